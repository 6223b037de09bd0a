"""The store contract, run against the in-memory and the SQLite store."""

from __future__ import annotations

from pathlib import Path

from ctxplugin.cas import CASStore, MemoryCASStore, SQLiteCASStore
from ctxplugin.testing.cas_contract import CASStoreContract, FakeClock


class TestMemoryCASStore(CASStoreContract):
    def make_store(self, tmp_path: Path, clock: FakeClock) -> CASStore:
        return MemoryCASStore(clock=clock)


class TestSQLiteCASStore(CASStoreContract):
    def make_store(self, tmp_path: Path, clock: FakeClock) -> CASStore:
        return SQLiteCASStore(tmp_path / "cas.sqlite3", clock=clock)


def test_every_shipped_store_can_revoke(tmp_path: Path) -> None:
    from ctxplugin.cas import RefRevocation, SQLiteCASStore

    for store in (MemoryCASStore(), SQLiteCASStore(tmp_path / "cas.sqlite3")):
        assert isinstance(store, RefRevocation), type(store).__name__
        store.close()
