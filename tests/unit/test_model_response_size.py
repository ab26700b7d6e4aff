"""A reply's decoded body is capped while it is read (`OpenAICompatible`'s
``max_response_bytes``): gzip bombs and huge replies from `HostileChatServer` over
real HTTP on 127.0.0.1 end in an error naming the endpoint, not in a MemoryError."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import corral
from corral.models import OpenAICompatible
from corral.testing import HostileChatServer, HostileReply

from .test_models_waits import HELLO, MB, NO_HANG, client

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    ("reply", "kwargs"),
    [
        (HostileReply.gzip_bomb(64 * MB), {}),  # the default cap, 16 MB
        (HostileReply.huge(20 * MB), {}),
        (HostileReply.gzip_bomb(4 * MB), {"max_response_bytes": MB}),
        (HostileReply.huge(2 * MB), {"max_response_bytes": MB}),
    ],
    ids=["bomb", "huge", "bomb-1MB", "huge-1MB"],
)
async def test_the_decoded_body_is_capped_while_read(
    reply: HostileReply, kwargs: dict[str, Any]
) -> None:
    limit = kwargs.get("max_response_bytes", 16 * MB)
    with HostileChatServer(reply) as server:
        with anyio.fail_after(NO_HANG), pytest.raises(corral.ModelError) as caught:
            await client(server, **kwargs).complete(HELLO)
    message = str(caught.value)
    assert f"{server.url}/chat/completions" in message
    assert f"more than max_response_bytes={limit}" in message


async def test_a_body_under_the_cap_is_read_whole() -> None:
    with HostileChatServer(HostileReply.huge(MB)) as server:
        response = await client(server, max_response_bytes=2 * MB).complete(HELLO)
    assert response.content == "a" * MB


async def test_a_huge_error_body_is_cut_not_read_whole() -> None:
    body = {"error": {"message": "overloaded " + "x" * (4 * MB)}}
    with HostileChatServer(HostileReply.raw(body, status=503)) as server:
        with pytest.raises(corral.ModelUnavailable, match="HTTP 503 .*overloaded x+\\.\\.\\."):
            await client(server, max_response_bytes=MB).complete(HELLO)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16MB"])
def test_a_bad_size_cap_is_refused(bad: object) -> None:
    with pytest.raises(corral.ConfigError, match="max_response_bytes"):
        OpenAICompatible("m", base_url="http://127.0.0.1:9/v1", max_response_bytes=bad)  # type: ignore[arg-type]
