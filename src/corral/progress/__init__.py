"""Progress of a run, fed by its durable commits: a live display drawn with rich,
or plain lines for logs."""

from ._display import ProgressDisplay
from ._per_task import per_task_note
from ._plain import PlainProgress
from ._tally import Tally
from ._view import utilisation

__all__ = ["PlainProgress", "ProgressDisplay", "Tally", "per_task_note", "utilisation"]
