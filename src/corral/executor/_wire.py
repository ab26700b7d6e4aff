"""Batches of jobs and results as bytes: plain pickle with flat reductions of Corral's
value types (a frozen dataclass is rebuilt from its fields in order, not through
``__getstate__``), so a batch costs the coordinator a few microseconds per trial.
Anything plain pickle cannot take (a closure in an agent's scratch), or would name by
its module where cloudpickle sends that module by value, goes through cloudpickle
instead, with the same flat reductions."""

from __future__ import annotations

import copyreg
import dataclasses
import functools
import io
import operator
import pickle
import sys
from collections import ChainMap
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

from .._budget import Budget
from .._types import NO_USAGE, BenchmarkTaskMetadata, Commit, Evaluation, TrialRecord, Usage
from ..runtime._jobs import Deferred, EvalJob, Evaluated, Executed, Postponed, Previous, TrialJob


def _flat(cls: type) -> Callable[[Any], tuple[Any, ...]]:
    values = operator.attrgetter(*(f.name for f in dataclasses.fields(cls)))

    def reduce(obj: Any) -> tuple[Any, ...]:
        return cls, values(obj)

    return reduce


def _usage(obj: Usage) -> Any:
    if obj is NO_USAGE:  # shared, and kept shared
        return "NO_USAGE"
    return Usage, (obj.input_tokens, obj.output_tokens, obj.cost)


def _mapping(obj: MappingProxyType[Any, Any]) -> tuple[Any, ...]:
    return proxy, (dict(obj),)


def proxy(items: dict[Any, Any]) -> MappingProxyType[Any, Any]:
    return MappingProxyType(items)


_TABLE: dict[type, Callable[[Any], Any]] = {
    **copyreg.dispatch_table,
    **{
        cls: _flat(cls)
        for cls in (
            Budget,
            BenchmarkTaskMetadata,
            Commit,
            Evaluation,
            TrialRecord,
            Deferred,
            Previous,
            TrialJob,
            EvalJob,
            Executed,
            Postponed,
            Evaluated,
        )
    },
    Usage: _usage,
    MappingProxyType: _mapping,
}


def dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=5)
    pickler.dispatch_table = _TABLE
    try:
        pickler.dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError):
        return _cloudpickled(obj)
    data = buffer.getvalue()
    if _by_value_named(data):  # plain pickle named a class of it: the other side lacks it
        return _cloudpickled(obj)
    return data


def _by_value_named(data: bytes) -> bool:
    """Whether ``data`` may name a module cloudpickle sends by value (registered with
    `RayExecutor.pickle_by_value`: `corral run`'s benchmark file), which the other side
    cannot import. A name found by chance costs a cloudpickle, never a wrong batch."""
    registered = _by_value_modules()
    return registered is not None and any(name.encode() in data for name in registered())


def _by_value_modules() -> Callable[[], set[str]] | None:
    """Ray's list of the modules it sends by value, or None while Ray's cloudpickle is
    not imported (nothing can have been registered yet). Never imports it: `dumps` runs
    as Corral is imported, and Ray there would slow every start and leave Ray's exit
    hook in every process."""
    cloudpickle = sys.modules.get("ray.cloudpickle")
    return None if cloudpickle is None else cloudpickle.list_registry_pickle_by_value


def _cloudpickled(obj: Any) -> bytes:
    """``obj`` through cloudpickle, Corral's types as flat as with plain pickle (so
    `loads` shares evaluations the same way)."""
    buffer = io.BytesIO()
    _cloud_pickler()(buffer, protocol=5).dump(obj)
    return buffer.getvalue()


@functools.cache
def _cloud_pickler() -> type:
    from ray import cloudpickle

    class Pickler(cloudpickle.CloudPickler):
        # Read by the C pickler when it is made: a class attribute, not an instance's.
        dispatch_table = ChainMap(_TABLE, cloudpickle.CloudPickler.dispatch_table)

    return Pickler


def loads(data: bytes, evaluation: Callable[..., Evaluation] | None = None) -> Any:
    """``data`` unpickled; with ``evaluation``, every `Evaluation` in it is made by it
    (the coordinator's report table hands out the equal one it keeps)."""
    if evaluation is None:
        return pickle.loads(data)
    return _Loader(data, evaluation).load()


class _Loader(pickle.Unpickler):
    def __init__(self, data: bytes, evaluation: Callable[..., Evaluation]) -> None:
        super().__init__(io.BytesIO(data))
        self._evaluation = evaluation

    def find_class(self, module: str, name: str) -> Any:
        if name == "Evaluation" and module == Evaluation.__module__:
            return self._evaluation
        return super().find_class(module, name)
