"""Peak memory of a run against the number of tasks: a dict of tasks vs a TaskSource
vs a dataset read by `corral.datasets.from_jsonl` (scored by `corral.scorers.exact`
against each row's target, so every evaluation reads its task's target too).

    python bench/streaming_memory.py [--tasks 10000 50000 100000 --prompt 2000]

Each task has a prompt of ``--prompt`` characters in its inputs; each
configuration runs in its own process (one trial per task, SQLite store) and
reports peak RSS when the run's last trial has ended, before the report.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

import anyio

import corral
from corral import BenchmarkTaskMetadata, Final, datasets, scorers
from corral.testing import FakeEnvironment, ScriptedAgent


class PeakAtEnd:
    def __init__(self) -> None:
        self.rss_mb = 0.0

    def on_run_end(self, info: corral.RunInfo) -> None:
        self.rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        pass


def child(kind: str, tasks: int, prompt: int) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="corral-mem-"))
    jsonl = tmp / "tasks.jsonl"
    with open(jsonl, "w") as f:
        for i in range(tasks):
            row = {
                "id": f"task-{i:07d}",
                "agent_id": "a",
                "environment_id": "e",
                "inputs": {"prompt": "x" * prompt, "n": i},
            }
            f.write(json.dumps(row) + "\n")
    source: corral.TaskSource | dict[str, BenchmarkTaskMetadata]
    environment = FakeEnvironment()
    if kind == "dataset":  # a plain dataset: its own fields, mapped to tasks
        data = tmp / "data.jsonl"
        with open(data, "w") as f:
            for i in range(tasks):
                row = {"id": f"q-{i:07d}", "question": "x" * prompt, "answer": str(prompt)}
                f.write(json.dumps(row) + "\n")
        jsonl.unlink()
        source = datasets.from_jsonl(
            data, agent_id="a", environment_id="e", input="question", target="answer"
        )
        environment = FakeEnvironment(evaluate=scorers.exact())
    elif kind == "source":
        source = corral.TaskSource.jsonl(jsonl)
    else:  # what a user does without a source: every task in a dict
        source = {}
        with open(jsonl) as f:
            for line in f:
                row = json.loads(line)
                task_id = row.pop("id")
                source[task_id] = BenchmarkTaskMetadata(**row)
    peak = PeakAtEnd()
    runner = corral.CorralRunner(
        source,
        {"a": ScriptedAgent(lambda s: Final(len(s.inputs["prompt"])))},
        {"e": environment},
        store=tmp / "store.db",
    )

    async def go() -> None:
        await runner.run("mem", max_parallel=64, observers=[peak])

    anyio.run(go)
    print(json.dumps({"kind": kind, "tasks": tasks, "peak_rss_mb": round(peak.rss_mb, 1)}))


KINDS = ("dict", "source", "dataset")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, nargs="+", default=[10_000, 50_000, 100_000])
    parser.add_argument("--prompt", type=int, default=2000)
    parser.add_argument("--child", nargs=2, metavar=("KIND", "TASKS"))
    args = parser.parse_args()
    if args.child:
        child(args.child[0], int(args.child[1]), args.prompt)
        return
    rows = {}
    for kind in KINDS:
        for n in args.tasks:
            out = subprocess.run(
                [sys.executable, __file__, "--prompt", str(args.prompt), "--child", kind, str(n)],
                capture_output=True,
                text=True,
                check=True,
            )
            rows[(kind, n)] = json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"]
    print(
        f"{'tasks':>8} {'dict MB':>9} {'source MB':>10} {'dataset MB':>11}"
        f"   (prompt {args.prompt} chars per task)"
    )
    for n in args.tasks:
        print(
            f"{n:>8} {rows[('dict', n)]:>9.1f} {rows[('source', n)]:>10.1f}"
            f" {rows[('dataset', n)]:>11.1f}"
        )
    first, last = args.tasks[0], args.tasks[-1]
    for kind in KINDS:
        per = (rows[(kind, last)] - rows[(kind, first)]) * 1024 / (last - first)
        print(f"{kind}: {per:.2f} KB of peak RSS per extra task")


if __name__ == "__main__":
    main()
