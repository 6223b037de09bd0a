"""A Postgres that refuses connections (a wrong port, a server not started yet), with stores
built by hand: a call waits the store's ``timeout`` for a connection once, not once per
attempt. Waiting out the pool is no dropped connection, which a call does run again."""

from __future__ import annotations

import time

import pytest
from ctxplugin_postgres import AsyncPostgresCASStore, PostgresCASStore
from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.testing.cas_contract import make_item
from ctxplugin.testing.chroma_server import free_port

pytestmark = pytest.mark.postgres

TIMEOUT = 1.0
S = Scope(session_id="refused")


def _refused() -> str:
    return f"postgresql://postgres@127.0.0.1:{free_port()}/test"


def test_a_call_to_a_refusing_server_waits_its_timeout_once() -> None:
    store = PostgresCASStore.from_dsn(_refused(), timeout=TIMEOUT)
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError, match="no connection became available"):
            store.exists("ref:t:0123456789abcdef", S)
        waited = time.monotonic() - started
    finally:
        store.close()
    assert waited < TIMEOUT + 0.9, f"one call waited {waited:.1f}s for a {TIMEOUT}s timeout"


def test_a_capture_on_a_refusing_server_passes_the_output_through_within_its_timeout() -> None:
    engine = ContextEngine(config=ContextConfig(facts={"enabled": False}), cas=PostgresCASStore.from_dsn(_refused(), timeout=TIMEOUT))
    output = "\n".join(f"order #W{1000 + i} shipped to Lyon" for i in range(200))
    try:
        started = time.monotonic()
        compact = engine.capture_tool_result(ToolMessage(output, tool_call_id="c1", name="orders"), scope=S)
        waited = time.monotonic() - started
    finally:
        engine.close()
    assert compact.content == output
    assert "no connection became available" in compact.additional_kwargs["ctxplugin"]["warning"]
    assert waited < TIMEOUT + 0.9, f"the capture waited {waited:.1f}s for a {TIMEOUT}s timeout"


async def test_an_async_call_to_a_refusing_server_waits_its_timeout_once() -> None:
    store = await AsyncPostgresCASStore.from_dsn(_refused(), timeout=TIMEOUT)
    item = make_item("order #W1001 shipped to Lyon")
    try:
        started = time.monotonic()
        with pytest.raises(StoreUnavailableError):
            await store.put(item, S)
        waited = time.monotonic() - started
    finally:
        await store.close()
    assert waited < TIMEOUT + 0.9, f"one call waited {waited:.1f}s for a {TIMEOUT}s timeout"
