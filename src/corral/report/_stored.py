"""A benchmark's report read from its store: from the trial heads the store keeps, each
task's records read only when used."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._types import BenchmarkTaskMetadata
from ..store._heads import HeadStore, TaskList, heads_of
from ._build import HeadTally, build_report, records_from, task_list
from ._lazy import StoreRecords
from ._model import BenchmarkReport


async def stored_report(
    store: Any,
    benchmark_id: str,
    config: Mapping[str, Any] | TaskList,
    *,
    metadata: Iterable[tuple[str, BenchmarkTaskMetadata]] | None = None,
    **options: Any,
) -> BenchmarkReport:
    """The report of ``benchmark_id`` (``config``: its stored configuration, or one of a
    subset of its tasks, or what the report needs of it: `HeadStore.task_list`) from
    ``store``'s trial heads; ``options`` as `build_report`'s.

    A store that keeps no heads (a wrapper of another) gives its records instead."""
    tasks = config if isinstance(config, TaskList) else task_list(config, metadata)
    if not isinstance(store, HeadStore):
        return build_report(
            benchmark_id,
            {"trials_per_task": tasks.trials_per_task},
            records=records_from(await store.summaries(benchmark_id)),
            metadata=((t, BenchmarkTaskMetadata("", env, model)) for t, model, env in tasks.tasks),
            **options,
        )
    tally = HeadTally(tasks)
    async for chunk in heads_of(store, benchmark_id):
        tally.add(chunk)
    order: list[Sequence[str]] = []
    source = StoreRecords(store.reader, benchmark_id, tally.trials_per_task, lambda: order[0])
    report = tally.report(benchmark_id, source, **options)
    order.append(list(report.tasks))
    return report
