"""create_agent with ContextMiddleware: budgets as shares of the model's window, and an agent
that completes its turn when a store is down."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from pytest_mock import MockerFixture

from ctxplugin import ConfigError, ContextConfig, StoreUnavailableError
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

SHARES = {"total": 0.1, "header": 0.02, "history": 0.04, "facts": 0.02, "summaries": 0.02}


@tool
def list_orders(user_id: str) -> str:
    """List a user's orders."""
    return json.dumps([{"order_id": f"#W{1000 + i}", "user_id": user_id, "total": 10.5 * i} for i in range(80)])


def scripted(**kwargs: Any) -> ScriptedChatModel:
    return ScriptedChatModel(
        script=[
            AIMessage(content="", tool_calls=[tool_call("list_orders", {"user_id": "yusuf_1"})]),
            AIMessage(content="You have 80 orders; the latest is #W1079."),
        ],
        **kwargs,
    )


def run(model: ScriptedChatModel, engine: Any) -> list[Any]:
    agent = create_agent(model, [list_orders], middleware=[ContextMiddleware(engine)])
    result = agent.invoke({"messages": [{"role": "user", "content": "my orders?"}]}, {"configurable": {"thread_id": "b1"}})
    return list(result["messages"])


def test_budget_shares_resolve_against_the_model_profile() -> None:
    model = scripted(profile={"max_input_tokens": 20_000})
    state = run(model, memory_engine(ContextConfig(budget=SHARES)))
    report = state[-1].response_metadata["ctxplugin"]
    assert report["ctxplugin.sections"]["history"]["budget"] == 800
    assert report["ctxplugin.within_budget"] is True
    assert report["ctxplugin.tokens_after"] <= 2000


def test_budget_shares_without_a_known_window_are_a_clear_error() -> None:
    with pytest.raises(ConfigError, match="context window"):
        run(scripted(), memory_engine(ContextConfig(budget=SHARES)))


def test_agent_completes_when_the_cas_is_down(mocker: MockerFixture, caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    mocker.patch.object(engine.cas, "put", side_effect=StoreUnavailableError("database is locked"))
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        state = run(scripted(), engine)
    assert state[-1].content == "You have 80 orders; the latest is #W1079."
    result = next(m for m in state if isinstance(m, ToolMessage))
    assert json.loads(str(result.content))[79]["order_id"] == "#W1079", "the original passes through whole"
    warnings = state[-1].response_metadata["ctxplugin"]["ctxplugin.warnings"]
    assert any("CAS unavailable" in w and "database is locked" in w for w in warnings)
    assert any("CAS unavailable" in r.getMessage() for r in caplog.records)


def test_agent_completes_when_the_facts_store_is_down(mocker: MockerFixture, caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    down = StoreUnavailableError("chroma server unreachable")
    mocker.patch.object(engine.facts, "search", side_effect=down)
    mocker.patch.object(engine.facts, "ingest", side_effect=down)
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        state = run(scripted(), engine)
    assert state[-1].content.startswith("You have 80 orders")
    warnings = state[-1].response_metadata["ctxplugin"]["ctxplugin.warnings"]
    assert any("facts store unavailable" in w for w in warnings)
    assert any("facts store unavailable" in r.getMessage() for r in caplog.records)
