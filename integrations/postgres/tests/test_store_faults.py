"""Fault injection: stores that freeze, refuse or are misconfigured, through a real TCP proxy in
front of the real Postgres and a real ``chroma run`` server, and a Chroma server stopped with
``SIGSTOP``.

What every test holds (``docs/reliability.md``): no engine call (a step: ``prepare`` or a
capture) takes longer than ``stores.timeout`` plus one second; a degraded step keeps the
original tool output and says why in its report; the same engine is back on the server within
two steps of its return; refs and facts written before the outage are still there after it,
and facts stated during it are read once the store is back.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from ctxplugin_postgres import migrate
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import ConfigError
from ctxplugin.report import CaptureReport, ContextReport
from ctxplugin.testing.chroma_server import ChromaServer, free_port
from ctxplugin.testing.fault_proxy import FaultProxy

pytestmark = pytest.mark.postgres

TIMEOUT = 2.0
RETRY = 0.25
BOUND = TIMEOUT + 1.0
"""The longest any step may take: the configured timeout plus one second (a functional bound)."""

THINK = 2 * RETRY
"""What the model takes per call in these agents (a real one takes longer)."""

_ids = itertools.count(1)


def _output(n: int) -> str:
    return "\n".join(f"2026-11-0{n % 9 + 1}T10:{r:02d}:00 worker-{n} request {n * 100 + r} took {r * 3}ms" for r in range(60))


class Agent:
    """One conversation, driven turn by turn; every engine call is a timed step."""

    def __init__(self, engine: ContextEngine, scope: Scope) -> None:
        self.engine = engine
        self.scope = scope
        self.messages: list[BaseMessage] = [SystemMessage("You answer questions about service logs.")]
        self.steps: list[tuple[float, list[str]]] = []
        self.outputs: list[tuple[ToolMessage, str]] = []

    def _step(self, run: Any) -> Any:
        start = time.monotonic()
        result = run()
        report: ContextReport | CaptureReport = result.report if hasattr(result, "report") else result[1]
        self.steps.append((time.monotonic() - start, list(report.warnings)))
        return result

    def turn(self, text: str) -> tuple[ContextReport, CaptureReport]:
        """The user says ``text``; the model searches the logs once, then answers."""
        n = next(_ids)
        self.messages.append(HumanMessage(text, id=f"h{n}"))
        first = self._step(lambda: self.engine.prepare(self.messages, scope=self.scope))
        time.sleep(THINK)
        call = {"name": "search_logs", "args": {"q": text}, "id": f"call{n}", "type": "tool_call"}
        self.messages.append(AIMessage("", tool_calls=[call], id=f"a{n}"))
        original = _output(n)
        raw = ToolMessage(original, tool_call_id=f"call{n}", name="search_logs", id=f"t{n}")
        compact, capture = self._step(lambda: self.engine.capture_with_report(raw, self.scope))
        self.messages.append(compact)
        self.outputs.append((compact, original))
        self._step(lambda: self.engine.prepare(self.messages, scope=self.scope))
        time.sleep(THINK)
        self.messages.append(AIMessage("The slow requests come from one worker.", id=f"b{n}"))
        return first.report, capture

    def mark(self) -> int:
        return len(self.steps)

    def longest(self, since: int = 0) -> float:
        return max(duration for duration, _ in self.steps[since:])

    def warnings(self, since: int = 0) -> list[str]:
        return [w for _, warnings in self.steps[since:] for w in warnings]

    def assert_nothing_lost(self) -> None:
        """Every tool output expands to its original or was passed through whole, with a warning."""
        for message, original in self.outputs:
            meta = message.additional_kwargs.get("ctxplugin", {})
            if "ref" in meta:
                assert self.engine.expand_ref(meta["ref"], scope=self.scope) == original
            else:
                assert message.content == original and "warning" in meta

    def assert_recovered(self, since: int) -> None:
        """From the second step after ``since`` on, no step degraded and outputs are stored again."""
        assert not self.warnings(since + 1), self.warnings(since + 1)
        last, _ = self.outputs[-1]
        assert "ref" in last.additional_kwargs["ctxplugin"]


def _close(engine: ContextEngine) -> None:
    engine.cas.close()
    close = getattr(engine.facts.store, "close", None)
    if callable(close):
        close()


@pytest.fixture
def pg_proxy(pg_dsn: str) -> Iterator[FaultProxy]:
    host, port = _host_port(pg_dsn)
    with FaultProxy(host, port) as proxy:
        yield proxy


def _host_port(dsn: str) -> tuple[str, int]:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    return str(info.get("host") or "127.0.0.1"), int(str(info.get("port") or 5432))


def _via(dsn: str, port: int) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info.update(host="127.0.0.1", port=str(port))
    return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


def _postgres_engine(dsn: str, schema: str, path: Path) -> ContextEngine:
    migrate(dsn, schema=schema)  # the tables exist before the first timed step
    config = ContextConfig(
        postgres_dsn=dsn, postgres_schema=schema, path=str(path), stores={"timeout": TIMEOUT, "retry_after": RETRY}
    )
    return ctxplugin.connect(config)


# --- Postgres behind a proxy ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("fault", ["freeze", "refuse"])
def test_postgres_outage_is_bounded_degraded_and_recovered(
    fault: str, pg_dsn: str, pg_schema: str, pg_proxy: FaultProxy, tmp_path: Path
) -> None:
    engine = _postgres_engine(_via(pg_dsn, pg_proxy.port), pg_schema, tmp_path)
    agent = Agent(engine, Scope(session_id=f"pg-{fault}", user_id="ops"))
    try:
        _, warm = agent.turn("The deploy target is eu-west-3.")
        assert warm.ref_id is not None and not warm.warnings

        getattr(pg_proxy, fault)()
        outage = agent.mark()
        _, degraded = agent.turn("The release deadline is Friday 5pm.")
        agent.turn("Which worker is slow?")
        assert agent.longest(outage) <= BOUND
        assert degraded.ref_id is None and any("CAS unavailable" in w for w in degraded.warnings)
        compact, original = agent.outputs[-1]
        assert compact.content == original  # the original is kept in the message
        if fault == "refuse":  # the report names the cause, not a guess
            assert any("refused" in w.lower() for w in agent.warnings(outage + 1)), agent.warnings(outage)
        else:
            assert any("no answer within" in w for w in agent.warnings(outage)), agent.warnings(outage)

        pg_proxy.heal()
        back = agent.mark()
        agent.turn("And now?")
        agent.turn("Anything else?")
        assert agent.longest(back) <= BOUND
        agent.assert_recovered(back)
        agent.assert_nothing_lost()
        # the fact stated during the outage was read once the write lock could be had again
        for key in ("deploy_target", "release_deadline"):
            assert engine.facts.current(key, scope=agent.scope) is not None, key
    finally:
        pg_proxy.heal()
        _close(engine)


# --- a Chroma server behind a proxy, and one stopped with SIGSTOP ----------------------------


def _chroma_engine(url: str, path: Path) -> ContextEngine:
    config = ContextConfig(
        chroma_url=url,
        path=str(path),
        facts={"collection": f"f{uuid.uuid4().hex[:12]}"},
        stores={"timeout": TIMEOUT, "retry_after": RETRY},
    )
    return ctxplugin.connect(config)


def _chroma_outage(agent: Agent, stop: Any, resume: Any) -> None:
    _, warm = agent.turn("The deploy target is eu-west-3.")
    assert not warm.warnings and agent.engine.facts.current("deploy_target", scope=agent.scope) is not None
    stop()
    outage = agent.mark()
    try:
        first, _ = agent.turn("The release deadline is Friday 5pm.")
        agent.turn("Which worker is slow?")
    finally:
        resume()
    assert agent.longest(outage) <= BOUND
    assert any("facts store unavailable" in w for w in first.warnings) and first.facts == []
    assert all(w.startswith("facts store unavailable") for w in agent.warnings(outage))  # the CAS kept working
    back = agent.mark()
    agent.turn("Thanks.")
    report, _ = agent.turn("Where do we deploy, and by when?")
    assert agent.longest(back) <= BOUND
    agent.assert_recovered(back)
    agent.assert_nothing_lost()
    # the task's own statement is never repeated in the facts block; both facts are current
    assert "release_deadline" in {f.key for f in report.facts}
    for key in ("deploy_target", "release_deadline"):
        assert agent.engine.facts.current(key, scope=agent.scope) is not None, key


@pytest.mark.chroma_server
@pytest.mark.slow
def test_a_frozen_chroma_server_is_bounded_degraded_and_recovered(chroma_server: ChromaServer, tmp_path: Path) -> None:
    port = int(chroma_server.url.rsplit(":", 1)[1])
    with FaultProxy("127.0.0.1", port) as proxy:
        engine = _chroma_engine(f"http://127.0.0.1:{proxy.port}", tmp_path)
        try:
            _chroma_outage(Agent(engine, Scope(session_id="chroma-frozen")), proxy.freeze, proxy.heal)
        finally:
            _close(engine)


@pytest.mark.chroma_server
@pytest.mark.slow
def test_a_stopped_chroma_process_is_bounded_degraded_and_recovered(own_chroma_server: ChromaServer, tmp_path: Path) -> None:
    pid = own_chroma_server.process.pid
    engine = _chroma_engine(own_chroma_server.url, tmp_path)
    try:
        _chroma_outage(
            Agent(engine, Scope(session_id="chroma-stopped")),
            lambda: os.kill(pid, signal.SIGSTOP),
            lambda: os.kill(pid, signal.SIGCONT),
        )
    finally:
        os.kill(pid, signal.SIGCONT)
        _close(engine)


# --- configuration errors at connect() -----------------------------------------------------


@pytest.mark.parametrize(
    ("dsn", "cause"),
    [
        ("not-a-dsn", "not a Postgres connection string"),
        ("postgresql://postgres@no-such-host.invalid:5432/test", "no-such-host.invalid"),
        ("{base}/ctxplugin_no_such_database", 'database "ctxplugin_no_such_database" does not exist'),
        ("postgresql://ctxplugin_no_such_role@{hostport}/test", 'role "ctxplugin_no_such_role" does not exist'),
        # libpq refuses it before connecting: it started degraded, as for a server that is down
        ("postgresql://postgres@127.0.0.1:99999/test", 'invalid port number: "99999"'),
    ],
    ids=["malformed", "unknown-host", "missing-database", "auth", "port-out-of-range"],
)
def test_a_dsn_that_cannot_work_fails_at_connect_with_its_cause(dsn: str, cause: str, pg_dsn: str, tmp_path: Path) -> None:
    host, port = _host_port(pg_dsn)
    dsn = dsn.format(base=f"postgresql://postgres@{host}:{port}", hostport=f"{host}:{port}")
    start = time.monotonic()
    with pytest.raises(ConfigError, match=cause) as raised:
        ctxplugin.connect(ContextConfig(postgres_dsn=dsn, path=str(tmp_path), stores={"timeout": TIMEOUT}))
    if dsn == "not-a-dsn":  # not chained: libpq's parse error quotes the DSN, its password too
        assert raised.value.__cause__ is None
    else:
        assert isinstance(raised.value.__cause__, psycopg.Error)  # chained to the driver's error
    assert time.monotonic() - start <= BOUND


def test_ssl_required_of_a_server_without_it_fails_at_connect(pg_dsn: str, tmp_path: Path) -> None:
    host, port = _host_port(pg_dsn)
    dsn = f"postgresql://postgres@{host}:{port}/test?sslmode=require"
    try:
        psycopg.connect(dsn, connect_timeout=2).close()
    except psycopg.OperationalError as exc:
        if "does not support SSL" not in str(exc):
            raise
    else:
        pytest.skip("the test server speaks TLS")
    with pytest.raises(ConfigError, match="does not support SSL") as raised:
        ctxplugin.connect(ContextConfig(postgres_dsn=dsn, path=str(tmp_path), stores={"timeout": TIMEOUT}))
    assert isinstance(raised.value.__cause__, psycopg.Error)


def test_a_refused_postgres_port_starts_degraded_and_says_so(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    dsn = f"postgresql://postgres@127.0.0.1:{free_port()}/test"
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        engine = ctxplugin.connect(ContextConfig(postgres_dsn=dsn, path=str(tmp_path), stores={"timeout": TIMEOUT}))
    assert any("Connection refused" in r.getMessage() for r in caplog.records)
    agent = Agent(engine, Scope(session_id="refused"))
    try:
        _, capture = agent.turn("The deploy target is eu-west-3.")
        agent.turn("Which worker is slow?")
        assert agent.longest() <= BOUND
        assert capture.ref_id is None and all("Connection refused" in w for w in capture.warnings)
        agent.assert_nothing_lost()
    finally:
        _close(engine)


def test_chroma_urls_that_cannot_work_fail_at_connect(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"no-such-host\.invalid"):
        ctxplugin.connect(ContextConfig(chroma_url="http://no-such-host.invalid:8000", path=str(tmp_path)))
    refused = ctxplugin.connect(
        ContextConfig(chroma_url=f"http://127.0.0.1:{free_port()}", path=str(tmp_path), stores={"timeout": TIMEOUT})
    )
    try:
        report = refused.prepare([HumanMessage("The deploy target is eu-west-3.")], scope=Scope(session_id="c")).report
        assert any("facts store unavailable" in w and "Connection refused" in w for w in report.warnings), report.warnings
    finally:
        _close(refused)
