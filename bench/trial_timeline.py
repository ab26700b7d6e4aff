"""Where each trial's time goes at latency L: a per-trial timeline of its waits.

    python bench/trial_timeline.py [--trials 4000] [--latency 0.01] [--parallel 64] [--gc python]
        [--store memory|sqlite|postgres] [--server postgresql://postgres@127.0.0.1:5432]

The throughput workload (one model call of ``--latency`` seconds, one tool step,
a trivial scorer; one trial per task) on ``--parallel`` slots. Each trial's
moments are stamped from outside the engine (wrappers around the worker pool's
submission, the job runner and the store's ``enqueue``, and an observer for
durable commits), so nothing in ``corral`` changes for the measurement. The
process's garbage collector is tuned as `corral run` tunes its own (`corral._gc`;
``--gc python`` leaves Python's default). Printed:
wall against the ideal ``N x L / P``, the CPU per trial of the event loop's
thread and of the whole process (the stamps' own cost included), and, per phase, the median and 90th
percentile over the trials, in milliseconds:

- ``queued``: admitted (its job submitted) until a worker runs it;
- ``model``: the agent's model call (``L``, the only wait the ideal counts);
- ``action ack``: the action commit handed to the store until it is durable (the
  one wait inside a trial a durability guarantee needs: its tool runs after);
- ``run rest``: the rest of the execution (setup, tool, terminal; CPU and the
  loop's queue), its model call and action ack taken out;
- ``to evaluation``: the execution's end until its evaluation starts (delivery,
  admission, a worker);
- ``evaluation``: scoring and handing the evaluation commit over;
- ``to durable``: the evaluation handed over until it is durable (what a
  reported result needs).

A durable store's writer thread (SQLite's, PostgreSQL's) is timed too, batch by
batch: from its first append until the thread takes it, the write, and from the
write's end until the event loop wakes its waiters. A thread that waits for a
batch, and one whose write lets go of the GIL (each SQLite statement does), takes
the GIL back only when the event loop's thread lets go of it (at its next poll, or
when the switch interval forces it): the first span is mostly that wait.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
from workloads import CountingEnvironment, GcTimer

import corral
from corral import Action, BenchmarkTaskMetadata, Final
from corral._gc import collect_less
from corral.executor import _pool, _work
from corral.runtime._jobs import EvalJob, TrialJob
from corral.store import _batching

Stamps = dict[str, dict[str, float]]


class TimedAgent:
    """Awaits ``sleep(latency)`` (the model call) and stamps it, then one tool step."""

    def __init__(self, latency: float, stamps: Stamps) -> None:
        self.latency = latency
        self.stamps = stamps

    async def act(self, session: corral.AgentSession) -> Action | Final:
        if session.iteration:
            return Final(session.state)
        own = self.stamps[session.task_id]
        own["model_start"] = time.perf_counter()
        await anyio.sleep(self.latency)
        own["model_end"] = time.perf_counter()
        return Action("step", {"n": 1})


class Durable:
    """Stamps when each trial's action and evaluation commits are durable."""

    def __init__(self, stamps: Stamps) -> None:
        self.stamps = stamps

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        if commit.kind in ("action", "evaluation"):
            self.stamps[key.task_id][commit.kind + "_durable"] = time.perf_counter()


def instrument(stamps: Stamps) -> None:
    """Stamp submission, job start and end, and hand-over to the store, from outside."""
    submit_all = _pool.WorkerPool.submit_all

    def stamped_submit(self: Any, jobs: Sequence[Any]) -> None:
        now = time.perf_counter()
        for job in jobs:
            kind = "exec" if isinstance(job, TrialJob) else "eval"
            stamps[job.task_id][kind + "_submitted"] = now
        submit_all(self, jobs)

    run = _work.JobRunner.run

    async def stamped_run(self: Any, job: Any) -> Any:
        kind = "exec" if isinstance(job, TrialJob) else "eval"
        own = stamps[job.task_id]
        own[kind + "_start"] = time.perf_counter()
        result = await run(self, job)
        own[kind + "_end"] = time.perf_counter()
        return result

    _pool.WorkerPool.submit_all = stamped_submit  # type: ignore[method-assign]
    _work.JobRunner.run = stamped_run  # type: ignore[method-assign]
    assert EvalJob is not None  # the job types the stamps tell apart


def stamp_handed(store: Any, stamps: Stamps) -> Any:
    """Stamps when each trial's action and evaluation are handed to ``store``.

    The store's own ``enqueue`` is wrapped on the instance, so the store stays of
    its own class (a wrapper object would not pass Python 3.12's protocol check).
    """
    enqueue = store.enqueue

    def stamped(key: corral.TrialKey, commits: Sequence[corral.Commit]) -> Any:
        for commit in commits:
            if commit.kind in ("action", "evaluation"):
                stamps[key.task_id][commit.kind + "_handed"] = time.perf_counter()
        return enqueue(key, commits)

    store.enqueue = stamped
    return store


class WriterTimes:
    """Each store batch's moments, stamped from outside (`corral.store._batching`'s
    `Batch` and `WriterThread`, wrapped): as it opens (its first append), as the writer
    thread takes it and has written it, and as the event loop wakes its waiters."""

    def __init__(self) -> None:
        self.open: dict[int, list[float]] = {}  # by the batch's id, until it is woken
        #: Opened, taken, written, woken; and whether it opened while another was written.
        self.done: list[tuple[float, float, float, float, bool]] = []
        self._writing = 0  # batches being written (the writer thread's: 0 or 1)

    def install(self) -> None:
        init, write, finish = (
            _batching.Batch.__init__,
            _batching.WriterThread._write,
            _batching.Batch.finish,
        )

        def stamped_init(batch: Any, *args: Any) -> None:
            init(batch, *args)
            self.open[id(batch)] = [time.perf_counter(), float(self._writing)]

        def stamped_write(thread: Any, batch: Any) -> None:
            own = self.open.get(id(batch))
            if own is not None:
                own.append(time.perf_counter())
            self._writing += 1
            try:
                write(thread, batch)
            finally:
                self._writing -= 1
            if own is not None:
                own.append(time.perf_counter())

        def stamped_finish(batch: Any) -> None:
            own = self.open.pop(id(batch), None)
            if own is not None and len(own) == 4:
                opened, behind, taken, written = own
                self.done.append((opened, taken, written, time.perf_counter(), bool(behind)))
            finish(batch)

        _batching.Batch.__init__ = stamped_init  # type: ignore[method-assign,assignment]
        _batching.WriterThread._write = stamped_write  # type: ignore[method-assign,assignment]
        _batching.Batch.finish = stamped_finish  # type: ignore[method-assign,assignment]

    def print(self, wall: float) -> None:
        if not self.done:
            return
        writing = sum(own[2] - own[1] for own in self.done)
        behind = sum(own[4] for own in self.done)
        print(
            f"store writer: {len(self.done):,} batches, writing {writing / wall:.0%} of the "
            f"wall, {behind:,} opened while another was written (median / mean ms):"
        )
        idle = [own for own in self.done if not own[4]]
        rows = (
            ("opened to taken", self.done, 0),
            ("  writer was idle", idle, 0),
            ("writing", self.done, 1),
            ("written to woken", self.done, 2),
        )
        for name, batches, at in rows:
            if batches:
                spans = [(own[at + 1] - own[at]) * 1e3 for own in batches]
                median, mean = statistics.median(spans), statistics.fmean(spans)
                print(f"  {name:18} {median:8.2f} {mean:8.2f}")


PHASES = (
    ("queued", "exec_submitted", "exec_start"),
    ("model", "model_start", "model_end"),
    ("action ack", "action_handed", "action_durable"),
    ("to evaluation", "exec_end", "eval_start"),
    ("evaluation", "eval_start", "eval_end"),
    ("to durable", "evaluation_handed", "evaluation_durable"),
)


@contextmanager
def store_of(args: argparse.Namespace, tmp: Path) -> Iterator[Any]:
    if args.store == "sqlite":
        yield corral.SQLiteStore(tmp / "store.db")
    elif args.store == "memory":
        yield corral.MemoryStore()
    else:  # a database of this run's own, dropped after it
        from postgres_store import drop_database, fresh_database

        name = fresh_database(args.server)
        try:
            yield corral.PostgresStore(f"{args.server}/{name}")
        finally:
            drop_database(args.server, name)


async def main(args: argparse.Namespace) -> None:
    stamps: Stamps = defaultdict(dict)
    instrument(stamps)
    writer = WriterTimes()
    writer.install()
    tasks = {f"t{i}": BenchmarkTaskMetadata("agent", "env") for i in range(args.trials)}
    with tempfile.TemporaryDirectory() as tmp, store_of(args, Path(tmp)) as inner:
        runner = corral.CorralRunner(
            tasks,
            {"agent": TimedAgent(args.latency, stamps)},
            {"env": CountingEnvironment()},
            store=stamp_handed(inner, stamps),
        )
        start, loop_cpu, cpu = time.perf_counter(), time.thread_time(), time.process_time()
        with GcTimer() as collector:
            report = await runner.run(
                "timeline", max_parallel=args.parallel, observers=[Durable(stamps)]
            )
        wall = time.perf_counter() - start
        loop_cpu, cpu = time.thread_time() - loop_cpu, time.process_time() - cpu
    assert report.counts["completed"] == args.trials, report.counts
    ideal = args.trials * args.latency / args.parallel
    print(
        f"{args.trials:,} trials, L={args.latency * 1e3:g} ms, P={args.parallel}, "
        f"store={args.store}: wall {wall:.2f} s, ideal {ideal:.2f} s, "
        f"wall/ideal {wall / ideal:.2f}"
    )
    first = min(own["exec_start"] for own in stamps.values()) - start
    last = max(own["evaluation_durable"] for own in stamps.values()) - start
    print(
        f"the first trial started after {first:.2f} s; the last durable after {last:.2f} s "
        f"({last / ideal:.2f} x ideal); the report after it: {wall - last:.2f} s"
    )
    print(
        f"CPU per trial: event loop {loop_cpu / args.trials * 1e6:.0f} us, process "
        f"{cpu / args.trials * 1e6:.0f} us (one loop keeps up while it is under L/P = "
        f"{args.latency / args.parallel * 1e6:.0f} us: bench/loop_floor.py)"
    )
    print(
        f"garbage collector ({args.gc}): {sum(collector.seconds):.2f} s in "
        f"{sum(collector.collections)} collections"
    )
    print(f"{'phase':16} {'median ms':>10} {'p90 ms':>8}")
    for name, begin, end in PHASES:
        spans = sorted(
            (own[end] - own[begin]) * 1e3 for own in stamps.values() if begin in own and end in own
        )
        p90 = spans[int(0.9 * (len(spans) - 1))]
        print(f"{name:16} {statistics.median(spans):10.2f} {p90:8.2f}")
    writer.print(wall)
    run_rest = sorted(
        (
            (own["exec_end"] - own["exec_start"])
            - (own["model_end"] - own["model_start"])
            - (own["action_durable"] - own["action_handed"])
        )
        * 1e3
        for own in stamps.values()
    )
    print(
        f"{'run rest':16} {statistics.median(run_rest):10.2f} "
        f"{run_rest[int(0.9 * (len(run_rest) - 1))]:8.2f}"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=4000)
    parser.add_argument("--latency", type=float, default=0.01)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--store", choices=["memory", "sqlite", "postgres"], default="memory")
    parser.add_argument("--server", default="postgresql://postgres@127.0.0.1:5432")
    parser.add_argument(
        "--gc",
        choices=["corral", "python"],
        default="corral",
        help="the garbage collector as `corral run` tunes its process (corral._gc), "
        "or Python's default",
    )
    args = parser.parse_args()
    if args.latency <= 0:
        parser.error("--latency must be above 0: the ideal wall is N x L / P")
    if args.gc == "corral":
        collect_less()
    anyio.run(main, args)
