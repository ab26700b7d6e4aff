"""How long fencing a Ray host off a PostgreSQL claim takes while the other hosts write.

    PYTHONPATH=src python bench/pg_fence.py [--writers 2 4 8 16] [--hold 0.01]
        [--dsn postgresql://postgres@127.0.0.1:5432/postgres]

The coordinator claims a benchmark; ``--writers`` hosts join it, each writing in a
loop as its store's writer does: a transaction that share-locks what a write checks
(the claim's row and the host's own row of its writers), held ``--hold`` seconds (a
batch in flight), then the next at once. The coordinator then fences host 0, which
is not writing, and the time until `fence_host` returns is printed. Before each
writer had a row of its own, the fence updated the claim's row, which every write
share-locks: with enough writers one always held it (16 writers of 10 ms starved it
for over a minute). Works in a scratch database it makes and drops.
"""

from __future__ import annotations

import argparse
import contextlib
import threading
import time
import uuid

import anyio

import corral

#: What a host's write share-locks while in flight (the writer's statement does so).
HOST_WRITING = (
    "SELECT 1 FROM corral.claims c JOIN corral.claim_writers w ON w.benchmark_id = "
    "c.benchmark_id AND w.epoch = c.epoch WHERE c.benchmark_id = %s AND c.epoch = %s "
    "AND w.host = %s FOR SHARE OF c, w"
)


def writing(dsn: str, epoch: int, host: int, hold: float, stop: threading.Event) -> None:
    import psycopg

    with psycopg.connect(dsn) as conn:
        while not stop.is_set():
            with conn.transaction():
                conn.execute(HOST_WRITING, ("fence-bench", epoch, host))
                time.sleep(hold)  # the batch in flight


async def fence_time(dsn: str, writers: int, hold: float) -> float:
    coordinator = corral.PostgresStore(dsn)
    stop = threading.Event()
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(coordinator.opened())
        await stack.enter_async_context(coordinator.claim("fence-bench"))
        epoch = coordinator.claim_epoch("fence-bench")
        assert epoch is not None
        for number in range(1, writers + 1):  # each host's row of the claim's writers
            host = corral.PostgresStore(dsn)
            await stack.enter_async_context(host.opened())
            await stack.enter_async_context(host.joined("fence-bench", epoch, number))
        threads = [
            threading.Thread(target=writing, args=(dsn, epoch, number, hold, stop))
            for number in range(1, writers + 1)
        ]
        for thread in threads:
            thread.start()
            await anyio.sleep(hold / writers)  # their transactions overlap
        try:
            await anyio.sleep(0.5)
            start = time.perf_counter()
            await coordinator.fence_host("fence-bench", 0)
            return time.perf_counter() - start
        finally:
            stop.set()
            for thread in threads:
                thread.join()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--writers", type=int, nargs="+", default=[2, 4, 8, 16])
    parser.add_argument("--hold", type=float, default=0.01)
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    args = parser.parse_args()
    import psycopg

    name = f"corral_fence_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(args.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    dsn = args.dsn.rsplit("/", 1)[0] + f"/{name}"
    try:
        for writers in args.writers:
            took = anyio.run(fence_time, dsn, writers, args.hold)
            print(f"writers={writers} hold={args.hold * 1e3:g} ms: fenced in {took * 1e3:.1f} ms")
    finally:
        with psycopg.connect(args.dsn, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


if __name__ == "__main__":
    main()
