"""Supersession across processes: ``PostgresWriteLock`` and the ledger that ``connect`` builds."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres import PostgresWriteLock, make_pool
from ctxplugin_postgres.locks import lock_key
from langchain_core.messages import HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore, WriteLock
from ctxplugin.scope import Scope

pytestmark = [pytest.mark.postgres]

TESTS = Path(__file__).resolve().parent


def two_locks(dsn: str, **options: Any) -> tuple[PostgresWriteLock, PostgresWriteLock]:
    """Two locks on separate pools, as two processes would have."""
    return (
        PostgresWriteLock(make_pool(dsn, max_size=2, timeout=5.0), owns_pool=True, **options),
        PostgresWriteLock(make_pool(dsn, max_size=2, timeout=5.0), owns_pool=True, **options),
    )


def test_a_held_name_makes_other_holders_wait_and_other_names_do_not(pg_dsn: str) -> None:
    first, second = two_locks(pg_dsn)
    assert isinstance(first, WriteLock)
    entered, release = threading.Event(), threading.Event()
    order: list[str] = []

    def holder() -> None:
        with first.hold("slot-a"):
            order.append("first in")
            entered.set()
            release.wait(10)
            order.append("first out")

    thread = threading.Thread(target=holder)
    thread.start()
    try:
        assert entered.wait(10)
        with second.hold("slot-b"):  # another name is free
            order.append("other name")

        def contender() -> None:
            with second.hold("slot-a"):
                order.append("second in")

        waiter = threading.Thread(target=contender)
        waiter.start()
        waiter.join(0.5)
        assert waiter.is_alive(), "the second holder waits while the first holds the name"
        release.set()
        waiter.join(10)
        assert not waiter.is_alive()
    finally:
        release.set()
        thread.join(10)
        first.close()
        second.close()
    assert order == ["first in", "other name", "first out", "second in"]


def test_waiting_too_long_is_a_store_unavailable_error(pg_dsn: str) -> None:
    first, second = two_locks(pg_dsn, wait_s=0.2)
    try:
        busy = r"another process held it for more than 0\.2s"
        with (
            first.hold("slot"),
            pytest.raises(StoreUnavailableError, match=busy),
            second.hold("slot"),
        ):
            pytest.fail("the lock was taken twice")
        with second.hold("slot"):  # free again once the first is released
            pass
    finally:
        first.close()
        second.close()


def test_holds_nest_within_a_thread_and_namespaces_keep_deployments_apart(pg_dsn: str) -> None:
    lock = PostgresWriteLock.from_dsn(pg_dsn, wait_s=0.2)
    other = PostgresWriteLock.from_dsn(pg_dsn, namespace="other_deployment", wait_s=0.2)
    try:
        with lock.hold("slot"), lock.hold("slot"), other.hold("slot"):
            pass
    finally:
        lock.close()
        other.close()
    assert lock_key("public", "slot") != lock_key("other_deployment", "slot")


def test_an_unreachable_server_is_a_store_unavailable_error() -> None:
    lock = PostgresWriteLock.from_dsn("postgresql://nobody@127.0.0.1:9/none")
    lock.pool.timeout = 0.5
    try:
        with pytest.raises(StoreUnavailableError), lock.hold("slot"):
            pass
    finally:
        lock.close()


@pytest.mark.chroma_server
@pytest.mark.slow
def test_processes_rewriting_one_key_leave_one_linear_chain(
    pg_dsn: str, pg_schema: str, chroma_server: Any, tmp_path: Path
) -> None:
    if str(TESTS) not in sys.path:  # spawned children import the worker module by name
        sys.path.insert(0, str(TESTS))
    import pg_workers  # type: ignore[import-not-found]  # a module beside this file, found at run time

    import ctxplugin

    processes, rounds = 4, 12
    env = pg_workers.deployment_env(
        pg_dsn,
        pg_schema,
        chroma_server.url,
        str(tmp_path / "unused"),
        f"lock{uuid.uuid4().hex[:12]}",
    )
    context = multiprocessing.get_context("spawn")
    with context.Pool(processes) as pool:
        start = time.time() + 8  # every child is up and connected by then
        # without the lock (locked=False) the chain forks: two writers retire the same fact
        done = pool.map(
            pg_workers.rewrite_key, [(w, env, start, rounds, True) for w in range(processes)]
        )
    assert done == [rounds] * processes

    engine = ctxplugin.connect(
        ctxplugin.ContextConfig(
            **{
                "postgres_dsn": pg_dsn,
                "postgres_schema": pg_schema,
                "chroma_url": chroma_server.url,
                "facts": {"collection": env["CTXPLUGIN_FACTS__COLLECTION"]},
            }
        )
    )
    try:
        scope = Scope(session_id="contended", user_id="team")
        facts = engine.facts.store.find(FactQuery(reader=scope, key="shared_counter"))
    finally:
        pg_workers.close(engine)
    assert len(facts) == processes * rounds, "every write is stored"
    assert len([f for f in facts if f.is_valid]) == 1, "exactly one value is current"
    replaced = [f.supersedes for f in facts if f.supersedes]
    assert len(replaced) == len(set(replaced)) == processes * rounds - 1, (
        "each fact was replaced once: one chain"
    )


def test_an_unreachable_lock_skips_the_facts_and_keeps_the_view() -> None:
    from ctxplugin import ContextEngine

    lock = PostgresWriteLock.from_dsn("postgresql://nobody@127.0.0.1:9/none")
    lock.pool.timeout = 0.5
    store = MemoryFactStore()
    engine = ContextEngine(facts=FactsLedger(store, lock=lock))
    try:
        messages = [
            HumanMessage("The meeting is Tuesday at 2pm.", id="h0"),
            HumanMessage("When is it?", id="h1"),
        ]
        prepared = engine.prepare(messages, scope=Scope(session_id="s1"))
    finally:
        lock.close()
    assert [m.id for m in prepared.messages if isinstance(m, HumanMessage)] == ["h0", "h1"]
    assert any("facts store unavailable" in w for w in prepared.report.warnings)
    assert len(store) == 0, "nothing half-written"


def test_an_unreachable_lock_still_shows_the_facts_stored_before() -> None:
    """Writes need the lock; reads do not: the facts already stored stay in the view while new
    statements wait for the lock."""
    from ctxplugin import ContextEngine

    store = MemoryFactStore()
    scope = Scope(session_id="s1")
    FactsLedger(store).write("The deploy target is eu-west-3.", key="deploy_target", scope=scope)
    lock = PostgresWriteLock.from_dsn("postgresql://nobody@127.0.0.1:9/none")
    lock.pool.timeout = 0.5
    engine = ContextEngine(facts=FactsLedger(store, lock=lock))
    try:
        messages = [
            HumanMessage("The release deadline is Friday 5pm.", id="h0"),
            HumanMessage("Where do we deploy?", id="h1"),
        ]
        prepared = engine.prepare(messages, scope=scope)
    finally:
        lock.close()
    assert [line.key for line in prepared.report.facts] == ["deploy_target"]
    assert any("eu-west-3" in str(m.content) for m in prepared.messages)
    assert any("new facts not recorded" in w for w in prepared.report.warnings), (
        prepared.report.warnings
    )
    assert len(store) == 1, "the statement made during the outage waits for the lock"


def test_ctrl_c_while_waiting_for_the_write_lock_leaves_it_free(
    pg_dsn: str, mocker: MockerFixture
) -> None:
    """Ctrl-C in a notebook while a facts write waits for another process's writer: once that
    writer is done, the lock taken too late is let go, and both go on writing the slot (an
    interactive session keeps the interrupted call's traceback, so nothing is left to the
    garbage collector)."""
    from ctxplugin.guard import GuardedWriteLock, StoreGuard

    namespace, waiter = f"ctrlc_{uuid.uuid4().hex[:8]}", f"ctxplugin-ctrlc-{uuid.uuid4().hex[:8]}"
    scope = Scope(session_id="s1")
    slow, mine = MemoryFactStore(), MemoryFactStore()
    other = PostgresWriteLock(
        make_pool(pg_dsn, max_size=2), namespace=namespace, wait_s=3, owns_pool=True
    )
    # waits long enough that Ctrl-C, however late a busy machine delivers it, comes first
    here = PostgresWriteLock(
        make_pool(pg_dsn, max_size=2, name=waiter), namespace=namespace, wait_s=20, owns_pool=True
    )
    other_ledger = FactsLedger(slow, lock=other)
    ledger = FactsLedger(
        mine, lock=GuardedWriteLock(here, StoreGuard("Postgres", timeout=30, retry_after=60))
    )
    writing, done = threading.Event(), threading.Event()
    real_add = slow.add

    def add_slowly(facts: Any) -> None:  # the other process's store answers late
        writing.set()
        done.wait(30)
        real_add(facts)

    def ctrl_c_once_waiting() -> None:
        with psycopg.connect(pg_dsn, autocommit=True) as conn:
            query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"
            while conn.execute(query, (waiter,)).fetchone() == (0,):
                time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    mocker.patch.object(slow, "add", side_effect=add_slowly)
    writer = threading.Thread(
        target=lambda: other_ledger.write(
            "The deploy target is eu-west-1.", key="deploy_target", scope=scope
        )
    )
    # Ctrl-C raises KeyboardInterrupt, whatever handler an earlier test's library installed
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        writer.start()
        writing.wait(30)
        threading.Thread(target=ctrl_c_once_waiting, daemon=True).start()
        with pytest.raises(KeyboardInterrupt) as interrupted:
            ledger.write("The deploy target is eu-west-2.", key="deploy_target", scope=scope)
        done.set()
        writer.join(30)
        mocker.stopall()
        other_ledger.write("The deploy target is eu-west-3.", key="deploy_target", scope=scope)
        ledger.write("The release is on Friday.", key="release_day", scope=scope)
        assert interrupted.value is not None  # the traceback is still held, as a REPL holds it
    finally:
        signal.signal(signal.SIGINT, previous)
        done.set()
        other.close()
        here.close()
    assert [f.text for f in mine.find(FactQuery(reader=scope))] == ["The release is on Friday."]


def _waits_for_the_lock(dsn: str, application: str, writer: threading.Thread) -> bool:
    """Whether the ``writer`` thread's connection (``application``) waits for an advisory lock
    before the thread ends."""
    query = "SELECT count(*) FROM pg_stat_activity WHERE application_name = %s AND wait_event_type = 'Lock'"
    with psycopg.connect(dsn, autocommit=True) as conn:
        while writer.is_alive():
            if conn.execute(query, (application,)).fetchone() != (0,):
                return True
            time.sleep(0.01)
    return False


SCOPE = Scope(session_id="s1")
LEFT = HumanMessage("The deploy target is eu-west-2.", id="h2")


@dataclass
class TwoProcesses:
    """One store and the ledgers of two processes writing to it, each with its lock on its own
    pool; ``waiter`` names the connections of the second's."""

    store: MemoryFactStore
    first: FactsLedger
    second: FactsLedger
    waiter: str


@pytest.fixture
def two_processes(pg_dsn: str) -> Iterator[TwoProcesses]:
    namespace, waiter = f"pair_{uuid.uuid4().hex[:8]}", f"ctxplugin-pair-{uuid.uuid4().hex[:8]}"
    here = PostgresWriteLock(make_pool(pg_dsn, max_size=2), namespace=namespace, owns_pool=True)
    there = PostgresWriteLock(
        make_pool(pg_dsn, max_size=2, name=waiter), namespace=namespace, owns_pool=True
    )
    store = MemoryFactStore()
    try:
        yield TwoProcesses(store, FactsLedger(store, lock=here), FactsLedger(store, lock=there), waiter)
    finally:
        here.close()
        there.close()


def _written_meanwhile(
    dsn: str, pair: TwoProcesses, mocker: MockerFixture, method: str, call: Callable[[], object]
) -> bool:
    """Make ``call`` on the first ledger, held up in the store's ``method``, and meanwhile write
    a value of the key from the second; whether that write waited for the lock."""
    reached, go = threading.Event(), threading.Event()
    real = getattr(pair.store, method)

    def slowly(*args: Any) -> Any:  # the first process's store answers late
        reached.set()
        go.wait(30)
        return real(*args)

    mocker.patch.object(pair.store, method, side_effect=slowly)
    first = threading.Thread(target=call)
    second = threading.Thread(
        target=lambda: pair.second.write("The deploy target is eu-west-3.", key="deploy_target", scope=SCOPE)
    )
    try:
        first.start()
        assert reached.wait(30)
        mocker.stopall()  # the second process's writes reach the store at once
        second.start()
        return _waits_for_the_lock(dsn, pair.waiter, second)
    finally:
        go.set()
        first.join(30)
        second.join(30)


def test_a_write_of_another_process_waits_for_a_branch_left_to_be_marked(
    pg_dsn: str, two_processes: TwoProcesses, mocker: MockerFixture
) -> None:
    """The thread went back to an earlier point while another process writes the same key: the
    write waits until what the branch left stated is marked not current and the value it
    replaced is current again, then replaces that value; one value stays current."""
    pair = two_processes
    pair.first.ingest([HumanMessage("The deploy target is eu-west-1.", id="h1"), LEFT], scope=SCOPE)
    waited = _written_meanwhile(
        pg_dsn, pair, mocker, "update", lambda: pair.first.leave([LEFT], scope=SCOPE)
    )
    current = pair.store.find(FactQuery(reader=SCOPE, key="deploy_target", valid=True))
    assert [f.text for f in current] == ["The deploy target is eu-west-3."]
    assert waited, "the other process's write waited for the marks"


def test_a_write_of_another_process_waits_for_a_withdrawal(
    pg_dsn: str, two_processes: TwoProcesses, mocker: MockerFixture
) -> None:
    """A tool output replaced by its host (its facts withdrawn) while another process writes the
    key it stated: the write waits for the withdrawal and replaces nothing withdrawn."""
    pair = two_processes
    output = ToolMessage("The deploy target is eu-west-2.", tool_call_id="c1", name="settings")
    pair.first.ingest([output], scope=SCOPE)
    waited = _written_meanwhile(
        pg_dsn, pair, mocker, "withdraw", lambda: pair.first.withdraw({"c1": []}, scope=SCOPE)
    )
    current = pair.store.find(FactQuery(reader=SCOPE, key="deploy_target"))
    assert [(f.text, f.supersedes) for f in current] == [("The deploy target is eu-west-3.", None)]
    assert waited, "the other process's write waited for the withdrawal"


def test_a_write_waiting_for_a_branch_left_in_another_thread_does_not_hold_it_up(
    pg_dsn: str, mocker: MockerFixture
) -> None:
    """One process, two threads: one marks a branch left (holding the slot's shared lock), the
    other writes to the slot meanwhile. The write waits for the shared lock before the ledger's
    own, so the marks go on and the write follows them; neither gives up."""
    application = f"ctxplugin-order-{uuid.uuid4().hex[:8]}"
    lock = PostgresWriteLock(
        make_pool(pg_dsn, max_size=4, name=application),
        namespace=f"order_{uuid.uuid4().hex[:8]}",
        wait_s=2,
        owns_pool=True,
    )
    ledger = FactsLedger(MemoryFactStore(), lock=lock)
    ledger.ingest([HumanMessage("The deploy target is eu-west-1.", id="h1"), LEFT], scope=SCOPE)
    held, go = threading.Event(), threading.Event()
    real_hold = lock.hold_all

    @contextmanager
    def hold_a_while(names: Sequence[str]) -> Iterator[None]:  # the branch's marks start late
        with real_hold(names):
            if threading.current_thread() is leaving:
                held.set()
                go.wait(30)
            yield

    mocker.patch.object(lock, "hold_all", side_effect=hold_a_while)
    errors: list[BaseException] = []

    def run(call: Any) -> None:
        try:
            call()
        except BaseException as exc:  # reported by the assertion below
            errors.append(exc)

    leaving = threading.Thread(target=run, args=(lambda: ledger.leave([LEFT], scope=SCOPE),))
    writer = threading.Thread(
        target=run,
        args=(lambda: ledger.write("The deploy target is eu-west-3.", key="deploy_target", scope=SCOPE),),
    )
    try:
        leaving.start()
        assert held.wait(30)
        writer.start()
        assert _waits_for_the_lock(pg_dsn, application, writer)
        go.set()
        leaving.join(30)
        writer.join(30)
    finally:
        go.set()
        lock.close()
    assert errors == []
    current = ledger.current("deploy_target", scope=SCOPE)
    assert current is not None and current.text == "The deploy target is eu-west-3."
