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


def test_a_call_whose_arguments_did_not_parse_is_answered_not_an_orphan() -> None:
    """create_agent answers an invalid tool call (malformed arguments) with an error result on
    the next turn; that result answers a call the model made, and the thread goes on."""
    bad = {"name": "search", "args": '{"q": "trunc', "id": "bad-1", "error": "malformed", "type": "invalid_tool_call"}
    model = ScriptedChatModel(script=[AIMessage(content="", invalid_tool_calls=[bad])], default="Done.")
    agent = create_agent(model, [], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(memory_engine())])
    agent.invoke({"messages": [{"role": "user", "content": "find it"}]}, CONFIG)
    result = agent.invoke({"messages": [{"role": "user", "content": "try again"}]}, CONFIG)
    assert result["messages"][-1].text == "Done."
    sent = model.calls[-1].messages
    answers = [m for m in sent if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in answers] == ["bad-1"]
    assert sent.index(answers[0]) == 1 + next(i for i, m in enumerate(sent) if isinstance(m, AIMessage) and m.invalid_tool_calls)
