"""Review findings: behaviour that differed from the README.

Each test states what should happen; each finding is fixed, so they are plain
regression tests now.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner

import corral
from corral import (
    Action,
    BenchmarkTaskMetadata,
    ConfigError,
    CorralRunner,
    Final,
    MemoryStore,
    RateLimited,
    RetryPolicy,
    TrialKey,
)
from corral.cli import main
from corral.testing import FakeEnvironment, Gate, ScriptedAgent

README = Path(__file__).resolve().parents[1] / "README.md"
ONE_RETRY = RetryPolicy(max_retries=1, backoff_base=0)
NO_RETRY = RetryPolicy(max_retries=0)


def _readme_benchmark_source() -> str:
    """The ``# mybench.py`` block of the README's "A benchmark of your own"."""
    text = README.read_text()
    match = re.search(r"```python\n(# mybench\.py\n.*?)```", text, re.S)
    assert match is not None, "README has no mybench.py example"
    return match.group(1)


# -- 1. two runs sharing one SQLite store ----------------------------------------


@pytest.mark.anyio
async def test_concurrent_runs_on_one_sqlite_store_survive_the_first_finishing(
    tmp_path: Path,
) -> None:
    gates = {"first": Gate(), "second": Gate()}
    started = {"first": anyio.Event(), "second": anyio.Event()}
    first_done = anyio.Event()

    async def decide(session: corral.AgentSession) -> Final:
        started[session.benchmark_id].set()
        await gates[session.benchmark_id].wait()
        return Final(1)

    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=tmp_path / "store.db",
        retry_policy=NO_RETRY,
    )
    reports: dict[str, corral.BenchmarkReport] = {}

    async def go(benchmark_id: str) -> None:
        reports[benchmark_id] = await runner.run(benchmark_id)
        if benchmark_id == "first":
            first_done.set()

    with anyio.fail_after(5):
        async with anyio.create_task_group() as tg:
            tg.start_soon(go, "first")  # opens the store
            await started["first"].wait()
            tg.start_soon(go, "second")  # shares it
            await started["second"].wait()
            gates["first"].open()
            await first_done.wait()  # the opener is done and has left opened()
            gates["second"].open()
    assert reports["second"].tasks["t"].trials[0].status == "completed"


# -- 2. resume refused for inputs that are not canonical JSON ----------------------


@pytest.mark.anyio
async def test_rerun_with_tuple_inputs_resumes_on_sqlite(tmp_path: Path) -> None:
    tasks = {"t": BenchmarkTaskMetadata("a", "e", inputs={"xs": (1, 2)})}

    def make() -> CorralRunner:
        return CorralRunner(
            tasks,
            {"a": ScriptedAgent()},
            {"e": FakeEnvironment()},
            store=tmp_path / "store.db",
            retry_policy=NO_RETRY,
        )

    first = await make().run("b")
    second = await make().run("b")  # same tasks, same metadata: must resume
    assert second.resumed == 1
    assert second.pass_at_k == first.pass_at_k


# -- 3. observers miss commits of an attempt that fails -----------------------------


class _Recorder:
    def __init__(self) -> None:
        self.seen: list[tuple[TrialKey, int, str]] = []

    def on_commit(self, key: TrialKey, commit: corral.Commit) -> None:
        self.seen.append((key, commit.seq, commit.kind))


@pytest.mark.anyio
async def test_observers_see_every_durable_commit_of_a_retried_trial() -> None:
    def decide(session: corral.AgentSession) -> Final:
        if session.attempt == 0:
            raise RuntimeError("flaky model")
        return Final(1)

    recorder = _Recorder()
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        retry_policy=ONE_RETRY,
        observers=[recorder],
    )
    await runner.run("b")
    history = await runner.store.history(TrialKey("b", "t", 0))
    assert [(c.seq, c.kind) for c in history] == [(0, "setup"), (1, "terminal"), (2, "evaluation")]
    assert sorted((seq, kind) for _, seq, kind in recorder.seen) == [
        (c.seq, c.kind) for c in history
    ]


# -- 4. a rate limit wipes session.scratch ----------------------------------------


@pytest.mark.anyio
async def test_scratch_survives_a_rate_limit() -> None:
    limited: list[int] = []

    def decide(session: corral.AgentSession) -> Action | Final:
        if session.iteration == 0:
            session.scratch["plan"] = "from turn 0"
            return Action("go", {})
        if not limited:
            limited.append(1)
            raise RateLimited(retry_after=0)
        return Final(session.scratch.get("plan"))

    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=MemoryStore(),
        retry_policy=NO_RETRY,
    )
    with anyio.fail_after(5):
        report = await runner.run("b")
    trial = report.tasks["t"].trials[0]
    assert trial.attempts == 1
    assert trial.output == "from turn 0"


# -- 5. usage of failed attempts vanishes from the report ---------------------------


async def _one_trial_with_one_retry(decide: Any, environment: Any) -> corral.BenchmarkReport:
    runner = CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": environment},
        store=MemoryStore(),
        retry_policy=ONE_RETRY,
    )
    return await runner.run("b")


@pytest.mark.anyio
async def test_usage_of_a_failed_attempt_is_counted() -> None:
    def decide(session: corral.AgentSession) -> Final:
        session.record_usage(input_tokens=10, cost=0.5)
        if session.attempt == 0:
            raise RuntimeError("the model call cost money, then the agent failed")
        return Final(1)

    report = await _one_trial_with_one_retry(decide, FakeEnvironment())
    assert report.usage.input_tokens == 20
    assert report.usage.cost == pytest.approx(1.0)


@pytest.mark.anyio
@pytest.mark.parametrize("tools", [["fail"], ["ok", "fail"]])
async def test_usage_of_a_failed_tool_call_is_counted(tools: list[str]) -> None:
    """A tool that records usage and then raises: counted once the retry finishes the
    turn, whether the turn had one action (run on the session) or several (views)."""

    class PaidTools:
        async def setup(self, session: corral.AgentSession) -> int:
            return 0

        async def execute(self, action: Action, session: corral.AgentSession) -> corral.ToolEffect:
            session.record_usage(input_tokens=5)
            if action.tool == "fail" and session.attempt == 0:
                raise RuntimeError("the tool call cost money, then failed")
            return corral.ToolEffect(observation=1)

        async def evaluate(self, trial: corral.TrialRecord) -> corral.Evaluation:
            return corral.Evaluation(1.0, True)

    def decide(session: corral.AgentSession) -> list[Action] | Final:
        if session.iteration == 0:
            return [Action(tool, {}) for tool in tools]
        return Final(1)

    report = await _one_trial_with_one_retry(decide, PaidTools())
    trial = report.tasks["t"].trials[0]
    assert (trial.status, trial.attempts) == (corral.TrialStatus.COMPLETED, 2)
    # Every call that ran: each tool once, and the failing one a second time.
    assert report.usage.input_tokens == 5 * (len(tools) + 1)


# -- 6. README: the CLI sequence of "A benchmark of your own" -----------------------


def _readme_cli_commands() -> list[list[str]]:
    """The ``corral ...`` lines of the README's guide, in order, continuations joined."""
    text = (Path(__file__).resolve().parents[1] / "README.md").read_text()
    block = text.split("```bash\ncorral run mybench.py", 1)[1].split("```", 1)[0]
    block = "corral run mybench.py" + block.replace("\\\n", " ")
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("corral "):
            commands.append(line.split()[1:])
    return commands


def test_readme_cli_sequence_runs_as_listed(tmp_path: Path) -> None:
    bench = tmp_path / "mybench.py"
    bench.write_text(_readme_benchmark_source())
    store = str(tmp_path / "store.db")
    cli = CliRunner()
    commands = _readme_cli_commands()
    assert [c[0] for c in commands] == [
        "run",
        "run",
        "run",
        "report",
        "show",
        "list",
        "run",
        "rescore",
    ]
    for command in commands:
        args = [str(bench) if a == "mybench.py" else a for a in command if a != "[--json]"]
        quiet = ["--no-progress"] if args[0] in ("run", "rescore") else []
        args += ["--store", store, *quiet]
        result = cli.invoke(main, args)
        assert result.exit_code == 0, (args, result.output)


# -- 7. README: the example benchmark's dependent task always errors -----------------


@pytest.mark.anyio
async def test_readme_example_benchmark_has_no_erroring_task() -> None:
    namespace: dict[str, Any] = {"__name__": "readme_mybench"}
    exec(compile(_readme_benchmark_source(), "mybench.py", "exec"), namespace)
    bench: corral.Benchmark = namespace["benchmark"]
    runner = CorralRunner(
        bench.tasks, bench.agents, bench.environments, store=MemoryStore(), retry_policy=NO_RETRY
    )
    report = await runner.run("mybench", trials_per_task=2, k_values=(1, 2))
    errors = [
        (t.task_id, t.error) for task in report.tasks.values() for t in task.trials if t.error
    ]
    assert errors == []


# -- 8. a string for dependencies is split into characters ---------------------------


def test_a_string_for_dependencies_is_refused() -> None:
    with pytest.raises(ConfigError, match="pq"):
        tasks = {
            "p": BenchmarkTaskMetadata("a", "e"),
            "q": BenchmarkTaskMetadata("a", "e"),
            "pq": BenchmarkTaskMetadata("a", "e"),
            "child": BenchmarkTaskMetadata("a", "e", dependencies="pq"),  # type: ignore[arg-type]
        }
        runner = CorralRunner(
            tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=MemoryStore()
        )
        runner.prepare()
