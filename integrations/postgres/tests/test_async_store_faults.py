"""The async CAS store on a server that stops answering (a stopped process, a stalled network):
each call returns or raises ``StoreUnavailableError`` within the store's timeout, a task
cancelled while it waits is released at once, and the store works again when the server does."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from ctxplugin_postgres import AsyncPostgresCASStore

from ctxplugin import Scope
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.testing.cas_contract import make_item

pytestmark = pytest.mark.postgres

S = Scope(session_id="async-faults")
TIMEOUT = 1.0
LONG_WAIT = 30.0
"""Far longer than any bounded call takes: a call still waiting then has no bound."""


async def test_a_call_to_a_frozen_server_raises_within_the_timeout(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    item = make_item("the deploy target is eu-west-3\n" * 40)
    async with await AsyncPostgresCASStore.from_dsn(proxy.via(pg_dsn), schema=pg_schema, timeout=TIMEOUT) as store:
        await store.put(item, S)
        proxy.freeze()
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            await asyncio.wait_for(store.get(item.ref_id, S), LONG_WAIT)
        proxy.heal()
        assert (await store.get(item.ref_id, S)).content == item.content


async def test_a_task_cancelled_while_a_call_waits_is_released_and_the_store_goes_on(
    pg_dsn: str, pg_schema: str, proxy: Any
) -> None:
    item = make_item("the release deadline is Friday 5pm\n" * 40)
    async with await AsyncPostgresCASStore.from_dsn(proxy.via(pg_dsn), schema=pg_schema, timeout=LONG_WAIT) as store:
        await store.put(item, S)
        proxy.freeze()
        waiting = asyncio.create_task(store.get(item.ref_id, S))
        await asyncio.sleep(0.2)
        waiting.cancel()
        # released by the cancellation, not after the driver gave up on the frozen connection
        done, _ = await asyncio.wait({waiting}, timeout=LONG_WAIT / 3)
        assert waiting in done and waiting.cancelled()
        proxy.heal()
        assert (await store.get(item.ref_id, S)).content == item.content
        assert await store.exists(item.ref_id, S)


async def test_a_revoke_on_a_frozen_server_raises_within_the_timeout(pg_dsn: str, pg_schema: str, proxy: Any) -> None:
    from ctxplugin_postgres import PostgresCASStore

    item = make_item("email: jane.doe@corp-mail.com\n" * 40)
    async with await AsyncPostgresCASStore.from_dsn(proxy.via(pg_dsn), schema=pg_schema, timeout=TIMEOUT) as store:
        await store.put(item, S)
        proxy.freeze()
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            await asyncio.wait_for(store.revoke(item.ref_id, S), LONG_WAIT)
        with (
            PostgresCASStore.from_dsn(proxy.via(pg_dsn), schema=pg_schema, timeout=TIMEOUT) as sync_store,
            pytest.raises(StoreUnavailableError),
        ):
            await asyncio.wait_for(asyncio.to_thread(sync_store.revoke, item.ref_id, S), LONG_WAIT)
        proxy.heal()
        await store.revoke(item.ref_id, S)  # (a call left waiting may have revoked it already)
        assert not await store.exists(item.ref_id, S)
