"""A reference model of admission (limits, reflective trials, dependencies), apart from the core.

Both the admission property test and the end-to-end one feed it the same
events: an execution or evaluation started or ended, an unreachable trial
recorded. At every start it asserts that the trial was ready and that no limit
is exceeded; `assert_work_conserving` asserts that nothing ready that fits
every limit is left waiting. A `ConcurrencyGauge` holds the counters, keyed:
``"exec"``, ``"eval"``, ``"busy"`` (both), ``("task", id)``, ``("model", m)``,
``("env", id)`` and ``("evalkey", name)``.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Iterator
from dataclasses import dataclass
from typing import Any

from hypothesis import strategies as st

from corral import BenchmarkTaskMetadata, Limits, TrialStatus
from corral.testing import ConcurrencyGauge

MODELS = ["m0", "m1", "m2"]
ENVIRONMENTS = ["e0", "e1", "e2"]
EVAL_NAMES = ["g0", "g1"]
EVALUATED = {TrialStatus.COMPLETED, TrialStatus.MAX_ITERATIONS, TrialStatus.TIMEOUT}
# Mostly completed, so that dependencies are usually reachable; shrinks to completed.
OUTCOMES = [TrialStatus.COMPLETED] * 3 + [TrialStatus.ERROR, TrialStatus.MAX_ITERATIONS]

Trial = tuple[str, int]


@dataclass(frozen=True)
class Scenario:
    tasks: dict[str, BenchmarkTaskMetadata]
    #: The ``name`` of each environment id (None: the id keys its evaluations).
    env_names: dict[str, str | None]
    trials: int
    #: The keyword arguments of `CorralRunner.run` that set limits.
    limit_args: dict[str, Any]
    #: How each trial's execution ends when it is let go.
    outcomes: dict[Trial, TrialStatus]

    @property
    def limits(self) -> Limits:
        return Limits.resolve(**self.limit_args)

    def eval_key(self, task_id: str) -> str:
        env = self.tasks[task_id].environment_id
        return self.env_names[env] or env

    def all_trials(self) -> Iterator[Trial]:
        for task_id in self.tasks:
            for r in range(self.trials):
                yield task_id, r


@st.composite
def scenarios(draw: st.DrawFn, max_tasks: int = 6, max_trials: int = 3) -> Scenario:
    """Random task sets (models, environments, evaluation names, dependencies) and limits."""
    env_names = {e: draw(st.sampled_from([None, *EVAL_NAMES])) for e in ENVIRONMENTS}
    tasks: dict[str, BenchmarkTaskMetadata] = {}
    for i in range(draw(st.integers(1, max_tasks))):
        parents = (
            draw(st.lists(st.sampled_from(list(tasks)), max_size=2, unique=True)) if tasks else []
        )
        tasks[f"t{i}"] = BenchmarkTaskMetadata(
            "agent",
            draw(st.sampled_from(ENVIRONMENTS)),
            model=draw(st.sampled_from([*MODELS, None])),
            max_iterations=1,
            dependencies=tuple(parents),
        )
    trials = draw(st.integers(1, max_trials))

    def keyed(keys: list[str]) -> dict[str, int]:
        # Keys the runner knows (a model no task has would be refused as a typo); an
        # environment or name that no task uses is among them, and must be accepted.
        if not keys:
            return {}
        return draw(st.dictionaries(st.sampled_from(keys), st.integers(1, 2), max_size=3))

    models = sorted({m.model for m in tasks.values() if m.model is not None})
    names = sorted({n for n in env_names.values() if n is not None})

    limit_args = {
        "max_parallel": draw(st.integers(1, 4)),
        "max_parallel_per_task": draw(st.integers(1, 3)),
        "max_parallel_evaluations": draw(st.none() | st.integers(1, 3)),
        "max_parallel_total": draw(st.none() | st.integers(1, 6)),
        "max_parallel_by_model": keyed(models),
        "max_parallel_by_environment": keyed(ENVIRONMENTS),
        # What keys evaluations: names, and the ids of unnamed environments (a named
        # one's id is refused: it keys nothing).
        "max_parallel_evaluations_by_environment": keyed(
            [*names, *(e for e in ENVIRONMENTS if env_names[e] is None)]
        ),
    }
    outcomes = {(t, r): draw(st.sampled_from(OUTCOMES)) for t in tasks for r in range(trials)}
    return Scenario(tasks, env_names, trials, limit_args, outcomes)


class Phase(enum.Enum):
    PENDING = "pending"
    EXECUTING = "executing"
    RECORDING = "recording unreachable"
    ENDED = "ended"  # waiting for its evaluation
    EVALUATING = "evaluating"
    DONE = "done"


class Model:
    def __init__(self, scenario: Scenario) -> None:
        self.s = scenario
        limits = scenario.limits
        self.sequential = limits.max_parallel_per_task == 1
        caps: dict[Hashable, int] = {
            "exec": limits.max_parallel,
            "eval": limits.max_parallel_evaluations,
            "busy": limits.max_parallel_total,
        }
        caps.update({("task", t): limits.max_parallel_per_task for t in scenario.tasks})
        caps.update({("model", m): n for m, n in limits.max_parallel_by_model.items()})
        caps.update({("env", e): n for e, n in limits.max_parallel_by_environment.items()})
        caps.update(
            {("evalkey", k): n for k, n in limits.max_parallel_evaluations_by_environment.items()}
        )
        self.gauge = ConcurrencyGauge(caps)
        self.phase = {trial: Phase.PENDING for trial in scenario.all_trials()}
        self.status: dict[Trial, TrialStatus] = {}

    # -- what a trial needs ------------------------------------------------

    def exec_keys(self, task_id: str) -> list[Hashable]:
        meta = self.s.tasks[task_id]
        keys: list[Hashable] = ["exec", "busy", ("task", task_id), ("env", meta.environment_id)]
        return keys if meta.model is None else [*keys, ("model", meta.model)]

    def eval_keys(self, task_id: str) -> list[Hashable]:
        return ["eval", "busy", ("evalkey", self.s.eval_key(task_id))]

    def fits(self, keys: list[Hashable]) -> bool:
        limits = self.gauge.limits
        return all(key not in limits or self.gauge.count(key) < limits[key] for key in keys)

    def _in_turn(self, task_id: str, r: int) -> bool:
        """Whether round r may go now as far as its own task is concerned (reflective trials).

        Trial r+1 starts only after trial r has been evaluated (or ended without
        an evaluation) when trials are sequential; otherwise rounds go in any order.
        """
        if not self.sequential:
            return True
        return all(self.phase[(task_id, q)] is Phase.DONE for q in range(r))

    def _parents_completed(self, trial: Trial) -> bool | None:
        """None until every parent's same round has ended; then whether all completed."""
        t, r = trial
        parents = [(p, r) for p in self.s.tasks[t].dependencies]
        if any(self.phase[p] in (Phase.PENDING, Phase.EXECUTING, Phase.RECORDING) for p in parents):
            return None
        return all(self.status[p] == TrialStatus.COMPLETED for p in parents)

    def _waiting_for(self, trial: Trial, parents_completed: bool) -> bool:
        return (
            self.phase[trial] is Phase.PENDING
            and self._in_turn(*trial)
            and self._parents_completed(trial) is parents_completed
        )

    def execution_ready(self, trial: Trial) -> bool:
        return self._waiting_for(trial, parents_completed=True)

    def unreachable(self, trial: Trial) -> bool:
        return self._waiting_for(trial, parents_completed=False)

    def unreachable_due(self, trial: Trial) -> bool:
        # It takes its task's turn and, with max_parallel_per_task > 1, waits like an
        # execution of its task for a per-task slot, though it holds none.
        return self.unreachable(trial) and (self.sequential or self.fits([("task", trial[0])]))

    def evaluation_ready(self, trial: Trial) -> bool:
        return self.phase[trial] is Phase.ENDED

    # -- events ------------------------------------------------------------

    def execution_started(self, trial: Trial) -> None:
        assert self.execution_ready(trial), f"{trial} started while {self.describe(trial)}"
        self.gauge.enter(*self.exec_keys(trial[0]))  # raises if a limit is exceeded
        self.phase[trial] = Phase.EXECUTING

    def execution_ended(self, trial: Trial, status: TrialStatus) -> None:
        assert self.phase[trial] is Phase.EXECUTING, f"{trial} ended while {self.describe(trial)}"
        self.gauge.exit(*self.exec_keys(trial[0]))
        self.status[trial] = status
        self.phase[trial] = Phase.ENDED if status in EVALUATED else Phase.DONE

    def unreachable_started(self, trial: Trial) -> None:
        assert self.unreachable(trial), f"{trial} unreachable while {self.describe(trial)}"
        self.phase[trial] = Phase.RECORDING

    def unreachable_recorded(self, trial: Trial) -> None:
        assert self.phase[trial] is Phase.RECORDING
        self.status[trial] = TrialStatus.UNREACHABLE
        self.phase[trial] = Phase.DONE

    def evaluation_started(self, trial: Trial) -> None:
        assert self.evaluation_ready(trial), f"{trial} evaluated while {self.describe(trial)}"
        self.gauge.enter(*self.eval_keys(trial[0]))
        self.phase[trial] = Phase.EVALUATING

    def evaluation_ended(self, trial: Trial) -> None:
        assert self.phase[trial] is Phase.EVALUATING
        self.gauge.exit(*self.eval_keys(trial[0]))
        self.phase[trial] = Phase.DONE

    def settle(self, events: list[tuple[str, Trial, TrialStatus | None]]) -> None:
        """Apply what a run did between two quiet moments, seen out of order.

        Between quiet moments one gated execution or evaluation ends and the
        run then starts work, and trials started together reach their agents
        in any order. So: ends first, then every start in an order that is
        valid, if there is one.
        """
        for kind, trial, status in events:
            if kind == "ended":
                assert status is not None
                self.execution_ended(trial, status)
            elif kind == "evaluated":
                self.evaluation_ended(trial)
        checks = {
            "started": self.execution_ready,
            "evaluating": self.evaluation_ready,
            "unreachable": self.unreachable,
        }
        pending = [(kind, trial) for kind, trial, _ in events if kind in checks]
        while pending:
            valid = [(kind, trial) for kind, trial in pending if checks[kind](trial)]
            if not valid:
                raise AssertionError(
                    "started while not ready: "
                    + "; ".join(
                        f"{kind} {trial}: {self.describe(trial)}" for kind, trial in pending
                    )
                )
            for kind, trial in valid:
                pending.remove((kind, trial))
                if kind == "started":
                    self.execution_started(trial)
                elif kind == "evaluating":
                    self.evaluation_started(trial)
                else:
                    self.unreachable_started(trial)
                    self.unreachable_recorded(trial)

    # -- invariants --------------------------------------------------------

    def assert_work_conserving(self) -> None:
        """Nothing that is ready and fits every limit is waiting (work conservation)."""
        for trial in self.phase:
            t = trial[0]
            if self.execution_ready(trial) and self.fits(self.exec_keys(t)):
                raise AssertionError(f"{trial} is ready and fits but waits: {self.gauge.current}")
            if self.evaluation_ready(trial) and self.fits(self.eval_keys(t)):
                raise AssertionError(f"{trial}'s evaluation fits but waits: {self.gauge.current}")
            if self.unreachable_due(trial):
                raise AssertionError(f"{trial} is unreachable but not recorded")

    @property
    def finished(self) -> bool:
        return all(p is Phase.DONE for p in self.phase.values())

    def describe(self, trial: Trial) -> str:
        t, r = trial
        rounds = {q: self.phase[(t, q)].value for q in range(self.s.trials)}
        parents = {p: self.phase[(p, r)].value for p in self.s.tasks[t].dependencies}
        return f"rounds {rounds}, parents {parents}, counters {self.gauge.current}"


class DeferringModel(Model):
    """The reference model, plus trials waiting out a rate limit (holding no slot) and
    trials whose wait is over (ready again)."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.deferred: set[Trial] = set()
        self.resumed: set[Trial] = set()
        #: The effective caps of models admission applies now (rate limits cut them).
        self.effective: dict[str, int] = {}

    def fits(self, keys: list[Hashable]) -> bool:
        if not super().fits(keys):
            return False
        for key in keys:
            if isinstance(key, tuple) and key[0] == "model" and key[1] in self.effective:
                if self.gauge.count(key) >= self.effective[key[1]]:
                    return False
        return True

    def execution_ready(self, trial: Trial) -> bool:
        if trial in self.resumed:
            return True
        return trial not in self.deferred and super().execution_ready(trial)

    def unreachable(self, trial: Trial) -> bool:
        return (
            trial not in self.deferred and trial not in self.resumed and super().unreachable(trial)
        )

    def execution_started(self, trial: Trial) -> None:
        if trial in self.resumed:
            self.resumed.discard(trial)
            self.gauge.enter(*self.exec_keys(trial[0]))
            return
        super().execution_started(trial)

    def defer(self, trial: Trial) -> None:
        assert self.phase[trial] is Phase.EXECUTING
        self.gauge.exit(*self.exec_keys(trial[0]))
        self.deferred.add(trial)

    def resume(self, trial: Trial) -> None:
        self.deferred.remove(trial)
        self.resumed.add(trial)

    def assert_work_conserving(self) -> None:
        super().assert_work_conserving()
        for trial in self.resumed:
            if self.fits(self.exec_keys(trial[0])):
                raise AssertionError(f"resumed {trial} fits but waits: {self.gauge.current}")

    def settle(self, events: list[tuple[str, Trial, TrialStatus | None]]) -> None:
        """As `Model.settle`, with ``deferred`` events: a trial that waited out a rate
        limit of no length (ready again at once), applied after the ends and before the
        starts."""
        ends = [e for e in events if e[0] in ("ended", "evaluated")]
        super().settle(ends)
        for kind, trial, _ in events:
            if kind == "deferred":
                self.defer(trial)
                self.resume(trial)
        super().settle([e for e in events if e[0] not in ("ended", "evaluated", "deferred")])
