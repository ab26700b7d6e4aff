"""Broken and hostile replies (a body that does not decompress, a gzip bomb, JSON nested
past the decoder, an unreadable reset, a lone surrogate, arguments too deep): each fails
only its attempt, with the failed try in the transcript, and never the run as a whole.
Real HTTP on 127.0.0.1 (`HostileChatServer`)."""

from __future__ import annotations

import gzip
import itertools
import json
import tracemalloc
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral._types import TrialKey
from corral.agents import ToolAgent
from corral.models import OpenAICompatible
from corral.testing import ChatReply, FakeEnvironment, HostileChatServer, HostileReply

pytestmark = pytest.mark.anyio

HELLO = [{"role": "user", "content": "hello"}]
NO_HANG = 20.0
MB = 1024 * 1024
OK = json.dumps(
    {"choices": [{"message": {"role": "assistant", "content": "x"}, "finish_reason": "stop"}]}
).encode()


def client(server: HostileChatServer, **kwargs: Any) -> OpenAICompatible:
    return OpenAICompatible("m", base_url=server.url, api_key="", **kwargs)


def first_then_done(first: Any) -> Any:
    """A script: ``first``, then a plain answer to every later request."""
    n = itertools.count()
    return lambda body: first if next(n) == 0 else ChatReply.text("done")


async def run_one(first: Any, store: Any = None, **runner: Any) -> tuple[Any, list[Any], int]:
    """One ToolAgent trial whose first model reply is ``first``: its record, its
    history and the number of requests the server saw."""
    store = corral.MemoryStore() if store is None else store
    with HostileChatServer(first_then_done(first)) as server:
        run = corral.CorralRunner(
            {"t": Meta("a", "e", model="m")},
            {"a": ToolAgent(client(server))},
            {"e": FakeEnvironment()},
            store=store,
            **{"backoff_base": 0.0, **runner},
        )
        with anyio.fail_after(NO_HANG):
            report = await run.run("b")
    async with run.store.opened():
        history = await run.store.history(TrialKey("b", "t", 0))
    return report.tasks["t"].trials[0], history, server.calls


def failed_tries(history: list[Any]) -> list[dict[str, Any]]:
    return [f for c in history if c.kind == "model_call" for f in c.payload.get("failed", [])]


# -- 1. A body that does not decompress ---------------------------------------------


async def test_a_body_that_does_not_decompress_is_a_model_error() -> None:
    # A proxy that labels a plain body gzip: httpx.DecodingError escaped as it was.
    with HostileChatServer(HostileReply.raw(OK, headers={"content-encoding": "gzip"})) as server:
        model = client(server)
        with pytest.raises(corral.ModelUnavailable) as caught:
            await model.complete(HELLO)
    assert model.url in str(caught.value)


async def test_a_body_that_does_not_decompress_is_a_failed_try_in_the_transcript() -> None:
    bad = HostileReply.raw(OK, headers={"content-encoding": "gzip"})
    record, history, _ = await run_one(bad)
    assert str(record.status) == "completed"
    # Its first try, the bad body; on a loaded machine a try after it may fail too.
    failed = failed_tries(history)
    assert failed and failed[0]["error"].startswith("ModelUnavailable"), failed


# -- 2. JSON nested too deeply for the decoder ---------------------------------------


@pytest.mark.parametrize("status", [200, 500, 429])
async def test_deeply_nested_json_is_a_model_error_not_a_recursion_error(status: int) -> None:
    with HostileChatServer(HostileReply.raw(b"[" * 100_000, status=status)) as server:
        model = client(server)
        with pytest.raises(corral.CorralError) as caught:
            await model.complete(HELLO)
    assert model.url in str(caught.value)


async def test_deeply_nested_json_is_a_failed_try_in_the_transcript() -> None:
    record, history, _ = await run_one(HostileReply.raw(b"[" * 100_000))
    assert str(record.status) == "completed"
    # Its first try, the nested body; on a loaded machine a try after it may fail too.
    failed = failed_tries(history)
    assert failed and failed[0]["error"].startswith("ModelUnavailable"), failed
    assert "recursion" in failed[0]["error"], failed


# -- 3. A rate-limit reset too large for a float -------------------------------------


async def test_a_reset_too_long_for_a_float_is_still_a_rate_limit() -> None:
    # "x-ratelimit-reset-requests: 999...9s" read as inf: the FailedTry could not be
    # recorded (NaN/inf is no JSON), the rate limit became a failed attempt, the good
    # reply after it was thrown away and asked again.
    huge = ChatReply.rate_limited(reset="9" * 400 + "s")
    record, history, calls = await run_one(huge, max_rate_limit_wait=0.01, max_retries=0)
    assert str(record.status) == "completed", record.error
    assert record.attempts == 1
    (failed,) = failed_tries(history)
    assert failed["kind"] == "429"
    assert calls == 2


# -- 4. A reply holding a lone surrogate (valid JSON: "\ud800") ---------------------


def reply_with(**message: Any) -> HostileReply:
    body = {"choices": [{"message": {"role": "assistant", **message}, "finish_reason": "stop"}]}
    return HostileReply.raw(json.dumps(body).encode())  # ensure_ascii: "\ud800" as an escape


@pytest.mark.parametrize(
    "message",
    [
        {"content": "a\ud800b"},
        {"content": "hi", "reasoning_content": "\udfff"},
    ],
    ids=["content", "reasoning"],
)
async def test_a_lone_surrogate_in_a_reply_never_crashes_the_run(
    tmp_path: Any, message: dict[str, Any]
) -> None:
    # The run raised NotSerializableError / StoreError (SQLite: "surrogates not allowed").
    record, history, _ = await run_one(reply_with(**message), store=str(tmp_path / "s.db"))
    assert str(record.status) in ("completed", "error")
    assert any(c.kind == "model_call" for c in history)


# -- 5. A tool call whose arguments cannot be recorded ------------------------------


async def test_the_call_behind_unrecordable_arguments_stays_in_the_transcript() -> None:
    nested: Any = "x"
    for _ in range(150):  # valid JSON, deeper than a record may nest
        nested = {"a": nested}
    # No retry: a retry asks the model again (and here gets an answer it can record).
    reply = ChatReply.tools(("echo", nested), usage=(7, 5))
    record, history, _ = await run_one(reply, max_retries=0)
    assert str(record.status) == "error"
    assert "nest" in (record.error or "")
    calls = [c for c in history if c.kind == "model_call"]
    assert len(calls) == 1  # the call that chose the action, and its tokens
    assert sum(c.usage.input_tokens for c in history) == 7


async def test_unrecordable_arguments_are_retried_keeping_the_call_that_chose_them() -> None:
    nested: Any = "x"
    for _ in range(150):
        nested = {"a": nested}
    reply = ChatReply.tools(("echo", nested), usage=(7, 5))
    record, history, requests = await run_one(reply)  # retried (SPEC 1): asked again
    assert (str(record.status), record.attempts, requests) == ("completed", 2, 2)
    calls = [c for c in history if c.kind == "model_call"]
    assert len(calls) == 2 and "nest" in str(calls[0].payload)  # the refused one kept
    # Its tokens count with the answer's (ChatReply.text's default of 12 and 2).
    assert (record.usage.input_tokens, record.usage.output_tokens) == (7 + 12, 5 + 2)


# -- 6. A gzip body: the cap must bound memory, not only the result ---------------


async def test_a_gzip_reply_is_capped_before_it_is_decompressed_in_memory() -> None:
    body = b'{"choices":[{"message":{"content":"' + b"a" * (32 * MB) + b'"}}]}'
    packed = gzip.compress(body, 1)  # about 140 KB on the wire
    reply = HostileReply.raw(packed, headers={"content-encoding": "gzip"})
    with HostileChatServer(reply) as server:
        model = client(server, max_response_bytes=MB)
        tracemalloc.start()
        try:
            with pytest.raises(corral.ModelError, match="max_response_bytes"):
                await model.complete(HELLO)
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 8 * MB, f"peak {peak / MB:.0f} MB for a 1 MB cap"
