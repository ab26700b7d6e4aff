"""`corral.datasets`: JSONL, CSV and Hugging Face datasets (read from local files
through the library, never the hub) mapped to tasks with targets, streamed into a
`TaskSource`, with stable ids; and a run's ``limit``, ``shuffle``/``seed`` and
``sample_ids``, in Python and on the command line."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

import corral
from corral import ConfigError, TaskSource, datasets, scorers
from corral.cli import main
from corral.testing import FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio

ROWS = [
    {"id": "q1", "question": "2+2?", "answer": "4", "level": "easy"},
    {"id": "q2", "question": "3*3?", "answer": "9", "level": "easy"},
    {"id": "q3", "question": "2^10?", "answer": "1024", "level": "hard"},
]
MAPPING = {"input": "question", "target": "answer", "metadata": ["level"]}


def write_jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_csv(path: Path, rows: list[dict[str, Any]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    return path


def check(source: TaskSource) -> None:
    assert list(source) == ["q1", "q2", "q3"]
    q3 = source["q3"]
    assert (q3.agent_id, q3.environment_id) == ("solver", "math")
    assert q3.inputs == {"prompt": "2^10?"}
    assert q3.target == "1024" and q3.metadata == {"level": "hard"}


def test_from_jsonl(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    check(datasets.from_jsonl(path, agent_id="solver", environment_id="math", **MAPPING))


def test_from_csv(tmp_path: Path) -> None:
    path = write_csv(tmp_path / "d.csv", ROWS)
    check(datasets.from_csv(path, agent_id="solver", environment_id="math", **MAPPING))


def test_from_hf_reads_local_files_through_the_library(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Never the hub: offline, with a cache of its own (read when datasets is imported).
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pytest.importorskip("datasets")
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    source = datasets.from_hf(
        "json",
        agent_id="solver",
        environment_id="math",
        split="train",
        load_options={"data_files": str(path)},
        **MAPPING,
    )
    check(source)


def test_from_hf_without_the_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "datasets", None)  # import datasets fails
    with pytest.raises(ConfigError, match=r"pip install 'corral\[hf\]'"):
        datasets.from_hf("json", agent_id="a", environment_id="e")


def test_a_function_maps_each_row_and_may_skip_it(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)

    def sample(row: dict[str, Any]) -> dict[str, Any] | None:
        if row["level"] == "hard":
            return None
        return {
            "id": row["id"].upper(),
            "input": {"q": row["question"]},
            "target": int(row["answer"]),
        }

    source = datasets.from_jsonl(path, sample, agent_id="a", environment_id="e", model="m")
    assert list(source) == ["Q1", "Q2"]
    assert source["Q2"].inputs == {"q": "3*3?"} and source["Q2"].target == 9
    assert source["Q2"].model == "m"


def test_ids_from_content_are_stable_across_runs_and_positions(tmp_path: Path) -> None:
    rows = [{"question": r["question"], "answer": r["answer"]} for r in ROWS]
    a = datasets.from_jsonl(
        write_jsonl(tmp_path / "a.jsonl", rows),
        agent_id="a",
        environment_id="e",
        id=None,
        input="question",
        target="answer",
    )
    b = datasets.from_jsonl(
        write_jsonl(tmp_path / "b.jsonl", [rows[2], rows[0], rows[1], rows[0]]),
        agent_id="a",
        environment_id="e",
        id=None,
        input="question",
        target="answer",
    )
    ids = list(a)
    assert len(set(ids)) == 3
    assert list(b) == [ids[2], ids[0], ids[1], ids[0] + "~2"]  # a repeated row: ~2


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"input": "prompt"}, r"d\.jsonl:1: no field 'prompt' \(its fields: 'id', 'question'"),
        ({"input": "question", "target": "gold"}, r"no field 'gold'"),
        ({"input": 3}, r"input must name a field, list fields, or map names to fields"),
        ({"input": "question", "target": "answer", "colour": 1}, r"unknown dataset argument"),
    ],
)
def test_bad_mappings_are_refused(tmp_path: Path, kwargs: dict[str, Any], message: str) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    with pytest.raises(ConfigError, match=message):
        datasets.from_jsonl(path, agent_id="a", environment_id="e", **kwargs)


def test_a_mistyped_field_comes_with_its_close_match_past_the_listed_ones(
    tmp_path: Path,
) -> None:
    """The refusal lists a row's first 20 fields only: a typo of the 25th was refused
    without the one field it meant, which every other mistyped name gets."""
    row = {f"column_{i:02d}": i for i in range(24)} | {"question": "q", "id": "r"}
    path = write_jsonl(tmp_path / "wide.jsonl", [row])
    with pytest.raises(ConfigError, match=r"no field 'qestion' .*did you mean 'question'\?"):
        datasets.from_jsonl(path, agent_id="a", environment_id="e", input="qestion")


def test_a_function_and_fields_are_not_both_taken(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    with pytest.raises(ConfigError, match=r"either a sample function or the fields"):
        datasets.from_jsonl(path, lambda r: r, agent_id="a", environment_id="e", input="question")


def test_a_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"dataset '.*nope\.csv' cannot be read"):
        datasets.from_csv(tmp_path / "nope.csv", agent_id="a", environment_id="e")


def runner(tmp_path: Path, n: int = 20) -> corral.CorralRunner:
    rows = [{"id": f"s{i:02d}", "input": f"{i}+0", "target": str(i)} for i in range(n)]
    source = datasets.from_jsonl(
        write_jsonl(tmp_path / "d.jsonl", rows), agent_id="a", environment_id="e"
    )
    agent = ScriptedAgent(lambda s: corral.Final(s.inputs["prompt"].split("+")[0]))
    return corral.CorralRunner(
        source,
        {"a": agent},
        {"e": FakeEnvironment(evaluate=scorers.exact())},
        store=corral.MemoryStore(),
    )


async def test_limit_shuffle_and_seed_draw_the_same_sample(tmp_path: Path) -> None:
    report = await runner(tmp_path).run("b", limit=3)
    assert list(report.tasks) == ["s00", "s01", "s02"]
    drawn = await runner(tmp_path).run("b", limit=5, shuffle=True, seed=7)
    again = await runner(tmp_path).run("b", limit=5, shuffle=True, seed=7)
    other = await runner(tmp_path).run("b", limit=5, shuffle=True, seed=8)
    assert set(drawn.tasks) == set(again.tasks) and len(drawn.tasks) == 5
    assert set(drawn.tasks) != set(other.tasks)
    assert drawn.pass_at_k[1] == 1.0


async def test_sample_ids(tmp_path: Path) -> None:
    report = await runner(tmp_path).run("b", sample_ids=["s05", "s01"])
    assert set(report.tasks) == {"s01", "s05"}


async def test_a_repeated_task_id_counts_once_toward_the_limit(tmp_path: Path) -> None:
    """``task_ids`` with an id twice ran that one task alone under ``limit=2`` (the
    repeat took the second place), and a shuffle drew differently for the repeat."""
    report = await runner(tmp_path).run("b", task_ids=["s01", "s01", "s02"], limit=2)
    assert set(report.tasks) == {"s01", "s02"}
    ids = ["s03", "s01", "s02", "s04", "s05", "s06"]
    drawn = [
        set((await runner(tmp_path).run("b", task_ids=i, limit=3, shuffle=True, seed=s)).tasks)
        for s in range(4)
        for i in (ids, ids[:1] + ids)
    ]
    assert drawn[0::2] == drawn[1::2]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"limit": 0}, r"limit must be a positive integer, not 0"),
        ({"seed": 3}, r"seed=3 orders a shuffle: give shuffle=True too"),
        ({"shuffle": True, "seed": "x"}, r"seed must be an integer, not 'x'"),
        ({"sample_ids": ["s5"]}, r"unknown sample id 's5' in sample_ids"),
        ({"sample_ids": ["s05"], "task_ids": ["s01"]}, r"task_ids or sample_ids, not both"),
        # Not a TypeError from the tasks' lookup: an id that is no text is named.
        ({"sample_ids": [["s05"]]}, r"sample_ids must hold task ids \(text\), not \['s05'\]"),
        ({"task_ids": ["s01", ["s05"]]}, r"task_ids must hold task ids \(text\), not \['s05'\]"),
        ({"task_ids": [5]}, r"task_ids must hold task ids \(text\), not 5"),
    ],
)
async def test_bad_selections_are_refused(
    tmp_path: Path, kwargs: dict[str, Any], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        await runner(tmp_path).run("b", **kwargs)


BENCH = """
import corral
from corral import datasets, scorers
from corral.testing import FakeEnvironment, ScriptedAgent

benchmark = corral.Benchmark(
    datasets.from_jsonl(DATA, agent_id="a", environment_id="e"),
    {"a": ScriptedAgent(lambda s: corral.Final(s.inputs["prompt"].split("+")[0]))},
    {"e": FakeEnvironment(evaluate=scorers.exact())},
)
"""


def test_the_cli_selects_samples(tmp_path: Path) -> None:
    rows = [{"id": f"s{i:02d}", "input": f"{i}+0", "target": str(i)} for i in range(20)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH.replace("DATA", repr(str(data))), encoding="utf-8")

    def tasks(*flags: str, benchmark: str) -> list[str]:
        args = ["run", str(bench), "--store", str(tmp_path / "s.db"), "--no-progress", "--json"]
        result = CliRunner().invoke(main, [*args, "--benchmark-id", benchmark, *flags])
        assert result.exit_code == 0, result.output
        return sorted(json.loads(result.output[result.output.index("{") :])["tasks"])

    assert tasks("--limit", "2", benchmark="a") == ["s00", "s01"]
    drawn = tasks("--limit", "4", "--shuffle", "--seed", "3", benchmark="b")
    assert len(drawn) == 4 and drawn == tasks(
        "--limit", "4", "--shuffle", "--seed", "3", benchmark="c"
    )
    assert tasks("--sample-id", "s07", "--sample-id", "s11", benchmark="d") == ["s07", "s11"]
    result = CliRunner().invoke(
        main, ["run", str(bench), "--store", str(tmp_path / "s.db"), "--limit", "0"]
    )
    assert result.exit_code == 2 and "limit must be a positive integer, not 0" in result.output


def test_a_seeded_shuffle_draws_the_same_sample_whatever_order_the_ids_are_given(
    tmp_path: Path,
) -> None:
    """``--shuffle --seed 1 --limit 2`` over the same six ``--sample-id`` (or ``--task``)
    drew another sample when they were listed in another order (a rotation): the
    shuffle started from the order given, so a script listing the ids differently
    (sorted, from a set) drew differently and its resume was refused."""
    rows = [{"id": f"s{i:02d}", "input": f"{i}+0", "target": str(i)} for i in range(20)]
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH.replace("DATA", repr(str(data))), encoding="utf-8")
    ids = [f"s{i:02d}" for i in (3, 1, 2, 4, 5, 6)]

    def drawn(flag: str, order: list[str], benchmark: str) -> list[str]:
        args = ["run", str(bench), "--store", str(tmp_path / "s.db"), "--json"]
        args += ["--benchmark-id", benchmark, "--shuffle", "--seed", "1", "--limit", "2"]
        args += [a for task_id in order for a in (flag, task_id)]
        result = CliRunner().invoke(main, args)
        assert result.exit_code == 0, result.output
        return sorted(json.loads(result.stdout)["tasks"])

    for flag in ("--sample-id", "--task"):
        first = drawn(flag, ids, f"a{flag}")
        assert len(first) == 2
        for n, order in enumerate((ids[1:] + ids[:1], sorted(ids), ids[::-1])):
            assert drawn(flag, order, f"b{n}{flag}") == first, order


# -- files as users have them --------------------------------------------------------


def load(path: Path, **kwargs: Any) -> TaskSource:
    read = datasets.from_csv if path.suffix == ".csv" else datasets.from_jsonl
    return read(path, agent_id="a", environment_id="e", spool_dir=path.parent, **kwargs)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.jsonl", b'{"id": "a", "input": "x", "target": "1"}\n{"id": "b", "input": "caf\xe9"}\n'),
        ("d.csv", b"id,input,target\nb,caf\xe9,2\n"),
    ],
    ids=["jsonl", "csv"],
)
def test_a_byte_that_is_not_utf8_is_refused_naming_its_line(
    tmp_path: Path, name: str, text: bytes
) -> None:
    """A Latin-1 file gave a UnicodeDecodeError, naming neither the file nor the line."""
    path = tmp_path / name
    path.write_bytes(text)
    with pytest.raises(ConfigError, match=rf"{name}:2: not UTF-8 text \(byte 0xe9"):
        load(path)


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("d.jsonl", '\ufeff{"id": "q1", "input": "x", "target": "1"}\n'),
        ("d.csv", "\ufeffid,input,target\r\nq1,x,1\r\n"),
    ],
    ids=["jsonl", "csv"],
)
def test_a_byte_order_mark_is_not_part_of_the_first_field(
    tmp_path: Path, name: str, text: str
) -> None:
    """Excel's "CSV UTF-8" (and Notepad) start the file with a byte order mark: the
    JSONL line was refused as not JSON, the CSV header's first field was "\\ufeffid"."""
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    source = load(path)
    assert list(source) == ["q1"]
    assert source["q1"].inputs == {"prompt": "x"} and source["q1"].target == "1"


def test_a_csv_header_naming_a_field_twice_is_refused(tmp_path: Path) -> None:
    """A row kept the last of two columns of one name: the first's values were
    silently dropped."""
    path = tmp_path / "d.csv"
    path.write_text("id,input,target,input\nq1,first,1,second\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"d\.csv:1: the header names the field 'input' twice"):
        load(path)


def test_a_csv_field_longer_than_the_csv_module_reads_is_a_config_error(tmp_path: Path) -> None:
    """A prompt over `csv.field_size_limit()` (128 KiB) gave the csv module's bare
    `_csv.Error`, naming neither the file nor the line."""
    path = tmp_path / "d.csv"
    long = "x" * (csv.field_size_limit() + 1)
    path.write_text(f"id,input,target\nq1,x,1\nq2,{long},2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"d\.csv:3: .*field larger than field limit"):
        load(path)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ('id,input,target\nq1,x,"1\nq2,y,2\nq3,z,3\n', 4),  # the rows after it were its target
        ('id,input,target\nq1,"x"y,1\n', 2),  # was read as "xy"
    ],
    ids=["left-open", "text-after-the-closing-quote"],
)
def test_a_malformed_csv_quote_is_refused(tmp_path: Path, text: str, line: int) -> None:
    """A quote left open ran to the end of the file: every later row silently became
    part of the field, a dataset of one task."""
    path = tmp_path / "d.csv"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"d\.csv:{line}: "):
        load(path)


def test_a_row_refused_as_a_task_is_named_by_its_file_and_line(tmp_path: Path) -> None:
    """Rows the task file refuses (a value JSON cannot record, a blank id) were named
    "task source item N": the Nth task kept, not the file's line N (blank lines and
    skipped rows shift it), and with ids made from the content, no id to search for."""
    rows = tmp_path / "d.jsonl"
    rows.write_text(
        '{"input": "x", "target": 1}\n\n{"input": "y", "target": NaN}\n', encoding="utf-8"
    )
    with pytest.raises(ConfigError, match=r"^\S*d\.jsonl:3 .*target.* is nan"):
        load(rows, id=None)
    table = tmp_path / "d.csv"
    table.write_text("id,input,target\nq1,x,1\n\n ,y,2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^\S*d\.csv:4: task id must be a non-empty string"):
        load(table)


def test_a_jsonl_object_naming_a_key_twice_is_refused_naming_its_line(tmp_path: Path) -> None:
    """JSON readers disagree on a repeated key (the stdlib keeps the last, silently):
    which target was meant is not Corral's to guess."""
    rows = tmp_path / "d.jsonl"
    rows.write_text(
        '{"id": "a", "input": "x", "target": 1}\n'
        '{"id": "b", "input": "y", "target": 2, "target": 3}\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigError, match=r"^\S*d\.jsonl:2: key 'target' appears twice"):
        load(rows)
    nested = tmp_path / "n.jsonl"
    nested.write_text('{"id": "a", "input": {"q": 1, "q": 2}, "target": 1}\n', encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^\S*n\.jsonl:1: key 'q' appears twice"):
        load(nested)


@pytest.mark.parametrize(
    ("row", "refused"),
    [
        # With an id field named, the row got an id made from its content, silently,
        # beside the rows with ids of their own.
        ('{"id": null, "input": "y", "target": 2}', r"field 'id' \(the task id\) is null"),
        # Hugging Face gives a row None for each field another row has: the task's
        # prompt was None, silently, and its trials sent the model no question.
        ('{"id": "b", "input": null, "target": 2}', r"field 'input' \(the prompt\) is null"),
    ],
)
def test_a_null_id_or_prompt_is_refused_naming_its_row(
    tmp_path: Path, row: str, refused: str
) -> None:
    """A row whose id or input field is null is refused, naming its file, line and field."""
    rows = tmp_path / "d.jsonl"
    rows.write_text('{"id": "a", "input": "x", "target": 1}\n' + row + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"^\S*d\.jsonl:2: " + refused):
        load(rows)


def test_a_csv_row_of_empty_cells_is_skipped_as_a_blank_line_is(tmp_path: Path) -> None:
    """A spreadsheet's export ends with rows of empty cells (``,,``): each became a
    task with an empty prompt and an empty target (with ids made from the content,
    one after another, ``~2``, ``~3``), or a refusal of its blank id."""
    path = tmp_path / "d.csv"
    path.write_text("id,input,target\r\nq1,x,1\r\n,,\r\n , ,\r\n,\r\n", encoding="utf-8")
    assert list(load(path)) == ["q1"]
    assert len(load(path, id=None)) == 1


def test_a_sample_function_returning_no_input_is_refused(tmp_path: Path) -> None:
    """A sample function that returned no ``input`` gave every task the prompt
    None, silently."""
    path = write_jsonl(tmp_path / "d.jsonl", ROWS)
    with pytest.raises(ConfigError, match=r"d\.jsonl:1: the sample function returned no 'input'"):
        datasets.from_jsonl(
            path, lambda r: {"id": r["id"], "target": r["answer"]}, agent_id="a", environment_id="e"
        )
    # A task without inputs says so.
    source = datasets.from_jsonl(
        path, lambda r: {"id": r["id"], "input": {}}, agent_id="a", environment_id="e"
    )
    assert source["q1"].inputs == {}


async def test_a_changed_target_in_a_dataset_is_refused_naming_the_target(tmp_path: Path) -> None:
    """The refusal of a dataset whose target was edited between runs said the task's
    inputs changed, from one hash to another: the target, changed, was not named."""
    store = corral.MemoryStore()
    path = tmp_path / "d.jsonl"

    def run(target: str) -> Any:
        write_jsonl(path, [{"id": "q1", "input": "4", "target": target}])
        source = datasets.from_jsonl(path, agent_id="a", environment_id="e")
        agent = ScriptedAgent(lambda s: corral.Final(s.inputs["prompt"]))
        env = FakeEnvironment(evaluate=scorers.exact())
        return corral.CorralRunner(source, {"a": agent}, {"e": env}, store=store).run("b")

    await run("4")
    await run("4")  # the same: resumes
    with pytest.raises(ConfigError, match=r"task 'q1' inputs, target or metadata changed"):
        await run("5")


def test_ids_from_content_do_not_depend_on_the_order_of_a_rows_fields(tmp_path: Path) -> None:
    """A content id hashed the row's fields in the order the file wrote them, so the same
    rows re-exported with their keys in another order (``jq -S``) had other ids and a
    resume found none of its trials."""
    rows = [{"question": "2+2?", "answer": "4", "extra": {"b": 1, "a": [{"y": 2, "x": 1}]}}]
    again = [{"extra": {"a": [{"x": 1, "y": 2}], "b": 1}, "answer": "4", "question": "2+2?"}]
    a, b = (
        datasets.from_jsonl(
            write_jsonl(tmp_path / name, data),
            agent_id="a",
            environment_id="e",
            id=None,
            input="question",
            target="answer",
        )
        for name, data in (("a.jsonl", rows), ("b.jsonl", again))
    )
    assert list(a) == list(b)


def test_ids_from_content_of_rows_with_a_nan_ignore_field_order_and_null_fields(
    tmp_path: Path,
) -> None:
    """A row holding a value JSON cannot write (a NaN in a field no task takes) is hashed
    another way: that way kept its nested objects in the file's order and counted its
    null fields, so its id still changed with them."""
    rows = '{"question": "2+2?", "answer": "4", "w": NaN, "extra": {"b": 1, "a": 2}}\n'
    again = '{"extra": {"a": 2, "b": 1}, "w": NaN, "hint": null, "answer": "4", "question": "2+2?"}'
    sources = []
    for name, text in (("a.jsonl", rows), ("b.jsonl", again + "\n")):
        (tmp_path / name).write_text(text, encoding="utf-8")
        sources.append(load(tmp_path / name, id=None, input="question", target="answer"))
    assert list(sources[0]) == list(sources[1])


def hf_content_ids(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, rows: list[dict[str, Any]]
) -> list[str]:
    """The ids from content (``id=None``) `from_hf` gives ``rows`` written as a local
    JSONL file ``name`` (offline: nothing is downloaded)."""
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    pytest.importorskip("datasets")
    return list(
        datasets.from_hf(
            "json",
            agent_id="a",
            environment_id="e",
            split="train",
            load_options={"data_files": str(write_jsonl(tmp_path / name, rows))},
            id=None,
            input="question",
            target="answer",
        )
    )


def test_from_hf_ids_from_content_do_not_depend_on_the_other_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library gives every row its dataset's columns, in the order of the file's
    first row: a row's content id changed when the rows were written in another order."""
    rows = [{"question": "2+2?", "answer": "4"}, {"answer": "9", "question": "3*3?"}]
    written = set(hf_content_ids(tmp_path, monkeypatch, "a.jsonl", rows))
    assert written == set(hf_content_ids(tmp_path, monkeypatch, "b.jsonl", rows[::-1]))


def test_from_hf_ids_from_content_do_not_change_when_another_row_adds_a_field(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The library gives a row ``None`` for every field another row has and it lacks: a
    row's content id changed when a row with a new field was added to the dataset."""
    first = {"question": "2+2?", "answer": "4"}
    alone = hf_content_ids(tmp_path, monkeypatch, "a.jsonl", [first])
    added = {"question": "3*3?", "answer": "9", "hint": "times"}
    grown = hf_content_ids(tmp_path, monkeypatch, "b.jsonl", [first, added])
    assert grown[0] == alone[0]


async def test_a_dataset_with_its_keys_in_another_order_resumes(tmp_path: Path) -> None:
    """A streamed task is stored as its line's digest, and the line kept a row's nested
    objects in the file's key order: the same dataset re-exported with its keys sorted
    was refused on resume as a changed task (a mapping of tasks resumes)."""
    store = corral.MemoryStore()
    path = tmp_path / "d.jsonl"
    agent = ScriptedAgent(lambda s: corral.Final("4"))
    env = FakeEnvironment(evaluate=scorers.exact())

    async def run(row: dict[str, Any]) -> Any:
        source = datasets.from_jsonl(
            write_jsonl(path, [row]), agent_id="a", environment_id="e", metadata=["info"]
        )
        return await corral.CorralRunner(source, {"a": agent}, {"e": env}, store=store).run("b")

    row = {
        "id": "q1",
        "input": {"q": "2+2?", "c": ["3", "4"]},
        "target": "4",
        "info": {"y": 1, "x": 2},
    }
    await run(row)
    again = json.loads(json.dumps(row, sort_keys=True))
    report = await run(again)
    assert report.pass_at_k[1] == 1.0


async def test_a_sample_functions_objects_from_a_row_in_another_order_resume(
    tmp_path: Path,
) -> None:
    """A sample function that keeps a row's other fields (its inputs or metadata, in
    the row's order) gave the line those objects in the file's key order: the same
    dataset re-exported with its keys sorted was refused on resume as changed."""
    store = corral.MemoryStore()
    path = tmp_path / "d.jsonl"
    agent = ScriptedAgent(lambda s: corral.Final("4"))
    env = FakeEnvironment(evaluate=scorers.exact())

    def sample(row: dict[str, Any]) -> dict[str, Any]:
        rest = {k: v for k, v in row.items() if k not in ("id", "a", "level", "field")}
        kept = {k: v for k, v in row.items() if k in ("level", "field")}
        return {"id": row["id"], "input": rest, "target": row["a"], "metadata": kept}

    async def run(row: dict[str, Any]) -> Any:
        source = datasets.from_jsonl(
            write_jsonl(path, [row]), agent_id="a", environment_id="e", sample=sample
        )
        return await corral.CorralRunner(source, {"a": agent}, {"e": env}, store=store).run("b")

    row = {"id": "q1", "q": "2+2?", "c": "none", "a": "4", "level": "easy", "field": "math"}
    await run(row)
    report = await run(json.loads(json.dumps(row, sort_keys=True)))
    assert report.pass_at_k[1] == 1.0
