"""Scorers that measure rather than match: `numeric` (a number within a tolerance)
and `f1` (token overlap)."""

from __future__ import annotations

import math
import re
import string
import unicodedata
from collections import Counter
from typing import Any

from .._checks import non_negative_number
from .._errors import ConfigError
from .._types import Evaluation, TrialRecord
from ._base import Scorer, as_text, folded, plain_targets

# 1,234.5  -3  .5  2e-3  +7  1/2  (a thousands comma only between groups of three digits;
# a sign right after a digit is a range's dash or a subtraction: "2-3" ends with 3; an
# exponent only after digits: a word's "e" is none, "value-5" is -5; a fraction of whole
# numbers, not a date's "3/4/2020", with its whole part: "1 1/2" is 1.5; a currency sign
# after the sign: "-$5" is -5)
_NUMBER = re.compile(
    r"(?:(?<!\d)[-+\u2212][$\u20ac\u00a3\u00a5]?)?"
    r"(?:(?<![\d/])(?:\d+ )?\d+/[1-9]\d*(?![\d/]|[.,]\d)"
    r"|(?:(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+)?)"
)

#: A vulgar fraction (``½``, ``⅔``), after a digit or a digit and a space: ``1½`` is 1 1/2.
_VULGAR = re.compile(r"(?:(\d) ?)?([\u00bc-\u00be\u2150-\u215e\u2189])")


def _spelled(found: re.Match[str]) -> str:
    """A vulgar fraction written out (``1½`` as ``1 1/2``)."""
    fraction = unicodedata.normalize("NFKC", found[2]).replace("\u2044", "/")
    return f"{found[1]} {fraction}" if found[1] else fraction


#: A LaTeX fraction of whole numbers (``\frac{1}{2}``, ``\dfrac``, ``\tfrac``, ``\frac12``),
#: after a digit or a digit and a space: ``1\frac{1}{2}`` is 1 1/2.
_LATEX_FRACTION = re.compile(
    r"(?:(\d) ?)?\\[dt]?frac\s*(?:\{\s*([-+\u2212]?\d+)\s*\}|(\d))\s*(?:\{\s*(\d+)\s*\}|(\d))"
)


def _latex(found: re.Match[str]) -> str:
    r"""A LaTeX fraction written out (``\frac{1}{2}`` as ``1/2``, whose value the number's
    pattern reads; its braces made its numerator and denominator two numbers)."""
    fraction = f"{found[2] or found[3]}/{found[4] or found[5]}"
    return f"{found[1]} {fraction}" if found[1] else fraction


#: How LaTeX writes a thousands comma (``1{,}234``) and a dollar sign (``\$5``), which
#: read as a number's comma and dollar (else ``1{,}234`` was 234, ``-\$5`` was 5).
_LATEX_SPELLING = re.compile(r"(?<=\d)\{,\}(?=\d)|\\(?=\$)")


def _unlatexed(found: re.Match[str]) -> str:
    """LaTeX's comma or dollar as plain text writes it."""
    return "," if found[0] == "{,}" else ""


#: A space typeset between a number's groups of digits (SI style): a thin, narrow
#: no-break or no-break space, or LaTeX's ``\\,``; a plain space is not one ("3 4" is
#: two numbers, "1 1/2" one).
_LATEX_THIN = r"\{?\\,\}?"  # LaTeX's thin space: ``\,`` or ``{\,}``
_GROUP_SPACE = rf"(?:[\u2009\u202f\u00a0]|{_LATEX_THIN})"
#: A thousands separator so typeset, between a digit and a group of three
#: (``1\u2009234\u2009567``).
_SPACED_GROUP = re.compile(rf"(?<=\d){_GROUP_SPACE}(?=\d{{3}}(?!\d))")
#: Decimals so grouped, by three from the point (``3.141\u2009592\u2009653``): read as
#: one number's, not as thousands after it (``3.141`` and ``592,653``).
_SPACED_DECIMALS = re.compile(
    rf"(?<=\d\.)\d{{3}}(?:{_GROUP_SPACE}\d{{3}}(?!\d))*{_GROUP_SPACE}\d{{1,3}}(?!\d)"
)
_GROUP_SPACES = re.compile(_GROUP_SPACE)


def _ungrouped(found: re.Match[str]) -> str:
    """Grouped decimals without their spaces."""
    return _GROUP_SPACES.sub("", found[0])


_SUPERSCRIPT = str.maketrans(
    "\u207b\u207a\u2070\u00b9\u00b2\u00b3\u2074\u2075\u2076\u2077\u2078\u2079", "-+0123456789"
)

#: A power of ten, as a factor (``1.5 \\times 10^{3}``, ``2.5 × 10^4``, ``6.02·10²³``) or
#: alone (``10^{-3}``): written out as ``1.5e3`` (else read as 1.5, 10 and 3, the last
#: being 3). The factor before it is a whole number (its thousands commas too). A
#: decimal point after it is no power of ten (``10^3.5``); a full stop is (``10^3.``).
_POWER_OF_TEN = re.compile(
    r"(?:(?<![\d.,])((?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?|\.\d+)\s*(?:\\times|\\cdot|[\u00d7\u00b7\u22c5xX*])\s*)?"
    r"(?<![\d.,])10(?:\s*\^\s*(?:\{\s*([-+\u2212]?\d+)\s*\}|([-+\u2212]?\d+))"
    r"|([\u207b\u207a]?[\u2070\u00b9\u00b2\u00b3\u2074-\u2079]++))(?!\.?\d)"
)


def _power(found: re.Match[str]) -> str:
    """A power of ten written as the number's pattern reads it (``1.5e3``)."""
    exponent = found[2] or found[3] or found[4].translate(_SUPERSCRIPT)
    return f"{found[1] or 1}e{exponent.replace(chr(0x2212), '-')}"


#: What a number's text holds that its value does not: thousands commas, currency signs.
_NOT_WRITTEN = re.compile("[,$\u20ac\u00a3\u00a5]")


#: A decimal comma's text as the decimal point's reads: its full stops and commas swapped.
_COMMA_DECIMALS = str.maketrans(".,", ",.")
#: LaTeX's thin space between groups of digits (``1\,234``, ``1{\,}234``), as the thin
#: space it typesets: its comma is no decimal comma.
_LATEX_THIN_SPACE = re.compile(_LATEX_THIN)
#: A full stop before digits that are not a group of three: a decimal point, which
#: `numeric(decimal=",")` would read as two numbers (``3.5`` as 3 and 5).
_POINT_DECIMAL = re.compile(r"\d\.(?!\d{3}(?!\d))\d")
#: The decimal marks `numeric` reads.
_DECIMAL_MARKS = (".", ",")


def numbers_in(text: str, decimal: str = ".") -> list[float]:
    """The numbers written in ``text``, in order (``$1,234.50`` is 1234.5, ``1/2`` and
    ``\\frac{1}{2}`` are 0.5, ``1 1/2`` and ``1½`` are 1.5, LaTeX's ``1{,}234`` and
    ``1\\,234`` are 1234, ``1.5 × 10^3`` is 1500;
    full-width forms, ``－５``, as their ASCII: `folded`). With ``decimal=","``, as
    German or French write them: ``1.234,5`` is 1234.5, LaTeX's ``3{,}5`` is 3.5."""
    out: list[float] = []
    spelled = _LATEX_SPELLING.sub(_unlatexed, _VULGAR.sub(_spelled, folded(text)))
    spelled = _LATEX_FRACTION.sub(_latex, spelled)
    if decimal == ",":  # read from here on as if written with a decimal point
        spelled = _LATEX_THIN_SPACE.sub("\u2009", spelled).translate(_COMMA_DECIMALS)
    spelled = _SPACED_GROUP.sub(",", _SPACED_DECIMALS.sub(_ungrouped, spelled))
    spelled = _POWER_OF_TEN.sub(_power, spelled)
    for match in _NUMBER.finditer(spelled):
        # U+2212, the minus sign of typeset maths, is a minus as "-" is.
        written = _NOT_WRITTEN.sub("", match.group(0)).replace("\u2212", "-")
        whole, _, fraction = written.rpartition(" ")
        numerator, _, denominator = fraction.partition("/")
        try:
            value = float(numerator)
            if denominator:
                value /= float(denominator)
            if whole and value < 1:  # a mixed number: 1 1/2, -2 3/4
                value = math.copysign(abs(float(whole)) + value, -1.0 if whole[0] == "-" else 1.0)
            elif whole:  # "5 4/3" is two numbers
                out.append(float(whole))
        except ValueError:
            continue
        out.append(value)
    return out


def number_of(value: Any, which: str, decimal: str = ".") -> float | None:
    """``value`` as a number: itself if it is one, else the ``which`` ("first" or
    "last") number written in its text (with ``decimal`` its decimal mark); None if
    there is none."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    found = numbers_in(as_text(value), decimal)
    if not found:
        return None
    return found[0] if which == "first" else found[-1]


class _Numeric(Scorer):
    def __init__(self, name: str, abs_tol: float, rel_tol: float, which: str, decimal: str) -> None:
        super().__init__(name)
        self.abs_tol = abs_tol
        self.rel_tol = rel_tol
        self.which = which
        self.decimal = decimal

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        wanted = []
        for target in plain_targets(trial, self.name):
            number = number_of(target, "last", self.decimal)
            if number is None:
                raise ConfigError(
                    f"task {trial.task or trial.task_id!r} target {target!r} is not a number"
                )
            if self.decimal == "," and isinstance(target, str) and _POINT_DECIMAL.search(target):
                raise ConfigError(
                    f"task {trial.task or trial.task_id!r} target {target!r} has a decimal "
                    'point, which numeric(decimal=",") reads as a thousands separator (give '
                    "the target as a number, or with a decimal comma)"
                )
            wanted.append(number)
        got = number_of(trial.output, self.which, self.decimal)
        if got is None:
            return self.verdict(0.0, False, {"found": None})
        ok = any(math.isclose(got, w, rel_tol=self.rel_tol, abs_tol=self.abs_tol) for w in wanted)
        return self.verdict(float(ok), ok, {"found": got})


def numeric(
    *,
    abs_tol: float = 0.0,
    rel_tol: float = 1e-9,
    which: str = "last",
    decimal: str = ".",
    name: str = "numeric",
) -> Scorer:
    """Passes when the output's number is within ``abs_tol`` or ``rel_tol`` (as
    `math.isclose`) of the target. An output that is not a number gives the
    ``which`` ("last", the default, or "first") number written in its text
    (``"so the total is $1,234.50."`` gives 1234.5); the number read is in
    ``details["found"]`` (None: the output has none, and the trial fails).
    ``decimal=","`` reads the output's text and a target's as German or French write
    numbers (``"1.234,5"`` is 1234.5, ``"3,5"`` is 3.5); by default a comma only groups
    thousands."""
    for label, tol in (("abs_tol", abs_tol), ("rel_tol", rel_tol)):
        non_negative_number(label, tol)
    if which not in ("first", "last"):
        raise ConfigError(f"which must be 'first' or 'last', not {which!r}")
    if not isinstance(decimal, str) or decimal not in _DECIMAL_MARKS:
        raise ConfigError(f"decimal must be '.' or ',', not {decimal!r}")
    return _Numeric(name, float(abs_tol), float(rel_tol), which, decimal)


_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)


def tokens(text: str) -> list[str]:
    """``text``'s words as SQuAD compares them: `folded`, lower case, without
    punctuation or articles."""
    return _ARTICLES.sub(" ", folded(text).casefold().translate(_PUNCTUATION)).split()


def token_f1(said: str, target: str) -> float:
    """The F1 of the words two texts share (1.0 when both have none)."""
    a, b = tokens(said), tokens(target)
    if not a or not b:
        return float(a == b)
    common = sum((Counter(a) & Counter(b)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(a), common / len(b)
    return 2 * precision * recall / (precision + recall)


class _F1(Scorer):
    def __init__(self, name: str, threshold: float) -> None:
        super().__init__(name)
        self.threshold = threshold

    async def __call__(self, trial: TrialRecord) -> Evaluation:
        said = as_text(trial.output)
        best = max(token_f1(said, as_text(t)) for t in plain_targets(trial, self.name))
        return self.verdict(best, best >= self.threshold)


def f1(*, threshold: float = 0.5, name: str = "f1") -> Scorer:
    """The token-overlap F1 of the output and the target (the best over a list of
    targets), as SQuAD scores it: words compared in lower case, without punctuation
    or articles. The score is the F1; the trial passes when it is at least
    ``threshold``."""
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not 0 <= threshold <= 1
    ):
        raise ConfigError(f"threshold must be a number from 0 to 1, not {threshold!r}")
    return _F1(name, float(threshold))
