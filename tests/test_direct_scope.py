"""Direct engine calls without a scope: the host run's scope when inside one, else the shared
``"default"`` session with a warning logged once (a capture and the prepare that shows its ref
are separate calls, so a scope per call would lose the ref)."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxplugin import RefNotFoundError, Scope, _run_scope
from ctxplugin.testing import memory_engine

LOG = "\n".join(f"line {i}: worker batch {i} finished" for i in range(400))


@pytest.fixture(autouse=True)
def fresh_warning() -> Iterator[None]:
    _run_scope._direct_warned.clear()
    yield
    _run_scope._direct_warned.clear()


def test_calls_without_a_scope_share_the_default_session_and_warn_once(caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        compact = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="c1", name="read_log", id="t1"))
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        call = AIMessage("", tool_calls=[{"name": "read_log", "args": {}, "id": "c1"}])
        engine.prepare([HumanMessage("Check the log"), call, compact])
        assert engine.expand_ref(ref) == LOG, "the capture and the later calls share one scope"
    warnings = [r for r in caplog.records if "without a scope" in r.getMessage()]
    assert len(warnings) == 1 and "capture_tool_result" in warnings[0].getMessage()
    assert "scope=Scope(session_id=" in warnings[0].getMessage(), "it says how to set one"
    assert engine.expand_ref(ref, Scope(session_id="default")) == LOG
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, Scope(session_id="another"))


def test_a_call_inside_a_host_run_uses_the_runs_scope(caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    run = Scope(session_id="run-abc")
    with caplog.at_level(logging.WARNING, logger="ctxplugin"), _run_scope.using(run):
        compact = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="c1", name="read_log", id="t1"))
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        assert engine.expand_ref(ref) == LOG
    assert not [r for r in caplog.records if "without a scope" in r.getMessage()]
    assert engine.expand_ref(ref, run) == LOG
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, Scope(session_id="default"))


def test_a_scope_given_where_the_tools_go_is_a_clear_error(caplog: pytest.LogCaptureFixture) -> None:
    """``prepare(messages, scope)``: the second parameter is ``tools``; a pydantic model iterates
    as (field, value) pairs, which were read as tools and refused as tuples, after the warning
    that the call had no scope."""
    engine = memory_engine()
    scope = Scope(session_id="s1")
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        with pytest.raises(ValueError, match=r"tools= takes a list of tools, got Scope; pass it as scope="):
            engine.prepare([HumanMessage("hi")], scope)
        with pytest.raises(ValueError, match=r"got Scope; pass it as scope="):
            engine.bound_tools([HumanMessage("hi")], scope)
    assert "without a scope" not in caplog.text, "the call is refused, not run in the shared session"
