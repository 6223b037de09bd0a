"""``StoreGuard.acall``: the async calls of a server go through the same circuit as its sync
ones. A call that does not end in time is cut and opens the circuit; later calls fail at once;
a call cancelled by its caller says nothing of the server and leaves no call stuck "trying"."""

from __future__ import annotations

import asyncio

import pytest

from ctxplugin.errors import StoreUnavailableError
from ctxplugin.guard import StoreGuard

TIMEOUT = 0.3


async def frozen() -> str:
    await asyncio.Event().wait()  # a server that never answers
    raise AssertionError("unreachable")


async def answers() -> str:
    return "ok"


async def test_a_frozen_async_call_opens_the_circuit_for_sync_and_async_calls() -> None:
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=60)
    with pytest.raises(StoreUnavailableError, match=r"Test server get: no answer within 0\.3s"):
        await guard.acall("get", frozen)
    assert guard.is_open
    ran: list[str] = []

    async def counted() -> str:
        ran.append("async")
        return "ok"

    with pytest.raises(StoreUnavailableError, match="Test server skipped for get"):
        await guard.acall("get", counted)
    with pytest.raises(StoreUnavailableError, match="Test server skipped for put"):
        guard.call("put", lambda: ran.append("sync"))
    assert ran == []  # nothing reached the server


async def test_a_cancelled_trial_leaves_the_next_call_to_try_the_server() -> None:
    guard = StoreGuard("Test server", timeout=30.0, retry_after=0.01)  # no check: the first call after the pause tries
    guard.trip("refused at start")
    await asyncio.sleep(0.05)
    trial = asyncio.ensure_future(guard.acall("get", frozen))
    await asyncio.sleep(0.05)
    trial.cancel()
    with pytest.raises(asyncio.CancelledError):
        await trial
    assert await guard.acall("get", answers) == "ok"
    assert not guard.is_open
