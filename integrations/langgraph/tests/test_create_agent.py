"""A real create_agent agent with ContextMiddleware: the state keeps everything, the model
receives the prepared view."""

from __future__ import annotations

import json
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call
from ctxplugin_langgraph import ContextMiddleware


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search flights between two airports."""
    return json.dumps([{"flight_number": f"HAT{i:03d}", "origin": origin, "destination": destination, "price": 100 + i} for i in range(80)])


@tool
def get_user(user_id: str) -> str:
    """Get a user profile."""
    return json.dumps({"user_id": user_id, "name": "Mia Li"})


def script() -> ScriptedChatModel:
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
        AIMessage(content="Cheapest is HAT000."),
        AIMessage(content="", tool_calls=[tool_call("get_user", {"user_id": "mia_li_3668"})]),
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "JFK", "destination": "SEA"})]),
        AIMessage(content="Mia can fly HAT000 JFK to SEA."),
    ])


def build(model: ScriptedChatModel, engine: Any) -> Any:
    return create_agent(model, [search_flights, get_user], system_prompt="Be brief.",
                        middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())


def check(model: ScriptedChatModel, state: list[Any], engine: Any, thread: str) -> None:
    tool_results = [m for m in state if isinstance(m, ToolMessage)]
    assert len(tool_results) == 3
    big = [m for m in tool_results if m.name == "search_flights"]
    # the checkpointed state holds the originals, annotated with their refs
    for m in big:
        assert json.loads(m.content)[0]["flight_number"] == "HAT000"
        ref = m.additional_kwargs["ctxplugin"]["ref"]
        assert engine.expand_ref(ref, scope=Scope(session_id=thread)) == m.content
    # the model received compact tool results, never the 80-item payload
    last = model.calls[-1]
    sent_tools = [m for m in last.messages if isinstance(m, ToolMessage)]
    assert sent_tools, "the model should see the tool results"
    for m in sent_tools:
        if m.name == "search_flights":
            assert "ref:" in str(m.content)
            assert len(str(m.content)) < len(big[0].content) / 3
    names = {t["function"]["name"] for t in last.tools}
    assert {"search_flights", "get_user", "expand_ref"} <= names
    ai = [m for m in state if isinstance(m, AIMessage)]
    assert "ctxplugin" in ai[-1].response_metadata
    humans = [m for m in state if isinstance(m, HumanMessage)]
    assert [h.content for h in humans] == ["find flights", "and for Mia?"]


def test_create_agent_sync_keeps_state_and_sends_view() -> None:
    model, engine = script(), memory_engine(ContextConfig())
    agent = build(model, engine)
    config: Any = {"configurable": {"thread_id": "t-sync"}}
    agent.invoke({"messages": [{"role": "user", "content": "find flights"}]}, config)
    agent.invoke({"messages": [{"role": "user", "content": "and for Mia?"}]}, config)
    check(model, agent.get_state(config).values["messages"], engine, "t-sync")


async def test_create_agent_async_keeps_state_and_sends_view() -> None:
    model, engine = script(), memory_engine()
    agent = build(model, engine)
    config: Any = {"configurable": {"thread_id": "t-async"}}
    await agent.ainvoke({"messages": [{"role": "user", "content": "find flights"}]}, config)
    await agent.ainvoke({"messages": [{"role": "user", "content": "and for Mia?"}]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    check(model, state, engine, "t-async")


def test_model_can_expand_a_ref_through_the_middleware_tool() -> None:
    engine = memory_engine()

    def expand_first_ref(messages: list[Any], tools: list[Any]) -> AIMessage:
        text = next(str(m.content) for m in messages if isinstance(m, ToolMessage) and "ref:" in str(m.content))
        ref = "ref:" + text.split("ref:", 1)[1].split()[0].rstrip("];,.)")
        return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref, "offset": 5, "limit": 2})])

    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
        expand_first_ref,
        AIMessage(content="HAT005 and HAT006."),
    ])
    agent = build(model, engine)
    config: Any = {"configurable": {"thread_id": "t-expand"}}
    agent.invoke({"messages": [{"role": "user", "content": "find flights"}]}, config)
    state = agent.get_state(config).values["messages"]
    expanded = [m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref"]
    assert expanded and "HAT005" in str(expanded[0].content) and "HAT007" not in str(expanded[0].content)
