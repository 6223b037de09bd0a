"""A server that answers its check while its real calls still fail (a table locked by a
migration or ``VACUUM FULL``): after the check passes, one call tries the server and the others
are refused at once; each time that call fails again, the pause before the next check doubles,
up to a cap, and a call that succeeds closes the circuit and resets the pause. The faults are
injected as calls that block or raise; the real lock on Postgres is in
``integrations/postgres/tests/test_pg_table_locked.py``."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from ctxplugin.errors import StoreError, StoreUnavailableError
from ctxplugin.guard import StoreGuard

TIMEOUT = 0.2
RETRY = 0.05


class Locked:
    """A store whose server answers its check, while a call to it blocks until ``released``."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.calls = 0
        self.checks = 0

    def check(self) -> None:
        self.checks += 1

    def call(self) -> str:
        self.calls += 1
        self.released.wait(30)
        return "ok"


def _until(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"never {what}")
        time.sleep(0.01)


def _half_open(guard: StoreGuard) -> None:
    _until(lambda: not guard.is_open, "checked")


def _opened(what: str = "put", *, probed: bool = True) -> tuple[Locked, StoreGuard]:
    """A guard of a locked store (checked by its ``check`` when ``probed``) whose first call,
    ``what``, timed out and opened the circuit."""
    store = Locked()
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=RETRY, probe=store.check if probed else None)
    with pytest.raises(StoreUnavailableError, match="no answer within"):
        guard.call(what, store.call)
    return store, guard


def test_after_the_check_passes_one_call_tries_the_server_and_the_others_fail_fast() -> None:
    store, guard = _opened()
    _half_open(guard)  # the check passed: the server answers, the table is still locked
    tried: list[BaseException] = []

    def trial() -> None:
        try:
            guard.call("put", store.call)
        except StoreUnavailableError as exc:
            tried.append(exc)

    thread = threading.Thread(target=trial)
    thread.start()
    _until(lambda: store.calls == 2, "tried")
    for _ in range(20):  # meanwhile every other call is refused without reaching the store
        with pytest.raises(StoreUnavailableError, match=r"skipped for get: .*trying it"):
            guard.call("get", store.call)
    thread.join()
    assert store.calls == 2 and len(tried) == 1
    assert guard.is_open and guard.retry_interval == 2 * RETRY  # it failed again: a longer pause
    with pytest.raises(StoreUnavailableError, match="skipped for put"):
        guard.call("put", store.call)
    store.released.set()


def test_the_pause_doubles_while_calls_keep_failing_and_resets_once_one_succeeds() -> None:
    store, guard = _opened()
    assert guard.retry_interval == RETRY
    for doubled in (2 * RETRY, 4 * RETRY):
        _half_open(guard)
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            guard.call("put", store.call)
        assert guard.retry_interval == doubled
    store.released.set()  # the lock is let go
    _half_open(guard)
    assert guard.call("put", store.call) == "ok"
    assert guard.retry_interval == RETRY and not guard.is_open
    assert guard.call("get", store.call) == "ok"  # closed: every call goes through again
    assert store.calls == 5


def test_a_server_that_is_out_keeps_its_pause() -> None:
    # refused connections fail the check itself: the pause between checks stays retry_after
    checks: list[int] = []

    def refused() -> None:
        checks.append(1)
        raise StoreUnavailableError("connection refused")

    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=RETRY, probe=refused)
    with pytest.raises(StoreUnavailableError):
        guard.call("put", refused)
    _until(lambda: len(checks) > 4, "checked")
    assert guard.is_open and guard.retry_interval == RETRY
    with pytest.raises(StoreUnavailableError, match=r"refused.*checked again every 0\.05s"):
        guard.call("put", refused)


def test_a_call_that_answers_with_an_error_closes_the_circuit() -> None:
    # the server answered (a constraint, a busy lock): it is up, whatever the call's own fate
    store, guard = _opened()
    _half_open(guard)

    def bad() -> None:
        raise StoreError("constraint violated")

    with pytest.raises(StoreError, match="constraint"):
        guard.call("put", bad)
    assert not guard.is_open and guard.retry_interval == RETRY
    store.released.set()


def test_without_a_check_the_call_after_the_pause_is_the_only_one_tried() -> None:
    store, guard = _opened(probed=False)
    time.sleep(RETRY * 2)
    def trial() -> None:
        with pytest.raises(StoreUnavailableError):
            guard.call("put", store.call)

    thread = threading.Thread(target=trial)
    thread.start()
    _until(lambda: store.calls == 2, "tried")
    with pytest.raises(StoreUnavailableError, match="trying it"):
        guard.call("get", store.call)
    thread.join()
    assert store.calls == 2 and guard.retry_interval == 2 * RETRY
    store.released.set()


def test_a_trial_cut_short_by_the_step_leaves_the_next_call_to_try() -> None:
    store, guard = _opened()
    _half_open(guard)
    with pytest.raises(Interrupted):
        guard.call("put", _interrupted)  # says nothing of the server
    assert guard.retry_interval == RETRY
    store.released.set()
    assert guard.call("put", store.call) == "ok" and not guard.is_open


class Interrupted(BaseException):
    """The caller stopped waiting (as on Ctrl-C)."""


def _interrupted() -> None:
    raise Interrupted


def test_the_circuit_s_pause_is_capped() -> None:
    from ctxplugin._circuit import MAX_RETRY_S, Circuit

    circuit = Circuit(retry_after=1.0)
    now = 100.0
    assert circuit.fail("timeout", now, trial=False)
    for _ in range(12):
        circuit.checked = True
        assert circuit.admit(now, probed=True) is True
        assert circuit.admit(now, probed=True) is None  # one trial at a time
        assert not circuit.fail("timeout", now, trial=True)
    assert circuit.pause == MAX_RETRY_S
    big = Circuit(retry_after=120.0)  # a longer retry_after than the cap is kept as it is
    big.fail("timeout", now, trial=False)
    big.admit(now + 120, probed=False)
    big.fail("timeout", now + 120, trial=True)
    assert big.pause == 120.0


def test_a_call_of_another_kind_that_works_keeps_the_pause_of_the_one_that_still_fails() -> None:
    # one server, several stores: the facts write lock (no table) works while the CAS table is
    # locked; the lock's call closing the circuit must not send the next CAS put back to a short pause
    store, guard = _opened("CAS put")
    _half_open(guard)
    with pytest.raises(StoreUnavailableError):
        guard.call("CAS put", store.call)
    assert guard.retry_interval == 2 * RETRY
    _half_open(guard)
    assert guard.call("facts write lock", lambda: "held") == "held"  # the server answered: closed
    assert not guard.is_open
    with pytest.raises(StoreUnavailableError, match="no answer within"):
        guard.call("CAS put", store.call)  # still locked: as a call tried after a check
    assert guard.is_open and guard.retry_interval == 4 * RETRY
    store.released.set()
    _half_open(guard)
    assert guard.call("facts write lock", lambda: "held") == "held"
    assert guard.retry_interval == 4 * RETRY  # the CAS put has not worked yet
    assert guard.call("CAS put", store.call) == "ok"
    assert guard.retry_interval == RETRY and not guard.is_open


def test_a_server_that_goes_out_after_the_pause_grew_is_checked_every_retry_after_again() -> None:
    # a table locked by a migration, then the server restarted: once its check fails it is out,
    # and its return must be found within retry_after, not the pause the lock made grow
    store = Locked()
    out = threading.Event()
    failed_checks: list[int] = []

    def check() -> None:
        if out.is_set():
            failed_checks.append(1)
            raise StoreUnavailableError("connection refused")

    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=RETRY, probe=check)
    with pytest.raises(StoreUnavailableError):
        guard.call("CAS put", store.call)
    for _ in range(2):
        _half_open(guard)
        with pytest.raises(StoreUnavailableError, match="no answer within"):
            guard.call("CAS put", store.call)
    assert guard.retry_interval == 4 * RETRY
    out.set()  # the server goes out
    _until(lambda: len(failed_checks) > 1, "checked twice")  # the first failed check is settled
    assert guard.is_open and guard.retry_interval == RETRY
    out.clear()  # back, the lock gone
    store.released.set()
    _half_open(guard)
    assert guard.call("CAS put", store.call) == "ok" and not guard.is_open


def test_a_kind_of_call_that_fails_now_and_then_does_not_make_the_pause_grow() -> None:
    # a purge of a large table timing out once an hour, while every other call works: each is a
    # failure of its own, not the same failure again right after the circuit closed
    from ctxplugin._circuit import Circuit

    circuit = Circuit(retry_after=1.0)
    now = 100.0
    for _ in range(4):
        assert circuit.fail("CAS purge: no answer", now, trial=False, what="CAS purge")
        circuit.checked = True
        assert circuit.admit(now + 1, probed=True) is True
        circuit.answered("CAS put", now + 1)  # the server answers the call let through
        assert circuit.cause is None
        now += 3600
    assert circuit.pause == 1.0


def test_a_stopped_guard_lets_a_call_try_the_server_after_its_pause() -> None:
    """``stop()`` ends the background check; the circuit it leaves open, or that a later failure
    opens, is tried by one call after the pause (as a guard without a probe does), not refused
    for good."""
    guard = StoreGuard("Test server", timeout=TIMEOUT, retry_after=RETRY, probe=lambda: None)
    guard.stop()

    def down() -> str:
        raise StoreUnavailableError("connection refused")

    with pytest.raises(StoreUnavailableError, match="connection refused"):
        guard.call("get", down)
    assert guard.is_open
    time.sleep(RETRY * 3)
    assert guard.call("get", lambda: "back") == "back"
    assert not guard.is_open
