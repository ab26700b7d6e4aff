"""Every refusal of bad input is a `ConfigError` naming the value, before anything is written."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from corral import (
    AgentSession,
    BenchmarkTaskMetadata,
    Commit,
    ConfigError,
    CorralRunner,
    Final,
    TrialKey,
)
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio

M = BenchmarkTaskMetadata
TASKS = {"t": M("a", "e", model="m"), "u": M("a", "e", dependencies=("t",))}


@dataclass
class Case:
    named: str  # what the message must say
    runner: dict[str, Any] = field(default_factory=dict)  # CorralRunner arguments to change
    run: dict[str, Any] = field(default_factory=dict)  # run() arguments to change
    existing: bool = False  # refused against a benchmark that already ran


class Watcher:
    def on_commit(self, key: TrialKey, commit: Commit) -> None:
        pass


class AsyncWatcher:
    """``on_commit`` is an ``async def``: called without an await, it never ran (a
    RuntimeWarning at each commit, most often unseen)."""

    async def on_commit(self, key: TrialKey, commit: Commit) -> None:
        pass

    def __repr__(self) -> str:
        return "AsyncWatcher()"


class GeneratorAgent:
    """``act`` yields its answer (an async generator): no awaitable, whatever it is given."""

    async def act(self, session: AgentSession) -> AsyncIterator[Final]:
        yield Final(1)


async def _yields(*args: object) -> AsyncIterator[None]:
    yield None


class GeneratorEnvironment(FakeEnvironment):
    """A `FakeEnvironment` whose ``method`` is an async generator."""

    def __init__(self, method: str) -> None:
        super().__init__()
        setattr(self, method, _yields)


def limit_cases() -> dict[str, Case]:
    cases = {}
    for name in (
        "max_parallel",
        "max_parallel_per_task",
        "max_parallel_evaluations",
        "max_parallel_total",
    ):
        for bad in (0, -2, 1.5, True, "4"):
            cases[f"{name}={bad!r}"] = Case(
                f"{name} must be a positive integer, not {bad!r}", run={name: bad}
            )
    for name in (
        "max_parallel_by_model",
        "max_parallel_by_environment",
        "max_parallel_evaluations_by_environment",
    ):
        for bad in (0, -1, 2.5, False):
            cases[f"{name}[m]={bad!r}"] = Case(
                f"{name}['m'] must be a positive integer, not {bad!r}", run={name: {"m": bad}}
            )
        cases[f"{name}=list"] = Case(name, run={name: [("m", 1)]})
    return cases


CASES: dict[str, Case] = {
    "unknown agent": Case("'ghost'", runner={"tasks": {"t": M("ghost", "e")}}),
    "unknown environment": Case("'nowhere'", runner={"tasks": {"t": M("a", "nowhere")}}),
    "unknown task id": Case("unknown task id 'v'", run={"task_ids": ["t", "v"]}),
    "unknown dependency": Case(
        "'x' depends on unknown task 'ghost'",
        runner={"tasks": {**TASKS, "x": M("a", "e", dependencies=("ghost",))}},
    ),
    "empty task_ids": Case("task_ids is empty", run={"task_ids": []}),
    "task_ids as a string": Case("'t'", run={"task_ids": "t"}),
    "cycle": Case(
        "dependency cycle: p -> q -> p",
        runner={
            "tasks": {"p": M("a", "e", dependencies=("q",)), "q": M("a", "e", dependencies=("p",))}
        },
    ),
    "missing parent": Case(
        "'u' depends on 't', which is not selected",
        run={"task_ids": ["u"], "include_dependencies": False},
    ),
    "include_dependencies not bool": Case("'yes'", run={"include_dependencies": "yes"}),
    "non-JSON inputs": Case(
        "task 't' inputs['when'] is {1, 2}",
        runner={"tasks": {"t": M("a", "e", inputs={"when": {1, 2}})}},
    ),
    "max_iterations 0": Case(
        "task 't' max_iterations must be a positive integer, not 0",
        runner={"tasks": {"t": M("a", "e", max_iterations=0)}},
    ),
    "metadata of the wrong type": Case(
        "task 't' must be a BenchmarkTaskMetadata", runner={"tasks": {"t": {"agent_id": "a"}}}
    ),
    "empty benchmark id": Case(
        "benchmark_id must be a non-empty string", run={"benchmark_id": " "}
    ),
    **{
        f"trials_per_task={bad!r}": Case(
            f"trials_per_task must be a positive integer, not {bad!r}", run={"trials_per_task": bad}
        )
        for bad in (0, -1, 2.0, True)
    },
    "k = 0": Case("k must be a positive integer, not 0", run={"k_values": (1, 0)}),
    "k > trials_per_task": Case(
        "k = 3 is larger than trials_per_task = 2", run={"trials_per_task": 2, "k_values": (1, 3)}
    ),
    "k not an integer": Case("1.5", run={"k_values": (1.5,)}),
    "no k at all": Case("k_values must be a non-empty sequence", run={"k_values": ()}),
    **limit_cases(),
    **{
        f"trial_timeout={bad!r}": Case(
            f"trial_timeout must be a positive number of seconds or None, not {bad!r}",
            runner={"trial_timeout": bad},
        )
        for bad in (0, -1.0, float("nan"), float("inf"), "60", True)
    },
    **{
        f"evaluation_timeout={bad!r}": Case(
            f"evaluation_timeout must be a positive number of seconds or None, not {bad!r}",
            runner={"evaluation_timeout": bad},
        )
        for bad in (0, -1.0, float("nan"), "60")
    },
    **{
        f"max_retries={bad!r}": Case("max_retries must be", runner={"max_retries": bad})
        for bad in (-1, 1.5, True, "2")
    },
    "runner observers=3": Case(
        "observers must be a list of observers, not 3", runner={"observers": 3}
    ),
    "run observers=3": Case("observers must be a list of observers, not 3", run={"observers": 3}),
    "observer class": Case(
        "observers holds the class Watcher: pass an instance, Watcher()",
        run={"observers": [Watcher]},
    ),
    "observer without on_commit": Case(
        "observers holds 'w', which has no on_commit", run={"observers": ["w"]}
    ),
    **{
        f"{where} observer with an async on_commit": Case(
            "observers holds AsyncWatcher(), whose on_commit is async: it is called without "
            "await, so it must be a plain def",
            **{where: {"observers": [AsyncWatcher()]}},  # type: ignore[arg-type]
        )
        for where in ("runner", "run")
    },
    "agent class": Case(
        "agent 'a' is the class ScriptedAgent: pass an instance, ScriptedAgent()",
        runner={"agents": {"a": ScriptedAgent}},
    ),
    "agent with a generator act": Case(
        "agent 'a''s act is a generator: it must be an async function",
        runner={"agents": {"a": GeneratorAgent()}},
    ),
    "environment class": Case(
        "environment 'e' is the class FakeEnvironment: pass an instance, FakeEnvironment()",
        runner={"environments": {"e": FakeEnvironment}},
    ),
    **{
        f"environment with a generator {method}": Case(
            f"environment 'e''s {method} is a generator: it must be an async function",
            runner={"environments": {"e": GeneratorEnvironment(method)}},
        )
        for method in ("setup", "execute", "evaluate")
    },
    "environment name=3": Case(
        "environment 'e' has name 3: a name must be a string or None",
        runner={"environments": {"e": FakeEnvironment(name=3)}},
    ),
    **{
        f"no_retry={bad!r}": Case(
            f"no_retry must be a list of exception types, not {bad!r}", runner={"no_retry": bad}
        )
        for bad in (3, ValueError, "ValueError")
    },
    "store of the wrong type": Case(
        "store must be a path or a CommitStore, not 42", runner={"store": 42}
    ),
    "store path under a file": Case("cannot be created", runner={"store": "{tmp}/file/store.db"}),
    "store path is a directory": Case("is a directory", runner={"store": "{tmp}"}),
    "changed trials_per_task": Case(
        "trials_per_task was 1, now 2", run={"trials_per_task": 2}, existing=True
    ),
    "changed inputs": Case(
        "task 't' inputs was {}, now {'prompt': 'new'}",
        existing=True,
        runner={"tasks": {**TASKS, "t": M("a", "e", model="m", inputs={"prompt": "new"})}},
    ),
    "changed model": Case(
        "task 't' model was 'm', now 'n'",
        existing=True,
        runner={"tasks": {**TASKS, "t": M("a", "e", model="n")}},
    ),
    "changed task set": Case(
        "task 'w' was not in it", existing=True, runner={"tasks": {**TASKS, "w": M("a", "e")}}
    ),
}


def written(path: Path) -> tuple[int, int]:
    """(benchmark rows, commit rows) in a SQLite store file, if there is one."""
    if not path.is_file():
        return (0, 0)
    with sqlite3.connect(path) as db:
        try:
            return (
                db.execute("SELECT COUNT(*) FROM benchmarks").fetchone()[0],
                db.execute("SELECT COUNT(*) FROM commits").fetchone()[0],
            )
        except sqlite3.OperationalError:  # no tables yet
            return (0, 0)


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
async def test_bad_input_is_refused_by_name_before_anything_is_written(
    case: Case, tmp_path: Path
) -> None:
    (tmp_path / "file").write_text("a file, not a folder")
    store = tmp_path / "store.db"
    agent = ScriptedAgent()
    base: dict[str, Any] = {
        "tasks": TASKS,
        "agents": {"a": agent},
        "environments": {"e": FakeEnvironment()},
        "store": store,
    }
    if case.existing:
        await CorralRunner(**base).run("b")
    before, calls = written(store), agent.calls
    kwargs = {**base, **case.runner}
    if isinstance(kwargs["store"], str):
        kwargs["store"] = kwargs["store"].format(tmp=tmp_path)
    run = {"benchmark_id": "b", **case.run}

    with pytest.raises(ConfigError) as info:
        await CorralRunner(**kwargs).run(**run)
    assert case.named in str(info.value)
    assert isinstance(info.value, ValueError)
    assert written(store) == before and agent.calls == calls
    assert before == ((1, 6) if case.existing else (0, 0))  # setup, terminal, evaluation x 2


async def test_a_refused_rerun_leaves_the_benchmark_usable(tmp_path: Path) -> None:
    store = tmp_path / "store.db"
    env = {"e": FakeEnvironment()}
    first = await CorralRunner(TASKS, {"a": ScriptedAgent()}, env, store=store).run("b")
    with pytest.raises(ConfigError):
        await CorralRunner(TASKS, {"a": ScriptedAgent()}, env, store=store).run(
            "b", trials_per_task=3
        )
    agent = ScriptedAgent()
    again = await CorralRunner(TASKS, {"a": agent}, env, store=store).run("b")
    assert agent.calls == 0 and again.resumed == 2
    assert again.pass_at_k == first.pass_at_k
    # A new benchmark id starts afresh beside it.
    other = await CorralRunner(TASKS, {"a": agent}, env, store=store).run("c", trials_per_task=3)
    assert other.counts["completed"] == 6
