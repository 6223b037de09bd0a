"""The store guard: a deadline on every call, a circuit that opens on the first failure and a
background check that closes it. The faults are injected as calls that block or raise; the
stores behind real servers are exercised in ``integrations/postgres/tests/test_store_faults.py``."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._step import step_wait
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import InvalidInputError, StoreBusyError, StoreError, StoreUnavailableError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.facts.locks import holding
from ctxplugin.facts.static import StaticEmbedding
from ctxplugin.guard import (
    GuardedCASStore,
    GuardedFactStore,
    GuardedWriteLock,
    StoreGuard,
    run_with_deadline,
    step_budget,
    unwrap,
)

TIMEOUT = 0.3
BOUND = TIMEOUT + 1.0


class Switch:
    """A server that is up, refusing (raises at once) or frozen (blocks until released)."""

    def __init__(self) -> None:
        self.state = "up"
        self.released = threading.Event()
        self.checks = 0

    def __call__(self) -> str:
        self.checks += 1
        if self.state == "refusing":
            raise StoreUnavailableError("connection refused")
        if self.state == "frozen":
            self.released.wait(30)
        return "ok"


def test_a_call_that_blocks_is_cut_at_the_deadline() -> None:
    released = threading.Event()
    start = time.monotonic()
    with pytest.raises(StoreUnavailableError, match=r"no answer within 0\.3s"):
        run_with_deadline(lambda: released.wait(30), TIMEOUT, "frozen call")
    assert time.monotonic() - start <= BOUND
    released.set()
    assert run_with_deadline(lambda: 7, TIMEOUT, "quick call") == 7
    with pytest.raises(KeyError):  # what the call raises reaches the caller unchanged
        run_with_deadline(lambda: dict[str, int]()["x"], TIMEOUT, "failing call")


def test_one_failure_opens_the_circuit_and_later_calls_fail_fast_naming_the_cause() -> None:
    server = Switch()
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=60, probe=server)
    server.state = "frozen"
    with pytest.raises(StoreUnavailableError):
        guard.call("put", server)
    assert guard.is_open
    calls_before = server.checks
    start = time.monotonic()
    for _ in range(20):
        with pytest.raises(StoreUnavailableError, match=r"Test server skipped for get: .*no answer within 0\.3s"):
            guard.call("get", server)
    assert server.checks == calls_before  # nothing reached the server
    assert time.monotonic() - start < TIMEOUT  # twenty refusals cost less than one timeout
    server.released.set()


def test_the_background_check_closes_the_circuit_when_the_server_is_back() -> None:
    server = Switch()
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=0.05, probe=server)
    server.state = "refusing"
    with pytest.raises(StoreUnavailableError):
        guard.call("put", server)
    time.sleep(0.3)
    assert guard.is_open and server.checks > 2  # checked in the background, still refused
    server.state = "up"
    deadline = time.monotonic() + 5
    while guard.is_open and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not guard.is_open
    assert guard.call("put", server) == "ok"


def test_without_a_check_one_call_after_retry_after_tries_the_server() -> None:
    server = Switch()
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=0.1)
    server.state = "refusing"
    with pytest.raises(StoreUnavailableError):
        guard.call("put", server)
    with pytest.raises(StoreUnavailableError, match="skipped"):
        guard.call("put", server)
    time.sleep(0.15)
    server.state = "up"
    assert guard.call("put", server) == "ok" and not guard.is_open


def test_errors_that_are_not_outages_leave_the_circuit_closed() -> None:
    guard = StoreGuard("Test server", timeout=TIMEOUT)

    def busy() -> None:
        raise StoreBusyError("another writer holds the slot")

    def bad() -> None:
        raise StoreError("constraint violated")

    for call in (busy, bad):
        with pytest.raises(StoreError):
            guard.call("put", call)
    assert not guard.is_open


def test_settings_are_checked() -> None:
    with pytest.raises(InvalidInputError):
        StoreGuard("x", timeout=0)
    with pytest.raises(ValueError, match="stores"):
        ContextConfig(stores={"timeout": -1})


def test_a_frozen_store_degrades_the_step_and_the_engine_recovers(tmp_path: Path) -> None:
    """The engine with a CAS whose server freezes: the step is bounded, keeps the original, and
    stores again once the server is back; refs from before the outage still expand."""
    server = Switch()
    guard = StoreGuard("CAS server", timeout=TIMEOUT, retry_after=0.05, probe=server)
    cas = SQLiteCASStore(tmp_path / "cas.sqlite3")

    real_put = cas.put

    def put(*args: object, **kwargs: object) -> bool:
        server()
        return real_put(*args, **kwargs)  # type: ignore[arg-type]

    cas.put = put  # type: ignore[method-assign]  # the fault: a server that stops answering
    engine = ContextEngine(ContextConfig(facts={"enabled": False}), cas=GuardedCASStore(cas, guard))
    scope = Scope(session_id="s")
    output = "\n".join(f"line {i}: request {i * 7} took {i * 3}ms on worker-{i % 5}" for i in range(200))

    def capture(n: int) -> tuple[ToolMessage, float, list[str]]:
        start = time.monotonic()
        message, report = engine.capture_with_report(ToolMessage(output + str(n), tool_call_id=f"c{n}", name="logs"), scope)
        return message, time.monotonic() - start, report.warnings

    before, _, warnings = capture(1)
    assert "ref" in before.additional_kwargs["ctxplugin"] and not warnings
    server.state = "frozen"
    for n in (2, 3):
        degraded, took, warnings = capture(n)
        assert took <= BOUND and degraded.content == output + str(n)
        assert warnings and "CAS unavailable" in warnings[0]
    server.state = "up"
    server.released.set()
    deadline = time.monotonic() + 5
    while guard.is_open and time.monotonic() < deadline:
        time.sleep(0.02)
    after, _, warnings = capture(4)
    assert "ref" in after.additional_kwargs["ctxplugin"] and not warnings
    ref = before.additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=scope) == output + "1"
    assert unwrap(engine.cas) is cas


def test_facts_stated_while_the_store_is_out_are_read_once_it_is_back() -> None:
    server = Switch()
    guard = StoreGuard("Facts server", timeout=TIMEOUT, retry_after=0.05, probe=server)
    store = MemoryFactStore()
    real_add = store.add

    def add(facts: object) -> None:
        server()
        real_add(facts)  # type: ignore[arg-type]

    store.add = add  # type: ignore[method-assign]  # the fault
    ledger = FactsLedger(GuardedFactStore(store, guard))
    engine = ContextEngine(ContextConfig(), facts=ledger)
    # the embedding's first load (about half a second in a fresh process) is over this test's
    # 0.3 s timeout: done first, as in any process that has already served a call
    StaticEmbedding().embed_documents(["warm"])
    scope = Scope(session_id="s")
    server.state = "refusing"
    messages: list[BaseMessage] = [HumanMessage("The deploy target is eu-west-3.", id="h1")]
    report = engine.prepare(messages, scope=scope).report
    assert any("facts store unavailable" in w for w in report.warnings)
    server.state = "up"
    deadline = time.monotonic() + 5
    while guard.is_open and time.monotonic() < deadline:
        time.sleep(0.02)
    messages += [AIMessage("Noted.", id="a1"), HumanMessage("Where do we deploy?", id="h2")]
    report = engine.prepare(messages, scope=scope).report
    assert not report.warnings
    current = ledger.current("deploy_target", scope=scope)
    assert current is not None and "eu-west-3" in current.text


def test_a_write_lock_that_cannot_be_had_in_time_is_released_when_it_comes() -> None:
    entered: list[str] = []
    exited: list[str] = []
    gate = threading.Event()

    class SlowLock:
        @contextmanager
        def hold(self, name: str) -> Iterator[None]:
            gate.wait(30)  # the fault: the lock service answers late
            entered.append(name)
            try:
                yield
            finally:
                exited.append(name)

    guard = StoreGuard("Lock server", timeout=TIMEOUT, retry_after=60)
    lock = GuardedWriteLock(SlowLock(), guard)
    with pytest.raises(StoreUnavailableError), lock.hold("slot"):
        pass
    gate.set()
    deadline = time.monotonic() + 5
    while not exited and time.monotonic() < deadline:
        time.sleep(0.02)
    assert entered == ["slot"] and exited == ["slot"]  # taken late, then let go at once


def test_a_held_write_lock_is_released_even_when_the_circuit_opened_meanwhile() -> None:
    released: list[str] = []

    class Lock:
        @contextmanager
        def hold(self, name: str) -> Iterator[None]:
            try:
                yield
            finally:
                released.append(name)

    guard = StoreGuard("Lock server", timeout=TIMEOUT, retry_after=60)
    with GuardedWriteLock(Lock(), guard).hold("slot"):
        guard.trip("another call of the step timed out")  # the server failed during the write
    assert released == ["slot"]


def test_a_step_waits_for_its_stores_once_and_the_circuit_opens() -> None:
    server = Switch()
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=60, probe=server)
    quick = StoreGuard("Other server", timeout=TIMEOUT, retry_after=60)
    server.state = "frozen"
    start = time.monotonic()
    with step_budget(TIMEOUT):
        quick.call("get", lambda: time.sleep(0.01))  # a call that answers uses a little of the budget
        for what in ("put", "get", "find"):
            with pytest.raises(StoreUnavailableError):
                guard.call(what, server)
        with pytest.raises(StoreUnavailableError, match="used up"):
            quick.call("get", lambda: None)  # another server: the step has no time left for it
    assert time.monotonic() - start <= BOUND
    assert guard.is_open and not quick.is_open
    server.released.set()


def test_the_step_s_own_work_before_its_first_store_call_leaves_the_store_time_whole() -> None:
    # summarizing a 50 MB output took longer than stores.timeout: its put was then "skipped:
    # this step's store time is used up" and the output passed through whole, the server fine
    quick = StoreGuard("Quick server", timeout=TIMEOUT, retry_after=60)
    with step_budget(TIMEOUT):
        time.sleep(TIMEOUT * 1.5)  # the step's own work: no store was waited for
        assert step_wait(TIMEOUT) > TIMEOUT / 2  # 0 before: the work had used the budget up
        assert quick.call("put", lambda: "stored") == "stored"
        with step_budget(TIMEOUT * 10):  # an inner budget still never extends the outer one
            assert step_wait(TIMEOUT * 10) <= TIMEOUT
    assert not quick.is_open


def test_the_step_s_own_work_between_its_store_calls_leaves_the_store_time_whole() -> None:
    # a Postgres deployment: the CAS put started the clock, then reading facts from a long
    # conversation took longer than stores.timeout, and the facts write lock was "skipped: this
    # step's store time is used up" on every step, the server fine: no fact was ever recorded
    quick = StoreGuard("Quick server", timeout=TIMEOUT, retry_after=60)
    with step_budget(TIMEOUT):
        assert quick.call("put", lambda: "stored") == "stored"
        time.sleep(TIMEOUT * 1.5)  # the step's own work: no store was waited for
        assert step_wait(TIMEOUT) > TIMEOUT / 2
        assert quick.call("lock", lambda: "taken") == "taken"
    assert not quick.is_open


def test_the_time_a_step_waited_for_its_stores_is_counted_across_its_own_work() -> None:
    server = Switch()
    guard = StoreGuard("Test server", timeout=TIMEOUT * 10, retry_after=60, probe=server)
    quick = StoreGuard("Other server", timeout=TIMEOUT * 10, retry_after=60)
    server.state = "frozen"
    with step_budget(TIMEOUT):
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            guard.call("put", server)  # waits the step's whole store time
        time.sleep(TIMEOUT / 2)  # own work
        with pytest.raises(StoreUnavailableError, match="used up"):
            quick.call("get", lambda: None)
    server.released.set()


def test_a_call_cut_short_by_its_step_says_so_rather_than_naming_a_shorter_store_timeout() -> None:
    # was "Postgres facts write lock: no answer within 0.0s (stores.timeout)", stores.timeout 5 s
    server = Switch()
    server.state = "frozen"
    guard = StoreGuard("Test server", timeout=TIMEOUT * 10, retry_after=60)
    with step_budget(TIMEOUT), pytest.raises(StoreUnavailableError) as raised:
        guard.call("get", server)
    assert re.search(r"no answer within 0\.\ds \(what was left of this step's store time, stores\.timeout\)", str(raised.value))
    server.released.set()


def test_the_first_call_of_a_step_given_the_whole_store_timeout_names_it() -> None:
    # the step's store time and the guard's timeout are both stores.timeout, as in an engine:
    # the first call was said cut short by "what was left of this step's store time"
    server = Switch()
    server.state = "frozen"
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=60)
    with step_budget(TIMEOUT), pytest.raises(StoreUnavailableError) as raised:
        guard.call("get", server)
    assert str(raised.value).endswith(f"no answer within {TIMEOUT:.1f}s (stores.timeout)")
    server.released.set()


def test_stop_waits_for_hung_calls_once_in_all_not_once_per_call(mocker: MockerFixture) -> None:
    # five calls left hanging on a frozen server: close() waits for them within one deadline
    released = threading.Event()
    guard = StoreGuard("frozen", timeout=0.05, retry_after=0.01)  # no probe: a call after retry_after checks
    for _ in range(5):
        time.sleep(guard.retry_interval * 1.5)  # the pause doubles each time the call let through fails
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            guard.call("read", released.wait)
    clock = [1000.0]
    waited: list[float] = []

    def join(thread: threading.Thread, timeout: float | None = None) -> None:
        waited.append(timeout or 0.0)
        clock[0] += timeout or 0.0  # the thread does not end while joined

    mocker.patch("ctxplugin._store_guard.time.monotonic", side_effect=lambda: clock[0])
    mocker.patch.object(threading.Thread, "join", autospec=True, side_effect=join)
    try:
        guard.stop()
    finally:
        mocker.stopall()
        released.set()
    assert len(waited) == 5, "each hung call is waited for"
    assert sum(waited) <= guard.timeout + guard.retry_after + 1e-6


def test_a_guarded_cas_store_revokes_when_the_store_can() -> None:
    from ctxplugin.cas import MemoryCASStore, RefRevocation
    from ctxplugin.guard import GuardedCASStore, StoreGuard
    from ctxplugin.testing.cas_contract import A, make_item

    inner = MemoryCASStore()
    store = GuardedCASStore(inner, StoreGuard("memory", timeout=5.0))
    item = make_item("masked later")
    store.put(item, A)
    assert isinstance(store, RefRevocation)
    assert store.revoke(item.ref_id, A) is True
    assert not inner.exists(item.ref_id, A)


class ManyLock:
    """A write lock that can take several names at once, recording what it took and released."""

    def __init__(self) -> None:
        self.taken: list[tuple[str, ...]] = []
        self.released: list[tuple[str, ...]] = []

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        with self.hold_all([name]):
            yield

    @contextmanager
    def hold_all(self, names: Sequence[str]) -> Iterator[None]:
        self.taken.append(tuple(names))
        try:
            yield
        finally:
            self.released.append(tuple(names))


def test_the_slots_of_a_session_are_held_at_once_through_the_guard() -> None:
    inner = ManyLock()
    lock = GuardedWriteLock(inner, StoreGuard("Lock server", timeout=TIMEOUT, retry_after=60))
    with holding(lock, ["b", "a", "c", "a"]), lock.hold("b"):  # "b" held already: passes through
        pass
    assert inner.taken == inner.released == [("a", "b", "c")]


def test_a_guarded_lock_with_its_circuit_open_takes_no_slot_of_a_session() -> None:
    inner = ManyLock()
    guard = StoreGuard("Lock server", timeout=TIMEOUT, retry_after=60)
    guard.trip("the lock server timed out")
    with pytest.raises(StoreUnavailableError), holding(GuardedWriteLock(inner, guard), ["a", "b"]):
        pass
    assert inner.taken == []


def test_a_lock_holding_one_name_at_a_time_takes_a_session_s_slots_in_order() -> None:
    taken: list[str] = []

    class OneLock:
        @contextmanager
        def hold(self, name: str) -> Iterator[None]:
            taken.append(name)
            yield

    with holding(GuardedWriteLock(OneLock(), StoreGuard("Lock server", timeout=TIMEOUT, retry_after=60)), ["b", "a"]):
        pass
    assert taken == ["a", "b"]
