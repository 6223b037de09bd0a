"""The async CAS store behind a :class:`~ctxplugin.guard.StoreGuard`: a server that is out
costs the first call its timeout and every later one nothing (it fails at once, naming the
cause), as with the sync stores ``connect()`` guards; the store works again once the guard's
check finds the server back. One guard may serve the sync and async stores of one server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ctxplugin_postgres import AsyncPostgresCASStore, PostgresCASStore, ping

from ctxplugin import Scope
from ctxplugin.errors import InvalidInputError, StoreUnavailableError
from ctxplugin.guard import GuardedCASStore, StoreGuard
from ctxplugin.testing.cas_contract import make_item

pytestmark = pytest.mark.postgres

S = Scope(session_id="async-guard")
TIMEOUT = 1.0
LONG_WAIT = 60.0
"""Far longer than a call may take: a second call that waited its timeout again ends well
within it, so only the error's text tells a skipped call from a tried one."""


def guard_for(dsn: str, *, retry_after: float = 0.05) -> StoreGuard:
    return StoreGuard("Postgres", timeout=TIMEOUT, retry_after=retry_after, probe=lambda: ping(dsn, TIMEOUT))


async def back(store: AsyncPostgresCASStore, ref_id: str) -> str:
    """The content of ``ref_id`` once the store answers again (the guard's check runs every
    ``retry_after``; calls before it passed are refused)."""
    for _ in range(int(LONG_WAIT / 0.05)):
        try:
            return (await store.get(ref_id, S)).content
        except StoreUnavailableError:
            await asyncio.sleep(0.05)
    raise AssertionError("the store did not answer again")


async def test_a_frozen_server_costs_one_timeout_then_calls_fail_at_once(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    dsn = proxy.via(pg_dsn)
    item = make_item("the deploy target is eu-west-3\n" * 40)
    guard = guard_for(dsn)
    async with await AsyncPostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=LONG_WAIT, guard=guard) as store:
        await store.put(item, S)
        proxy.freeze()
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
        assert guard.is_open
        for call in (store.get(item.ref_id, S), store.exists(item.ref_id, S), store.put(item, S)):
            with pytest.raises(StoreUnavailableError, match="skipped"):
                await asyncio.wait_for(call, LONG_WAIT)
        proxy.heal()
        assert await back(store, item.ref_id) == item.content
        assert not guard.is_open
        guard.stop()


async def test_a_refused_server_opens_the_circuit_of_the_async_store(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    dsn = proxy.via(pg_dsn)
    item = make_item("the on-call rota is in the wiki\n" * 40)
    guard = guard_for(dsn, retry_after=60)
    async with await AsyncPostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=TIMEOUT, guard=guard) as store:
        await store.put(item, S)
        proxy.refuse()
        with pytest.raises(StoreUnavailableError) as first:
            await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
        assert "skipped" not in str(first.value)
        with pytest.raises(StoreUnavailableError, match="skipped for CAS get"):
            await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
        guard.stop()


async def test_one_guard_serves_the_sync_and_async_stores_of_a_server(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    dsn = proxy.via(pg_dsn)
    item = make_item("the budget owner is Dana\n" * 40)
    guard = guard_for(dsn, retry_after=60)
    with PostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=TIMEOUT) as plain:
        sync_store = GuardedCASStore(plain, guard)
        async with await AsyncPostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=LONG_WAIT, guard=guard) as store:
            await store.put(item, S)
            proxy.freeze()
            with pytest.raises(StoreUnavailableError, match="no answer within"):
                await asyncio.to_thread(sync_store.get, item.ref_id, S)
            # the sync store's failure spares the async one its wait
            with pytest.raises(StoreUnavailableError, match="skipped for CAS get"):
                await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
            proxy.heal()
        guard.stop()


async def test_the_sync_wrapper_refuses_the_async_store_instead_of_guarding_nothing(pg_dsn: str, pg_schema: str) -> None:
    # wrapped, its calls would hand back coroutines at once (the circuit seeing each as answered)
    # and be awaited outside the guard, with no deadline and no circuit
    guard = guard_for(pg_dsn, retry_after=60)
    async with await AsyncPostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=TIMEOUT) as store:
        with pytest.raises(InvalidInputError, match="guard="):
            GuardedCASStore(store, guard)
    guard.stop()


def test_an_engine_refuses_an_async_store_it_would_call_without_await(pg_dsn: str) -> None:
    """Given as ``cas``, the async store's calls would hand back coroutines never awaited: captures
    reported a ref for an output that was never stored."""
    from ctxplugin import ContextEngine

    async def given() -> None:
        store = await AsyncPostgresCASStore.from_dsn(pg_dsn)
        try:
            with pytest.raises(InvalidInputError, match=r"ContextEngine\(cas=\.\.\.\) takes a store with sync methods"):
                ContextEngine(cas=store)  # type: ignore[arg-type]
        finally:
            await store.close()

    asyncio.run(given())


async def test_a_call_its_caller_stopped_waiting_for_still_opens_the_circuit(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    """The caller's own timeout (``asyncio.wait_for``) is far shorter than the guard's: the call
    it gave up on goes on, and once it outlives the guard's timeout the circuit opens, so the
    next calls fail at once instead of each waiting for the frozen server again."""
    dsn = proxy.via(pg_dsn)
    item = make_item("the release train leaves on Thursdays\n" * 40)
    guard = guard_for(dsn, retry_after=60)
    async with await AsyncPostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=LONG_WAIT, guard=guard) as store:
        await store.put(item, S)
        proxy.freeze()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(store.get(item.ref_id, S), TIMEOUT / 10)
        for _ in range(int(LONG_WAIT / 0.05)):
            if guard.is_open:
                break
            await asyncio.sleep(0.05)
        assert guard.is_open and "no answer within" in (guard.cause or "")
        with pytest.raises(StoreUnavailableError, match="skipped for CAS get"):
            await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
        proxy.heal()
        guard.stop()
