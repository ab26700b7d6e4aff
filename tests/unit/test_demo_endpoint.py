"""`corral demo --base-url`: a first call checks the endpoint before anything runs (one
``error:`` line, exit 2, when it is unreachable or refuses the key), and once it
runs on a real endpoint its exit code follows `corral run`'s rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
import trio.testing

from corral import ConfigError
from corral.demo import PROBE_TIMEOUT, build_demo, probe_endpoint
from corral.testing import ChatReply, FakeChatServer

from .test_demo import _demo_on


def test_demo_on_an_unreachable_endpoint_is_one_error_line(tmp_path: Path) -> None:
    result = _demo_on("http://127.0.0.1:9/v1", tmp_path)
    assert result.exit_code == 2
    checking, *lines = result.output.strip().splitlines()
    assert checking == "checking http://127.0.0.1:9/v1 …"
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "http://127.0.0.1:9/v1" in lines[0] and "ConnectError" in lines[0]
    assert not (tmp_path / "s.db").exists()  # nothing ran, nothing was written


def test_demo_with_a_refused_key_is_one_error_line(tmp_path: Path) -> None:
    refused = ChatReply.failure(401, "Incorrect API key provided: sk-...")
    with FakeChatServer(lambda body: refused) as server:
        result = _demo_on(server.url, tmp_path)
    assert result.exit_code == 2 and server.calls == 1
    _checking, *lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "Incorrect API key provided" in lines[0]


def test_demo_on_a_real_endpoint_exits_as_run_does(tmp_path: Path) -> None:
    def decide(body: dict[str, Any]) -> ChatReply:
        if "tools" not in body:  # the first call, before the run
            return ChatReply.text("OK")
        return ChatReply.failure(400, "content filter")

    with FakeChatServer(decide) as server:
        result = _demo_on(server.url, tmp_path)
    assert result.exit_code == 1, result.output
    assert "content filter" in result.output


def test_the_first_call_to_an_endpoint_that_never_answers_gives_up_soon() -> None:
    """Not after the client's 120 s: after `PROBE_TIMEOUT` (virtual time here)."""
    assert PROBE_TIMEOUT <= 15
    clock = trio.testing.MockClock(autojump_threshold=0)
    with FakeChatServer(lambda body: ChatReply.hang()) as server:
        benchmark = build_demo(server.url, models=["m"], api_key="")

        async def probe() -> float:
            with pytest.raises(ConfigError, match="no answer within 15 s") as caught:
                await probe_endpoint(benchmark, server.url)
            assert server.url in str(caught.value)
            return trio.current_time()

        waited = anyio.run(probe, backend="trio", backend_options={"clock": clock})
    assert waited == pytest.approx(PROBE_TIMEOUT)
