"""Corral side by side with Inspect AI, a naive runner and the limits of the machine.

    python bench/run.py --quick          # about 3 minutes: the quick grid
    python bench/run.py                  # the full grid (an hour or more)
    python bench/run.py --quick --repeat 3 --sections throughput

Sections: (1) throughput and overhead of every runner on the same workload,
(2) Corral's scaling with the number of trials, (3) scheduling quality on a
mixed-limit workload (virtual time), (4) the commit store against raw sqlite3.
Every measurement runs in its own subprocess, so peak RSS is per runner.
Results go to ``bench/results/<date>-<quick|full>.json`` and ``.md`` (the
tables printed here). Inspect AI is optional (``pip install -e '.[bench]'``):
without it its rows are skipped with a note.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
TRIALS_PER_TASK = 4  # also workloads.TRIALS_PER_TASK; not imported here to keep the parent light
CORRAL_RUNNERS = ("corral-sqlite", "corral-memory")
INSPECT_RUNNERS = ("inspect-light", "inspect-default")


# -- the grid ------------------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One measurement: a runner on the throughput workload (N tasks x 4 trials)."""

    runner: str
    tasks: int
    latency: float
    parallel: int

    @property
    def trials(self) -> int:
        return self.tasks * TRIALS_PER_TASK

    @property
    def ideal(self) -> float:
        return self.trials * self.latency / self.parallel


@dataclass(frozen=True)
class Grid:
    tasks: int
    latencies: tuple[float, ...]
    parallels: tuple[int, ...]
    #: Inspect runs (runner, tasks, latency, parallel): it is ~100x slower than
    #: Corral here, so it runs only the cells the targets need at full N.
    inspect: tuple[tuple[str, int, float, int], ...]
    scaling_tasks: tuple[int, ...]
    store_commits: int
    seeds: tuple[int, ...]


QUICK = Grid(
    tasks=1_000,
    latencies=(0.0, 0.010),
    parallels=(8, 64, 512),
    inspect=(
        ("inspect-light", 250, 0.0, 64),
        ("inspect-light", 250, 0.010, 64),
        ("inspect-default", 125, 0.0, 64),
    ),
    scaling_tasks=(1_000, 10_000),
    store_commits=200,
    seeds=(1, 2, 3, 4, 5),
)

FULL = Grid(
    tasks=10_000,
    latencies=(0.0, 0.010),
    parallels=(8, 64, 512),
    inspect=(
        ("inspect-light", 10_000, 0.0, 64),
        ("inspect-light", 10_000, 0.010, 64),
        ("inspect-default", 10_000, 0.0, 64),
        *(("inspect-light", 1_000, lat, p) for lat in (0.0, 0.010) for p in (8, 512)),
        ("inspect-default", 1_000, 0.010, 64),
    ),
    scaling_tasks=(1_000, 10_000, 100_000, 250_000),
    store_commits=1_000,
    seeds=(1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
)


# -- one measurement, in a child process ---------------------------------------


def child(kind: str, params: dict[str, Any]) -> dict[str, Any]:
    """Run one measurement in this process and return what it found."""
    if kind == "throughput":
        return _throughput(Spec(**params))
    if kind == "store":
        import commit_store

        return commit_store.measure(params["appenders"], params["commits"])
    if kind == "scheduling":
        import scheduling

        return scheduling.measure(params["seed"], params["tasks"])
    raise ValueError(f"unknown measurement {kind!r}")


def _throughput(spec: Spec) -> dict[str, Any]:
    import workloads

    extra: dict[str, Any] = {}
    if spec.runner.startswith("inspect"):
        import inspect_runner

        task, model = inspect_runner.build(spec.tasks, spec.latency)
        with workloads.measured() as probe:
            done, passed = inspect_runner.run(
                task,
                model,
                parallel=spec.parallel,
                epochs=TRIALS_PER_TASK,
                logging=spec.runner.removeprefix("inspect-"),
            )
    else:
        import anyio

        tasks = workloads.throughput_tasks(spec.tasks)
        agents = {"agent": workloads.SleepThenStepAgent(spec.latency)}
        envs = {"env": workloads.CountingEnvironment()}
        with tempfile.TemporaryDirectory() as tmp:
            run = _corral_run if spec.runner in CORRAL_RUNNERS else _naive_run
            with workloads.measured() as probe:
                done, passed = anyio.run(run, spec, tasks, agents, envs, Path(tmp), extra)
    if done != spec.trials or passed != spec.trials:
        raise RuntimeError(f"{spec}: {done} trials ran and {passed} passed, expected {spec.trials}")
    return {"trials": done, **probe.to_dict(), **extra}


class _ExecutionEnd:
    """Notes peak RSS when the last trial has been evaluated, before the report is built."""

    def __init__(self, extra: dict[str, Any]) -> None:
        self.extra = extra

    def on_commit(self, key: Any, commit: Any) -> None:
        pass

    def on_run_end(self, info: Any) -> None:
        import workloads

        self.extra["peak_rss_execution_mb"] = workloads.peak_rss_mb()


async def _corral_run(
    spec: Spec, tasks: Any, agents: Any, envs: Any, tmp: Path, extra: dict[str, Any]
) -> tuple[int, int]:
    import corral

    store: corral.CommitStore = (
        corral.SQLiteStore(tmp / "store.db")
        if spec.runner == "corral-sqlite"
        else corral.MemoryStore()
    )
    runner = corral.CorralRunner(tasks, agents, envs, store=store)
    # Trials of one task may overlap, like Inspect's epochs of one sample.
    report = await runner.run(
        "bench",
        trials_per_task=TRIALS_PER_TASK,
        max_parallel=spec.parallel,
        max_parallel_per_task=TRIALS_PER_TASK,
        observers=[_ExecutionEnd(extra)],
    )
    done = sum(report.counts.values())
    passed = sum(t.passed for task in report.tasks.values() for t in task.trials)
    return done, passed


async def _naive_run(
    spec: Spec, tasks: Any, agents: Any, envs: Any, tmp: Path, extra: dict[str, Any]
) -> tuple[int, int]:
    from naive import NaiveLimits, run_naive

    records = await run_naive(
        tasks,
        agents,
        envs,
        trials_per_task=TRIALS_PER_TASK,
        limits=NaiveLimits(spec.parallel, TRIALS_PER_TASK),
    )
    return len(records), sum(r.passed for r in records)


def spawn(kind: str, params: dict[str, Any], timeout: float = 4 * 3600) -> dict[str, Any]:
    """Run `child` in a fresh interpreter; return its result or ``{"error": ...}``."""
    cmd = [sys.executable, str(BENCH / "run.py"), "--child", kind, json.dumps(params)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=BENCH)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith("RESULT "):
            return dict(json.loads(line.removeprefix("RESULT ")))
    return {"error": (proc.stderr.strip().splitlines() or ["no output"])[-1][:300]}


# -- the sections --------------------------------------------------------------


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def measure_repeated(spec: Spec, repeat: int) -> dict[str, Any]:
    """Measure ``repeat`` times; keep the run with the median wall time, and every wall."""
    runs = []
    for _ in range(repeat):
        result = spawn("throughput", asdict(spec))
        if "error" in result:
            return {**asdict(spec), **result}
        runs.append(result)
    runs.sort(key=lambda r: r["wall_s"])
    median = runs[len(runs) // 2]
    return {**asdict(spec), **median, "walls_s": [r["wall_s"] for r in runs]}


def throughput_section(
    grid: Grid, repeat: int, runners: Sequence[str], inspect: bool
) -> list[dict[str, Any]]:
    specs = [
        Spec(r, grid.tasks, lat, p)
        for lat in grid.latencies
        for p in grid.parallels
        for r in runners
        if r not in INSPECT_RUNNERS
    ]
    if inspect:
        specs += [Spec(*cell) for cell in grid.inspect if cell[0] in runners]
    rows = []
    for spec in specs:
        log(f"  {spec.runner:16} N={spec.tasks:>6} L={spec.latency * 1e3:g}ms P={spec.parallel}")
        rows.append(measure_repeated(spec, repeat))
    _add_derived(rows)
    return rows


def _add_derived(rows: list[dict[str, Any]]) -> None:
    for row in rows:
        if "error" in row:
            continue
        trials, wall = row["trials"], row["wall_s"]
        ideal = trials * row["latency"] / row["parallel"]
        row["ideal_s"] = ideal
        row["wall_over_ideal"] = wall / ideal if ideal else None
        row["overhead_us_per_trial"] = (wall - ideal) / trials * 1e6
        row["cpu_us_per_trial"] = row["cpu_s"] / trials * 1e6
        row["trials_per_s"] = trials / wall
        row["gc_fraction"] = row["gc_s"] / wall
    for row in rows:
        if "error" in row or not row["runner"].startswith("corral"):
            continue
        for other, key in (("inspect-light", "vs_inspect"), ("naive", "vs_naive")):
            match = _cell(rows, other, row["latency"], row["parallel"])
            if match is not None:
                row[key] = row["trials_per_s"] / match["trials_per_s"]
                row[f"{key}_tasks"] = match["tasks"]


def _cell(
    rows: list[dict[str, Any]], runner: str, latency: float, parallel: int
) -> dict[str, Any] | None:
    """The row of ``runner`` in this cell, at the largest N it ran."""
    found = [
        r
        for r in rows
        if r["runner"] == runner
        and r["latency"] == latency
        and r["parallel"] == parallel
        and "error" not in r
    ]
    return max(found, key=lambda r: r["tasks"]) if found else None


def scaling_section(grid: Grid, through: list[dict[str, Any]], store: str) -> list[dict[str, Any]]:
    rows = []
    for n in grid.scaling_tasks:
        spec = Spec(f"corral-{store}", n, 0.0, 64)
        reuse = [
            r
            for r in through
            if r.get("runner") == spec.runner
            and r.get("tasks") == n
            and r.get("latency") == 0.0
            and r.get("parallel") == 64
            and "error" not in r
        ]
        if reuse:
            rows.append(reuse[0])
            continue
        log(f"  {spec.runner:16} N={n:>7} ({spec.trials:,} trials) L=0 P=64")
        rows.append(measure_repeated(spec, 1))
    _add_derived(rows)
    ok = [r for r in rows if "error" not in r]
    for before, after in zip(ok, ok[1:], strict=False):
        per_1k = (after["trials"] - before["trials"]) / 1000
        after["rss_mb_per_1k_trials"] = (after["peak_rss_mb"] - before["peak_rss_mb"]) / per_1k
        after["execution_rss_mb_per_1k_trials"] = (
            after["peak_rss_execution_mb"] - before["peak_rss_execution_mb"]
        ) / per_1k
    return rows


def scheduling_section(grid: Grid) -> list[dict[str, Any]]:
    log(f"  seeds {list(grid.seeds)}")
    return [spawn("scheduling", {"seed": seed, "tasks": 120}) for seed in grid.seeds]


def store_section(grid: Grid, repeat: int) -> dict[str, Any]:
    log(f"  64 appenders x {grid.store_commits} commits, {repeat} time(s)")
    runs = [spawn("store", {"appenders": 64, "commits": grid.store_commits}) for _ in range(repeat)]
    ok = [r for r in runs if "error" not in r]
    if not ok:
        return runs[0]
    ok.sort(key=lambda r: r["ratio_to_raw"])
    return {**ok[len(ok) // 2], "ratios_to_raw": [r["ratio_to_raw"] for r in ok]}


# -- targets -------------------------------------------------------------------


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    """Each target of the issue as (what, measured, goal, met), from this run alone."""
    through = results.get("throughput", [])
    out: list[dict[str, Any]] = []

    def add(what: str, value: float | None, goal: str, met: bool | None, where: str) -> None:
        out.append({"target": what, "measured": value, "goal": goal, "met": met, "where": where})

    cell = _cell(through, "corral-sqlite", 0.0, 64)
    if cell is not None and "vs_inspect" in cell:
        add(
            "Corral (SQLite) trials/s over Inspect's, L=0 P=64",
            cell["vs_inspect"],
            ">= 20",
            cell["vs_inspect"] >= 20,
            f"Corral {cell['trials']:,} trials, Inspect {cell['vs_inspect_tasks'] * 4:,}",
        )
    cell = _cell(through, "corral-sqlite", 0.010, 64)
    if cell is not None:
        add(
            "Corral (SQLite) wall / ideal, L=10 ms P=64",
            cell["wall_over_ideal"],
            "<= 1.2",
            cell["wall_over_ideal"] <= 1.2,
            f"{cell['trials']:,} trials",
        )
    corral_rows = [
        r
        for r in [*through, *results.get("scaling", [])]
        if r.get("runner", "").startswith("corral") and "error" not in r
    ]
    if corral_rows:
        worst = max(corral_rows, key=lambda r: r["peak_live_tasks"] - 2 * r["parallel"])
        excess = worst["peak_live_tasks"] - 2 * worst["parallel"]
        add(
            "Corral peak live tasks - max_parallel_total (2P)",
            excess,
            "<= 16",
            excess <= 16,
            f"worst: {worst['runner']} {worst['trials']:,} trials P={worst['parallel']}",
        )
    scaling = [r for r in results.get("scaling", []) if "error" not in r]
    if len(scaling) >= 2:
        first, last = scaling[0], scaling[-1]
        per_1k = (last["trials"] - first["trials"]) / 1000
        for what, key in (
            ("Corral peak RSS growth, MB per 1,000 trials", "peak_rss_mb"),
            ("  the same until the report is built", "peak_rss_execution_mb"),
        ):
            growth = (last[key] - first[key]) / per_1k
            add(
                what,
                growth,
                "<= 0.5",
                growth <= 0.5,
                f"{first['trials']:,} -> {last['trials']:,} trials",
            )
    store = results.get("store", {})
    if "ratio_to_raw" in store:
        add(
            "SQLite store commits/s over raw batched inserts",
            store["ratio_to_raw"],
            ">= 0.5",
            store["ratio_to_raw"] >= 0.5,
            "64 appenders, raw batches of 64 rows",
        )
    sched = [r for r in results.get("scheduling", []) if "error" not in r]
    if sched:
        worst_c = max(r["corral_ratio"] for r in sched)
        worst_n = min(r["naive_ratio"] for r in sched)
        add(
            "Corral makespan / lower bound (worst seed)",
            worst_c,
            "<= 1.05",
            worst_c <= 1.05,
            f"{len(sched)} seeds; naive (task order) best seed {worst_n:.2f}x",
        )
    return out


# -- output --------------------------------------------------------------------


def _fmt(value: Any, spec: str = ".2f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return format(value, spec)
    return str(value)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    widths = [
        max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)
    ]
    line = "| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)) + " |"
    rule = "|" + "|".join("-" * (w + 2) for w in widths) + "|"
    body = [
        "| " + " | ".join(c.rjust(w) for c, w in zip(r, widths, strict=True)) + " |" for r in rows
    ]
    return "\n".join([line, rule, *body])


def render(results: dict[str, Any]) -> str:
    parts = [
        f"# Corral benchmarks ({results['mode']}, {results['date']})",
        "",
        "Machine: " + ", ".join(f"{k} {v}" for k, v in results["machine"].items()),
        "",
    ]
    for note in results.get("notes", []):
        parts.append(f"Note: {note}")
    through = results.get("throughput")
    if through:
        parts += ["", "## 1. Throughput and overhead (N tasks x 4 trials, one tool step each)", ""]
        rows = []
        for r in through:
            if "error" in r:
                rows.append(
                    [
                        r["runner"],
                        f"{r['tasks'] * 4:,}",
                        _fmt(r["latency"] * 1e3, "g"),
                        str(r["parallel"]),
                        "error: " + r["error"][:60],
                        *[""] * 10,
                    ]
                )
                continue
            rows.append(
                [
                    r["runner"],
                    f"{r['trials']:,}",
                    _fmt(r["latency"] * 1e3, "g"),
                    str(r["parallel"]),
                    _fmt(r["wall_s"]),
                    _fmt(r["ideal_s"]),
                    _fmt(r["wall_over_ideal"], ".1f"),
                    _fmt(r["overhead_us_per_trial"], ".0f"),
                    _fmt(r["cpu_us_per_trial"], ".0f"),
                    _fmt(r["trials_per_s"], ",.0f"),
                    _fmt(r["peak_rss_mb"], ".0f"),
                    str(r["peak_live_tasks"]),
                    _fmt(100 * r["gc_fraction"], ".1f"),
                    _fmt(r.get("vs_inspect"), ".1f"),
                    _fmt(r.get("vs_naive"), ".2f"),
                ]
            )
        parts.append(
            table(
                [
                    "runner",
                    "trials",
                    "L ms",
                    "P",
                    "wall s",
                    "ideal s",
                    "wall/ideal",
                    "overhead us/trial",
                    "cpu us/trial",
                    "trials/s",
                    "peak RSS MB",
                    "peak tasks",
                    "GC %",
                    "x Inspect",
                    "x naive",
                ],
                rows,
            )
        )
        parts += [
            "",
            "x Inspect, x naive: Corral's trials/s over theirs in the same cell "
            "(Inspect at the largest N it ran in that cell). Wall is the run call only "
            "(no interpreter start-up or imports); the median of the repeats.",
        ]
    scaling = results.get("scaling")
    if scaling:
        parts += ["", "## 2. Scaling (Corral, L = 0, P = 64)", ""]
        rows = [
            [
                f"{r['trials']:,}",
                _fmt(r["wall_s"]),
                _fmt(r["trials_per_s"], ",.0f"),
                _fmt(r["cpu_us_per_trial"], ".0f"),
                _fmt(r["rss_before_mb"], ".0f"),
                _fmt(r.get("peak_rss_execution_mb"), ".0f"),
                _fmt(r.get("execution_rss_mb_per_1k_trials"), ".2f"),
                _fmt(r["peak_rss_mb"], ".0f"),
                _fmt(r.get("rss_mb_per_1k_trials"), ".2f"),
                str(r["peak_live_tasks"]),
                _fmt(r["gc_s"]),
                _fmt(100 * r["gc_fraction"], ".1f"),
                "/".join(str(c) for c in r["gc_collections"]),
            ]
            for r in scaling
            if "error" not in r
        ]
        parts.append(
            table(
                [
                    "trials",
                    "wall s",
                    "trials/s",
                    "cpu us/trial",
                    "RSS before MB",
                    "peak RSS in execution MB",
                    "MB per 1k more",
                    "peak RSS with report MB",
                    "MB per 1k more",
                    "peak tasks",
                    "GC s",
                    "GC %",
                    "GC runs gen0/1/2",
                ],
                rows,
            )
        )
    sched = results.get("scheduling")
    if sched:
        parts += ["", "## 3. Scheduling quality (mixed limits, virtual time)", ""]
        rows = [
            [
                str(r["seed"]),
                str(r["trials"]),
                _fmt(r["lower_bound"], ".1f"),
                _fmt(r["corral"], ".1f"),
                _fmt(r["corral_ratio"], ".3f"),
                _fmt(r["naive"], ".1f"),
                _fmt(r["naive_ratio"], ".3f"),
                _fmt(r["naive_rounds"], ".1f"),
                _fmt(r["naive_rounds_ratio"], ".3f"),
            ]
            for r in sched
            if "error" not in r
        ]
        parts.append(
            table(
                [
                    "seed",
                    "trials",
                    "lower bound",
                    "Corral",
                    "ratio",
                    "naive (task order)",
                    "ratio",
                    "naive (round order)",
                    "ratio",
                ],
                rows,
            )
        )
    store = results.get("store")
    if store and "corral" in store:
        c, raw, one = store["corral"], store["raw"], store["raw_one_transaction"]
        parts += [
            "",
            "## 4. Commit store (64 concurrent appenders, one commit per append)",
            "",
            table(
                ["writer", "commits", "commits/s", "p50 ms", "p99 ms"],
                [
                    [
                        "Corral SQLiteStore",
                        f"{c['commits']:,}",
                        _fmt(c["commits_per_s"], ",.0f"),
                        _fmt(c["latency_p50_ms"]),
                        _fmt(c["latency_p99_ms"]),
                    ],
                    [
                        "raw sqlite3, 64 rows/txn",
                        f"{raw['commits']:,}",
                        _fmt(raw["commits_per_s"], ",.0f"),
                        "-",
                        "-",
                    ],
                    [
                        "raw sqlite3, one txn",
                        f"{one['commits']:,}",
                        _fmt(one["commits_per_s"], ",.0f"),
                        "-",
                        "-",
                    ],
                ],
            ),
            "",
            f"Store / raw (64 rows per transaction): {store['ratio_to_raw']:.2f}",
        ]
    goals = results.get("targets")
    if goals:
        parts += ["", "## Targets", ""]
        rows = [
            [
                g["target"],
                _fmt(g["measured"], ".3g"),
                g["goal"],
                {True: "met", False: "MISSED", None: "-"}[g["met"]],
                g["where"],
            ]
            for g in goals
        ]
        parts.append(table(["target", "measured", "goal", "", "cell"], rows))
    return "\n".join(parts) + "\n"


def machine() -> dict[str, Any]:
    cpu = "unknown"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=BENCH
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--", "../src"], capture_output=True, text=True, cwd=BENCH
    ).stdout.strip()
    if dirty:
        commit += " + uncommitted changes in src/"
    inspect_version = None
    if importlib.util.find_spec("inspect_ai") is not None:
        from importlib.metadata import version

        inspect_version = version("inspect-ai")
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "memory_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30),
        "python": platform.python_version(),
        "os": f"{platform.system()} {platform.release()}",
        "corral_commit": commit,
        "inspect_ai": inspect_version,
        "load_average_at_start": os.getloadavg()[0],
    }


# -- main ----------------------------------------------------------------------

SECTIONS = ("throughput", "scaling", "scheduling", "store")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="the quick grid (about 3 minutes)")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="measure each throughput cell and the store this many times "
        "and report the median (default 1)",
    )
    parser.add_argument("--sections", nargs="+", choices=SECTIONS, default=list(SECTIONS))
    parser.add_argument(
        "--runners",
        nargs="+",
        default=[*CORRAL_RUNNERS, "naive", *INSPECT_RUNNERS],
        choices=[*CORRAL_RUNNERS, "naive", *INSPECT_RUNNERS],
    )
    parser.add_argument(
        "--parallels",
        type=int,
        nargs="+",
        help="only the throughput cells at these parallelisms (Inspect's too), "
        "e.g. --parallels 64 for the cells the targets read",
    )
    parser.add_argument("--scaling-store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument(
        "--out", type=Path, help="JSON path (default bench/results/<date>-<mode>.json)"
    )
    parser.add_argument("--render", type=Path, help="print the tables of an earlier results JSON")
    parser.add_argument("--child", nargs=2, metavar=("KIND", "PARAMS"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print("RESULT " + json.dumps(child(args.child[0], json.loads(args.child[1]))))
        return
    if args.render:
        earlier = json.loads(args.render.read_text())
        earlier.setdefault("targets", targets(earlier))
        print(render(earlier))
        return

    grid = QUICK if args.quick else FULL
    if args.parallels:
        grid = replace(
            grid,
            parallels=tuple(args.parallels),
            inspect=tuple(cell for cell in grid.inspect if cell[3] in args.parallels),
        )
    mode = "quick" if args.quick else "full"
    started = time.time()
    results: dict[str, Any] = {
        "mode": mode,
        "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
        "command": " ".join(["python", "bench/run.py", *(sys.argv[1:] if argv is None else argv)]),
        "machine": machine(),
        "grid": asdict(grid),
        "repeat": args.repeat,
        "notes": [],
    }
    inspect = importlib.util.find_spec("inspect_ai") is not None
    if not inspect and any(r in INSPECT_RUNNERS for r in args.runners):
        results["notes"].append(
            "Inspect AI is not installed (pip install -e '.[bench]'): its rows are skipped."
        )
    sections: dict[str, Callable[[], Any]] = {
        "throughput": lambda: throughput_section(grid, args.repeat, args.runners, inspect),
        "scaling": lambda: scaling_section(grid, results.get("throughput", []), args.scaling_store),
        "scheduling": lambda: scheduling_section(grid),
        "store": lambda: store_section(grid, args.repeat),
    }
    out = args.out or RESULTS / f"{datetime.date.today().isoformat()}-{mode}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    for name in SECTIONS:
        if name in args.sections:
            t0 = time.time()
            log(f"[{name}]")
            results[name] = sections[name]()
            log(f"[{name}] {time.time() - t0:.0f} s")
            # Written after every section, so a long full run that stops keeps what it found.
            out.write_text(json.dumps(results, indent=1) + "\n")
    results["targets"] = targets(results)
    results["machine"]["load_average_at_end"] = os.getloadavg()[0]
    results["elapsed_s"] = time.time() - started
    out.write_text(json.dumps(results, indent=1) + "\n")
    text = render(results)
    out.with_suffix(".md").write_text(text)
    print(text)
    log(f"wrote {out} and {out.with_suffix('.md')} in {results['elapsed_s']:.0f} s")


if __name__ == "__main__":
    main()
