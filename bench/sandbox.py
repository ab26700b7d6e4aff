"""HumanEval through Corral, and what the sandbox costs per execution.

    python bench/sandbox.py [--problems 164 --trials 10 --executions 100 --right 7]

Needs the ``humaneval`` extra and bubblewrap. Part 1 runs HumanEval (``--problems``
x ``--trials``) against a local `FakeChatServer` answering each problem's first
``--right`` requests with its canonical solution and the rest with wrong ones
(a wrong value, an exception, a syntax error, a hang cut by the timeout when
``--hangs``), every answer scored by ``code_tests`` in `corral.sandbox`: wall time,
and CPU (this process and every child) per scored trial. Part 2 runs one
canonical program with its tests ``--executions`` times, one at a time, bare
through `corral.subprocess`, through `corral.sandbox(isolation="none")` (the
limits, no isolation) and through `corral.sandbox` (bubblewrap): latency and CPU
per execution.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

import corral
from corral.benchmarks import humaneval
from corral.testing import ChatReply, FakeChatServer

WRONG = ("    return None\n", "    raise ValueError('no idea')\n", "    return (\n")
HANG = "    while True:\n        pass\n"


def cpu() -> float:
    """CPU seconds of this process and of every child it has reaped."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def model(problems: dict[str, humaneval.Problem], right: int, hangs: bool) -> Any:
    lock = threading.Lock()
    asked: Counter[str] = Counter()
    by_prompt = {p.prompt: p for p in problems.values()}

    def reply(body: dict[str, Any]) -> ChatReply:
        user = next(m["content"] for m in body["messages"] if m["role"] == "user")
        problem = by_prompt[user[len(humaneval.INSTRUCTION) :]]
        with lock:
            n = asked[problem.task_id]
            asked[problem.task_id] += 1
        if n < right:
            return ChatReply.text(problem.canonical_solution)
        if hangs and n == right:
            return ChatReply.text(HANG)
        return ChatReply.text(WRONG[n % len(WRONG)])

    return reply


async def part1(args: argparse.Namespace) -> dict[str, Any]:
    problems = dict(list(humaneval.load_problems().items())[: args.problems])
    with FakeChatServer(model(problems, args.right, args.hangs)) as server:
        bench = humaneval.benchmark(
            server.url, api_key="", task_ids=list(problems), timeout=args.timeout
        )
        store = corral.MemoryStore()
        runner = corral.CorralRunner(bench.tasks, bench.agents, bench.environments, store=store)
        cpu0, wall0 = cpu(), time.perf_counter()
        report = await runner.run(
            "humaneval",
            trials_per_task=args.trials,
            k_values=(1, args.trials) if args.trials > 1 else (1,),
            max_parallel=32,
            max_parallel_per_task=args.trials,
        )
        wall, used = time.perf_counter() - wall0, cpu() - cpu0
    trials = args.problems * args.trials
    return {
        "problems": args.problems,
        "trials": trials,
        "max_subprocesses": corral.ConcurrencyScopes().max_subprocesses,
        "wall_s": round(wall, 2),
        "cpu_s": round(used, 2),
        "cpu_ms_per_scored_trial": round(1000 * used / trials, 2),
        "trials_per_s": round(trials / wall, 1),
        "pass_at_k": {str(k): round(v, 4) for k, v in report.pass_at_k.items()},
        "counts": report.counts,
    }


async def part2(args: argparse.Namespace) -> dict[str, Any]:
    problem = humaneval.load_problems()["HumanEval/0"]
    source = f"{problem.prompt}{problem.canonical_solution}\n{problem.check}"
    folder = Path(tempfile.mkdtemp(prefix="corral-bench-"))
    (folder / "main.py").write_text(source)
    command = [sys.executable, "main.py"]

    async def bare() -> None:
        result = await corral.subprocess(command, cwd=folder, timeout=30)
        assert result.success, result.stderr

    async def unisolated() -> None:
        result = await corral.sandbox(
            command, files={"main.py": source}, timeout=30, isolation="none"
        )
        assert result.success, result.stderr

    async def sandboxed() -> None:
        result = await corral.sandbox(command, files={"main.py": source}, timeout=30)
        assert result.success, result.stderr

    out: dict[str, Any] = {"executions": args.executions}
    for name, call in (("subprocess", bare), ("sandbox_none", unisolated), ("sandbox", sandboxed)):
        await call()  # warm the page cache
        times = []
        cpu0 = cpu()
        for _ in range(args.executions):
            start = time.perf_counter()
            await call()
            times.append(time.perf_counter() - start)
        used = cpu() - cpu0
        out[name] = {
            "median_ms": round(1000 * statistics.median(times), 1),
            "mean_ms": round(1000 * statistics.fmean(times), 1),
            "cpu_ms": round(1000 * used / args.executions, 1),
        }
    base = out["subprocess"]
    for name in ("sandbox_none", "sandbox"):
        out[name]["added_median_ms"] = round(out[name]["median_ms"] - base["median_ms"], 1)
        out[name]["added_cpu_ms"] = round(out[name]["cpu_ms"] - base["cpu_ms"], 1)
    return out


async def main(args: argparse.Namespace) -> None:
    results = {"humaneval": await part1(args), "per_execution": await part2(args)}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--problems", type=int, default=164)
    parser.add_argument("--trials", type=int, default=10)
    parser.add_argument("--right", type=int, default=7, help="right answers per problem")
    parser.add_argument("--hangs", action="store_true", help="one answer per problem hangs")
    parser.add_argument("--timeout", type=float, default=10.0)
    parser.add_argument("--executions", type=int, default=100)
    anyio.run(main, parser.parse_args())
