"""A Postgres server that takes no writes (a standby promoted late, a database set read only
for maintenance): new outputs pass through, and the stored ones are still read back. The fault
is real: the reading store's DSN sets ``default_transaction_read_only``."""

from __future__ import annotations

import asyncio

import psycopg
import pytest
from ctxplugin_postgres import AsyncPostgresCASStore, PostgresCASStore, migrate
from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import RefNotFoundError
from ctxplugin.testing.cas_contract import make_item

pytestmark = pytest.mark.postgres

SCOPE = Scope(session_id="s1")
OUTPUT = "\n".join(f"issue #{n}: crash in parser.py line {n * 7} (reported by user{n})" for n in range(120))


def _read_only(dsn: str) -> str:
    return psycopg.conninfo.make_conninfo(dsn, options="-c default_transaction_read_only=on")


def test_a_read_only_server_passes_new_outputs_through_and_reads_stored_ones(pg_dsn: str, pg_schema: str) -> None:
    migrate(pg_dsn, schema=pg_schema)
    writer = PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=2.0)
    item = make_item(OUTPUT)
    writer.put(item, SCOPE)
    store = PostgresCASStore.from_dsn(_read_only(pg_dsn), schema=pg_schema, timeout=2.0)
    engine = ContextEngine(ContextConfig(), cas=store)
    try:
        compact = engine.capture_tool_result(ToolMessage(OUTPUT + "\nmore", tool_call_id="c1", name="issues"), scope=SCOPE)
        assert compact.content == OUTPUT + "\nmore" and "read-only" in compact.additional_kwargs["ctxplugin"]["warning"]
        assert engine.expand_ref(item.ref_id, scope=SCOPE) == OUTPUT
        with pytest.raises(RefNotFoundError):
            store.get(make_item("never stored").ref_id, SCOPE)
        assert writer.get(item.ref_id, SCOPE).access_count == 1  # the reads on the read-only server were not counted
    finally:
        store.close()
        writer.close()


def test_the_async_store_reads_stored_outputs_from_a_read_only_server(pg_dsn: str, pg_schema: str) -> None:
    migrate(pg_dsn, schema=pg_schema)
    writer = PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=2.0)
    item = make_item(OUTPUT)
    writer.put(item, SCOPE)

    async def read() -> str:
        store = await AsyncPostgresCASStore.from_dsn(_read_only(pg_dsn), schema=pg_schema, timeout=2.0)
        try:
            return (await store.get(item.ref_id, SCOPE)).content
        finally:
            await store.close()

    try:
        assert asyncio.run(read()) == OUTPUT
    finally:
        writer.close()
