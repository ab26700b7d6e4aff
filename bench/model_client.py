"""The model client's overhead, and a run through a storm of 429s.

    PYTHONPATH=src python bench/model_client.py [--calls 2000 --parallel 64 --trials 1000]
        [--provider openai|anthropic]

The `FakeChatServer` (or, with ``--provider anthropic``, `FakeAnthropicServer`
and `corral.models.Anthropic`) runs in a child process, so the CPU time measured
here is the client's alone (httpx, JSON, Corral's mapping), not the server's.

1. Client CPU per call: sequential calls, process CPU time / calls.
2. Calls/s at P = 64: 64 tasks share one pooled client (64 connections).
3. A run of ``--trials`` one-turn-plus-answer ToolAgent trials (two model calls
   each) where the server answers 429 (``retry-after-ms: 50``) to 10% of calls,
   chosen by a seeded draw: finished trials, failed attempts (none expected), and
   the model's effective limit sampled every 50 commits.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import random
import time
from typing import Any

import anyio

import corral
from corral import Action, Evaluation, ToolEffect, TrialRecord
from corral import BenchmarkTaskMetadata as Meta
from corral.agents import ToolAgent
from corral.models import Anthropic, OpenAICompatible
from corral.testing import ChatReply, FakeAnthropicServer, FakeChatServer, chat_request

ECHO = corral.Tool("echo", "Echo a word.", {"type": "object", "properties": {"w": {}}})
HELLO = [{"role": "user", "content": "Say hello."}]


class StormScript:
    """One tool call, then the answer; a seeded 10% of calls get a 429."""

    def __init__(self, rate: float) -> None:
        self.rate = rate
        self.rng = random.Random(0)

    def __call__(self, body: dict[str, Any]) -> ChatReply:
        if self.rate and self.rng.random() < self.rate:
            return ChatReply.rate_limited(retry_after_ms=50)
        if body["messages"][-1]["role"] == "user":
            return ChatReply.tools(("echo", {"w": "hi"}), usage=(40, 8))
        return ChatReply.text("hi", usage=(60, 2))


def serve(rate: float, urls: Any, stop: Any, provider: str) -> None:
    script = StormScript(rate)
    if provider == "openai":
        server: Any = FakeChatServer(script)
    else:
        server = FakeAnthropicServer(lambda body: script(chat_request(body)))
    with server:
        urls.put(server.url)
        stop.wait()


def client(url: str, provider: str) -> OpenAICompatible | Anthropic:
    return (OpenAICompatible if provider == "openai" else Anthropic)("bench-model", base_url=url)


class Echo:
    tools = (ECHO,)

    async def setup(self, session: corral.AgentSession) -> Any:
        return None

    async def execute(self, action: Action, session: corral.AgentSession) -> ToolEffect:
        return ToolEffect(action.arguments.get("w"))

    async def evaluate(self, trial: TrialRecord) -> Evaluation:
        return Evaluation(1.0, trial.output == "hi")


class Trace:
    def __init__(self) -> None:
        self.info: corral.RunInfo | None = None
        self.commits = 0
        self.effective: list[int] = []

    def on_run_start(self, info: corral.RunInfo) -> None:
        self.info = info

    def on_commit(self, key: corral.TrialKey, commit: corral.Commit) -> None:
        self.commits += 1
        if self.info is not None and self.commits % 50 == 0:
            self.effective.append(self.info.statistics().effective_by_model["bench-model"])


async def client_overhead(url: str, provider: str, calls: int, parallel: int) -> dict[str, float]:
    model = client(url, provider)
    async with model.pool(parallel):
        for _ in range(50):  # warm up: connections, imports
            await model.complete(HELLO)
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(calls):
            await model.complete(HELLO)
        sequential_cpu = (time.process_time() - cpu) / calls * 1e6
        sequential_wall = (time.perf_counter() - wall) / calls * 1e6

        async def worker(n: int) -> None:
            for _ in range(n):
                await model.complete(HELLO)

        cpu, wall = time.process_time(), time.perf_counter()
        async with anyio.create_task_group() as tg:
            for _ in range(parallel):
                tg.start_soon(worker, calls // parallel)
        done = calls // parallel * parallel
        elapsed = time.perf_counter() - wall
        parallel_cpu = (time.process_time() - cpu) / done * 1e6
    return {
        "client_cpu_us_per_call": round(sequential_cpu, 1),
        "sequential_wall_us_per_call": round(sequential_wall, 1),
        f"calls_per_s_at_p{parallel}": round(done / elapsed, 1),
        f"client_cpu_us_per_call_at_p{parallel}": round(parallel_cpu, 1),
    }


async def storm_run(url: str, provider: str, trials: int, parallel: int) -> dict[str, Any]:
    tasks = {
        f"t{i}": Meta("agent", "echo", model="bench-model", max_iterations=3) for i in range(trials)
    }
    trace = Trace()
    runner = corral.CorralRunner(
        tasks,
        {"agent": ToolAgent(client(url, provider))},
        {"echo": Echo()},
        store=corral.MemoryStore(),
        max_retries=0,
    )
    wall = time.perf_counter()
    report = await runner.run(
        "storm",
        max_parallel=parallel,
        max_parallel_by_model={"bench-model": parallel},
        observers=[trace],
    )
    elapsed = time.perf_counter() - wall
    attempts = [t.attempts for task in report.tasks.values() for t in task.trials]
    return {
        "trials": trials,
        "completed": report.counts.get("completed", 0),
        "errors": report.counts.get("error", 0),
        "extra_attempts": sum(a - 1 for a in attempts),
        "wall_s": round(elapsed, 2),
        "effective_limit_every_50_commits": " ".join(map(str, trace.effective)),
        "effective_min": min(trace.effective, default=None),
        "effective_last": trace.effective[-1] if trace.effective else None,
    }


def with_server(rate: float, provider: str, work: Any, *args: Any) -> Any:
    ctx = multiprocessing.get_context("spawn")
    urls, stop = ctx.Queue(), ctx.Event()
    child = ctx.Process(target=serve, args=(rate, urls, stop, provider), daemon=True)
    child.start()
    try:
        url = urls.get(timeout=30)
        return anyio.run(work, url, provider, *args)
    finally:
        stop.set()
        child.join(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--parallel", type=int, default=64)
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--storm-parallel", type=int, default=32)
    parser.add_argument("--provider", choices=("openai", "anthropic"), default="openai")
    args = parser.parse_args()
    provider = args.provider
    results = {
        "client": with_server(0.0, provider, client_overhead, args.calls, args.parallel),
        "storm": with_server(0.1, provider, storm_run, args.trials, args.storm_parallel),
    }
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
