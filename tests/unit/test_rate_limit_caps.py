"""A rate limit cannot hang a run: one wait is capped (``max_rate_limit_wait``) and so
are the deferrals of one trial (``max_deferrals``), after which it ends ``error``
naming the rate limit. Virtual time (trio's MockClock) makes the waits instant."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
import trio
from click.testing import CliRunner
from trio.testing import MockClock

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import Final
from corral.cli import main
from corral.runtime import RetryPolicy
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> Any:
    return ("trio", {"clock": MockClock(autojump_threshold=0)})


def runner(decide: Any, **kwargs: Any) -> corral.CorralRunner:
    return corral.CorralRunner(
        {"t": Meta("a", "e", model="m")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=corral.MemoryStore(),
        **kwargs,
    )


@pytest.mark.parametrize("asked", [1e9, 1e300, 2.5e11])
async def test_one_wait_is_capped(asked: float) -> None:
    def decide(session: corral.AgentSession) -> Any:
        if "limited" not in session.scratch:
            session.scratch["limited"] = True
            raise corral.RateLimited("HTTP 429: slow down", retry_after=asked)
        return Final("done")

    start = trio.current_time()
    report = await runner(decide).run("capped")
    assert report.counts["completed"] == 1
    assert trio.current_time() - start == pytest.approx(600, abs=1)  # the default cap


async def test_the_cap_is_configurable_and_the_deferrals_are_bounded() -> None:
    asks: list[float] = []

    def decide(session: corral.AgentSession) -> Any:
        asks.append(trio.current_time())
        raise corral.RateLimited("HTTP 429 from http://x/v1: Rate limit reached", retry_after=1e9)

    start = trio.current_time()
    with anyio.fail_after(10_000):  # virtual seconds: before, this waited 1e9 each time
        report = await runner(decide, max_rate_limit_wait=30, max_deferrals=3).run("bounded")
    record = report.tasks["t"].trials[0]
    assert str(record.status) == "error" and record.attempts == 1
    assert len(asks) == 4 and trio.current_time() - start == pytest.approx(90, abs=1)
    assert record.error is not None and record.error.startswith("RateLimited: HTTP 429")
    assert "still rate limited after 3 waits (max_deferrals=3)" in record.error
    assert "asked to wait 1e+09 s, waited 30 s (max_rate_limit_wait)" in record.error


async def test_a_scorers_rate_limit_wait_is_capped_too() -> None:
    asked = 0

    def evaluate(trial: corral.TrialRecord) -> corral.Evaluation:
        nonlocal asked
        asked += 1
        if asked == 1:
            raise corral.RateLimited("scorer: 429", retry_after=1e12)
        return corral.Evaluation(1.0, True)

    run = corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": ScriptedAgent(lambda s: Final("x"))},
        {"e": FakeEnvironment(evaluate=evaluate)},
        store=corral.MemoryStore(),
        max_rate_limit_wait=5,
    )
    start = trio.current_time()
    report = await run.run("scorer")
    assert report.pass_at_k[1] == 1.0 and trio.current_time() - start == pytest.approx(5, abs=1)


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"max_rate_limit_wait": -1}, "-1"),
        ({"max_rate_limit_wait": float("nan")}, "nan"),
        ({"max_deferrals": -2}, "-2"),
        ({"max_deferrals": 1.5}, "1.5"),
    ],
)
def test_bad_caps_are_refused(kwargs: dict[str, Any], named: str) -> None:
    with pytest.raises(corral.ConfigError, match=named):
        RetryPolicy(**kwargs)


def test_the_backoff_of_many_deferrals_does_not_overflow() -> None:
    assert 0 <= RetryPolicy(backoff_cap=30).delay(5000) <= 30


LIMITED_BENCH = textwrap.dedent(
    """
    import corral

    class Agent:
        async def act(self, session):
            raise corral.RateLimited("HTTP 429: slow down", retry_after=0)

    benchmark = corral.Benchmark(
        {"t": corral.BenchmarkTaskMetadata("a", "e")}, {"a": Agent()}, {"e": Env()}
    )

    """
)


def test_the_cli_sets_the_caps(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    env = "from corral.testing import FakeEnvironment as Env\n"
    bench.write_text(env + LIMITED_BENCH)
    run = ["run", str(bench), "--store", str(tmp_path / "s.db"), "--no-progress", "--json"]
    result = CliRunner().invoke(main, [*run, "--max-deferrals", "2"], catch_exceptions=False)
    assert result.exit_code == 1
    assert "still rate limited after 2 waits (max_deferrals=2)" in result.output
    refused = CliRunner().invoke(main, [*run, "--max-rate-limit-wait", "-5"])
    assert refused.exit_code == 2
    assert refused.output.strip().splitlines()[-1].startswith("error: max_rate_limit_wait")
