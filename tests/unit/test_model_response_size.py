"""A reply's decoded body is capped while it is read (`OpenAICompatible`'s
``max_response_bytes``): gzip bombs and huge replies from `HostileChatServer` over
real HTTP on 127.0.0.1 end in an error naming the endpoint, not in a MemoryError."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

import corral
from corral.models import Anthropic, OpenAICompatible
from corral.testing import HostileChatServer, HostileReply

from .test_models_waits import HELLO, MB, NO_HANG, PROVIDERS, client, hostile, model_for

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
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_the_decoded_body_is_capped_while_read(
    provider: str, reply: HostileReply, kwargs: dict[str, Any]
) -> None:
    limit = kwargs.get("max_response_bytes", 16 * MB)
    with hostile(provider, reply) as server:
        model = model_for(provider, server, **kwargs)
        with anyio.fail_after(NO_HANG), pytest.raises(corral.ModelError) as caught:
            await model.complete(HELLO)
    message = str(caught.value)
    assert model.url in message
    assert f"more than max_response_bytes={limit}" in message


async def test_a_body_under_the_cap_is_read_whole() -> None:
    with HostileChatServer(HostileReply.huge(MB)) as server:
        response = await client(server, max_response_bytes=2 * MB).complete(HELLO)
    assert response.content == "a" * MB


@pytest.mark.parametrize(("provider", "status"), [("openai", 503), ("anthropic", 529)])
async def test_a_huge_error_body_is_cut_not_read_whole(provider: str, status: int) -> None:
    body = {"type": "error", "error": {"message": "overloaded " + "x" * (4 * MB)}}
    with hostile(provider, HostileReply.raw(body, status=status)) as server:
        model = model_for(provider, server, max_response_bytes=MB)
        with pytest.raises(
            corral.ModelUnavailable, match=f"HTTP {status} .*overloaded x+\\.\\.\\."
        ):
            await model.complete(HELLO)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "16MB"])
@pytest.mark.parametrize("model", [OpenAICompatible, Anthropic])
def test_a_bad_size_cap_is_refused(model: type[OpenAICompatible | Anthropic], bad: object) -> None:
    with pytest.raises(corral.ConfigError, match="max_response_bytes"):
        model("m", base_url="http://127.0.0.1:9/v1", max_response_bytes=bad)  # type: ignore[arg-type]
