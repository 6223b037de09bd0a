"""A caller that gives up on a store call before the guard's own timeout (a step whose store
time is nearly used up, a task cancelled by its caller) still tells the guard about the server:
a call that outlives the guard's timeout opens the circuit, however its caller stopped waiting,
so the next steps fail at once instead of each waiting for the server again."""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pytest_mock import MockerFixture

from ctxplugin import Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.guard import GuardedCASStore, StoreGuard, step_budget
from ctxplugin.testing.cas_contract import make_item

TIMEOUT = 0.5
CALLER = TIMEOUT / 10  # the caller's own time: far shorter than the guard's
S = Scope(session_id="s1")
ITEM = make_item("the deploy target is eu-west-3\n" * 40)


def until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 30  # only against a hang
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.01)


class Slow:
    """The store's ``get`` blocks until released (a server that stopped answering)."""

    def __init__(self, real: Callable[..., Any]) -> None:
        self.real = real
        self.released = threading.Event()
        self.calls = 0

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        self.released.wait(30)
        return self.real(*args, **kwargs)


@pytest.fixture
def guarded(tmp_path: Path, mocker: MockerFixture, request: pytest.FixtureRequest) -> Iterator[tuple[GuardedCASStore, StoreGuard, Slow]]:
    inner = SQLiteCASStore(tmp_path / "cas.sqlite3")
    guard = StoreGuard("Test server", timeout=getattr(request, "param", TIMEOUT), retry_after=60)
    store = GuardedCASStore(inner, guard)
    store.put(ITEM, S)
    slow = Slow(inner.get)
    mocker.patch.object(inner, "get", side_effect=slow)
    yield store, guard, slow
    slow.released.set()
    guard.stop()
    inner.close()


def test_a_call_the_step_gave_up_on_opens_the_circuit_once_it_outlives_the_timeout(guarded: tuple[GuardedCASStore, StoreGuard, Slow]) -> None:
    store, guard, slow = guarded
    with step_budget(CALLER), pytest.raises(StoreUnavailableError, match="no answer within"):
        store.get(ITEM.ref_id, S)
    until(lambda: guard.is_open, "opened")
    assert "no answer within 0.5s" in (guard.cause or "")

    with step_budget(CALLER), pytest.raises(StoreUnavailableError, match="skipped"):
        store.get(ITEM.ref_id, S)  # fails at once: the server is not waited for again
    assert slow.calls == 1


@pytest.mark.parametrize("guarded", [30.0], indirect=True)  # answered long before the guard's timeout, however slow the machine
def test_a_call_given_up_on_that_answers_in_time_leaves_the_circuit_closed(guarded: tuple[GuardedCASStore, StoreGuard, Slow]) -> None:
    store, guard, slow = guarded
    with step_budget(CALLER), pytest.raises(StoreUnavailableError, match="no answer within"):
        store.get(ITEM.ref_id, S)
    slow.released.set()  # the server answers, late for the step but within the guard's timeout
    guard.stop()  # waits for the call and for what watches it (past the guard's timeout)
    assert not guard.is_open
    assert store.get(ITEM.ref_id, S).content == ITEM.content


async def test_an_async_call_whose_caller_stopped_waiting_opens_the_circuit_once_it_outlives_the_timeout() -> None:
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=60)
    frozen = asyncio.Event()
    calls: list[str] = []

    async def get() -> str:
        calls.append("get")
        await frozen.wait()
        return "ok"

    with pytest.raises(TimeoutError):
        await asyncio.wait_for(guard.acall("get", get), CALLER)
    for _ in range(3000):  # only against a hang
        if guard.is_open:
            break
        await asyncio.sleep(0.01)
    assert guard.is_open and "no answer within 0.5s" in (guard.cause or "")
    with pytest.raises(StoreUnavailableError, match="skipped"):
        await guard.acall("get", get)
    assert calls == ["get"]


async def test_an_async_call_given_up_on_that_fails_later_leaves_no_unretrieved_error() -> None:
    guard = StoreGuard("Test server", timeout=30, retry_after=60)  # the call ends long before
    loop = asyncio.get_running_loop()
    reported: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: reported.append(context))
    started, fail = asyncio.Event(), asyncio.Event()

    async def get() -> str:
        started.set()
        await fail.wait()
        raise ConnectionResetError("the server dropped the connection")

    caller = asyncio.ensure_future(guard.acall("get", get))
    await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller
    fail.set()
    for _ in range(100):  # the call ends with its error on the next turns of the loop
        await asyncio.sleep(0)
    del caller
    gc.collect()
    for _ in range(10):
        await asyncio.sleep(0)
    loop.set_exception_handler(None)
    assert [c.get("message") for c in reported] == []
    assert not guard.is_open
