"""Scorers that compare text: `exact`, `includes`, `pattern`, `choice`."""

from __future__ import annotations

import re
from typing import Any

from .._checks import flag
from .._errors import ConfigError
from .._types import Evaluation, TrialRecord
from ._base import Scorer, as_text, folded, normalized, targets_of


class _Text(Scorer):
    """A scorer comparing texts, in lower case if asked."""

    def __init__(self, name: str, ignore_case: bool) -> None:
        super().__init__(name)
        self.ignore_case = ignore_case


class _Exact(_Text):
    async def __call__(self, trial: TrialRecord) -> Evaluation:
        said = normalized(as_text(trial.output), ignore_case=self.ignore_case)
        for target in targets_of(trial, self.name):
            if trial.output == target or said == normalized(
                as_text(target), ignore_case=self.ignore_case
            ):
                return self.verdict(1.0, True)
        return self.verdict(0.0, False)


def exact(*, ignore_case: bool = False, name: str = "exact") -> Scorer:
    """Passes when the output is the target (or one of a list of targets): equal as
    values, or as text once surrounding and repeated whitespace is dropped and each
    character has one Unicode form (`folded`: ``é`` composed or not, full-width ``１``
    as ``1``; ``ignore_case`` compares case-insensitively)."""
    return _Exact(name, flag("ignore_case", ignore_case))


class _Includes(_Text):
    async def __call__(self, trial: TrialRecord) -> Evaluation:
        said = normalized(as_text(trial.output), ignore_case=self.ignore_case)
        wanted = []
        for target in targets_of(trial, self.name):
            text = normalized(as_text(target), ignore_case=self.ignore_case)
            if not text:  # every output contains it: a blank answer cell, say
                raise ConfigError(
                    f"task {trial.task or trial.task_id!r} target {target!r} is empty: "
                    f"scorer {self.name!r} would pass any output"
                )
            wanted.append(text)
        ok = any(text in said for text in wanted)
        return self.verdict(float(ok), ok)


def includes(*, ignore_case: bool = False, name: str = "includes") -> Scorer:
    """Passes when the output's text contains the target's (or one of the targets'); an
    empty target, which any output contains, is a `ConfigError`."""
    return _Includes(name, flag("ignore_case", ignore_case))


class _Pattern(_Text):
    def __init__(
        self, name: str, regex: re.Pattern[str], group: int | str, ignore_case: bool
    ) -> None:
        super().__init__(name, ignore_case)
        self.regex = regex
        self.group = group

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        match = self.regex.search(as_text(trial.output))
        if match is None:
            return self.verdict(0.0, False, {"found": None})
        found = match.group(self.group)
        if trial.target is None:  # no target: the pattern's presence is the verdict
            return self.verdict(1.0, True, {"found": found})
        said = None if found is None else normalized(found, ignore_case=self.ignore_case)
        ok = any(
            said == normalized(as_text(t), ignore_case=self.ignore_case)
            for t in targets_of(trial, self.name)
        )
        return self.verdict(float(ok), ok, {"found": found})


def pattern(
    regex: str | re.Pattern[str],
    *,
    group: int | str = 0,
    ignore_case: bool = False,
    name: str = "pattern",
) -> Scorer:
    """Searches the output for ``regex`` and compares ``group`` of the first match with
    the target as `exact` compares texts (or, for a task without a target, passes when
    it matches); ``ignore_case`` applies to both the search and the comparison. The
    text found is in ``details["found"]``.

    ``pattern(r"ANSWER:\\s*(\\S+)", group=1)`` reads the answer after ``ANSWER:``.
    """
    ignore_case = flag("ignore_case", ignore_case)
    flags = re.IGNORECASE if ignore_case else 0
    try:
        if isinstance(regex, str):
            compiled = re.compile(regex, flags)
        elif isinstance(regex, re.Pattern) and flags and not regex.flags & flags:
            compiled = re.compile(regex.pattern, regex.flags | flags)  # as asked, not dropped
        else:
            compiled = regex
    except re.error as exc:
        raise ConfigError(f"pattern {regex!r} is not a regular expression: {exc}") from None
    if not isinstance(compiled, re.Pattern):
        raise ConfigError(f"pattern must be a regular expression, not {regex!r}")
    if isinstance(group, bool) or not isinstance(group, int | str):
        raise ConfigError(f"group must be a group number or name, not {group!r}")
    if isinstance(group, int) and not 0 <= group <= compiled.groups:
        raise ConfigError(
            f"group {group} is not in pattern {compiled.pattern!r} "
            f"(it has {compiled.groups} group(s))"
        )
    if isinstance(group, str) and group not in compiled.groupindex:
        raise ConfigError(f"group {group!r} is not named in pattern {compiled.pattern!r}")
    return _Pattern(name, compiled, group, ignore_case)


# "Answer: B", "answer is (B)", "**B**", "B) ...", "B." at the start, or a lone letter.
# The first, an answer stated ("is", ":" or "-"; "**Answer:** B" in markdown too; "the
# answer is option B", "the correct option is B", "Answer: $B$"; or boxed, as
# maths-trained models mark it: "\boxed{B}", "\boxed{\text{B}}"), counts at its last: a
# reply that corrects itself ("the answer is B. Wait, ... the answer is C") ends with
# its answer. A run of whitespace is taken whole (possessive: what follows it is no
# space), and a line's start is one line's: else a long run in an output ("answer" then
# thousands of blank lines) was tried split every way, for minutes or hours.
_CHOICE_PATTERNS = (
    r"(?:(?:answer|(?:correct|right|best)\s++(?:option|choice))"
    r"\**\s*+(?:is\s*+[:\-]?|[:\-])\**\s*+(?:(?:option|choice)\s++)?\$?\(?\**"
    r"|\\boxed\s*+\{{\s*+(?:\\text(?:bf)?\s*+\{{\s*+)?\(?)([{letters}])\b",
    r"answer\s*+(?:is|:)?\s*+[:\-]?\s*+\(?\**([{letters}])\b",
    r"^[^\S\n]*\(?\**([{letters}])\**\s*(?:[).:]|$)",
    r"\(([{letters}])\)",
    r"\b([{letters}])\b",
)


#: A target letter as datasets write it: alone, in parentheses (``(B)``), or with the
#: stop or parenthesis a list of choices puts after it (``B.``, ``B)``).
_TARGET_LETTER = re.compile(r"\s*(?:\(([A-Za-z])\)|([A-Za-z])[.)]?)\s*")
_WORD_AFTER = re.compile(r"\s+\w")
#: After a lone capital "I" or "A", what makes it the pronoun or the article ("I think",
#: "I'm", "A good guess"), not a choice: a small word other than "is" or "was" ("A is
#: correct" chose A), or an apostrophe.
_PRONOUN_AFTER = re.compile(r"'|\s+(?!(?:is|was)\b)[a-z]")
#: After a letter joined to a stated answer, what makes it no second choice: a word's
#: ("B-cells", "C++", "A's"), a formula's ("F = ma"), an abbreviation's or a name's ("E.
#: coli", "J. S. Bach"), or prose's ("C, D being wrong"; "C or D is right" and "C and D
#: are right" are hedges).
_NOT_ANOTHER = re.compile(
    r"[-+#'=<>^_]"
    r"|\)?+\**+\$?+(?:\s*[=<>+^]|\s+(?!(?:is|was|are|were)\b)[a-z]|\.\s*[a-z]|\.\s?[A-Z]\.)"
)
#: After a letter put after a stated answer's comma (or "and"), a clause's verb: "C, D
#: is wrong", "C, D) was a trap", "C and D is wrong" start a sentence about D.
_SUBJECT_OF = re.compile(r"\)?+\**+\$?+\s+(?:is|was)\b")
#: What may join a clause about another letter to a stated answer: "C, D is wrong" and
#: "C and D is wrong" (two choices would be "are"), not "C or D is right" (a hedge).
_CLAUSE_JOINS = frozenset({",", "and"})
#: Where a sentence starts (a line's list marker or quote before it): the article is
#: "A" only there ("Option A fits" chose A).
_SENTENCE_START = re.compile(r"(?:\A|[.!?\n])[\s\"'(*#>-]*\Z")


class _Choice(Scorer):
    def __init__(self, name: str, letters: str) -> None:
        super().__init__(name)
        self.letters = letters
        # A lone letter counts only in capitals ("a cat" chose nothing).
        self.regexes = [
            re.compile(
                p.format(letters=re.escape(letters)),
                re.MULTILINE | (re.IGNORECASE if p is not _CHOICE_PATTERNS[-1] else 0),
            )
            for p in _CHOICE_PATTERNS
        ]
        # After a stated answer's letter, another joined to it ("C or D", "C, D",
        # "(C) and (D)"); whether it is a second choice is `_one`'s to say.
        either = f"{re.escape(letters)}{re.escape(letters.lower())}"
        self.another = re.compile(rf"\)?\**\s*([,/&]|(?i:or|and)\b)\s*\(?\**([{either}])\b")

    def chosen(self, text: str) -> str | None:
        for regex in self.regexes:
            stated = [
                found
                for found in regex.finditer(text)
                # "the answer is a bit ...": a small letter running on into a word is
                # an article or a pronoun, not a choice ("answer: b" is one).
                if not (found.group(1).islower() and _WORD_AFTER.match(text, found.end(1)))
                # A lone "I think", or a stated answer's ("Answer: B ... to check my
                # answer: I added ..."): the pronoun, not a choice.
                and not (
                    (regex is self.regexes[0] or regex is self.regexes[-1])
                    and self._pronoun(text, found)
                )
            ]
            if stated and regex is self.regexes[0]:
                return self._one(text, stated[-1])
            if stated:
                return stated[0].group(1).upper()
        return None

    def _one(self, text: str, stated: re.Match[str]) -> str | None:
        """A stated answer's letter; None when it names several ("Answer: C or D"): a
        hedge is no choice (its first letter passed, and so did listing them all). The
        letter after it is a second choice only as a choice is written: in the stated
        one's case ("C, i.e." is none), another letter ("C/C++" is none), and not
        starting a word, a name, a formula or a clause (`_NOT_ANOTHER`, `_SUBJECT_OF`)."""
        letter = stated.group(1)
        another = self.another.match(text, stated.end(1))
        if (
            another is None
            or another.group(2).isupper() != letter.isupper()
            or another.group(2).upper() == letter.upper()
            or _NOT_ANOTHER.match(text, another.end(2))
            or (
                another.group(1).lower() in _CLAUSE_JOINS
                and _SUBJECT_OF.match(text, another.end(2))
            )
        ):
            return letter.upper()
        return None

    @staticmethod
    def _pronoun(text: str, found: re.Match[str]) -> bool:
        """Whether a lone capital letter is the pronoun "I" (anywhere) or the article "A"
        (which starts a sentence) rather than a choice."""
        letter = found.group(1)
        if letter not in ("A", "I") or not _PRONOUN_AFTER.match(text, found.end(1)):
            return False
        start = found.start(1)
        return letter == "I" or bool(_SENTENCE_START.search(text, max(0, start - 20), start))

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        wanted = {self._letter(t, trial) for t in targets_of(trial, self.name)}
        chosen = self.chosen(folded(as_text(trial.output)))
        ok = chosen in wanted
        return self.verdict(float(ok), ok, {"chosen": chosen})

    def _letter(self, target: Any, trial: TrialRecord) -> str:
        if isinstance(target, int) and not isinstance(target, bool):
            if 0 <= target < len(self.letters):
                return self.letters[target].upper()
        elif isinstance(target, str):
            written = _TARGET_LETTER.fullmatch(folded(target))  # "B", "(B)", "B.", "Ｂ"
            letter = "" if written is None else (written[1] or written[2]).upper()
            if letter and letter in self.letters:
                return letter
        raise ConfigError(
            f"task {trial.task or trial.task_id!r} target {target!r} is not one of the "
            f"choices {self.letters!r} (a letter, or its index from 0)"
        )


def choice(*, letters: str = "ABCDEFGHIJ", name: str = "choice") -> Scorer:
    """A multiple-choice answer: reads the letter the output chose (``Answer: B`` or
    ``\\boxed{B}``, the last such answer given, ``(B)``, ``B) ...``, a lone ``B``; an
    answer stated as several, ``Answer: B or C``, chooses none) and passes when it is
    the target (a letter, as ``B``, ``(B)``, ``B.`` or ``B)``, or its index from 0).
    The letter read is in ``details["chosen"]``."""
    if not isinstance(letters, str) or not letters.isalpha() or len(set(letters)) != len(letters):
        raise ConfigError(f"letters must be distinct letters, not {letters!r}")
    return _Choice(name, letters.upper())
