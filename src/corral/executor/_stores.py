"""How a host reaches the coordinator's store, and writes under the coordinator's claim."""

from __future__ import annotations

from dataclasses import dataclass

from .._errors import ConfigError
from ..store import CommitStore, HostAccess, SharedStore, open_store


@dataclass(frozen=True, slots=True)
class StoreSpec:
    """A store by address (picklable): each host opens its own connections to it."""

    access: HostAccess

    @property
    def epoch(self) -> int | None:
        """The coordinator's claim hosts write under (None: nothing to join)."""
        return self.access.epoch

    def open(self) -> CommitStore:
        return open_store(self.access.address, **dict(self.access.options))


def check_store(store: CommitStore) -> None:
    """`ConfigError` unless hosts can write to ``store``: one that other processes open
    by address (PostgreSQL, SQLite), never one opened read-only (hosts write its
    commits, the run registers the benchmark)."""
    if not isinstance(store, SharedStore):
        raise ConfigError(
            f"Ray hosts cannot write to {store!r}: use a PostgresStore or (hosts on this "
            "machine only) an SQLiteStore"
        )
    if store.read_only:
        raise ConfigError(f"{store!r} was opened read-only: Ray hosts cannot write to it")


def check_reach(store: CommitStore, *, all_local: bool) -> None:
    """`ConfigError` unless every host reaches ``store``: a networked store anywhere, a
    file only when every host is on this machine."""
    if isinstance(store, SharedStore) and not all_local:
        if store.host_access("").reach == "machine":
            raise ConfigError(
                f"{store!r} is a file on this machine, and the Ray cluster has other nodes: "
                "use a PostgresStore (store='postgresql://...') to run on a cluster"
            )


def spec_of(store: CommitStore, benchmark_id: str) -> StoreSpec:
    """The store's address for hosts, with the claim the coordinator holds on the benchmark."""
    assert isinstance(store, SharedStore), "check_store first"
    return StoreSpec(store.host_access(benchmark_id))
