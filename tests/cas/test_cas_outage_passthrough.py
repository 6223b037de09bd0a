"""Tool outputs the CAS could not store while it was down (the SQLite file locked by another
writer): each is summarized once and logged once, however many calls show it; every call shows
it whole, the same text, and its report counts the outputs left unstored; the first call after
the CAS is back stores them all, without summarizing them again."""

from __future__ import annotations

import importlib
import logging
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreError
from ctxplugin.tokens import content_text

capture_module = importlib.import_module("ctxplugin.cas.capture")  # the package names its function so
SCOPE = Scope(session_id="outage")
OUTPUTS = 6
CALLS_AFTER = 3
"""Calls made with the same history once every output came, the CAS still down."""


def output(i: int) -> str:
    return "\n".join(f"worker-{i} request {i * 100 + r} took {r * 7}ms on shard {r % 4} status=ok" for r in range(120))


class Writer:
    """Another connection holding the file's write lock until :meth:`release`."""

    def __init__(self, path: Path) -> None:
        self.conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self.conn.execute("BEGIN IMMEDIATE")
        self.held = True

    def release(self) -> None:
        if self.held:
            self.conn.execute("ROLLBACK")
            self.held = False

    def close(self) -> None:
        self.release()
        self.conn.close()


def unstored_logs(caplog: pytest.LogCaptureFixture) -> int:
    return sum(r.levelno == logging.WARNING and "CAS unavailable" in r.getMessage() for r in caplog.records)


def texts(messages: list[BaseMessage]) -> list[str]:
    return [content_text(m.content) for m in messages]


@pytest.mark.parametrize("captured", [True, False], ids=["capture-then-prepare", "prepare-only"])
def test_outputs_passed_through_in_an_outage_are_summarized_and_logged_once_then_stored(
    tmp_path: Path, mocker: MockerFixture, caplog: pytest.LogCaptureFixture, captured: bool
) -> None:
    summarize = mocker.spy(capture_module, "summarize")
    caplog.set_level(logging.WARNING, logger="ctxplugin")
    config = ContextConfig(stores={"timeout": 0.2, "retry_after": 0.01}, history={"enabled": False}, budget={"total": 100_000})
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        writer = Writer(tmp_path / "stores" / "cas.sqlite3")
        try:
            messages: list[BaseMessage] = [HumanMessage("What did the workers do?", id="h0")]
            for i in range(OUTPUTS):
                messages.append(AIMessage("", tool_calls=[{"name": "logs", "args": {"i": i}, "id": f"c{i}"}], id=f"a{i}"))
                raw = ToolMessage(output(i), tool_call_id=f"c{i}", name="logs", id=f"t{i}")
                if captured:
                    raw = engine.capture_tool_result(raw, SCOPE)
                    assert raw.content == output(i), "passed through whole by capture"
                messages.append(raw)
                messages.append(HumanMessage(f"And worker {i}?", id=f"h{i + 1}"))
                report = engine.prepare(messages, scope=SCOPE).report
                assert report.refs_created == []
            # the outage goes on: the same history, the same view, nothing summarized or logged again
            views = []
            for _ in range(CALLS_AFTER):
                prepared = engine.prepare(messages, scope=SCOPE)
                views.append(texts(prepared.messages))
                warnings = [w for w in prepared.report.warnings if "CAS unavailable" in w]
                assert len(warnings) == 1, prepared.report.warnings
                assert f"{OUTPUTS} tool outputs passed through unstored" in warnings[0]
            assert all(view == views[0] for view in views), "the view is stable while the CAS is down"
            assert all(any(output(i) == t for t in views[0]) for i in range(OUTPUTS)), "each output shown whole"
            # at most once: an output that came while the CAS was down is summarized by the first
            # call that tries to store it (capture; else the call that reaches the CAS)
            assert summarize.call_count == (OUTPUTS if captured else 1), "no output summarized twice"
            assert unstored_logs(caplog) == OUTPUTS, "one log line per output, not one per output and call"
            logged = unstored_logs(caplog)
        finally:
            writer.close()
        # the CAS is back: the next call stores every output, from the summaries already made
        prepared = engine.prepare(messages, scope=SCOPE)
        assert len(prepared.report.refs_created) == OUTPUTS
        assert not [w for w in prepared.report.warnings if "CAS unavailable" in w]
        assert summarize.call_count == OUTPUTS, "each output summarized once in all"
        assert unstored_logs(caplog) == logged
        expanded = sorted(engine.expand_ref(ref, SCOPE) for ref in prepared.report.refs_created)
        assert expanded == sorted(output(i) for i in range(OUTPUTS)), "nothing lost"


def test_an_output_the_cas_refuses_does_not_keep_the_others_from_being_stored(tmp_path: Path, mocker: MockerFixture) -> None:
    """A refusal of one output (not an outage: the CAS answers) is no reason to stop storing
    the rest; the refused one passes through whole and is tried again on the next call."""
    config = ContextConfig(history={"enabled": False}, budget={"total": 100_000})
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        real = engine.cas.put

        def put(item: Any, scope: Scope, **kwargs: Any) -> bool:
            if item.content == output(0):
                raise StoreError("SQLite CAS put failed: the value was refused")
            return real(item, scope, **kwargs)

        mocker.patch.object(engine.cas, "put", side_effect=put)
        messages: list[BaseMessage] = [HumanMessage("What did the workers do?", id="h0")]
        for i in range(3):
            messages.append(AIMessage("", tool_calls=[{"name": "logs", "args": {"i": i}, "id": f"c{i}"}], id=f"a{i}"))
            messages.append(ToolMessage(output(i), tool_call_id=f"c{i}", name="logs", id=f"t{i}"))
        messages.append(HumanMessage("Which was slowest?", id="h1"))
        report = engine.prepare(messages, scope=SCOPE).report
        assert len(report.refs_created) == 2
        assert any("1 tool output passed through unstored" in w for w in report.warnings), report.warnings
