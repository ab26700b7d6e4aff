"""The cyclic garbage collector tuned for a process that runs one benchmark and is
Corral's own (a Ray host, the `corral` command): never for a library caller's.

What such a process holds once the benchmark is loaded (its tasks, agents and
environments, the imported modules) lives as long as the process: frozen
(`gc.freeze`), no full collection walks it again. And with hundreds of trials in
flight, collecting every 700 allocations (Python's default) walked the same live
trials over and over. Measured with ``gc.callbacks``: a Ray host at P = 512 spent
0.46 s of 8,000 trials collecting (about 20 % of its CPU), 0.01 s after; the
in-process runner at P = 512, 20,000 trials on SQLite 1.9 s, 0.05 s after (its CPU
per trial 17 % lower: `bench/trial_timeline.py --gc`). Cycles still die young:
every 20,000 allocations.
"""

from __future__ import annotations

import gc

#: The collector's first threshold (Python's default: 700).
THRESHOLD = 20_000


def collect_less() -> None:
    """Tune this process's collector as above (call it once what lasts is loaded)."""
    gc.collect()  # what is garbage already is not kept for good
    gc.freeze()
    _, second, third = gc.get_threshold()
    gc.set_threshold(THRESHOLD, second, third)
