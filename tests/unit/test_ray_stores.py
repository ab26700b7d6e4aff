"""Which stores Ray hosts may write to, checked before anything runs (no Ray needed)."""

from __future__ import annotations

from pathlib import Path

import pytest

import corral
from corral.executor._stores import check_store


def test_a_read_only_store_is_refused_naming_it(tmp_path: Path) -> None:
    # The password stays out of the message: the store's own name masks it.
    postgres = corral.PostgresStore("postgresql://u:secret@127.0.0.1:5432/db", read_only=True)
    sqlite = corral.SQLiteStore(tmp_path / "store.db", read_only=True)
    for store in (postgres, sqlite):
        with pytest.raises(corral.ConfigError, match="read-only: Ray hosts cannot write") as e:
            check_store(store)
        assert repr(store) in str(e.value) and "secret" not in str(e.value)
    check_store(corral.PostgresStore("postgresql://u@127.0.0.1:5432/db"))


def test_a_store_hosts_cannot_open_is_refused() -> None:
    with pytest.raises(corral.ConfigError, match=r"Ray hosts cannot write to .*MemoryStore"):
        check_store(corral.MemoryStore())
