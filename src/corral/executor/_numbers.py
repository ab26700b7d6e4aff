"""Which numbers of a sequence have come, kept as a low-water mark and the ones above it
that came out of order: memory for the gaps' worth, not for every number seen.

A Ray call that Ray could not deliver for the moment is sent again under the same
number (the caller cannot tell whether the first one ran): the receiver runs each
number once, and keeps this to know which.
"""

from __future__ import annotations


class Numbers:
    """The numbers from ``first`` on that have come, each counted once."""

    __slots__ = ("_above", "below")

    def __init__(self, first: int = 1) -> None:
        #: Every number below it has come.
        self.below = first
        self._above: set[int] = set()

    def __contains__(self, number: int) -> bool:
        return number < self.below or number in self._above

    def add(self, number: int) -> bool:
        """Count ``number``; False if it had come already."""
        if number in self:
            return False
        above = self._above
        above.add(number)
        while self.below in above:  # kept small: only the gaps' worth
            above.remove(self.below)
            self.below += 1
        return True

    def __len__(self) -> int:
        """The numbers kept beside the mark (what this costs in memory)."""
        return len(self._above)
