"""A trial's commit history: the kinds of commit, a typed payload per kind with the one
encoder and decoder of the stored JSON, and the one fold of a trial's commits.

The stored benchmark configuration is typed here too (`StoredConfig`). The engine's
internals (the runner, runtime, scheduler, stores, report, CLI and
viewer read and write commits only through these)."""

from ._codec import (
    FAILED_ATTEMPTS,
    action_seq_of,
    decode,
    decode_terminal,
    encode,
    evaluation_of,
    failed_attempts_of,
    status_of,
    terminal_of,
    worked_of,
)
from ._config import PIECE, ConfigStream, StoredConfig, StoredConfigText, StoredTask, StoredTasks
from ._fold import TrialFold, finished_and_scored, last_of_kind, latest_attempt
from ._kinds import KINDS, CommitKind
from ._payloads import (
    ActionPayload,
    EvaluationPayload,
    Payload,
    ReopenPayload,
    SetupPayload,
    Stamp,
    TerminalPayload,
    ToolEffectPayload,
    evaluation_failed,
    reopen,
    terminal,
)

__all__ = [
    "FAILED_ATTEMPTS",
    "KINDS",
    "PIECE",
    "ActionPayload",
    "CommitKind",
    "ConfigStream",
    "EvaluationPayload",
    "Payload",
    "ReopenPayload",
    "SetupPayload",
    "Stamp",
    "StoredConfig",
    "StoredConfigText",
    "StoredTask",
    "StoredTasks",
    "TerminalPayload",
    "ToolEffectPayload",
    "TrialFold",
    "action_seq_of",
    "decode",
    "decode_terminal",
    "encode",
    "evaluation_failed",
    "evaluation_of",
    "failed_attempts_of",
    "finished_and_scored",
    "last_of_kind",
    "latest_attempt",
    "reopen",
    "status_of",
    "terminal",
    "terminal_of",
    "worked_of",
]
