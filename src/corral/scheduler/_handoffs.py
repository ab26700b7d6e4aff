"""What trials hand each other: a parent's output to its children, and a task's latest
finished trial to the next reflective session."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._types import BenchmarkTaskMetadata, TrialRecord
from ..runtime._jobs import Previous, new_previous
from ._admission import Phase
from ._plan import RunPlan
from ._resume import Resume


class Handoffs:
    def __init__(self, plan: RunPlan, resumed: Resume) -> None:
        self.plan = plan
        #: Whether a trial may see an earlier one (`previous_of`, `finished`): a task
        #: has several trials.
        self.reflective = plan.trials_per_task > 1
        self._previous = resumed.previous
        # A parent's output waits here until every child's same round has taken it.
        self._outputs: dict[tuple[int, int], list[Any]] = {}
        n = plan.trials_per_task
        for (t, r), output in resumed.outputs.items():
            waiting = sum(1 for c in plan.children[t] if resumed.phases[c * n + r] == Phase.PENDING)
            if waiting:
                self._outputs[(t, r)] = [output, waiting]

    def trial_inputs(self, t: int, r: int) -> tuple[BenchmarkTaskMetadata, Mapping[str, Any]]:
        """Trial (t, r)'s metadata and inputs (its parents' outputs taken); raises
        `CorralError` when a streamed task's line cannot be read."""
        plan = self.plan
        meta = plan.metadata[t]
        parents = plan.parents[t]
        if not parents:
            return meta, meta.inputs
        inputs = dict(meta.inputs)
        for p in parents:
            inputs[plan.output_name(p)] = self._take_output(p, r)
        return meta, inputs

    def drop_inputs(self, t: int, r: int) -> None:
        """Trial (t, r) will not run: its parents' outputs are not kept for it."""
        for p in self.plan.parents[t]:
            if (p, r) in self._outputs:
                self._take_output(p, r)

    def _take_output(self, p: int, r: int) -> Any:
        entry = self._outputs[(p, r)]
        entry[1] -= 1
        if entry[1] == 0:
            del self._outputs[(p, r)]
        return entry[0]

    def output(self, t: int, r: int, output: Any) -> None:
        """Trial (t, r) completed with ``output``: kept until its children take it."""
        children = self.plan.children[t]
        if children:
            self._outputs[(t, r)] = [output, len(children)]

    def previous_of(self, t: int, r: int, phases: bytearray) -> tuple[Previous | None, int | None]:
        """The earlier trial (t, r)'s reflective session sees, or (None, q) when it is
        trial q, which must be read from the store. ``phases``: admission's (every trial's)."""
        previous = self._previous[t]
        base = t * self.plan.trials_per_task
        if previous is not None and (
            previous.trial >= r or phases[base + previous.trial] != Phase.DONE
        ):
            # Rounds finished out of order (a resumed run, or a later round's
            # parents ended first), or the one kept was reopened by a rerun and has
            # not finished again: this trial sees the latest *earlier* finished one.
            earlier = [q for q in range(r) if phases[base + q] == Phase.DONE]
            return None, earlier[-1] if earlier else None
        return previous, None

    def finished(self, t: int, record: TrialRecord, state: Any = None) -> None:
        """Keep the highest finished trial of each task (with its final state: ``state``,
        else the record's) for reflective sessions; not its last trial, which no later
        trial follows (a one-trial run keeps no state at all)."""
        best = self._previous[t]
        last = record.trial + 1 >= self.plan.trials_per_task
        # A trial reopened by a rerun finishes again: its new record replaces the old.
        if not last and (best is None or best.trial <= record.trial):
            final = record.state if state is None else state
            self._previous[t] = new_previous(
                record.trial, record.evaluation, final, str(record.status)
            )
