"""`corral.scorers`: each ready scorer on its own, as an environment's ``evaluate``,
combined into named scores that are stored and read back, and `model_graded` with a
real grader over HTTP whose usage lands on the evaluation."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import corral
from corral import BenchmarkTaskMetadata as Meta
from corral import ConfigError, Evaluation, TrialRecord, TrialStatus, Usage, scorers
from corral.models import OpenAICompatible
from corral.testing import ChatReply, FakeChatServer, FakeEnvironment, ScriptedAgent

pytestmark = pytest.mark.anyio


def trial(output: Any, target: Any = None, **kw: Any) -> TrialRecord:
    return TrialRecord("t", 0, TrialStatus.COMPLETED, output=output, target=target, task="t", **kw)


async def score(scorer: scorers.Scorer, output: Any, target: Any = None) -> Evaluation:
    return await scorer(trial(output, target))


async def numeric_finds(output: str, found: float, scorer: scorers.Scorer | None = None) -> None:
    """``numeric`` (or ``scorer``, one of its kind) reads ``found`` in ``output``, and
    passes it against target ``found``."""
    evaluation = await score(scorer or scorers.numeric(), output, found)
    assert evaluation.details == {"found": found}
    assert evaluation.passed


@pytest.mark.parametrize(
    ("output", "target", "passed"),
    [
        ("Paris", "Paris", True),
        ("  Paris \n", "Paris", True),
        ("paris", "Paris", False),
        (8, 8, True),
        ("8", 8, True),
        ({"a": 1}, {"a": 1}, True),
        ("Lyon", ["Paris", "Lyon"], True),
        ("Nice", ["Paris", "Lyon"], False),
    ],
)
async def test_exact(output: Any, target: Any, passed: bool) -> None:
    evaluation = await score(scorers.exact(), output, target)
    assert evaluation.passed is passed
    assert evaluation.scores == {"exact": float(passed)}


async def test_exact_ignoring_case_and_a_missing_target() -> None:
    assert (await score(scorers.exact(ignore_case=True), "PARIS", "paris")).passed
    with pytest.raises(ConfigError, match=r"task 't' has no target: scorer 'exact'"):
        await score(scorers.exact(), "x")


async def test_includes() -> None:
    assert (await score(scorers.includes(), "The capital is Paris.", "Paris")).passed
    assert not (await score(scorers.includes(), "The capital is Lyon.", "Paris")).passed
    assert (await score(scorers.includes(ignore_case=True), "PARIS!", "paris")).passed


async def test_pattern_compares_a_group_or_checks_presence() -> None:
    answer = scorers.pattern(r"ANSWER:\s*(\S+)", group=1)
    got = await score(answer, "thinking...\nANSWER: 42", "42")
    assert got.passed and got.details == {"found": "42"}
    assert not (await score(answer, "ANSWER: 41", "42")).passed
    assert (await score(answer, "no answer", "42")).details == {"found": None}
    named = scorers.pattern(r"(?P<n>\d+) apples", group="n")
    assert (await score(named, "I have 3 apples", 3)).passed
    assert (await score(scorers.pattern(r"\bdone\b"), "all done")).passed  # no target


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"regex": "("}, r"pattern '\(' is not a regular expression"),
        ({"regex": "a", "group": 1}, r"group 1 is not in pattern 'a' \(it has 0 group"),
        ({"regex": "(a)", "group": "x"}, r"group 'x' is not named"),
        ({"regex": "a", "ignore_case": 1}, r"ignore_case must be True or False, not 1"),
    ],
)
def test_pattern_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        scorers.pattern(**kwargs)


@pytest.mark.parametrize(
    ("output", "target", "kwargs", "passed", "found"),
    [
        ("The answer is 42.", 42, {}, True, 42.0),
        ("so the total is $1,234.50.", "1234.5", {}, True, 1234.5),
        ("first 3 then 4", 3, {"which": "first"}, True, 3.0),
        ("first 3 then 4", 3, {}, False, 4.0),
        (3.14, 3.14159, {"abs_tol": 0.01}, True, 3.14),
        (3.14, 3.14159, {}, False, 3.14),
        ("100", 101, {"rel_tol": 0.02}, True, 100.0),
        ("-2.5e3 units", -2500, {}, True, -2500.0),
        ("no number", 1, {}, False, None),
    ],
)
async def test_numeric(
    output: Any, target: Any, kwargs: dict[str, Any], passed: bool, found: float | None
) -> None:
    evaluation = await score(scorers.numeric(**kwargs), output, target)
    assert evaluation.passed is passed
    assert evaluation.details == {"found": found}


def test_numeric_refuses_bad_tolerances() -> None:
    with pytest.raises(ConfigError, match=r"abs_tol must be a non-negative number, not -1"):
        scorers.numeric(abs_tol=-1)
    with pytest.raises(ConfigError, match=r"which must be 'first' or 'last', not 'middle'"):
        scorers.numeric(which="middle")


@pytest.mark.parametrize(
    ("output", "target", "chosen"),
    [
        ("The answer is (C).", "C", "C"),
        ("Answer: b", "B", "B"),
        ("D) because ...", "D", "D"),
        ("**A**", "A", "A"),
        ("So I pick B", 1, "B"),
        ("a cat? no: C", "C", "C"),
    ],
)
async def test_choice(output: str, target: Any, chosen: str) -> None:
    evaluation = await score(scorers.choice(letters="ABCD"), output, target)
    assert evaluation.passed and evaluation.details == {"chosen": chosen}


async def test_choice_refuses_a_target_outside_its_letters() -> None:
    with pytest.raises(ConfigError, match=r"target 'E' is not one of the choices 'ABCD'"):
        await score(scorers.choice(letters="ABCD"), "A", "E")


async def test_f1_is_squad_token_overlap() -> None:
    evaluation = await score(scorers.f1(), "the cat sat on the mat", "A cat sat.")
    # tokens: cat sat on mat / cat sat -> precision 2/4, recall 2/2
    assert evaluation.score == pytest.approx(2 / 3) and evaluation.passed
    assert (await score(scorers.f1(), "dog", ["cat", "dog"])).score == 1.0
    assert not (await score(scorers.f1(threshold=0.9), "the cat sat on the mat", "cat sat")).passed


async def test_combine_gives_named_scores_and_the_chosen_verdict() -> None:
    combined = scorers.combine(
        scorers.exact(), scorers.f1(), scorers.numeric(name="number"), passed="f1"
    )
    evaluation = await score(combined, "It is 42 apples", "42 apples")
    # f1: "it is 42 apples" shares 2 of its 4 words with "42 apples" (all of its 2).
    assert evaluation.scores == {"exact": 0.0, "f1": pytest.approx(2 / 3), "number": 1.0}
    assert evaluation.passed and evaluation.score == pytest.approx(2 / 3)
    assert evaluation.details == {"number": {"found": 42.0}}


async def test_a_function_joins_a_combination_and_may_abstain() -> None:
    def long_enough(record: TrialRecord) -> bool | None:
        return None if record.output is None else len(str(record.output)) > 3

    combined = scorers.combine(scorers.exact(), long_enough)
    assert (await score(combined, "Paris", "Paris")).scores == {"exact": 1.0, "long_enough": 1.0}
    abstained = await score(combined, None, "Paris")
    assert abstained.scores == {"exact": 0.0}  # long_enough abstained: no score of its own


def test_combine_refuses_two_scorers_of_one_name() -> None:
    with pytest.raises(ConfigError, match=r"two scorers are named 'exact'"):
        scorers.combine(scorers.exact(), scorers.exact(ignore_case=True))
    with pytest.raises(ConfigError, match=r"passed='x' names none of the scorers"):
        scorers.combine(scorers.exact(), passed="x")


class Answering:
    """An environment whose ``evaluate`` is a ready scorer, set in its class."""

    name = "qa"
    evaluate = scorers.combine(scorers.exact(ignore_case=True), scorers.f1())

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: corral.Action, session: corral.AgentSession) -> Any:
        return corral.ToolEffect(None)


QA = {
    "capital": Meta("a", "qa", inputs={"answer": "paris"}, target="Paris"),
    "river": Meta("a", "qa", inputs={"answer": "the Seine river"}, target="Seine"),
}


def answers(session: corral.AgentSession) -> corral.Final:
    return corral.Final(session.inputs["answer"])


async def test_named_scores_are_stored_and_read_back(tmp_path: Path) -> None:
    store = corral.SQLiteStore(tmp_path / "s.db")
    runner = corral.CorralRunner(
        QA, {"a": ScriptedAgent(answers)}, {"qa": Answering()}, store=store
    )
    report = await runner.run("qa", trials_per_task=2)
    river = report.tasks["river"].trials[0].evaluation
    assert river is not None and not river.passed
    assert river.scores == {"exact": 0.0, "f1": pytest.approx(2 / 3)}
    assert report.tasks["capital"].trials[1].evaluation.scores == {"exact": 1.0, "f1": 1.0}  # type: ignore[union-attr]
    as_json = report.tasks["river"].trials[0].to_dict()["evaluation"]
    assert as_json["scores"] == {"exact": 0.0, "f1": pytest.approx(2 / 3)}
    # Read back from the store, as `corral report` reads it.
    async with store.opened():
        summaries = await store.summaries("qa")
    records = {(s.task_id, s.trial): s.record() for s in summaries}
    assert records[("river", 1)].evaluation.scores == river.scores  # type: ignore[union-attr]


async def test_an_evaluation_without_named_scores_reads_as_before() -> None:
    store = corral.MemoryStore()
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")}, {"a": ScriptedAgent()}, {"e": FakeEnvironment()}, store=store
    )
    report = await runner.run("b", trials_per_task=1)
    payload = [
        c for c in await store.history(corral.TrialKey("b", "t", 0)) if c.kind == "evaluation"
    ]
    assert set(payload[0].payload) == {"score", "passed", "details"}
    assert "scores" not in report.tasks["t"].trials[0].to_dict()["evaluation"]


@pytest.mark.parametrize(
    ("scores", "message"),
    [
        ({"a": float("nan")}, r"Evaluation.scores\['a'\] must be a finite number"),
        ({"a": True}, r"Evaluation.scores\['a'\] must be a finite number"),
        ({1: 1.0}, r"names must be non-empty strings"),
    ],
)
async def test_bad_named_scores_fail_the_evaluation(scores: Any, message: str) -> None:
    env = FakeEnvironment(evaluate=lambda t: Evaluation(1.0, True, scores=scores))
    runner = corral.CorralRunner(
        {"t": Meta("a", "e")},
        {"a": ScriptedAgent()},
        {"e": env},
        store=corral.MemoryStore(),
        backoff_base=0.0,  # the failed evaluation's retries, at once
    )
    report = await runner.run("b", trials_per_task=1)
    assert re.search(message, str(report.tasks["t"].trials[0].evaluation_error))


GRADER_TEMPLATE = "Q: {input}\nA: {output}\nGold: {target}\nGrade it."


def grader(body: dict[str, Any]) -> ChatReply:
    prompt = body["messages"][0]["content"]
    if "Gold: ???" in prompt:
        return ChatReply(content="I cannot tell.", usage=(30, 5))
    good = "A: Paris" in prompt
    return ChatReply(content=f"Reasoning...\nGRADE: {'C' if good else 'I'}", usage=(40, 8))


async def test_model_graded_records_its_usage_on_the_evaluation() -> None:
    with FakeChatServer(grader) as server:
        model = OpenAICompatible("judge", base_url=server.url, prices={"input": 1.0, "output": 2.0})
        judge = scorers.model_graded(model, template=GRADER_TEMPLATE)
        tasks = {
            "ok": Meta(
                "a", "e", inputs={"prompt": "Capital of France?", "say": "Paris"}, target="Paris"
            ),
            "bad": Meta(
                "a", "e", inputs={"prompt": "Capital of France?", "say": "Lyon"}, target="Paris"
            ),
            "unsure": Meta("a", "e", inputs={"say": "x"}, target="???"),
        }
        store = corral.MemoryStore()
        runner = corral.CorralRunner(
            tasks,
            {"a": ScriptedAgent(lambda s: corral.Final(s.inputs["say"]))},
            {"e": FakeEnvironment(evaluate=judge)},
            store=store,
        )
        report = await runner.run("g", trials_per_task=1)
        prompts = [r["messages"][0]["content"] for r in server.requests]
    ok = report.tasks["ok"].trials[0]
    assert ok.passed and ok.evaluation.scores == {"model_graded": 1.0}  # type: ignore[union-attr]
    assert ok.evaluation.details["grade"] == "C"  # type: ignore[union-attr]
    assert not report.tasks["bad"].trials[0].passed
    unsure = report.tasks["unsure"].trials[0].evaluation
    assert unsure is not None and unsure.scores == {}
    assert unsure.details["abstained"] == "the grader gave no grade"
    # The grader's usage is on the evaluation commit, and in the trial's usage.
    history = await store.history(corral.TrialKey("g", "ok", 0))
    evaluation = [c for c in history if c.kind == "evaluation"][0]
    assert evaluation.usage == Usage(40, 8, (40 * 1.0 + 8 * 2.0) / 1e6)
    assert ok.usage.input_tokens == 40 and ok.usage.output_tokens == 8
    assert any('Q: {"prompt": "Capital of France?", "say": "Paris"}' in p for p in prompts)


async def test_model_graded_calls_count_against_the_run_cost_limit() -> None:
    with FakeChatServer(lambda body: ChatReply(content="GRADE: C", usage=(1_000_000, 0))) as server:
        model = OpenAICompatible("judge", base_url=server.url, prices={"input": 1.0})
        judge = scorers.model_graded(model)
        tasks = {f"t{i}": Meta("a", "e", target="x") for i in range(6)}
        runner = corral.CorralRunner(
            tasks,
            {"a": ScriptedAgent(lambda s: corral.Final("x"))},
            {"e": FakeEnvironment(evaluate=judge)},
            store=corral.MemoryStore(),
        )
        report = await runner.run(
            "g", trials_per_task=1, run_cost_limit=2.0, max_parallel=1, max_parallel_evaluations=1
        )
    # Only the grader spends: its cost is what stopped the run.
    assert report.stopped is not None and "run_cost_limit" in report.stopped


async def test_model_graded_calls_of_a_failed_evaluation_attempt_count_in_its_usage() -> None:
    """A grader answered, then a scorer after it raised: the evaluation is retried and
    the grader asked (and paid) again. Before, the first call's tokens and cost were
    dropped with the failed attempt: the report counted one call of the two paid."""
    failures = iter([RuntimeError("flaky")])

    def flaky(trial: TrialRecord) -> bool:
        if (failed := next(failures, None)) is not None:
            raise failed
        return True

    report, history, asked = await _graded_then(flaky)
    ok = report.tasks["t"].trials[0]
    assert asked == 2 and ok.passed
    assert (ok.usage.input_tokens, ok.usage.output_tokens) == (80, 16)
    assert report.usage.cost == pytest.approx(80 / 1e6)
    evaluation = [c for c in history if c.kind == "evaluation"][0]
    assert evaluation.usage == Usage(80, 16, 80 / 1e6)


async def test_model_graded_calls_of_a_timed_out_evaluation_count_in_its_usage() -> None:
    """The grader answered, then a scorer after it hung past evaluation_timeout: the
    failed evaluation still counts the call paid for (before, none of it)."""

    async def hangs(trial: TrialRecord) -> bool:
        await anyio.Event().wait()
        return True

    report, history, asked = await _graded_then(hangs, evaluation_timeout=0.05)
    failed = report.tasks["t"].trials[0]
    assert asked == 1 and "evaluation_timeout" in str(failed.evaluation_error)
    assert (failed.usage.input_tokens, failed.usage.output_tokens) == (40, 8)
    evaluation = [c for c in history if c.kind == "evaluation"][0]
    assert evaluation.usage == Usage(40, 8, 40 / 1e6)


async def _graded_then(after: Any, **run: Any) -> tuple[Any, list[corral.Commit], int]:
    """A run of one trial scored by a grader, then ``after``: its report, the trial's
    history and how many times the grader was asked."""
    with FakeChatServer(lambda body: ChatReply(content="GRADE: C", usage=(40, 8))) as server:
        model = OpenAICompatible("judge", base_url=server.url, prices={"input": 1.0})
        judge = scorers.combine(scorers.model_graded(model), scorers.scorer(after))
        store = corral.MemoryStore()
        runner = corral.CorralRunner(
            {"t": Meta("a", "e", target="x")},
            {"a": ScriptedAgent(lambda s: corral.Final("x"))},
            {"e": FakeEnvironment(evaluate=judge)},
            store=store,
            backoff_base=0.0,
            **run,
        )
        report = await runner.run("g", trials_per_task=1)
        asked = len(server.requests)
    return report, await store.history(corral.TrialKey("g", "t", 0)), asked


@pytest.mark.parametrize(
    ("said", "grade", "expected"),
    [
        ("Reasoning.\nGRADE: C", "C", 1.0),
        ("Reasoning.\n**GRADE:** C", "C", 1.0),
        ("Reasoning.\nGRADE: **P**", "P", 0.5),
        ("Reasoning.\nGrade: I", "I", 0.0),
        ("Reasoning.\ngrade: c", "c", 1.0),
        ("Not GRADE: I, so GRADE: C.\n\n### GRADE: I", "I", 0.0),
        ("My verdict is 'GRADE: C'.", "C", 1.0),  # quoted: the quote ends no word
        ("Verdict: \u2018GRADE: I\u2019", "I", 0.0),
        ("Reasoning.\nGRADE: `C`", "C", 1.0),
        ("Reasoning.\nGRADE: (P)", "P", 0.5),
        ('Reasoning.\nGRADE: "I"', "I", 0.0),
        ("Reasoning.\nGRADE: [C]", "C", 1.0),
        ("Reasoning.\nGRADE: 'C'", "C", 1.0),
    ],
)
async def test_model_graded_reads_the_grade_however_the_judge_writes_it(
    said: str, grade: str, expected: float
) -> None:
    with FakeChatServer(lambda body: ChatReply(content=said, usage=(10, 2))) as server:
        judge = scorers.model_graded(OpenAICompatible("judge", base_url=server.url))
        evaluation = await score(judge, "Paris", "Paris")
    assert evaluation.details.get("grade") == grade
    assert evaluation.scores == {"model_graded": expected}


@pytest.mark.parametrize(
    ("said", "grade"),
    [
        ("GRADE: C\n\nNo downgrade: it is right.", "C"),
        ("GRADE: I\n\nAn upgrade: Certainly not.", "I"),
        ("Reasoning.\nGRADE: Incorrect", "I"),  # its word, as before
        ("It is hard to grade: it depends on the units.", None),
        ("Before I give my grade: perhaps the units matter.", None),
        ("GRADE: C\n\nIf I had to change the grade: I'd keep it.", "C"),
        ("Grade: I\u2019m not sure the units", None),  # cut off: I'm is no Incorrect
        # A list the reasoning marks off is no grade marked off (cut off at max_tokens).
        ("To settle the grade: (i) first the units, (ii) then the value", None),
        ('The grade: "Incorrect" would be wrong here, as', None),
        ("Reasoning.\nGRADE: (Correct)", "C"),
    ],
)
async def test_model_graded_takes_no_word_of_the_judges_reasoning_for_its_grade(
    said: str, grade: str | None
) -> None:
    # "upgrade:", "downgrade:" are no GRADE:, and "grade: it" grades nothing: the grade is
    # the judge's last GRADE line, or none (an abstention, not a made-up verdict).
    with FakeChatServer(lambda body: ChatReply(content=said, usage=(10, 2))) as server:
        judge = scorers.model_graded(OpenAICompatible("judge", base_url=server.url))
        evaluation = await score(judge, "Paris", "Paris")
    assert evaluation.details.get("grade") == grade
    if grade is None:
        assert evaluation.details["abstained"] == "the grader gave no grade"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"template": "{question}"}, r"template field \{question\} is not one of input"),
        ({"grade_pattern": "GRADE"}, r"needs a group around the grade"),
        ({"grades": {"C": "yes"}}, r"grades must map text to numbers"),
        ({"max_tokens": 0}, r"max_tokens must be a positive integer"),
        # Sent as the request's model (a 400 at every scoring), or "" in place of none.
        ({"grader_model": 3}, r"grader_model must be a non-empty string, not 3"),
        ({"grader_model": ""}, r"grader_model must be a non-empty string, not ''"),
    ],
)
def test_model_graded_refuses_bad_arguments(kwargs: dict[str, Any], message: str) -> None:
    model = OpenAICompatible("judge", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(ConfigError, match=message):
        scorers.model_graded(model, **kwargs)


def test_the_report_table_shares_equal_named_scores_only() -> None:
    from corral._records import TrialTable

    table = TrialTable(4)
    made = [
        Evaluation(1.0, True, scores={"exact": 1.0, "f1": 1.0}),
        Evaluation(1.0, True, scores={"exact": 1.0, "f1": 1.0}),
        Evaluation(1.0, True, scores={"exact": 1, "f1": 1.0}),  # 1 is other JSON than 1.0
        Evaluation(1.0, True, scores={"f1": 1.0, "exact": 1.0}),  # another order
    ]
    for n, evaluation in enumerate(made):
        table.add(TrialRecord("t", n, TrialStatus.COMPLETED, evaluation=evaluation))
    kept = [table["t", n].evaluation for n in range(4)]
    assert kept[1] is kept[0]
    assert kept[2] is not kept[0] and kept[3] is not kept[0]
    assert [dict(e.scores) for e in kept if e] == [dict(e.scores) for e in made]
    assert list(kept[3].scores) == ["f1", "exact"]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("output", "chosen"),
    [
        ("So I pick B", "B"),  # the pronoun is no choice, with the default letters too
        ("I think it's C.", "C"),
        ("I'm sure: D", "D"),
        ("A good guess would be E", "E"),  # the article is no choice either
        ("It is hard. A fair guess: F", "F"),  # a sentence's first word, after its stop
        ("Notes:\n- A fair guess: F", "F"),
        # A capital A inside a sentence is no article (that is "a"): it was chosen.
        ("Option A fits best.", "A"),
        ("I choose A because the rest fail.", "A"),
        ("A is correct.", "A"),  # but a letter that "is" something was chosen
        ("The last one, I", "I"),  # a lone I at the end is the letter
        ("I is the answer", "I"),
        ("The answer is a bit tricky, but it is (C).", "C"),  # "a" is an article here
        ("The answer: b", "B"),  # a small letter on its own is a choice
    ],
)
async def test_choice_with_the_default_letters_reads_the_letter_chosen(
    output: str, chosen: str
) -> None:
    evaluation = await score(scorers.choice(), output, chosen)
    assert evaluation.details == {"chosen": chosen}


async def test_pattern_ignores_case_for_a_compiled_regex_too() -> None:
    scorer = scorers.pattern(re.compile(r"ANSWER:\s*(\w+)"), group=1, ignore_case=True)
    assert (await score(scorer, "answer: Paris", "Paris")).passed


@pytest.mark.parametrize(("output", "found"), [("\u22125", -5.0), ("x = \u22121,000.5", -1000.5)])
async def test_numeric_reads_a_unicode_minus_sign(output: str, found: float) -> None:
    """U+2212 (as typeset maths writes it) is a minus: "−5" is not 5."""
    await numeric_finds(output, found)
    assert not (await score(scorers.numeric(), output, -found)).passed


@pytest.mark.parametrize(
    ("output", "target"),
    [
        ("answer: paris", "Paris"),
        ("ANSWER: PARIS", ["Lyon", "paris"]),
        ("Answer: New  York", "new york"),
    ],
)
async def test_pattern_ignoring_case_compares_the_text_found_without_case(
    output: str, target: Any
) -> None:
    """``ignore_case`` is asked of the comparison too, as `exact` takes it (and Inspect's
    ``pattern``): the group found is the target whatever its case and spacing."""
    scorer = scorers.pattern(r"ANSWER:\s*(.+)", group=1, ignore_case=True)
    assert (await score(scorer, output, target)).passed
    strict = scorers.pattern(r"ANSWER:\s*(.+)", group=1)
    assert not (await score(strict, output.upper(), "Paris")).passed


@pytest.mark.parametrize(
    ("scorer", "output", "target"),
    [
        (scorers.exact(), "cafe\u0301", "caf\u00e9"),  # é decomposed, and composed
        (scorers.exact(), "\uff11\uff12\uff13", "123"),  # full-width digits
        (scorers.exact(ignore_case=True), "\uff30\uff41\uff52\uff49\uff53", "paris"),
        (scorers.includes(), "The answer is \uff14\uff12.", "42"),
        (scorers.f1(threshold=1.0), "cafe\u0301 au lait", "caf\u00e9 au lait"),
        (scorers.choice(), "Answer: \uff22", "B"),
    ],
)
async def test_text_scorers_take_one_text_in_its_unicode_forms_as_one(
    scorer: scorers.Scorer, output: str, target: str
) -> None:
    """The same text written with composed or decomposed accents, or in full-width forms
    (as CJK keyboards type digits and letters), is the same answer."""
    assert (await score(scorer, output, target)).passed


async def test_text_scorers_keep_superscripts_apart_from_digits() -> None:
    # Only width is folded, not every compatibility form: 10² is not 102.
    assert not (await score(scorers.exact(), "10\u00b2", "102")).passed


@pytest.mark.parametrize(
    ("said", "grade"),
    [
        ("GRADE: I\n\nThe answer names Lyon; it would need Paris for GRADE: C.", "I"),
        ("GRADE: C\n\nI considered GRADE: P for the missing units, but they are given.", "C"),
        ("The rubric: GRADE: C if correct, GRADE: I if not.\nIt is wrong.\nGRADE: I", "I"),
        ("GRADE: C\nGRADE: C", "C"),
        ("My verdict is 'GRADE: P'.", "P"),  # no grade begins a line: the last anywhere
    ],
)
async def test_model_graded_takes_the_grade_line_over_grades_its_explanation_mentions(
    said: str, grade: str
) -> None:
    """A judge that grades and then explains may name another grade in its explanation:
    the grade is the last one beginning its line (as the template asks), not the last
    mention."""
    with FakeChatServer(lambda body: ChatReply(content=said, usage=(10, 2))) as server:
        judge = scorers.model_graded(OpenAICompatible("judge", base_url=server.url))
        evaluation = await score(judge, "Paris", "Paris")
    assert evaluation.details.get("grade") == grade


@pytest.mark.parametrize("target", ["(B)", "B.", "B)", " b ", ["(A)", "(B)"]])
async def test_choice_takes_a_target_letter_written_as_choices_are(target: Any) -> None:
    """Datasets write the answer letter as their choices are listed (BIG-Bench Hard's
    ``(B)``): it is the letter B, not a refusal of every trial."""
    evaluation = await score(scorers.choice(), "Answer: B", target)
    assert evaluation.passed and evaluation.details == {"chosen": "B"}
    with pytest.raises(ConfigError, match=r"target '\(BC\)' is not one of the choices"):
        await score(scorers.choice(), "Answer: B", "(BC)")


@pytest.mark.parametrize(
    ("output", "found"), [("It takes 2-3 days: 3", 3.0), ("between 10-20", 20.0)]
)
async def test_numeric_reads_a_dash_after_a_digit_as_no_minus_sign(
    output: str, found: float
) -> None:
    """A dash between digits is a range or a subtraction: "2-3" ends with 3, not -3."""
    await numeric_finds(output, found)
    assert (await score(scorers.numeric(), "x = -3", -3)).passed


@pytest.mark.parametrize(
    ("said", "grade"),
    [
        (
            "It names Lyon, not Paris.\nGRADE: I\n\nThe rubric I followed:\n"
            "> GRADE: C if it is correct, GRADE: P if partly, GRADE: I if it is not.",
            "I",
        ),
        ("GRADE: I\n\nHad it said Paris, I would have written:\n\n    GRADE: C", "I"),
        ("GRADE: I\n\nHad it said Paris:\n\n\tGRADE: C", "I"),
        ("Right.\n   GRADE: C", "C"),  # up to three spaces: still its own line
        ("> GRADE: P", "P"),  # a quoted grade alone is still the grade (the last anywhere)
    ],
)
async def test_model_graded_takes_no_quoted_or_code_line_for_the_grade_line(
    said: str, grade: str
) -> None:
    """A rubric the judge quotes after its grade (``> GRADE: C if ...``) or an example in
    an indented code block begins its line too, but is no grade line of the judge's."""
    with FakeChatServer(lambda body: ChatReply(content=said, usage=(10, 2))) as server:
        judge = scorers.model_graded(OpenAICompatible("judge", base_url=server.url))
        evaluation = await score(judge, "Lyon", "Paris")
    assert evaluation.details.get("grade") == grade


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("The change is -5", -5.0),
        ("Its value-5", -5.0),
        ("stage 2, then the type3", 3.0),
        ("encoded as base64", 64.0),
        ("1e-3", 0.001),
        ("x = 2.5E3", 2500.0),
    ],
)
async def test_numeric_reads_a_number_after_a_letter_e(output: str, found: float) -> None:
    """A word's ``e`` before a number (``value-5``, ``type2``) is no exponent: the number
    after it is read, not dropped with it."""
    await numeric_finds(output, found)


async def test_full_width_forms_read_as_their_ascii_in_numbers_and_choice_targets() -> None:
    """CJK input types a full-width minus (``－5``) and letters (``Ｂ``): the output's
    were folded for text and choices, but numeric read ``－5`` as 5, and a dataset's
    full-width target letter was refused as no choice."""
    negative = await score(scorers.numeric(), "答え：－5", -5)
    assert negative.passed and negative.details == {"found": -5.0}
    chosen = await score(scorers.choice(), "Answer: B", "Ｂ")
    assert chosen.passed and chosen.details == {"chosen": "B"}


@pytest.mark.parametrize(
    ("output", "target", "found", "passed"),
    [
        ("The answer is 1/2", "0.5", 0.5, True),
        ("The answer is 0.5", "1/2", 0.5, True),
        ("The answer is 2", "1/2", 2.0, False),  # the denominator is not the answer
        ("x = -3/4", -0.75, -0.75, True),
        ("48/2 = 24", 24, 24.0, True),
        ("on 3/4/2020", 2020, 2020.0, True),  # a date is no fraction
    ],
)
async def test_numeric_reads_a_fraction_as_its_value(
    output: str, target: Any, found: float, passed: bool
) -> None:
    """``1/2`` is 0.5: read as its denominator, output 2 passed target ``1/2``."""
    evaluation = await score(scorers.numeric(), output, target)
    assert evaluation.details == {"found": found}
    assert evaluation.passed is passed


@pytest.mark.parametrize(
    ("output", "found"),
    [("It takes 1 1/2 hours.", 1.5), ("x = -2 3/4", -2.75), ("5 4/3", 4 / 3)],
)
async def test_numeric_reads_a_mixed_number_as_its_value(output: str, found: float) -> None:
    """``1 1/2`` is one and a half: it was read as its fraction alone (0.5), so an output
    of 1 1/2 passed target 1/2 and failed 1.5 (an improper ``4/3`` is no mixed part)."""
    await numeric_finds(output, found)
    assert not (await score(scorers.numeric(), "It takes 1 1/2 hours.", "1/2")).passed


@pytest.mark.parametrize(
    ("output", "found"),
    [("It takes 1½ hours.", 1.5), ("x = -2 ¾", -2.75), ("½ cup", 0.5), ("⅔", 2 / 3)],
)
async def test_numeric_reads_a_vulgar_fraction_as_its_value(output: str, found: float) -> None:
    """``1½`` is one and a half: the ``½`` was no number, so an output of 1½ passed
    target 1 and failed 1.5."""
    await numeric_finds(output, found)
    assert not (await score(scorers.numeric(), "It takes 1½ hours.", 1)).passed


@pytest.mark.parametrize(
    ("output", "found"),
    [("She lost -$5.", -5.0), ("a change of -€1,234.50", -1234.5), ("$5-$3", 3.0)],
)
async def test_numeric_reads_a_minus_before_a_currency_sign(output: str, found: float) -> None:
    """``-$5`` is minus five dollars: the sign before ``$`` was dropped (5)."""
    await numeric_finds(output, found)


@pytest.mark.parametrize(
    "output",
    [
        "So the answer is B. Wait, let me re-check. Actually, the answer is C.",
        "Answer: B\n\nOn reflection that is wrong.\n\nFinal answer: C",
        "The answer is C; answer B fails the second condition.",  # "answer B" says no answer
        "The answer is B.\n\nWait, that misreads the question.\n\n**Final Answer:** C",
        "**Answer**: B\n\nNo: **Answer**: C",
    ],
)
async def test_choice_takes_the_last_answer_the_output_gives(output: str) -> None:
    """A reply that corrects itself ends with its answer: the first one it gave was read."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": "C"}
    assert evaluation.passed


async def test_choice_takes_no_pronoun_after_a_later_answer_colon_for_the_answer() -> None:
    """``my answer: I added ...`` after ``Answer: B`` is the pronoun, not a later answer I
    (the last stated answer was read as I)."""
    output = "Answer: B\n\nTo double-check my answer: I added the numbers again."
    evaluation = await score(scorers.choice(), output, "B")
    assert evaluation.details == {"chosen": "B"}
    output = "The answer is B. Wait, the answer is I."
    assert (await score(scorers.choice(), output, "I")).passed


@pytest.mark.parametrize(
    ("scorer", "target"),
    [
        (scorers.f1(), {"text": ["Denver Broncos"], "answer_start": [177]}),  # SQuAD's row
        (scorers.f1(), ["Broncos", ["Denver Broncos"]]),
        (scorers.numeric(), {"answer": 72}),
    ],
)
async def test_f1_and_numeric_refuse_a_target_that_is_no_text_or_number(
    scorer: scorers.Scorer, target: Any
) -> None:
    """A Hugging Face row's ``answers`` object given as the target was scored as its JSON
    text (an F1 with ``answer_start``'s words, the last number of its offsets)."""
    with pytest.raises(ConfigError, match=r"task 't' target .* is not a text or a number"):
        await score(scorer, "Denver Broncos", target)


@pytest.mark.parametrize("target", ["", "  ", ["Paris", ""]])
async def test_includes_refuses_an_empty_target(target: Any) -> None:
    """Every text contains the empty one: a CSV row whose answer cell was left blank (its
    target ``""``) passed every trial of its task."""
    with pytest.raises(ConfigError, match=r"task 't' target .* is empty"):
        await score(scorers.includes(), "anything at all", target)


@pytest.mark.parametrize(
    ("output", "found"),
    [
        (r"The answer is $\boxed{\frac{1}{2}}$.", 0.5),
        (r"$\dfrac{3}{4}$", 0.75),
        (r"\boxed{-\frac{1}{2}}", -0.5),
        (r"x = \frac{-3}{4}", -0.75),
        (r"\tfrac{ 2 }{ 3 }", 2 / 3),
        (r"$1\frac{1}{2}$ hours", 1.5),
        (r"\frac12", 0.5),
    ],
)
async def test_numeric_reads_a_latex_fraction_as_its_value(output: str, found: float) -> None:
    r"""``\frac{1}{2}`` (as MATH-style answers box it) is 0.5: it was read as its
    denominator (2), so the right answer failed target 1/2 and 2 passed it."""
    await numeric_finds(output, found)
    assert not (await score(scorers.numeric(), r"$\boxed{\frac{1}{2}}$", 2)).passed


@pytest.mark.parametrize(
    "output",
    [
        r"Option A is incorrect because it ignores friction. Therefore the answer is $\boxed{C}$.",
        r"A fails, and so does B. $\boxed{\text{C}}$",
        r"The answer is \boxed{B}. Wait, B double-counts: \boxed{(C)}",
    ],
)
async def test_choice_takes_a_boxed_letter_for_the_answer(output: str) -> None:
    r"""``\boxed{C}`` states the answer, as ``Answer: C`` does: the first lone letter of
    the reasoning before it (``Option A is incorrect``) was read instead."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": "C"}
    assert evaluation.passed


@pytest.mark.parametrize(
    ("output", "found"),
    [
        (r"The total is $\boxed{1{,}234}$.", 1234.0),
        (r"$12{,}345{,}678.5$", 12345678.5),
        (r"$-\$1{,}000$", -1000.0),
    ],
)
async def test_numeric_reads_latex_thousands_commas(output: str, found: float) -> None:
    r"""LaTeX writes a thousands comma as ``{,}`` (``1{,}234``): the number was read as
    the groups after its last comma (234); and a dollar as ``\$``, whose backslash kept
    the minus before it from the number (``-\$5`` was 5)."""
    await numeric_finds(output, found)


@pytest.mark.parametrize(
    "output",
    [
        "Answer: C or D",
        "ANSWER: C/D",
        "The answer is (C) and (D).",
        "**Answer:** C, D",
        "Answer: A, B, C, D",
        "Answer: C or D is right",
        "The answer is C and D are right",
        "Answer: C, D are both correct",
    ],
)
async def test_choice_takes_no_answer_that_names_several_letters(output: str) -> None:
    """A stated answer hedged over several letters chooses none: its first letter was
    read, so ``Answer: C or D`` (or every letter listed) passed target C."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": None}
    assert not evaluation.passed


@pytest.mark.parametrize(
    ("output", "chosen"),
    [
        ("Answer: C, because D is wrong", "C"),
        ("Answer: C and I am sure of it", "C"),
        ("Answer: B or D. Wait, the answer is C.", "C"),
        ("The answer is C, a classic result.", "C"),
    ],
)
async def test_choice_takes_one_letter_followed_by_prose(output: str, chosen: str) -> None:
    """Prose after a stated letter is no second answer."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": chosen}


@pytest.mark.parametrize(
    "output",
    [
        "Answer: C, i.e. the largest one",
        "Answer: C, e.g. the third",
        "answer: c, i.e. the largest one",
        "Answer: C, F = ma",
        "Answer: C, A + B is too large",
        "Answer: C, B-cells",
        "Answer: C, E. coli",
        "Answer: C, H. pylori",
        "Answer: C, J. S. Bach",
        "Answer: C, C++",
        "Answer: C/C++",
        "Answer: C, C) Paris",
        "Answer: C, D is wrong",
        "Answer: C, D) is wrong",
        "**Answer:** **C**, **D** was a trap",
    ],
)
async def test_choice_takes_a_stated_letter_followed_by_no_other_choice(output: str) -> None:
    """After a stated letter, a letter that is no second choice (an abbreviation's, a
    name's initial, a formula's, the same letter again, or a clause's subject, as
    ``D is wrong``) is no hedge: such an answer chose nothing, and failed."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": "C"}
    assert evaluation.passed


@pytest.mark.parametrize(
    "output",
    [
        "Option A overstates it. The correct answer is option C.",
        "A is too small. The answer is: Option C",
        "A is too small. So the correct option is C.",
        "A is too small. The best choice is (C).",
        "A is too small. Answer: $C$",
    ],
)
async def test_choice_takes_an_answer_stated_as_an_option(output: str) -> None:
    """``the answer is option C``, ``the correct option is C``, ``Answer: $C$`` state the
    answer: the first lone letter of the reasoning before (``A is too small``) was read."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": "C"}
    assert evaluation.passed


@pytest.mark.parametrize(
    "output",
    [
        "The answer" + " " * 1_500 + "?",
        "answer:" + "\n" * 16_000 + "?",
        "The answer is" + " " * 8_000 + "?",
        "the correct option is" + " " * 8_000 + "?",
        "\n" * 8_000,
    ],
)
async def test_choice_reads_a_long_run_of_whitespace_at_once(output: str) -> None:
    """A run of whitespace after "answer" (a model that went on printing blank lines)
    was tried split between the pattern's spaces every way: 1,000 spaces took some 20 s,
    8,000 blank lines some 10 s (100 KB: hours); now some milliseconds. The bound is
    far from both, so a loaded machine does not fail it."""
    start = time.perf_counter()
    evaluation = await score(scorers.choice(), output, "C")
    assert time.perf_counter() - start < 10.0
    assert evaluation.details == {"chosen": None}


@pytest.mark.parametrize(
    ("output", "found"),
    [
        (r"The answer is $1.5 \times 10^{3}$.", 1500.0),
        ("about 2.5 × 10^4 molecules", 25000.0),
        ("N = 6.02·10²³", 6.02e23),
        (r"$3 \cdot 10^{-2}$ m", 0.03),
        ("-1.5 x 10^\u22123", -0.0015),
        (r"$10^{6}$", 1e6),
        ("1,500 × 10^3", 1.5e6),
    ],
)
async def test_numeric_reads_a_power_of_ten(output: str, found: float) -> None:
    r"""``1.5 \times 10^{3}`` is 1500: it was read as 1.5, 10 and 3, so the last number,
    the exponent, was taken for the answer."""
    await numeric_finds(output, found)


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("The answer is 1.5 × 10^3.", 1500.0),
        (r"So $x = 3 \times 10^{-2}$.", 0.03),
        ("about 6.02 × 10²³.", 6.02e23),
        ("1.5 × 10⁻³. Done", 0.0015),
    ],
)
async def test_numeric_reads_a_power_of_ten_that_ends_a_sentence(output: str, found: float) -> None:
    """A full stop after a power of ten ends its sentence: it was taken for a decimal
    exponent's point, and ``1.5 × 10^3.`` read as 1.5, 10 and 3 (``10²³.`` as 10²)."""
    await numeric_finds(output, found)
    assert (await score(scorers.numeric(), "10^3.5", 3.5)).passed  # no power of ten


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("The total is 1\u2009234\u2009567.", 1234567.0),
        ("1\u202f234 items, then 5", 1234.0),
        (r"$1\,234.50$", 1234.5),
        (r"$12{\,}345$", 12345.0),
    ],
)
async def test_numeric_reads_thousands_typeset_as_thin_spaces(output: str, found: float) -> None:
    r"""SI style groups thousands with thin spaces (``1 234 567``, LaTeX ``1\,234``): the
    number was read as its last group (567); a plain space still parts two numbers."""
    await numeric_finds(output, found, scorers.numeric(which="first"))
    assert (await score(scorers.numeric(), "3 4", 4)).passed


@pytest.mark.parametrize(
    ("output", "target", "found"),
    [
        ("Die Antwort ist 3,5.", "3,5", 3.5),
        ("Le total est de 1.234,50 €.", 1234.5, 1234.5),
        ("Insgesamt 1.234.567 Schafe", "1.234.567", 1234567.0),
        ("La réponse : 1\u202f234,5", "1234,5", 1234.5),
        (r"$3{,}75$", 3.75, 3.75),
        (r"$1.234{,}5$", 1234.5, 1234.5),
        ("-0,25 et puis 1/2", "0,5", 0.5),
        ("2,5 × 10^3", 2500, 2500.0),
        (r"$1\,234{,}5$", "1.234,5", 1234.5),
        (r"$1\,000\,000$", 1000000, 1000000.0),
        (r"$1{\,}234,5$", 1234.5, 1234.5),
        (r"$3,141\,592$", 3.141592, 3.141592),
        (7, 7, 7.0),
    ],
)
async def test_numeric_reads_a_decimal_comma_when_told(
    output: Any, target: Any, found: float
) -> None:
    """``decimal=","`` reads numbers as German or French write them, in the output and
    in a target written so: a comma before the decimals, a full stop (or a thin space)
    between groups of thousands; the default reads "3,5" as two numbers."""
    evaluation = await score(scorers.numeric(decimal=","), output, target)
    assert evaluation.details == {"found": found}
    assert evaluation.passed
    assert (await score(scorers.numeric(), "Die Antwort ist 3,5.", 3.5)).details == {"found": 5.0}


def test_numeric_refuses_an_unknown_decimal_mark() -> None:
    with pytest.raises(ConfigError, match=r"decimal must be '\.' or ',', not ';'"):
        scorers.numeric(decimal=";")


@pytest.mark.parametrize("target", ["3.5", "0.25", "1234.5", "1.2345"])
async def test_numeric_refuses_a_target_with_a_decimal_point_when_told_commas(
    target: str,
) -> None:
    """A target written "3.5" under ``decimal=","`` would be read as 3 and 5 (the full
    stop groups thousands there, and only before three digits): the task is named, not
    scored against 5."""
    with pytest.raises(ConfigError, match=rf"task 't' target '{re.escape(target)}'.*decimal"):
        await score(scorers.numeric(decimal=","), "3,5", target)
    assert (await score(scorers.numeric(decimal=","), "1234,5", "1.234,5")).passed


@pytest.mark.parametrize(
    ("output", "found"),
    [
        ("pi is 3.141\u2009592\u2009653", 3.141592653),
        ("N = 6.022\u2009140\u200976 × 10^23", 6.02214076e23),
        ("1\u2009234.567\u200989", 1234.56789),
        (r"$3.141\,59$", 3.14159),
    ],
)
async def test_numeric_reads_decimals_typeset_in_groups(output: str, found: float) -> None:
    r"""SI style groups a number's decimals by three too (``3.141 592 653``): its
    spaces were read as thousands commas, and the number as 3.141 and 592,653 (the
    Avogadro constant, ``6.022 140 76 × 10^23``, as 7.6e24)."""
    await numeric_finds(output, found)
    assert (await score(scorers.numeric(), "1.5\u20091234", 1234)).passed  # no group of three


@pytest.mark.parametrize(
    "output",
    [
        "The answer is C and A is wrong",
        "Answer: C and B was a trap",
        "The answer is C and D) is wrong",
    ],
)
async def test_choice_takes_a_clause_about_another_letter_after_and_for_no_hedge(
    output: str,
) -> None:
    """ "C and A is wrong" says something of A (two choices would be "are"), as "C, A is
    wrong" does: it chose none."""
    evaluation = await score(scorers.choice(), output, "C")
    assert evaluation.details == {"chosen": "C"}
    assert evaluation.passed
