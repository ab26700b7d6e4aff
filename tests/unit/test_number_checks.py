"""`corral._checks`: the one check of each kind of number a setting takes, and its one
message style, used by every setting (timeouts, budgets, limits, retries, clients)."""

from __future__ import annotations

import math

import pytest

import corral
from corral._checks import (
    non_negative_int,
    non_negative_number,
    positive_int,
    positive_number,
    seconds,
)
from corral.runtime._retry import RetryPolicy

NOT_NUMBERS = [True, False, "1", None, math.nan, math.inf, -math.inf, [1]]


@pytest.mark.parametrize("bad", [*NOT_NUMBERS, 0, -1, -0.5])
def test_a_positive_number_is_finite_above_zero_and_not_a_bool(bad: object) -> None:
    with pytest.raises(corral.ConfigError) as caught:
        positive_number("x", bad)
    assert str(caught.value) == f"x must be a positive number, not {bad!r}"
    with pytest.raises(corral.ConfigError, match=r"^t must be a positive number of seconds, not"):
        seconds("t", bad)


def test_the_message_names_the_unit_and_none_where_none_is_allowed() -> None:
    assert seconds("t", None, or_none=True) is None
    assert seconds("t", 0.25) == 0.25 and positive_number("x", 3) == 3
    with pytest.raises(corral.ConfigError) as caught:
        seconds("trial_timeout", -1, or_none=True)
    assert str(caught.value) == "trial_timeout must be a positive number of seconds or None, not -1"


@pytest.mark.parametrize("bad", [*NOT_NUMBERS, -1, -1e-9])
def test_a_non_negative_number_may_be_zero(bad: object) -> None:
    assert non_negative_number("x", 0) == 0
    with pytest.raises(corral.ConfigError) as caught:
        non_negative_number("x", bad)
    assert str(caught.value) == f"x must be a non-negative number, not {bad!r}"


@pytest.mark.parametrize("bad", [True, 1.0, "2", None, -1, math.nan])
def test_integers_are_ints_not_bools_or_floats(bad: object) -> None:
    assert non_negative_int("n", 0) == 0 and positive_int("n", 1) == 1
    assert positive_int("n", None, or_none=True) is None
    with pytest.raises(corral.ConfigError) as caught:
        non_negative_int("n", bad)
    assert str(caught.value) == f"n must be a non-negative integer, not {bad!r}"
    with pytest.raises(corral.ConfigError, match=r"^n must be a positive integer or None, not"):
        positive_int("n", 0 if bad is None else bad, or_none=True)


@pytest.mark.parametrize("name", ["backoff_base", "backoff_cap", "max_rate_limit_wait"])
@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_a_retry_wait_that_is_not_finite_is_refused(name: str, bad: float) -> None:
    # Before: NaN and infinity passed `value < 0` for the backoffs.
    with pytest.raises(corral.ConfigError, match=f"{name} must be a non-negative number"):
        RetryPolicy(**{name: bad})  # type: ignore[arg-type]
