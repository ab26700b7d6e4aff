"""Copying benchmarks between any two stores, verified commit by commit."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .._errors import ConfigError, StoreError
from .._suggest import did_you_mean
from .._types import Commit
from ._config_diff import same_json
from ._heads import HeadStore
from ._protocol import BenchmarkInfo, CommitStore, TrialKey

#: Commits handed to the destination per append (one trial's history at most).
_CHUNK = 512


@dataclass(frozen=True, slots=True)
class Copied:
    """What `copy_benchmarks` did for one benchmark."""

    benchmark_id: str
    trials: int
    commits: int
    #: Commits the destination did not have before (the rest were already there).
    new: int


async def copy_benchmarks(
    source: CommitStore, destination: CommitStore, benchmark_ids: Sequence[str] | None = None
) -> list[Copied]:
    """Copy benchmarks (all of them, or ``benchmark_ids``) from ``source`` to ``destination``.

    A benchmark the destination already has must have the same configuration, and
    each of its trials' histories must be a prefix of the source's: the rest is
    appended (so a copy interrupted part-way can simply be run again). Otherwise
    the copy is refused with `ConfigError` before that benchmark is written.
    Every trial is read back from the destination and compared with the source,
    commit by commit; a difference is a `StoreError`.
    """
    async with source.opened():
        known = {info.benchmark_id: info for info in await source.benchmarks()}
        chosen = list(known) if benchmark_ids is None else list(benchmark_ids)
        for benchmark_id in chosen:
            if benchmark_id not in known:
                hint = did_you_mean(benchmark_id, known)
                raise ConfigError(f"the source store has no benchmark {benchmark_id!r}{hint}")
        # Opened (an SQLite file created) only once the copy is known to be possible.
        async with destination.opened():
            return [await _copy_one(source, destination, known[b]) for b in chosen]


async def _copy_one(source: CommitStore, destination: CommitStore, info: BenchmarkInfo) -> Copied:
    benchmark_id = info.benchmark_id
    keys = [
        TrialKey(benchmark_id, s.task_id, s.trial)
        async for chunk in source.scan(benchmark_id)
        for s in chunk
    ]
    async with destination.claim(benchmark_id):
        # As it is: its creation time too (commits carry their own).
        existed = await destination.register_benchmark(
            benchmark_id, info.config, created_at=info.created_at
        )
        # Check every trial before writing any, so a refused copy writes nothing.
        if existed:
            await _check_same_config(destination, info)
            ours = {(k.task_id, k.trial) for k in keys}
            async for chunk in destination.scan(benchmark_id):
                for s in chunk:
                    if (s.task_id, s.trial) not in ours:
                        raise ConfigError(
                            f"benchmark {benchmark_id!r} is in the destination with other "
                            f"commits (task {s.task_id!r} trial {s.trial}, which the source "
                            "does not have); refusing to copy it"
                        )
        missing = []
        total = 0
        await _check_headless(source, benchmark_id, keys)
        for key in keys:
            history = await _checked_history(source, key)
            total += len(history)
            there = await destination.history(key) if existed else []
            if len(there) > len(history) or history[: len(there)] != there:
                raise ConfigError(
                    f"benchmark {benchmark_id!r} is in the destination with other commits "
                    f"(task {key.task_id!r} trial {key.trial}); refusing to copy it"
                )
            if len(history) > len(there):
                missing.append((key, len(there)))
        runs = await source.runs(benchmark_id)
        there_runs = await destination.runs(benchmark_id) if existed else []
        if runs[: len(there_runs)] != there_runs:
            raise ConfigError(
                f"benchmark {benchmark_id!r} is in the destination with other run records; "
                "refusing to copy it"
            )
        new = 0
        for key, start in missing:
            history = await source.history(key)
            for i in range(start, len(history), _CHUNK):
                # Read back from a store: plain JSON already (a payload as deep as the
                # runtime writes would fail `append`'s check of values).
                await destination.enqueue(key, history[i : i + _CHUNK]).wait()
                new += len(history[i : i + _CHUNK])
        for record in runs[len(there_runs) :]:
            await destination.record_run(benchmark_id, record)
        if await destination.runs(benchmark_id) != runs:
            raise StoreError(f"copy of {benchmark_id!r} differs from its source in its runs")
        for key in keys:
            if await destination.history(key) != await source.history(key):
                raise StoreError(
                    f"copy of {benchmark_id!r} differs from its source at task "
                    f"{key.task_id!r} trial {key.trial}"
                )
    return Copied(benchmark_id, len(keys), total, new)


async def _check_same_config(destination: CommitStore, info: BenchmarkInfo) -> None:
    """Refuse a destination whose benchmark's configuration is not the source's: its
    registration takes the source's as the same benchmark when it has only some of the
    destination's tasks (as a run of some tasks is), which a copy must not."""
    there = await destination.benchmark_config(info.benchmark_id)
    if there is None or same_json(there, info.config):
        return
    extra = sorted(set(there.get("tasks", {})) - set(info.config.get("tasks", {})))
    detail = f"task {extra[0]!r} is not in the source's" if extra else "it differs"
    raise ConfigError(
        f"benchmark {info.benchmark_id!r} is in the destination with another configuration "
        f"({detail}); refusing to copy it"
    )


async def _checked_history(source: CommitStore, key: TrialKey) -> list[Commit]:
    """``key``'s commits in ``source``, checked against its head where it keeps heads
    (`HeadStore.checked_history`): the copy's heads are made from the commits copied,
    so a copy of commits its head counted and that were deleted since would report
    otherwise than its source, though "verified"."""
    if isinstance(source, HeadStore):
        return await source.checked_history(key)
    return await source.history(key)


async def _check_headless(source: CommitStore, benchmark_id: str, keys: list[TrialKey]) -> None:
    """`_checked_history` of each trial ``source`` keeps a head of without a commit
    among ``keys`` (the trials its scan found): every commit it counted was deleted,
    or a writer began it after the scan (its commits are then read with it)."""
    if not isinstance(source, HeadStore):
        return
    found = {(k.task_id, k.trial) for k in keys}
    async for chunk in source.heads(benchmark_id):
        for head in chunk:
            if (head.task_id, head.trial) not in found:
                await source.checked_history(TrialKey(benchmark_id, head.task_id, head.trial))
