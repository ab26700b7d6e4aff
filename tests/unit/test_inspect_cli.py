"""``corral show`` (stored errors, reopened attempts), ``corral list`` (finished as a resume
sees it), ``corral report`` (-k, the several-models table)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from rich.console import Console

from corral import Commit, Usage
from corral.cli import main
from corral.cli._tables import TASK_ROWS, models_table, report_table, scores_table
from corral.store import SQLiteStore, TrialKey

from ..support.reports import hand_made_report

TRACE = 'Traceback (most recent call last):\n  File "agent.py", line 3, in act\n    boom()\n'


def _invoke(*args: Any) -> Result:
    result = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result


def _flat(text: str) -> str:
    return " ".join(text.split())


def _store(path: Path, trials: dict[tuple[str, int], list[Commit]], trials_per_task: int) -> None:
    """A store holding exactly these commits, appended through the store API."""
    tasks = sorted({t for t, _ in trials} | {"t"})
    config = {
        "trials_per_task": trials_per_task,
        "tasks": {
            t: {"agent_id": "a", "environment_id": "e", "model": None, "max_iterations": 3}
            for t in tasks
        },
    }

    async def go() -> None:
        store = SQLiteStore(path)
        async with store.opened():
            await store.register_benchmark("b", config)
            for (task, trial), commits in trials.items():
                await store.append(TrialKey("b", task, trial), commits)

    anyio.run(go)


def terminal(seq: int, status: str, at: float, **extra: Any) -> Commit:
    payload = {"status": status, "output": None, "attempts": 1, "state": None, **extra}
    return Commit(seq, "terminal", payload, at)


def evaluation(seq: int, at: float, passed: bool = True) -> Commit:
    return Commit(seq, "evaluation", {"score": float(passed), "passed": passed, "details": {}}, at)


def test_show_prints_a_stored_errors_type_message_and_traceback(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    failure = {
        "error": "KeyError: 'answer'",
        "error_type": "KeyError",
        "traceback": TRACE + "KeyError: 'answer'\n",
    }
    scorer = {
        "error": "ZeroDivisionError: division by zero",
        "error_type": "ZeroDivisionError",
        "traceback": 'Traceback (most recent call last):\n  File "grader.py", line 9\n',
        "attempts": 3,
    }
    _store(
        store,
        {
            ("t", 0): [terminal(0, "error", 10.0, **failure)],
            ("t", 1): [terminal(0, "completed", 10.0), Commit(1, "evaluation", scorer, 11.0)],
        },
        2,
    )
    out = _flat(_invoke("show", "b", "t", "0", "--store", store).output)
    assert "error KeyError: 'answer'" in out
    assert 'File "agent.py", line 3, in act boom()' in out
    assert "type KeyError" in out
    out = _flat(_invoke("show", "b", "t", "1", "--store", store).output)
    assert "evaluation failed after 3 attempts: ZeroDivisionError: division by zero" in out
    assert 'File "grader.py", line 9' in out and "type ZeroDivisionError" in out


def test_show_renders_reopen_markers_as_attempt_boundaries(tmp_path: Path) -> None:
    store = tmp_path / "s.db"
    reopen = {"reason": "rerun", "previous_status": "error"}
    commits = [
        terminal(0, "error", 10.0, error="RuntimeError: flaky", error_type="RuntimeError"),
        Commit(1, "reopen", reopen, 20.0),
        terminal(2, "completed", 21.0),
        evaluation(3, 22.0, passed=False),
        evaluation(4, 30.0, passed=True),  # a rescore: the latest counts
    ]
    _store(store, {("t", 0): commits}, 1)
    out = _invoke("show", "b", "t", "0", "--store", store).output
    flat = _flat(out)
    assert "run 2: reopened (rerun; the earlier run ended error)" in flat
    assert "run 1" in flat
    outcome = next(line for line in out.splitlines() if line.startswith("outcome"))
    assert "completed" in outcome and "passed" in outcome and "error" not in outcome
    assert "latest of 2 runs" in outcome


@pytest.mark.parametrize(
    "payload, shown",
    [
        ({"tool": "add", "arguments": [1, 2]}, "add([1,2])"),  # Action.arguments unchecked
        ({"tool": "add", "arguments": "x=1"}, 'add("x=1")'),
        ({"tool": "add", "budget": ["token_limit"]}, 'budget ["token_limit"]'),
        ({"tool": "add", "budget": {"token_limit": "many"}}, 'token_limit "many"'),
        ({"tool": "add", "budget": {"steps": 3}}, "steps 3"),  # a limit this version lacks
        # An integer no float holds: `:g` raised OverflowError (a traceback).
        ({"tool": "add", "budget": {"token_limit": 10**400}}, "token_limit 1000"),
    ],
    ids=[
        "arguments a list",
        "arguments text",
        "budget a list",
        "limit text",
        "limit unknown",
        "limit past a float",
    ],
)
def test_show_prints_an_action_as_recorded_whatever_its_values(
    tmp_path: Path, payload: dict[str, Any], shown: str
) -> None:
    """The store keeps any JSON an action's payload holds (an agent's `Action.arguments`
    are not checked): `show` prints it as it is, not a traceback."""
    store = tmp_path / "s.db"
    action = Commit(0, "action", {"turn": 0, "index": 0, **payload}, 10.0)
    _store(store, {("t", 0): [action, terminal(1, "error", 11.0)]}, 1)
    result = CliRunner().invoke(main, ["show", "b", "t", "0", "--store", str(store)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert shown in _flat(result.output)


def test_list_counts_finished_trials_as_the_report_does(tmp_path: Path) -> None:
    """A trial awaiting its evaluation is not finished: a resume evaluates it. A trial
    reopened after its terminal counts its earlier attempt until the fresh one ends
    (a rerun stopped midway never drops a trial from n)."""
    store = tmp_path / "s.db"
    _store(
        store,
        {
            ("t", 0): [terminal(0, "completed", 1.0), evaluation(1, 2.0)],  # finished
            ("t", 1): [terminal(0, "completed", 1.0)],  # awaits its evaluation
            ("t", 2): [terminal(0, "error", 1.0, error="E: x")],  # finished (error)
            ("t", 3): [  # reopened by a rerun: its fresh attempt has not ended (counted)
                terminal(0, "error", 1.0, error="E: x"),
                Commit(1, "reopen", {"reason": "rerun", "previous_status": "error"}, 2.0),
            ],
        },
        5,
    )
    out = _flat(_invoke("list", "--store", store).output)
    assert "3/5" in out
    report = _flat(_invoke("report", "b", "--store", store).output)
    assert "incomplete: 3 of 5 trials finished" in report


BENCH = textwrap.dedent(
    """
    import corral

    class Agent:
        async def act(self, session):
            return corral.Final(session.trial)

    class Env:
        async def setup(self, session):
            return None

        async def execute(self, action, session):
            return corral.ToolEffect(None)

        async def evaluate(self, trial):
            return corral.Evaluation(1.0, trial.output % 2 == 0)

    tasks = {
        "parent": corral.BenchmarkTaskMetadata("a", "e"),
        "child": corral.BenchmarkTaskMetadata("a", "e", dependencies=("parent",)),
    }
    benchmark = corral.Benchmark(tasks, {"a": Agent()}, {"e": Env()})
    """
)


def test_the_several_models_table_keeps_marks_and_passed_counts(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    store = tmp_path / "s.db"
    args = ["run", bench, "--store", store, "--trials", "3", "--task", "child"]
    out = _invoke(*args, "--model", "m1", "--model", "m2", "-k", "1").output
    assert "pass@k by model" in out
    rows = [line.replace("│", " ").split() for line in out.splitlines()]
    lines = [" ".join(row) for row in rows if row[:1] in (["parent"], ["child"])]
    assert len(lines) == 2, out
    assert any(line.split()[:2] == ["parent", "*"] for line in lines), out
    assert all(line.count("2/3") == 2 for line in lines), out  # trials 0 and 2 pass
    assert "* added by dependency closure" in out
    assert out.split("mean of 2 tasks")[1].splitlines()[0].count("4/6") == 2


def test_report_k_does_not_follow_the_last_run(tmp_path: Path) -> None:
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    store = tmp_path / "s.db"
    _invoke("run", bench, "--store", store, "--trials", "4", "-k", "3")
    out = _invoke("report", "bench", "--store", store).output
    assert "pass@1" in out and "pass@2" in out and "pass@4" in out and "pass@3" not in out
    out = _invoke("report", "bench", "--store", store, "-k", "3").output
    assert "pass@3" in out and "pass@1" not in out
    helped = _flat(_invoke("report", "--help").output)
    assert "1, 2, 4, ... up to the trials per task" in helped


def _table_text(table: Any) -> str:
    console = Console(record=True, width=200)
    console.print(table)
    return _flat(console.export_text())


def test_the_mean_row_of_an_interrupted_run_says_which_tasks_each_mean_is_over() -> None:
    """A mean at k is over the tasks with at least k finished trials; the row said
    "mean of 4 tasks" over a pass@1 of three of them and a pass@4 of one."""
    passes = {"A": [True] * 4, "B": [True], "C": [], "D": [False]}
    report = hand_made_report("b", passes, trials_per_task=4, k_values=(1, 4))
    text = _table_text(report_table(report))
    assert "mean of 4 tasks" not in text
    assert "mean over tasks with ≥ k trials" in text
    over = "each mean at k is over the tasks with at least k finished trials"
    assert f"{over}: 3 of 4 at k = 1, 1 of 4 at k = 4" in text
    whole = hand_made_report("c", {"A": [True] * 4, "B": [False] * 4}, k_values=(1, 4))
    text = _table_text(report_table(whole))
    assert "mean of 2 tasks" in text and "finished trials" not in text
    # Per model, likewise: model y has no trial of q1 yet, and one of q0.
    passes = {"q0@x": [True] * 4, "q1@x": [True] * 4, "q0@y": [False], "q1@y": []}
    text = _table_text(models_table(hand_made_report("m", passes, k_values=(1, 4))))
    assert "mean of 2 tasks" not in text
    assert "y: 1 of 2 at k = 1, 0 of 2 at k = 4" in text


def test_the_table_of_means_says_which_rows_are_over_fewer_tasks() -> None:
    """In an interrupted run a mean at k is over the tasks with at least k finished
    trials: the column said "all (2 tasks)" over a pass@2 of one task, whose interval
    is then that task's value ([1.00, 1.00]), as if certain."""
    passes = {"a@x": [True, True, False], "b@x": [True], "a@y": [True] * 3, "b@y": [False] * 3}
    report = hand_made_report("i", passes, k_values=(1, 2))
    table = scores_table(report)
    assert table is not None
    lines = _table_text(table).split("│ pass")[1:]  # one per row, its cells after
    rows = {line.split()[0]: " ".join(line.replace("│", " ").split()[1:]) for line in lines}
    assert rows["@1"] == "0.67 [0.00, 1.00] 0.83 [0.67, 1.00] 0.50 [0.00, 1.00]", rows
    # pass@2 and pass^2 are over 3 of the 4 tasks, and 1 of model x's 2.
    for row in ("@2", "^2"):
        cells = rows[row].split("]")
        assert "· 3 tasks" in cells[1] and "· 1 task" in cells[2], rows
        assert "task" not in cells[3], rows


def test_the_several_models_table_keeps_models_whose_names_hold_an_at_sign() -> None:
    """A model named ``claude@2024`` (as Vertex AI names them) runs task ``q`` as
    ``q@claude@2024``: the table split the id at its last ``@``, so every cell of
    the model showed ``-`` (and the task ``q@claude``) while its mean was right."""
    passes = {
        "q0@claude@2024": [True, False],
        "q0@gpt@1": [True, True],
        "q1@claude@2024": [False, False],
        "q1@gpt@1": [True, False],
    }
    models = {t: t.partition("@")[2] for t in passes}
    table = models_table(hand_made_report("m", passes, models=models))
    text = " ".join(_table_text(table).replace("│", " ").split())
    assert "q0 1/2 0.50 2/2 1.00" in text, text
    assert "q1 0/2 0.00 1/2 0.50" in text, text
    assert "mean of 2 tasks 1/4 0.25 3/4 0.75" in text, text


def test_the_several_models_table_lists_the_first_tasks_and_counts_the_rest() -> None:
    """The text report lists the first 100 tasks (`TASK_ROWS`) and counts the rest; the
    several-models table printed a row for every task (10,000 rows for 10,000 tasks)."""
    passes = {f"q{i}@{m}": [i % 2 == 0] for i in range(TASK_ROWS + 30) for m in ("x", "y")}
    table = models_table(hand_made_report("m", passes))
    text = " ".join(_table_text(table).replace("│", " ").split())
    assert f" q{TASK_ROWS - 1} " in text and f" q{TASK_ROWS} " not in text, text
    assert "… 30 more tasks (--json lists every one)" in text
    # The mean row is still over every task.
    assert f"mean of {TASK_ROWS + 30} tasks 65/130 0.50 65/130 0.50" in text


def test_the_viewers_model_means_say_which_tasks_each_mean_is_over() -> None:
    """The viewer's tasks-by-model table labels its mean row as the CLI's does: not
    "mean of 2 tasks" over a model that has finished one task's trials."""
    from corral.view._compare import model_columns

    passes = {"q0@x": [True] * 4, "q1@x": [True] * 4, "q0@y": [False], "q1@y": []}
    columns = model_columns(hand_made_report("m", passes, k_values=(1, 4)))
    assert columns is not None
    assert columns["mean_label"] == "mean over tasks with ≥ k trials"
    assert "y: 1 of 2 at k = 1, 0 of 2 at k = 4" in columns["mean_note"]
    whole = {"q0@x": [True] * 4, "q1@x": [False] * 4, "q0@y": [True] * 4, "q1@y": [True] * 4}
    columns = model_columns(hand_made_report("w", whole, k_values=(1, 4)))
    assert columns is not None
    assert (columns["mean_label"], columns["mean_note"]) == ("mean of 2 tasks", None)


def test_show_tells_a_rescore_of_the_earlier_attempt_from_the_new_attempts_score(
    tmp_path: Path,
) -> None:
    """A rescore while a rerun was unfinished scored the earlier attempt (its evaluation
    names that attempt's terminal): `show` does not give it as the new attempt's
    verdict, which has none yet."""
    store = tmp_path / "s.db"
    earlier = Commit(3, "evaluation", {**evaluation(3, 4.0).payload, "terminal_seq": 0}, 4.0)
    commits = [
        terminal(0, "max_iterations", 1.0),
        evaluation(1, 2.0, passed=False),
        Commit(2, "reopen", {"reason": "rerun", "previous_status": "max_iterations"}, 3.0),
        earlier,
        terminal(4, "max_iterations", 5.0),
    ]
    _store(store, {("t", 0): commits}, 1)
    out = _invoke("show", "b", "t", "0", "--store", store).output
    outcome = next(line for line in out.splitlines() if line.startswith("outcome"))
    assert "max_iterations" in outcome and "passed" not in outcome, outcome


def test_show_gives_the_new_attempts_budget_without_a_rescore_of_the_earlier_one(
    tmp_path: Path,
) -> None:
    """A rescore while a rerun was unfinished scored the earlier attempt, its scorer
    spending tokens: `show`'s budget line (what the latest attempt spent of its limits)
    counted them as the new attempt's, which spent nothing yet (its run's budget, the
    fold's `usage`, does not count them either)."""
    store = tmp_path / "s.db"
    setup = {"state": None, "previous_trial": None, "budget": {"token_limit": 1000}}
    scored = {**evaluation(6, 6.0).payload, "terminal_seq": 1}
    commits = [
        Commit(0, "setup", setup, 0.5),
        terminal(1, "max_iterations", 1.0, budget={"token_limit": 1000}),
        evaluation(2, 2.0, passed=False),
        Commit(3, "reopen", {"reason": "rerun", "previous_status": "max_iterations"}, 3.0),
        Commit(4, "setup", setup, 4.0),
        Commit(5, "evaluation", scored, 5.0, Usage(30, 7, 0.5)),
    ]
    _store(store, {("t", 0): commits}, 1)
    out = _flat(_invoke("show", "b", "t", "0", "--store", store).output)
    assert "token_limit 1000: spent 0 tokens" in out, out


def test_shows_commit_table_says_which_terminal_a_rescore_mid_rerun_scored(
    tmp_path: Path,
) -> None:
    """The rescore's evaluation of the earlier attempt is listed among the new
    attempt's commits (after its reopen): it says it scores that attempt's terminal,
    not reading as the new attempt's verdict."""
    store = tmp_path / "s.db"
    scored = {**evaluation(4, 4.0).payload, "terminal_seq": 0}
    commits = [
        terminal(0, "max_iterations", 1.0),
        evaluation(1, 2.0, passed=False),
        Commit(2, "reopen", {"reason": "rerun", "previous_status": "max_iterations"}, 3.0),
        Commit(3, "setup", {"state": None, "previous_trial": None}, 3.5),
        Commit(4, "evaluation", scored, 4.0),
    ]
    _store(store, {("t", 0): commits}, 1)
    out = _invoke("show", "b", "t", "0", "--store", store).output
    row = next(line for line in out.splitlines() if line.lstrip().startswith("4 "))
    assert "passed · score 1.0 · of the terminal at seq 0" in row, out


def test_show_gives_the_verdict_of_an_evaluation_naming_the_latest_terminal(
    tmp_path: Path,
) -> None:
    """An evaluation naming the latest attempt's own terminal is its verdict, as the
    report counts it (`show` skipped every evaluation that names a terminal)."""
    store = tmp_path / "s.db"
    named = Commit(1, "evaluation", {**evaluation(1, 2.0).payload, "terminal_seq": 0}, 2.0)
    _store(store, {("t", 0): [terminal(0, "max_iterations", 1.0), named]}, 1)
    out = _invoke("show", "b", "t", "0", "--store", store).output
    outcome = next(line for line in out.splitlines() if line.startswith("outcome"))
    assert "max_iterations · attempts 1 · passed" in outcome, outcome
