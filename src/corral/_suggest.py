"""Did you mean: the one place that names close matches of a mistyped name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def close_matches(word: str, choices: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``choices`` close to ``word``, best first; a choice that ``word``
    is a prefix of or that differs only in case counts as close too (``apples`` for
    ``apples@mini``, ``Calc`` for ``calc``)."""
    options = sorted(set(choices))
    found = [c for c in options if c.lower() == word.lower() and c != word]
    found += [c for c in options if c.startswith(f"{word}@")]
    found += difflib.get_close_matches(word, options, n=n)
    return list(dict.fromkeys(found))[:n]


def did_you_mean(word: str, choices: Iterable[str]) -> str:
    """``"; did you mean 'a' or 'b'?"`` for the close matches of ``word``, else ``""``:
    the tail of an error message that names ``word``."""
    close = close_matches(word, choices)
    if not close:
        return ""
    names = [repr(c) for c in close]
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    return f"; did you mean {listed}?"
