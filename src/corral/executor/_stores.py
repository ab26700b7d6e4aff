"""How a host reaches the coordinator's store, and writes under the coordinator's claim."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._errors import ConfigError
from ..store import CommitStore, PostgresStore, SQLiteStore, open_store


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """A store by address (picklable): each host opens its own connections to it."""

    kind: str  # "postgres" or "sqlite"
    address: str
    options: tuple[tuple[str, Any], ...]
    #: The coordinator's claim: PostgreSQL's fencing epoch (None for SQLite, whose
    #: file lock is the coordinator's alone; hosts write without taking it).
    epoch: int | None = None

    def open(self) -> CommitStore:
        return open_store(self.address, **dict(self.options))


def check_store(store: CommitStore) -> None:
    """`ConfigError` unless hosts can write to ``store``: a PostgresStore or an SQLiteStore,
    never one opened read-only (hosts write its commits, the run registers the benchmark)."""
    if not isinstance(store, PostgresStore | SQLiteStore):
        raise ConfigError(
            f"Ray hosts cannot write to {store!r}: use a PostgresStore or (hosts on this "
            "machine only) an SQLiteStore"
        )
    if store.read_only:
        raise ConfigError(f"{store!r} was opened read-only: Ray hosts cannot write to it")


def check_reach(store: CommitStore, *, all_local: bool) -> None:
    """`ConfigError` unless every host reaches ``store``: PostgreSQL anywhere, SQLite only
    when every host is on this machine."""
    if isinstance(store, SQLiteStore) and not all_local:
        raise ConfigError(
            f"{store!r} is a file on this machine, and the Ray cluster has other nodes: "
            "use a PostgresStore (store='postgresql://...') to run on a cluster"
        )


def spec_of(store: CommitStore, benchmark_id: str) -> StoreSpec:
    """The store's address for hosts, with the claim the coordinator holds on the benchmark."""
    if isinstance(store, PostgresStore):
        options = (("synchronous_commit", store.synchronous_commit), ("retry_for", store.retry_for))
        return StoreSpec("postgres", store.dsn, options, store.claim_epoch(benchmark_id))
    assert isinstance(store, SQLiteStore)
    path = str(store.path.absolute())
    return StoreSpec("sqlite", path, (("synchronous", store.synchronous),))
