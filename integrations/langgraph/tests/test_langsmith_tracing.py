"""ctxplugin's runs reach LangSmith nested under the agent's run (real langsmith client,
endpoint on 127.0.0.1)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langsmith import Client, tracing_context

from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call


@tool
def list_orders(user_id: str) -> str:
    """List a user's orders."""
    return json.dumps([{"order_id": f"#W{1000 + i}", "user_id": user_id, "total": 10.5 * i} for i in range(60)])


def run_agent(engine: Any) -> ScriptedChatModel:
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("list_orders", {"user_id": "yusuf_1"})]),
        AIMessage(content="You have 60 orders."),
    ])
    agent = create_agent(model, [list_orders], middleware=[ContextMiddleware(engine)])
    agent.invoke({"messages": [{"role": "user", "content": "my orders?"}]}, {"configurable": {"thread_id": "traced"}})
    return model


def test_prepare_and_capture_runs_arrive_nested_with_metadata(langsmith_sink: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    url, runs = langsmith_sink
    monkeypatch.setenv("LANGSMITH_TRACING", "true")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "test-key")
    # Runs are posted as they end (no background batching thread to wait on).
    client = Client(api_url=url, api_key="test-key", auto_batch_tracing=False)
    try:
        with tracing_context(enabled=True, client=client, project_name="ctxplugin-test"):
            run_agent(memory_engine())
        from langchain_core.tracers.langchain import wait_for_all_tracers

        wait_for_all_tracers()
    finally:
        client.session.close()
    prepares = runs.by_name("ctxplugin.prepare")
    captures = runs.by_name("ctxplugin.capture_tool_result")
    assert len(prepares) == 2 and len(captures) == 1
    roots = [r for r in runs.runs.values() if not r.get("parent_run_id")]
    assert roots, "the agent's own run should be there"
    root_ids = {str(r.get("id") or k) for k, r in runs.runs.items() if not r.get("parent_run_id")}
    for run in prepares + captures:
        assert run.get("parent_run_id"), "ctxplugin runs must be nested under the agent's run"
        assert str(run.get("trace_id")) in root_ids
    meta = prepares[-1]["extra"]["metadata"]
    assert meta["ctxplugin.tokens_before"] >= meta["ctxplugin.tokens_after"] > 0
    assert meta["ctxplugin.refs_used"] == 1
    captured = captures[0]["extra"]["metadata"]
    assert captured["ctxplugin.ref_id"].startswith("ref:")
    assert captured["ctxplugin.session_id"] == meta["ctxplugin.session_id"] == "traced"
    assert captured["ctxplugin.original_tokens"] > captured["ctxplugin.compact_tokens"] > 0
    ours = [k for run in prepares + captures for k in run["extra"]["metadata"] if k.startswith(("ctxplugin", "ref_", "session_", "warn"))]
    assert ours and all(k.startswith("ctxplugin.") for k in ours), "one key convention for every ctxplugin run"


def test_nothing_is_sent_when_tracing_is_off(langsmith_sink: tuple[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    url, runs = langsmith_sink
    monkeypatch.setenv("LANGSMITH_TRACING", "false")
    monkeypatch.setenv("LANGSMITH_ENDPOINT", url)
    monkeypatch.setenv("LANGSMITH_API_KEY", "test-key")
    run_agent(memory_engine())
    from langchain_core.tracers.langchain import wait_for_all_tracers

    wait_for_all_tracers()
    assert runs.runs == {}
