"""What the 95% intervals cost, and how often they cover the truth.

    python bench/intervals.py [--tasks 10000 --trials 10]   # timings
    python bench/intervals.py --coverage [--simulations 1000]

Timings (CPU): `build_report` over tasks x trials records (half the tasks on each of
two models, k = 1, 2, 4, 8 and the trials), its intervals (`BenchmarkReport.scores`
and `scores_by_model`, computed on first use), and a paired comparison of the two
models (`compare`). Run it with PYTHONPATH pointing at
another checkout to compare. Coverage: benchmarks of 5, 10, 40 and 200 tasks x 5
trials whose tasks' pass rates are uniform on [0, 1], so the true mean pass@k is
k / (k + 1) and pass^k is 1 / (k + 1); how often each 95% interval holds it.
"""

from __future__ import annotations

import argparse
import random
import time
from collections import Counter

from corral import Evaluation, TrialRecord, TrialStatus
from corral.report import build_report

try:
    from corral import compare
    from corral.report import task_scores
except ImportError:  # a checkout from before intervals: time build_report alone
    compare = task_scores = None  # type: ignore[assignment]

MODELS = ("small", "large")


def timings(tasks: int, trials: int) -> None:
    rng = random.Random(5)
    config = {
        "trials_per_task": trials,
        "tasks": {
            f"t{i // 2}@{MODELS[i % 2]}": {"environment_id": "e", "model": MODELS[i % 2]}
            for i in range(tasks)
        },
    }
    records = {}
    for task in config["tasks"]:
        p = rng.random()
        for r in range(trials):
            ok = rng.random() < p
            records[(task, r)] = TrialRecord(
                task, r, TrialStatus.COMPLETED, evaluation=Evaluation(float(ok), ok)
            )
    ks = sorted({k for k in (1, 2, 4, 8) if k <= trials} | {trials})
    best = float("inf")
    for _ in range(5):  # CPU time, best of 5: other processes on the machine move it less
        start = time.process_time()
        report = build_report("b", config, records=records, k_values=ks)
        best = min(best, time.process_time() - start)
    print(f"build_report, {tasks:,} tasks x {trials} trials, k = {ks}: {best:.3f} s (best of 5)")
    if task_scores is None or compare is None:
        return
    start = time.process_time()
    report.scores_by_model  # noqa: B018 (computed on first use)
    report.scores  # noqa: B018
    print(
        f"the 95% intervals (all tasks, each model; first use): {time.process_time() - start:.3f} s"
    )
    for k in (1, trials):
        start = time.perf_counter()
        result = compare(report, report, models=MODELS, k=k)
        print(
            f"compare {len(result.shared):,} shared tasks, k = {k}: "
            f"{time.perf_counter() - start:.3f} s"
        )


def coverage(simulations: int) -> None:
    for size in (5, 10, 40, 200):
        rng = random.Random(123)
        hits: Counter[str] = Counter()
        for sim in range(simulations):
            tasks = []
            for _ in range(size):
                p = rng.random()
                tasks.append((5, sum(rng.random() < p for _ in range(5))))
            scores = task_scores(tasks, (1, 2, 5), resamples=1000, seed=sim)
            for k in (1, 2, 5):
                at, hat = scores.pass_at_k[k], scores.pass_hat_k[k]
                hits[f"pass@{k}"] += at.low <= k / (k + 1) <= at.high
                hits[f"pass^{k}"] += hat.low <= 1 / (k + 1) <= hat.high
        rates = ", ".join(f"{name} {n / simulations:.3f}" for name, n in sorted(hits.items()))
        print(f"{size:>4} tasks: {rates}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=10_000)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--coverage", action="store_true")
    parser.add_argument("--simulations", type=int, default=1000)
    args = parser.parse_args()
    if args.coverage:
        coverage(args.simulations)
    else:
        timings(args.tasks, args.trials)


if __name__ == "__main__":
    main()
