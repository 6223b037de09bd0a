"""A thread whose state holds a tool result without its call: every turn fails with an error
that says how to repair it, the repair it names works, and the opt-in repair mode continues."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, RemoveMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, InvalidInputError
from ctxplugin.testing import ScriptedChatModel, memory_engine

CONFIG: Any = {"configurable": {"thread_id": "orphaned"}}


def broken_thread(config: ContextConfig | None = None) -> tuple[Any, ScriptedChatModel]:
    """An agent whose thread got a tool result with no call (e.g. a bad state edit)."""
    model = ScriptedChatModel(default="Done.")
    agent = create_agent(model, [], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(memory_engine(config))])
    agent.invoke({"messages": [{"role": "user", "content": "hello"}]}, CONFIG)
    stray = ToolMessage(content="order 7: shipped", tool_call_id="lost-call", name="order_status", id="stray-1")
    agent.update_state(CONFIG, {"messages": [stray, AIMessage(content="It shipped.", id="ai-after")]})
    return agent, model


def test_every_turn_fails_with_the_repair_then_the_named_repair_works() -> None:
    agent, model = broken_thread()
    for _ in range(2):
        with pytest.raises(InvalidInputError, match=r"tool_call_id='lost-call'.*RemoveMessage\(id='stray-1'\)"):
            agent.invoke({"messages": [{"role": "user", "content": "and order 8?"}]}, CONFIG)
    calls = len(model.calls)
    agent.update_state(CONFIG, {"messages": [RemoveMessage(id="stray-1")]})
    result = agent.invoke({"messages": [{"role": "user", "content": "and order 8?"}]}, CONFIG)
    assert result["messages"][-1].text == "Done." and len(model.calls) == calls + 1


@pytest.mark.parametrize("mode", ["pair", "drop"])
def test_the_repair_mode_continues_the_thread_with_a_warning(mode: Any) -> None:
    agent, model = broken_thread(ContextConfig(orphan_tool_results=mode))
    result = agent.invoke({"messages": [{"role": "user", "content": "and order 8?"}]}, CONFIG)
    assert result["messages"][-1].text == "Done."
    sent = model.calls[-1].messages
    results = [m for m in sent if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == (["lost-call"] if mode == "pair" else [])
    report = result["messages"][-1].response_metadata["ctxplugin"]
    assert any("lost-call" in w for w in report["ctxplugin.warnings"])
    state = agent.get_state(CONFIG).values["messages"]
    assert any(getattr(m, "id", None) == "stray-1" for m in state), "the state keeps the message"


def test_a_malformed_tool_call_does_not_break_the_thread() -> None:
    # create_agent answers a call whose arguments did not parse with an error result of its own;
    # that result answers a call, it is not an orphan
    bad = AIMessage(content="", invalid_tool_calls=[
        {"name": "order_status", "args": '{"order": ', "id": "call-bad", "error": "truncated JSON", "type": "invalid_tool_call"},
    ])
    model = ScriptedChatModel(script=[bad, AIMessage(content="Order 7 shipped.")])
    agent = create_agent(model, [], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(memory_engine())])
    agent.invoke({"messages": [{"role": "user", "content": "where is order 7?"}]}, CONFIG)
    result = agent.invoke({"messages": [{"role": "user", "content": "and now?"}]}, CONFIG)
    assert result["messages"][-1].text == "Order 7 shipped."
    sent = model.calls[-1].messages
    answer = next(i for i, m in enumerate(sent) if isinstance(m, ToolMessage))
    result_message, call_message = sent[answer], sent[answer - 1]
    assert isinstance(result_message, ToolMessage) and result_message.tool_call_id == "call-bad"
    assert isinstance(call_message, AIMessage) and call_message.invalid_tool_calls
