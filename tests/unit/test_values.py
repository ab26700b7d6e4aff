"""The values a run records are JSON Corral can read back: lone surrogates, deep or
cyclic values are refused where they are made, failing only their trial; the text
Corral records itself keeps a lone surrogate as its escape."""

from __future__ import annotations

import abc
import json
from pathlib import Path
from types import MappingProxyType
from typing import Any

import pytest

import corral
from corral import Action, BenchmarkTaskMetadata, ConfigError, Evaluation, Final, ToolEffect
from corral import NotSerializableError as Unrecordable
from corral._json import MAX_DEPTH, check_json, dumps, dumps_for_report, loads, recordable_text
from corral.runtime._model_calls import copied
from corral.testing import FakeEnvironment, ScriptedAgent

M = BenchmarkTaskMetadata
LONE = "\ud800"


def nested(depth: int, leaf: Any = 1) -> Any:
    """``depth`` levels of containers, lists and dicts alternating, around ``leaf``."""
    value = leaf
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


# -- lone surrogates -------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "named"),
    [
        (LONE, "v is '\\ud800'"),
        ({"a": ["ok", f"x{LONE}y"]}, "v['a'][1] is 'x\\ud800y'"),
        ({f"k{LONE}": 1}, "v has key 'k\\ud800'"),
        ({"a": {LONE: None}}, "v['a'] has key '\\ud800'"),
        (("é", "\udfff"), "v[1] is '\\udfff'"),
    ],
)
def test_a_lone_surrogate_is_refused_naming_where(value: Any, named: str) -> None:
    with pytest.raises(Unrecordable, match="surrogate") as info:
        check_json(value, "v")
    assert named in str(info.value)


def test_a_long_bad_string_is_shown_truncated() -> None:
    with pytest.raises(Unrecordable) as info:
        check_json("x" * 10_000 + LONE, "v")
    assert len(str(info.value)) < 300


def test_valid_unicode_and_str_subclasses_pass_unchanged() -> None:
    class Name(str):
        pass

    value = {"é": ["日本語", "👩\u200d💻", "\U0001f600", Name("n")], "ascii": "plain"}
    assert check_json(value, "v") == value
    assert loads(dumps(check_json(value, "v"))) == value


def test_text_corral_records_itself_keeps_a_lone_surrogate_as_its_escape() -> None:
    assert recordable_text("plain") == "plain" and recordable_text("é😀") == "é😀"
    assert recordable_text(f"bad {LONE}!") == "bad \\ud800!"
    check_json(recordable_text(f"bad {LONE}!"), "v")


def history_is_json(store: Path) -> None:
    """Every payload stored reads back as JSON (what a resume does)."""
    import sqlite3

    with sqlite3.connect(store) as db:
        tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")]
        for table in tables:
            columns = [r[1] for r in db.execute(f"PRAGMA table_info({table})")]
            for column in columns:
                for (cell,) in db.execute(f"SELECT {column} FROM {table}"):
                    if isinstance(cell, str) and cell[:1] in "{[":
                        json.loads(cell)


def placed(where: str, bad: Any) -> tuple[ScriptedAgent, FakeEnvironment]:
    """An agent and environment that put ``bad`` at ``where`` in task 'bad' only."""

    def value(task_id: str) -> Any:
        return bad if task_id == "bad" else "fine"

    def decide(session: corral.AgentSession) -> Any:
        if session.iteration == 0:
            return Action("tool", {"x": value(session.task_id) if where == "arguments" else 1})
        return Final(value(session.task_id) if where == "output" else "done")

    def effect(action: Action, session: corral.AgentSession) -> ToolEffect:
        if where == "observation":
            return ToolEffect(value(session.task_id))
        if where == "state":
            return ToolEffect("o", state={"s": value(session.task_id)})
        return ToolEffect("o")

    def score(trial: corral.TrialRecord) -> Evaluation:
        details = {"why": value(trial.task_id)} if where == "details" else None
        return Evaluation(1.0, True, details)

    return ScriptedAgent(decide), FakeEnvironment(effect=effect, evaluate=score)


WHERE = ["arguments", "observation", "state", "output", "details"]


@pytest.mark.anyio
@pytest.mark.parametrize("where", WHERE)
async def test_a_recorded_lone_surrogate_fails_only_its_trial_and_resumes(
    tmp_path: Path, where: str
) -> None:
    agent, env = placed(where, f"bad {LONE}")
    tasks = {t: M("a", "e") for t in ("ok1", "bad", "ok2")}
    store = tmp_path / "store.db"
    run = corral.CorralRunner(tasks, {"a": agent}, {"e": env}, store=store, max_retries=0)
    report = await run.run("b")
    statuses = {t: task.trials[0].status for t, task in report.tasks.items()}
    if where == "details":  # the trial ran; only its evaluation failed
        assert report.tasks["bad"].trials[0].evaluation is None
    else:
        assert statuses["bad"] == corral.TrialStatus.ERROR
        error = report.tasks["bad"].trials[0].error
        assert error is not None and "NotSerializableError" in error and "surrogate" in error
    assert statuses["ok1"] == statuses["ok2"] == corral.TrialStatus.COMPLETED
    history_is_json(store)
    again = await corral.CorralRunner(
        tasks, {"a": agent}, {"e": env}, store=store, max_retries=0
    ).run("b")
    assert {t: task.trials[0].status for t, task in again.tasks.items()} == statuses


def test_a_lone_surrogate_in_task_inputs_is_a_config_error_naming_the_task() -> None:
    tasks = {"t": M("a", "e", inputs={"p": ["x", LONE]})}
    with pytest.raises(ConfigError, match=r"task 't' inputs\['p'\]\[1\].*surrogate"):
        corral.CorralRunner(tasks, {"a": ScriptedAgent()}, {"e": FakeEnvironment()})


def line(task_id: str = "t", **fields: Any) -> dict[str, Any]:
    return {"id": task_id, "agent_id": "a", "environment_id": "e", **fields}


def write(path: Path, *rows: dict[str, Any] | str) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def test_a_lone_surrogate_in_a_task_line_is_a_config_error_naming_file_line_and_task(
    tmp_path: Path,
) -> None:
    # json.dumps writes the lone surrogate as the escape \ud800, which json.loads accepts.
    path = write(tmp_path / "t.jsonl", line("ok"), line("t", inputs={"p": LONE}))
    with pytest.raises(ConfigError, match="surrogate") as info:
        corral.TaskSource.jsonl(path)
    assert f"{path}:2" in str(info.value) and "task 't'" in str(info.value)


def test_a_lone_surrogate_in_a_spooled_task_names_the_task(tmp_path: Path) -> None:
    items = [("ok", M("a", "e")), ("t", M("a", "e", inputs={"p": LONE}))]
    with pytest.raises(ConfigError, match=r"task source item 2 \(task 't'\)\['inputs'\]"):
        corral.TaskSource.from_iterable(items, spool_dir=tmp_path)
    assert list(tmp_path.iterdir()) == []  # the spool file went with the error


def test_dicts_and_mappingproxies_are_checked_and_copied_without_asking_the_mapping_abc(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Asking ``isinstance(x, Mapping)`` is a Python call, three for a mappingproxy (whose
    answer CPython never caches): a trial checks and copies such values every time (its
    task's empty inputs, an evaluation's empty details), known by their type."""
    asked: list[type] = []
    instancecheck = abc.ABCMeta.__instancecheck__

    def counted(cls: abc.ABCMeta, instance: object) -> bool:
        asked.append(type(instance))
        return instancecheck(cls, instance)

    monkeypatch.setattr(abc.ABCMeta, "__instancecheck__", counted)
    value = {"a": MappingProxyType({"b": "c"}), "d": MappingProxyType({})}
    assert check_json(value, "v") == {"a": {"b": "c"}, "d": {}}
    assert type(check_json(MappingProxyType({}), "v")) is dict
    assert copied(value) == {"a": {"b": "c"}, "d": {}}
    assert type(copied(MappingProxyType({}))) is dict
    assert not {dict, MappingProxyType} & set(asked)


def test_bools_none_and_empty_mappings_are_recorded_as_given() -> None:
    """The checks that skip the general walk (an empty mapping) or ask less of a scalar
    (a bool is an int) record the same values: a bool stays a bool, an empty mapping is
    a dict of its own (the caller's is not kept)."""
    value = {"yes": True, "no": False, "none": None, "list": [True, None, {}]}
    checked = check_json(value, "v")
    assert checked == value
    assert [type(checked[k]) for k in ("yes", "no")] == [bool, bool]
    assert type(checked["list"][0]) is bool
    empty: dict[str, Any] = {}
    assert check_json(empty, "v") == {} and check_json(empty, "v") is not empty
    assert check_json(True, "v") is True and check_json(None, "v") is None


# -- depth and cycles --------------------------------------------------------------


def test_a_value_at_the_depth_limit_round_trips_and_one_past_it_is_refused() -> None:
    at_limit = nested(MAX_DEPTH)
    assert loads(dumps(check_json(at_limit, "v"))) == at_limit
    # Inside a commit payload, inside whatever the store wraps it in, it still reads back.
    assert loads(dumps(nested(10, check_json(at_limit, "v")))) == nested(MAX_DEPTH + 10)
    for past in (nested(MAX_DEPTH + 1), nested(100_000)):
        with pytest.raises(Unrecordable, match=f"more than {MAX_DEPTH} levels"):
            check_json(past, "v")


def test_a_value_that_contains_itself_is_refused() -> None:
    loop: list[Any] = [1]
    loop.append(loop)
    mapping: dict[str, Any] = {"a": {}}
    mapping["a"]["b"] = mapping
    for value, named in ((loop, "v contains itself at v[1]"), (mapping, "v['a']['b']")):
        with pytest.raises(Unrecordable, match="contains itself") as info:
            check_json(value, "v")
        assert named in str(info.value)


def test_deep_task_inputs_are_config_errors(tmp_path: Path) -> None:
    deep = {"t": M("a", "e", inputs={"p": nested(10_000)})}
    with pytest.raises(ConfigError, match="task 't' inputs"):
        corral.CorralRunner(deep, {"a": ScriptedAgent()}, {"e": FakeEnvironment()})
    for depth in (MAX_DEPTH + 1, 100_000):
        text = '{"id": "t", "agent_id": "a", "environment_id": "e", "inputs": '
        text += "[" * depth + "]" * depth + "}"
        path = write(tmp_path / "deep.jsonl", line("ok"), text)
        with pytest.raises(ConfigError) as info:
            corral.TaskSource.jsonl(path)
        assert f"{path}:2" in str(info.value)


@pytest.mark.anyio
async def test_a_deep_observation_fails_the_attempt_and_one_at_the_limit_resumes(
    tmp_path: Path,
) -> None:
    def effect(action: Action, session: corral.AgentSession) -> ToolEffect:
        depth = 5_000 if session.task_id == "deep" else MAX_DEPTH
        return ToolEffect(nested(depth))

    def decide(session: corral.AgentSession) -> Any:
        if session.iteration == 0:
            return Action("tool")
        return Final(session.steps[-1].effect.observation)

    tasks = {"deep": M("a", "e"), "limit": M("a", "e")}
    store = tmp_path / "store.db"

    def make() -> corral.CorralRunner:
        env = FakeEnvironment(effect=effect)
        return corral.CorralRunner(tasks, {"a": ScriptedAgent(decide)}, {"e": env}, store=store)

    first = await make().run("b")
    [deep] = first.tasks["deep"].trials
    assert deep.status == corral.TrialStatus.ERROR and deep.error is not None
    assert "NotSerializableError" in deep.error and "levels" in deep.error
    [limit] = first.tasks["limit"].trials
    assert limit.status == corral.TrialStatus.COMPLETED and limit.output == nested(MAX_DEPTH)
    again = await make().run("b")
    assert again.tasks["limit"].trials[0].output == nested(MAX_DEPTH)


@pytest.mark.anyio
async def test_an_error_message_with_a_lone_surrogate_is_recorded_escaped(tmp_path: Path) -> None:
    def decide(session: Any) -> Final:
        raise ValueError("bad \ud800 input")

    run = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent(decide)},
        {"e": FakeEnvironment()},
        store=tmp_path / "store.db",
        max_retries=0,
    )
    for _ in range(2):  # and the store reads back on resume
        report = await run.run("b")
        [trial] = report.tasks["t"].trials
        assert trial.error == "ValueError: bad \\ud800 input"
        assert trial.traceback is not None and "\\ud800" in trial.traceback


@pytest.mark.parametrize(
    "value",
    [
        {"a": 1.5, "b": [1, "é\u2028", None, True, False], "c": {"x": float("nan")}},
        {"inf": float("-inf"), "big": 10**30, "tuple": (1, "2"), "key": {1: 2, None: 3}},
        "a plain string é",
        [Path("/a/path"), {"nested": [[[]]], "": {}}],
    ],
)
def test_a_report_encodes_as_json_dumps_with_default_str(value: Any) -> None:
    """The report file's encoder (made once, not per call) writes what
    ``json.dumps(value, default=str)`` writes, byte for byte."""
    assert dumps_for_report(value) == json.dumps(value, default=str)


@pytest.mark.anyio
async def test_a_scorer_computing_with_numpy_scores_its_trial() -> None:
    """``passed=score > 0.5`` with a numpy score is a numpy bool, and a numpy float32
    is no float: each failed the evaluation ("Evaluation.passed must be a bool, not
    np.True_"). The numbers and truth they hold are recorded."""
    np = pytest.importorskip("numpy")

    class Scored(FakeEnvironment):
        async def evaluate(self, trial: corral.TrialRecord) -> Evaluation:
            score = np.float32(0.75)
            return Evaluation(score, score > 0.5, scores={"f1": np.float64(0.5)})

    runner = corral.CorralRunner(
        {"t": BenchmarkTaskMetadata("a", "e")},
        {"a": ScriptedAgent()},
        {"e": Scored()},
        store=corral.MemoryStore(),
        max_retries=0,
    )
    trial = (await runner.run("b")).tasks["t"].trials[0]
    assert trial.error is None
    assert trial.evaluation == Evaluation(0.75, True, scores={"f1": 0.5})
    assert type(trial.evaluation.passed) is bool and type(trial.evaluation.score) is float
