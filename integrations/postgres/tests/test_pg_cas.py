"""The Postgres CAS stores: the shared store contract, plus what only a server store has
(many pools on one schema, async twin, migrations on first use, error translation)."""

from __future__ import annotations

import threading
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import AsyncPostgresCASStore, PostgresCASStore, make_async_pool, make_pool
from psycopg import sql
from psycopg.conninfo import make_conninfo
from psycopg_pool import ConnectionPool, PoolTimeout

from ctxplugin.cas import CASStore
from ctxplugin.errors import ConfigError, RefNotFoundError, StoreError, StoreUnavailableError
from ctxplugin.scope import Scope
from ctxplugin.testing.cas_contract import A, B, CASStoreContract, FakeClock, make_item

pytestmark = pytest.mark.postgres


class TestPostgresCASStore(CASStoreContract):
    """The contract every CAS backend passes, on a fresh schema per test."""

    @pytest.fixture(autouse=True)
    def _database(self, pg_dsn: str, pg_schema: str) -> None:
        self.dsn = pg_dsn
        self.schema = pg_schema

    def make_store(self, tmp_path: Path, clock: FakeClock) -> CASStore:
        return PostgresCASStore.from_dsn(self.dsn, schema=self.schema, clock=clock, max_size=8)


def test_two_pools_share_one_schema(pg_dsn: str, pg_schema: str) -> None:
    with (
        PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as first,
        PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as second,
    ):
        item = make_item("written by one process, read by another")
        assert first.put(item, A) is True
        assert second.put(item, A) is False
        assert second.get(item.ref_id, A).content == item.content
        with pytest.raises(RefNotFoundError):
            second.get(item.ref_id, B)
        assert second.stats() == {"contents": 1, "bytes": len(item.content), "grants": 1, "refs": 1}


def test_purge_removes_orphaned_contents_and_refs(pg_dsn: str, pg_schema: str) -> None:
    clock = FakeClock()
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, clock=clock) as store:
        short, shared = make_item("short"), make_item("shared")
        store.put(short, A, ttl_seconds=5)
        store.put(shared, A, ttl_seconds=5)
        store.put(shared, B)
        clock.advance(6)
        assert store.purge_expired() == 2
        assert store.stats() == {"contents": 1, "bytes": len("shared"), "grants": 1, "refs": 1}
        assert store.get(shared.ref_id, B).content == "shared"


def test_concurrent_first_puts_create_one_grant(pg_dsn: str, pg_schema: str) -> None:
    """Sixteen threads race to store the same output for one scope: one creates it."""
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, max_size=16) as store:
        item = make_item("raced " * 300)
        start = threading.Barrier(16)
        results: list[bool] = []
        lock = threading.Lock()

        def put() -> None:
            start.wait()
            created = store.put(item, A)
            with lock:
                results.append(created)

        threads = [threading.Thread(target=put) for _ in range(16)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(results) == [False] * 15 + [True]
        assert store.stats()["grants"] == 1


def test_purge_racing_puts_loses_nothing(pg_dsn: str, pg_schema: str) -> None:
    """Puts of already-expired content while another thread purges: every put is readable."""
    clock = FakeClock()
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, clock=clock, max_size=8) as store:
        items = [make_item(f"cycled {i}") for i in range(30)]
        for item in items:
            store.put(item, A, ttl_seconds=1)
        clock.advance(2)  # all expired: the purge wants their contents and refs
        stop = threading.Event()
        purge_errors: list[BaseException] = []

        def purge() -> None:
            while not stop.is_set():
                try:
                    store.purge_expired()
                except BaseException as exc:  # surfaced below
                    purge_errors.append(exc)
                    return

        sweeper = threading.Thread(target=purge)
        sweeper.start()
        try:
            for item in items:
                assert store.put(item, B) is True
        finally:
            stop.set()
            sweeper.join()
        assert not purge_errors, purge_errors[0]
        for item in items:
            assert store.get(item.ref_id, B).content == item.content


async def test_async_store_shares_tables_with_the_sync_store(pg_dsn: str, pg_schema: str) -> None:
    async with await AsyncPostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as astore:
        item = make_item("written from asyncio")
        assert await astore.put(item, A, visibility="user") is True
        assert await astore.put(item, A, visibility="user") is False
        assert (await astore.get(item.ref_id, Scope(session_id="other", user_id="u1"))).content == item.content
        with pytest.raises(RefNotFoundError):
            await astore.get(item.ref_id, B)
        assert await astore.exists(item.ref_id, A) and not await astore.exists(item.ref_id, B)
        with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as store:
            assert store.get(item.ref_id, A).access_count == 2, "exists() counted nothing"
        assert (await astore.stats())["grants"] == 1
        assert await astore.purge_expired() == 0
    with pytest.raises(StoreError):
        await astore.get(item.ref_id, A)


async def test_async_store_on_a_pool_it_does_not_own(pg_dsn: str, pg_schema: str) -> None:
    pool = make_async_pool(pg_dsn, max_size=2)
    await pool.open()
    try:
        store = AsyncPostgresCASStore(pool, schema=pg_schema)
        item = make_item("pool owned by the caller")
        await store.put(item, A)
        await store.close()
        assert not pool.closed
    finally:
        await pool.close()


def test_schema_is_migrated_on_first_use_only_when_allowed(pg_dsn: str, pg_schema: str, pg_pool: ConnectionPool) -> None:
    strict = PostgresCASStore(pg_pool, schema=pg_schema, auto_migrate=False)
    with pytest.raises(StoreError, match="ctxplugin-postgres migrate"):
        strict.put(make_item("x"), A)
    PostgresCASStore(pg_pool, schema=pg_schema).put(make_item("x"), A)
    assert strict.get(make_item("x").ref_id, A).content == "x"
    strict.close()
    assert not pg_pool.closed  # not owned


def test_a_role_that_may_not_create_the_tables_is_told_the_command(
    pg_dsn: str, pg_schema: str
) -> None:
    role = f"{pg_schema}_app"  # roles belong to the whole server: this test's is dropped after it
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN PASSWORD 'app'").format(sql.Identifier(role)))
    try:
        app_dsn = make_conninfo(pg_dsn, user=role, password="app")
        command = f"ctxplugin-postgres migrate --dsn ... --schema {pg_schema}"
        with (
            PostgresCASStore.from_dsn(app_dsn, schema=pg_schema) as store,
            pytest.raises(StoreError, match=command) as caught,
        ):
            store.put(make_item("x"), A)
        assert isinstance(caught.value.__cause__, psycopg.errors.InsufficientPrivilege)
    finally:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))


@pytest.mark.parametrize("bad", ["Public", "drop table", "", "x" * 64, "1abc"])
def test_bad_schema_names_are_config_errors(pg_dsn: str, bad: str) -> None:
    with pytest.raises(ConfigError):
        PostgresCASStore.from_dsn(pg_dsn, schema=bad)


def test_unreachable_server_is_store_unavailable() -> None:
    pool = make_pool("postgresql://postgres@127.0.0.1:1/none", timeout=0.5)
    try:
        store = PostgresCASStore(pool)
        with pytest.raises(StoreUnavailableError) as caught:
            store.put(make_item("nowhere to go"), A)
        assert isinstance(caught.value.__cause__, PoolTimeout)
    finally:
        pool.close()


def test_backend_errors_are_translated_and_chained(pg_dsn: str, pg_schema: str) -> None:
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as store:
        store.put(make_item("present"), A)
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            conn.execute(f"DROP TABLE {pg_schema}.ctxplugin_cas_grants")
        with pytest.raises(StoreError, match="migrate") as caught:
            store.get(make_item("present").ref_id, A)
        assert isinstance(caught.value.__cause__, psycopg.errors.UndefinedTable)


async def test_async_store_revokes_like_the_sync_store(pg_dsn: str, pg_schema: str) -> None:
    from ctxplugin.cas import RefRevocation
    from ctxplugin.errors import InvalidInputError

    async with await AsyncPostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as astore:
        item, other = make_item("masked after capture: jane@example.com"), make_item("kept")
        await astore.put(item, A)
        await astore.put(item, B)
        await astore.put(other, A)
        assert await astore.revoke(item.ref_id, A) is True
        assert await astore.stats() == {"contents": 2, "bytes": len(item.content) + 4, "grants": 2, "refs": 2}
        assert await astore.revoke(item.ref_id, A) is False
        assert await astore.revoke(item.ref_id, B) is True
        assert await astore.stats() == {"contents": 1, "bytes": 4, "grants": 1, "refs": 1}
        with pytest.raises(InvalidInputError):
            await astore.revoke("ref:x", A)
        with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as store:
            assert isinstance(store, RefRevocation)
            with pytest.raises(RefNotFoundError):
                store.get(item.ref_id, B)
    with pytest.raises(StoreError):
        await astore.revoke(other.ref_id, A)


def test_revoke_racing_puts_of_the_same_output_loses_no_grant(pg_dsn: str, pg_schema: str) -> None:
    """One scope revokes an output while another stores it again and again: the other's grant
    always reads back its content (the revoke never deletes content a put holds)."""
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, max_size=8) as store:
        items = [make_item(f"raced {i}") for i in range(30)]
        for item in items:
            store.put(item, A)
        for item in items:
            worker = threading.Thread(target=store.revoke, args=(item.ref_id, A))
            worker.start()
            store.put(item, B)
            worker.join()
            assert store.get(item.ref_id, B).content == item.content
        assert store.stats()["grants"] == len(items)
