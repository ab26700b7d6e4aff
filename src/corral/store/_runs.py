"""`RunRecord`: what one run (or rescore) of a benchmark leaves in the store for its report.

The trials' commits give every figure of a report but the run's own: which tasks
it selected and which the dependency closure added, how many finished trials it
reused, its budgets and k values, why it stopped, its timings. A store keeps one
record per run, in order, so ``corral report`` gives the run's report on every
backend, with no file beside the store.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One run's own figures, as its report gave them (`BenchmarkReport`'s names)."""

    #: ``"run"`` or ``"rescore"``.
    kind: str
    #: Wall-clock seconds since the epoch: when the run started and when it ended.
    started: float
    ended: float
    #: The tasks the run reported on (its selection after the dependency closure).
    task_ids: tuple[str, ...]
    #: Those the dependency closure added to the selection (a rescore, which runs no
    #: closure, keeps the last run's).
    added: tuple[str, ...] = ()
    resumed: int = 0
    k_values: tuple[int, ...] = (1,)
    budgets: Mapping[str, float] = field(default_factory=dict)
    stopped: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    #: The run's report's trial counts and span (``started_at``, ``finished_at``):
    #: while the store still gives these, no commit changed the run's tasks since.
    counts: Mapping[str, int] = field(default_factory=dict)
    span: tuple[float, float] = (0.0, 0.0)
    #: The user's labels and note for the run (``run(tags=..., note=...)``).
    tags: tuple[str, ...] = ()
    note: str | None = None
    #: Where the run came from: ``corral_version``, and for a benchmark file its
    #: ``benchmark_file`` and ``git_commit`` (see `corral._run_meta.provenance`).
    provenance: Mapping[str, str] = field(default_factory=dict)
    #: Each agent's generation settings (model, temperature, ...), by agent id, as its
    #: ``generation_settings()`` gave them.
    generation: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "started": self.started,
            "ended": self.ended,
            "task_ids": list(self.task_ids),
            "added": list(self.added),
            "resumed": self.resumed,
            "k_values": list(self.k_values),
            "budgets": dict(self.budgets),
            "stopped": self.stopped,
            "timings": dict(self.timings),
            "counts": dict(self.counts),
            "span": list(self.span),
            "tags": list(self.tags),
            "note": self.note,
            "provenance": dict(self.provenance),
            "generation": {agent: dict(s) for agent, s in self.generation.items()},
        }

    @classmethod
    def from_dict(cls, data: Any) -> RunRecord:
        """A record as `to_dict` gave it; a key a later Corral added is ignored. Anything
        else is a `ValueError` (`store._decode.decode_run` names the store and benchmark)."""
        try:
            stopped = data.get("stopped")
            first, last = data.get("span", (0.0, 0.0))
            return cls(
                kind=str(data["kind"]),
                started=float(data["started"]),
                ended=float(data["ended"]),
                task_ids=tuple(map(str, data["task_ids"])),
                added=tuple(map(str, data.get("added", ()))),
                resumed=int(data.get("resumed", 0)),
                k_values=tuple(map(int, data.get("k_values", (1,)))),
                budgets=_numbers(data.get("budgets", {})),
                stopped=None if stopped is None else str(stopped),
                timings=_numbers(data.get("timings", {})),
                counts={str(k): int(v) for k, v in dict(data.get("counts", {})).items()},
                span=(float(first), float(last)),
                tags=tuple(_texts(data.get("tags", ()))),
                note=_text_or_none(data.get("note")),
                provenance={str(k): str(v) for k, v in dict(data.get("provenance", {})).items()},
                generation={
                    str(agent): dict(settings)
                    for agent, settings in dict(data.get("generation", {})).items()
                },
            )
        except (AttributeError, KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not a run record ({exc}): {data!r:.200}") from None


def _numbers(data: Any) -> dict[str, float]:
    """Names to numbers, kept as stored (a token limit stays an integer)."""
    out = {}
    for name, value in dict(data).items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise TypeError(f"{name!r} is {value!r}, not a number")
        out[str(name)] = value
    return out


def _texts(data: Any) -> list[str]:
    if isinstance(data, str) or not all(isinstance(t, str) for t in data):
        raise TypeError(f"tags {data!r} are not a list of strings")
    return list(data)


def _text_or_none(data: Any) -> str | None:
    if data is not None and not isinstance(data, str):
        raise TypeError(f"the note {data!r} is not text")
    return data
