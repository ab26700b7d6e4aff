"""The live progress display: an observer of durable commits, drawn with rich."""

from ._display import ProgressDisplay
from ._tally import Tally
from ._view import utilisation

__all__ = ["ProgressDisplay", "Tally", "utilisation"]
