"""CPU instructions per trial, counted by valgrind: a cost that machine load cannot move.

    python bench/instructions.py [--store sqlite|memory] [--trials 400 2400]

Wall and CPU times on a shared VM vary by 30% between runs; instruction counts
vary by less than 0.1%, so a change of a few percent in Corral's cost per
trial can be seen at once. Runs `bench/throughput.py` under
``valgrind --tool=callgrind`` at two sizes and prints the difference per
trial (interpreter start-up and imports cancel out). All threads are
counted, the store's writer included. Needs valgrind (``apt install
valgrind``); the two sizes take about 100 s together.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent


def instructions(store: str, trials: int) -> int:
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
    ]
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
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("valgrind is not installed")
    small, large = args.trials
    per_trial = (instructions(args.store, large) - instructions(args.store, small)) / (
        large - small
    )
    print(f"store={args.store} instructions per trial: {per_trial:,.0f}")


if __name__ == "__main__":
    main()
