"""`ConcurrencyGauge`: how many hold each key now, the most that ever did, and limits."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterator, Mapping
from contextlib import contextmanager


class ConcurrencyGauge:
    """Counts concurrent holders per key and records each key's peak.

    ``limits`` maps a key to the most holders it may have; ``check`` is called
    with the gauge after every entry to assert any other invariant (for
    example a sum over several keys). A breach is appended to ``violations``
    and raised as `AssertionError` in the entering task. Code under test may
    swallow that exception (Corral retries an agent that raises), so end a test
    with `assert_ok`.
    """

    def __init__(
        self,
        limits: Mapping[Hashable, int] | None = None,
        *,
        check: Callable[[ConcurrencyGauge], None] | None = None,
    ) -> None:
        self.limits: dict[Hashable, int] = dict(limits or {})
        self.check = check
        self.violations: list[str] = []
        self._current: Counter[Hashable] = Counter()
        self._peak: Counter[Hashable] = Counter()
        #: How many times each key was entered.
        self.entries: Counter[Hashable] = Counter()

    def __repr__(self) -> str:
        return f"<ConcurrencyGauge current={self.current} peaks={self.peaks}>"

    def count(self, key: Hashable) -> int:
        """How many hold ``key`` now."""
        return self._current[key]

    def peak(self, key: Hashable) -> int:
        """The most that ever held ``key`` at once."""
        return self._peak[key]

    @property
    def current(self) -> dict[Hashable, int]:
        """Every key held now, with its count."""
        return {key: n for key, n in self._current.items() if n}

    @property
    def peaks(self) -> dict[Hashable, int]:
        return dict(self._peak)

    def enter(self, *keys: Hashable) -> None:
        """Take one hold of every key at once, then check limits and ``check``.

        On a breach the holds are given back before `AssertionError` is raised.
        """
        for key in keys:
            self._current[key] += 1
            self.entries[key] += 1
            self._peak[key] = max(self._peak[key], self._current[key])
        breach = next(
            (
                f"{key!r} is held {self._current[key]} times, over its limit {self.limits[key]}"
                for key in keys
                if key in self.limits and self._current[key] > self.limits[key]
            ),
            None,
        )
        if breach is None and self.check is not None:
            try:
                self.check(self)
            except AssertionError as exc:
                breach = str(exc) or "check failed"
        if breach is not None:
            self.exit(*keys)
            self.violations.append(breach)
            raise AssertionError(breach)

    def exit(self, *keys: Hashable) -> None:
        for key in keys:
            if self._current[key] <= 0:
                raise RuntimeError(f"{key!r} released more often than it was entered")
            self._current[key] -= 1

    @contextmanager
    def hold(self, *keys: Hashable) -> Iterator[None]:
        """Hold ``keys`` for the duration of a ``with`` block."""
        self.enter(*keys)
        try:
            yield
        finally:
            self.exit(*keys)

    def assert_ok(self) -> None:
        """Raise `AssertionError` listing every breach seen so far, if any."""
        if self.violations:
            raise AssertionError("; ".join(self.violations))
