"""CPU instructions per trial, counted by valgrind: a cost that machine load cannot move.

    python bench/instructions.py [--store sqlite|memory] [--trials 400 2400]
        [--heads kept|off|both] [--latency 0]

Wall and CPU times on a shared VM vary by 30% between runs; instruction counts
vary by less than 0.1%, so a change of a few percent in Corral's cost per
trial can be seen at once. Runs `bench/throughput.py` under
``valgrind --tool=callgrind`` at two sizes and prints the difference per
trial (interpreter start-up and imports cancel out). All threads are
counted, the store's writer included. Needs valgrind (``apt install
valgrind``); the two sizes take about 100 s together.

``--heads both`` (SQLite) counts the run with trial heads kept and with their upkeep
switched off (``throughput.py --heads off``, the switch `heads_cost.py` uses) and
prints each per trial and what the heads cost (issue 26). With ``--heads`` given,
each run is counted up to its last commit (``throughput.py --to-last-commit``):
without heads the report reads none, so it is left out of both.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def instructions(store: str, trials: int, heads: str | None = None, latency: float = 0.0) -> int:
    command = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        str(BENCH / "throughput.py"),
        "--trials",
        str(trials),
        "--per-task",
        "4",
        "--store",
        store,
        "--latency",
        str(latency),
    ]
    if heads is not None:
        command += ["--heads", heads, "--to-last-commit"]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if found is None:
        raise SystemExit(f"no instruction count in valgrind's output:\n{done.stderr[-2000:]}")
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    parser.add_argument("--trials", type=int, nargs=2, default=[400, 2400])
    parser.add_argument("--heads", choices=["kept", "off", "both"])
    parser.add_argument(
        "--latency",
        type=float,
        default=0.0,
        help="The agent's model call in seconds (throughput.py --latency): 0.01 counts "
        "the trials of goal 3's workload, whose agents wait.",
    )
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    if args.heads not in (None, "kept") and args.store != "sqlite":
        raise SystemExit("--heads off|both: the SQLite store only")
    small, large = args.trials
    # A small run first, uncounted: in a fresh tree the first run counted (the large
    # one) would also pay for writing the bytecode caches of every module it imports,
    # which moved the figure by some 20 % (valgrind counts the compiler too).
    warm = [sys.executable, str(BENCH / "throughput.py"), "--trials", "8", "--per-task", "4"]
    warm += ["--store", args.store, "--latency", str(args.latency)]
    subprocess.run(warm, capture_output=True, check=True)
    found: dict[str | None, float] = {}
    for heads in ("kept", "off") if args.heads == "both" else (args.heads,):
        per_trial = (
            instructions(args.store, large, heads, args.latency)
            - instructions(args.store, small, heads, args.latency)
        ) / (large - small)
        found[heads] = per_trial
        print(
            f"store={args.store} latency={args.latency:g} s "
            f"heads={heads or 'kept, report included'} "
            f"instructions per trial: {per_trial:,.0f}"
        )
    if len(found) == 2:
        cost = found["kept"] - found["off"]
        print(f"heads cost: {cost:+,.0f} instructions per trial ({cost / found['off']:+.1%})")


if __name__ == "__main__":
    main()
