"""Peak RSS growth of a run by phase: plan, register, run, report (and a resume).

    python bench/planning_memory.py [--tasks 100000 --trials 1 --max-parallel 8 64]
    python bench/planning_memory.py --tasks 10000 --trials 10

Instant one-step trials (``ScriptedAgent`` returning at once, scored by a
`FakeEnvironment` that keeps no record: the fake's ``evaluated`` list would hold
every trial's record) of tasks held in a dict, on a SQLite store (``--store
memory`` or ``postgres`` for the others).
Each configuration runs in its own process. The peak of each phase is read from
``/proc/self/status`` (VmHWM) and reset between phases by writing 5 to
``/proc/self/clear_refs``; every figure is that peak minus the resident size
before the run (the tasks and the runner already built). Phases:

- plan: from the call of ``run`` to the store's ``register_benchmark``;
- register: registering the configuration, reading what is stored, setting up
  the run, up to ``on_run_start``;
- run: the trials, up to ``on_run_end``;
- report: building the report, up to ``run`` returning;
- resume: a second ``run`` of the same benchmark (every trial already finished), up
  to ``on_run_start``: planning, the stored configuration compared with the plan's,
  the finished trials read back;
- resumed: the rest of that run (its report).

Memory figures do not depend on the machine's load; wall times do (not shown).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import subprocess
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import anyio

import corral
from corral import BenchmarkTaskMetadata, Evaluation, Final, TrialRecord
from corral.testing import FakeEnvironment, ScriptedAgent, passed_if_completed

PHASES = ("plan", "register", "run", "report", "resume", "resumed")


def _status(field: str) -> float:
    with open("/proc/self/status") as f:
        match = re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M)
    assert match is not None
    return int(match.group(1)) / 1024


def _reset_peak() -> None:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


class Phases:
    """Each phase's peak RSS above the baseline, in MB."""

    def __init__(self) -> None:
        self.base = 0.0
        self.peaks: dict[str, float] = {}

    def start(self) -> None:
        gc.collect()
        _reset_peak()
        self.base = _status("VmRSS")

    def end(self, phase: str) -> None:
        self.peaks[phase] = max(self.peaks.get(phase, 0.0), _status("VmHWM") - self.base)
        _reset_peak()


def _store(kind: str, tmp: Path, phases: Phases) -> corral.CommitStore:
    if kind == "memory":
        base: type[Any] = corral.MemoryStore
        args: tuple[Any, ...] = ()
    elif kind == "postgres":
        base = corral.PostgresStore
        args = ("postgresql://postgres@127.0.0.1:5432/postgres",)
    else:
        base = corral.SQLiteStore
        args = (tmp / "store.db",)

    class Marked(base):  # type: ignore[misc, valid-type]
        async def register_benchmark(
            self, benchmark_id: str, config: Mapping[str, Any], **kw: Any
        ) -> bool:
            if phases.peaks.get("run") is None:
                phases.end("plan")
            existed: bool = await super().register_benchmark(benchmark_id, config, **kw)
            return existed

    store: corral.CommitStore = Marked(*args)
    return store


class Lean(FakeEnvironment):
    """`FakeEnvironment` that keeps no record it scores (its ``evaluated`` list would
    hold every trial's record, 21 MB at 100,000: the test fake's, not the run's)."""

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return passed_if_completed(trial)


class Marks:
    def __init__(self, phases: Phases) -> None:
        self.phases = phases
        self.resuming = False

    def on_run_start(self, info: corral.RunInfo) -> None:
        self.phases.end("resume" if self.resuming else "register")

    def on_run_end(self, info: corral.RunInfo) -> None:
        if not self.resuming:
            self.phases.end("run")

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        pass


def child(store_kind: str, tasks: int, trials: int, parallel: int) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="corral-plan-mem-"))
    metadata = {
        f"task-{i:07d}": BenchmarkTaskMetadata("a", "e", inputs={"n": i}) for i in range(tasks)
    }
    phases = Phases()
    marks = Marks(phases)
    store = _store(store_kind, tmp, phases)
    benchmark = f"mem-{tmp.name}"
    runner = corral.CorralRunner(
        metadata,
        {"a": ScriptedAgent(lambda s: Final(1))},
        {"e": Lean()},
        store=store,
    )

    async def go() -> None:
        phases.start()
        report = await runner.run(
            benchmark, trials_per_task=trials, max_parallel=parallel, observers=[marks]
        )
        phases.end("report")
        del report
        marks.resuming = True
        phases.start()
        await runner.run(
            benchmark, trials_per_task=trials, max_parallel=parallel, observers=[marks]
        )
        phases.end("resumed")

    anyio.run(go)
    return {
        "store": store_kind,
        "tasks": tasks,
        "trials": trials,
        "max_parallel": parallel,
        **{p: round(phases.peaks[p], 1) for p in PHASES},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--trials", type=int, default=1)
    parser.add_argument("--max-parallel", type=int, nargs="+", default=[8, 64])
    parser.add_argument("--store", choices=("sqlite", "memory", "postgres"), default="sqlite")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        row = child(args.store, args.tasks, args.trials, args.max_parallel[0])
        print(json.dumps(row))
        return
    print(
        f"{args.tasks} tasks x {args.trials} trials, {args.store}: "
        "peak RSS growth by phase, MB above the resident size before the run"
    )
    print(f"{'P':>4} " + " ".join(f"{p:>9}" for p in PHASES))
    for parallel in args.max_parallel:
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--store",
                args.store,
                "--tasks",
                str(args.tasks),
                "--trials",
                str(args.trials),
                "--max-parallel",
                str(parallel),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        row = json.loads(out.stdout.strip().splitlines()[-1])
        print(f"{parallel:>4} " + " ".join(f"{row[p]:>9.1f}" for p in PHASES))


if __name__ == "__main__":
    main()
