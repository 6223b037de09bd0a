"""A Postgres table locked by another session (``LOCK TABLE ... IN ACCESS EXCLUSIVE MODE``, as a
migration or ``VACUUM FULL`` takes it) while the server answers: the real Postgres on
127.0.0.1:5432, the lock held from a second connection.

The server passes its check at once, so the check alone cannot tell the store works: one step
waits ``stores.timeout``, then a call tries the table only after each passed check, with the
pause doubling each time it is still locked; the steps between degrade at once. Once the lock is
let go the engine stores on Postgres again within one pause.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres import migrate
from langchain_core.messages import ToolMessage
from psycopg import sql
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope, _store_guard
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts.locks import slot_lock_name
from ctxplugin.guard import GuardedCASStore, StoreGuard, run_with_deadline
from ctxplugin.report import CaptureReport

pytestmark = pytest.mark.postgres

TIMEOUT = 0.5
RETRY = 0.1
STEPS = 16
THINK = 0.3
"""The model's time between two steps: longer than a check (``retry_after`` and a ping)."""

SCOPE = Scope(session_id="locked", user_id="ops")


def _engine(dsn: str, schema: str, path: Path, *, facts: bool = False) -> ContextEngine:
    migrate(dsn, schema=schema)
    config = ContextConfig(
        postgres_dsn=dsn,
        postgres_schema=schema,
        path=str(path),
        facts={"enabled": facts},
        stores={"timeout": TIMEOUT, "retry_after": RETRY},
    )
    return ctxplugin.connect(config)


def _output(n: int) -> str:
    return "\n".join(f"worker-{n} request {n * 100 + r} took {r * 7}ms on shard {r % 4}" for r in range(80))


def _capture(engine: ContextEngine, n: int) -> tuple[ToolMessage, CaptureReport]:
    raw = ToolMessage(_output(n), tool_call_id=f"call{n}", name="search_logs", id=f"t{n}")
    message, report = engine.capture_with_report(raw, SCOPE)
    assert isinstance(message, ToolMessage)
    return message, report


def _waited(report: CaptureReport) -> bool:
    """Whether the step waited for the table (a refusal names the earlier wait as its cause)."""
    return any("CAS unavailable" in w and "skipped for" not in w for w in report.warnings)


@contextmanager
def _locked(dsn: str, schema: str) -> Iterator[None]:
    with psycopg.connect(dsn) as conn:
        conn.execute(
            sql.SQL("LOCK TABLE {} IN ACCESS EXCLUSIVE MODE").format(sql.Identifier(schema, "ctxplugin_cas_refs"))
        )
        try:
            yield
        finally:
            conn.rollback()


class _Checks:
    """The background checks of ``guard``, with those that failed counted as its circuit counts
    them: one that raised, or that got no answer within ``timeout`` (a loaded machine) however
    it ended later. A failed check starts the pause over at retry_after, as for a server that
    is out."""

    def __init__(self, guard: StoreGuard, mocker: MockerFixture) -> None:
        self.failed = 0
        run = run_with_deadline  # what the guard's module calls it by

        def counted(fn: Callable[[], object], timeout: float, what: str, **kwargs: Any) -> object:
            try:
                return run(fn, timeout, what, **kwargs)
            except Exception:
                if what == f"{guard.name} check":
                    self.failed += 1
                raise

        mocker.patch.object(_store_guard, "run_with_deadline", new=counted)


def test_a_check_answering_after_its_deadline_is_counted_failed(mocker: MockerFixture) -> None:
    # the circuit takes a check that gets no answer within ``timeout`` as failed, however it
    # ends later: the count the bound below allows for must take it so too
    slow = threading.Event()
    guard = StoreGuard("slow", timeout=0.05, retry_after=0.01, probe=lambda: slow.wait(0.3))
    checks = _Checks(guard, mocker)

    def refused() -> None:
        raise StoreUnavailableError("out")

    with pytest.raises(StoreUnavailableError):
        guard.call("step", refused)
    deadline = time.monotonic() + 5
    while not checks.failed and time.monotonic() < deadline:
        time.sleep(0.02)
    slow.set()
    guard.stop()
    assert checks.failed >= 1


def _steps_while_locked(
    engine: ContextEngine, dsn: str, schema: str, mocker: MockerFixture, before: Callable[[int], None] = lambda n: None
) -> None:
    """Run the steps while another session holds the CAS table locked (``before`` each one's
    capture) and check how many waited for the table: the first does; later a call tries the
    table only once a check has passed, and the pause before the k-th such check is
    retry_after * 2**(k-1), so k tries take retry_after * (2**k - 1). Each check that failed
    starts that sequence over."""
    assert isinstance(engine.cas, GuardedCASStore)
    checks = _Checks(engine.cas.guard, mocker)
    waited = 0
    with _locked(dsn, schema):
        start = time.monotonic()
        for n in range(1, STEPS + 1):
            before(n)
            message, report = _capture(engine, n)
            assert report.ref_id is None and message.content == _output(n)  # degraded, the original kept
            waited += _waited(report)
            time.sleep(THINK)
        elapsed = time.monotonic() - start
    tries = math.floor(math.log2(elapsed / RETRY + 1))
    assert 1 <= waited <= 1 + tries * (1 + checks.failed) and 1 + tries < STEPS, (waited, tries, checks.failed)


@pytest.fixture
def engine(pg_dsn: str, pg_schema: str, tmp_path: Path) -> Iterator[ContextEngine]:
    engine = _engine(pg_dsn, pg_schema, tmp_path)
    yield engine
    engine.close()


def test_a_locked_table_costs_one_step_its_timeout_then_steps_degrade_at_once(
    engine: ContextEngine, pg_dsn: str, pg_schema: str, mocker: MockerFixture
) -> None:
    _, warm = _capture(engine, 0)
    assert warm.ref_id is not None and not warm.warnings
    _steps_while_locked(engine, pg_dsn, pg_schema, mocker)


def test_steps_that_record_facts_do_not_shorten_the_pause_while_the_table_stays_locked(
    pg_dsn: str, pg_schema: str, tmp_path: Path, mocker: MockerFixture
) -> None:
    # the facts write lock is on the same server (an advisory lock, no table): taking it works
    # while the CAS table is locked, and must not make every step wait for the table again
    engine = _engine(pg_dsn, pg_schema, tmp_path, facts=True)
    try:
        lock = engine.facts.lock
        assert lock is not None
        _, warm = _capture(engine, 0)
        assert warm.ref_id is not None and not warm.warnings

        def record_a_fact(n: int) -> None:  # as a step recording a fact takes the write lock
            try:
                with lock.hold(slot_lock_name(f"user:ops:{n}")):
                    pass
            except StoreUnavailableError:
                pass  # refused while the circuit is open

        _steps_while_locked(engine, pg_dsn, pg_schema, mocker, before=record_a_fact)
    finally:
        engine.close()


def test_once_the_lock_is_let_go_the_engine_stores_on_postgres_again(
    engine: ContextEngine, pg_dsn: str, pg_schema: str
) -> None:
    _, warm = _capture(engine, 0)
    assert warm.ref_id is not None
    guard = engine.cas.guard if isinstance(engine.cas, GuardedCASStore) else None
    assert guard is not None
    with _locked(pg_dsn, pg_schema):
        for n in range(1, 9):
            _, report = _capture(engine, n)
            assert report.ref_id is None
            time.sleep(THINK)
        assert guard.retry_interval > RETRY  # the table stayed locked after a check passed
    # bounded: the pause now in force, a check and one call, with room for a loaded machine
    deadline = time.monotonic() + guard.retry_interval + 2 * TIMEOUT + 5
    stored: str | None = None
    n = 100
    while stored is None and time.monotonic() < deadline:
        n += 1
        _, report = _capture(engine, n)
        stored = report.ref_id
        time.sleep(RETRY)
    assert stored is not None, "never stored on Postgres again"
    assert not guard.is_open and guard.retry_interval == RETRY
    _, after = _capture(engine, n + 1)
    assert after.ref_id is not None and not after.warnings
    assert engine.expand_ref(warm.ref_id, scope=SCOPE) == _output(0)
    assert engine.expand_ref(stored, scope=SCOPE) == _output(n)
