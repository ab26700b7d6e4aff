"""Reading a large benchmark: `corral report`, `list`, `compare` and the viewer's
benchmark page (its headline pass@k and intervals), timed cold, with peak RSS.

    PYTHONPATH=src python bench/report_scale.py [--store postgres] [--shapes 100000x1 10000x10]

For each shape (tasks x trials per task) two benchmarks of finished trials (setup,
an action, its effect, terminal, evaluation; 5% errors), written straight through
the store API, then each command in a fresh process: wall seconds and the process's
peak RSS (GNU time). The viewer: ``corral view`` started cold, then the time until
``/api/benchmark?id=...&wait=1`` answers with pass@k and its intervals.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from viewer_stores import big_store, serving  # bench/, beside this file

from corral.store import open_store

GOALS = {"report": (2.0, 100), "list": (1.0, None), "compare": (3.0, None), "viewer": (2.0, None)}


def timed(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of ``corral ARGS`` in a fresh process (its CPU
    seconds, user + sys, printed: the figure a loaded machine does not change). The
    RSS is GNU time's: a child forked by this (large) process would count its pages."""
    start = time.perf_counter()
    done = subprocess.run(
        ["/usr/bin/time", "-f", "%U %S %M", sys.executable, "-m", "corral", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
        check=False,
    )
    took = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise RuntimeError(f"corral {' '.join(args)} failed: {done.stderr}")
    user, system, rss = done.stderr.strip().splitlines()[-1].split()
    print(f"{'':>10} cpu      {float(user) + float(system):6.2f} s (corral {args[0]})")
    return took, int(rss) / 1024


def viewer(address: str, benchmark_id: str) -> float:
    """Seconds from a cold ``corral view`` to the benchmark's headline with intervals."""
    with serving(address) as url:
        start = time.perf_counter()
        with urllib.request.urlopen(f"{url}api/benchmark?id={benchmark_id}&wait=1") as r:
            body = json.loads(r.read())
        took = time.perf_counter() - start
    assert body["ready"] and body["scores"]["pass_at_k"], body.keys()
    return took


def show(shape: str, what: str, seconds: float, rss: float | None = None) -> None:
    goal_s, goal_mb = GOALS[what]
    ok = seconds < goal_s and (goal_mb is None or rss is None or rss < goal_mb)
    mb = "" if rss is None else f" · peak RSS {rss:.0f} MB"
    print(f"{shape:>10} {what:<8} {seconds:6.2f} s{mb}  ({'ok' if ok else 'over'} the goal)")


def measure(address: str, shape: str) -> None:
    tasks, trials = (int(n) for n in shape.split("x"))
    for benchmark_id in ("a", "b"):
        start = time.perf_counter()
        big_store(open_store(address), f"{shape}-{benchmark_id}", tasks, trials)
        took = time.perf_counter() - start
        print(f"{shape:>10} written  {took:6.1f} s ({tasks * trials / took:,.0f} trials/s)")
    seconds, rss = timed(["report", f"{shape}-a", "--store", address])
    show(shape, "report", seconds, rss)
    seconds, rss = timed(["list", "--store", address])
    show(shape, "list", seconds, rss)
    seconds, rss = timed(["compare", f"{shape}-a", f"{shape}-b", "--store", address])
    show(shape, "compare", seconds, rss)
    show(shape, "viewer", viewer(address, f"{shape}-a"))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--store", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/corral_bench")
    parser.add_argument("--shapes", nargs="+", default=["100000x1", "10000x10"])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        for shape in args.shapes:
            if args.store == "sqlite":
                address = str(Path(folder) / f"{shape}.db")
            else:
                address = args.dsn
                _fresh_database(address)
            measure(address, shape)


def _fresh_database(dsn: str) -> None:
    import psycopg

    base, _, name = dsn.rpartition("/")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


if __name__ == "__main__":
    main()
