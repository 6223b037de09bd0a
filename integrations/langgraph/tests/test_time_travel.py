"""Time travel on a checkpointed thread: the user goes back to an earlier checkpoint and goes on
from there (``invoke`` or ``update_state`` with that checkpoint's config). What the messages of
the abandoned branch stated is no longer current on the new one; what the messages before the
fork point stated stays, and so does what a host that trims the front of its history dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import SummarizationMiddleware
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    ToolMessage,
)
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition
from langgraph.types import interrupt

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing import ScriptedChatModel, tool_call


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


@tool
def hotels(city: str) -> str:
    """Hotels of a city with their nightly rate."""
    return json.dumps({"city": city, "hotel": "Casa Azul", "confirmation_code": "CZ-7781"})


@tool
def book(hotel: str) -> str:
    """Book a hotel once a human approved it."""
    return json.dumps({"booked": hotel, "approved": interrupt({"approve": hotel})})


def lookup(messages: list[BaseMessage], tools: Any) -> AIMessage:
    if isinstance(messages[-1], HumanMessage) and "Book" in messages[-1].text:
        return AIMessage(content="", tool_calls=[tool_call("book", {"hotel": "Casa Azul"})])
    if isinstance(messages[-1], HumanMessage) and "hotel" in messages[-1].text:
        return AIMessage(content="", tool_calls=[tool_call("hotels", {"city": "Lisbon"})])
    return AIMessage(content="Noted.")


def graph_on(engine: ContextEngine, model: ScriptedChatModel, saver: Any) -> Any:
    """The user's graph: model -> tools -> model, ``hooks.model_node`` and ``hooks.tool_node()``."""
    hooks = ContextHooks(engine, [hotels, book])
    builder = StateGraph(State)
    builder.add_node("model", hooks.model_node(model))
    builder.add_node("tools", hooks.tool_node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


def agent_on(engine: ContextEngine, model: ScriptedChatModel, saver: Any) -> Any:
    return create_agent(model, [hotels], middleware=[ContextMiddleware(engine)], checkpointer=saver)


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(script=[lookup] * 20, default=None)


def shown(model: ScriptedChatModel) -> str:
    """What the latest model call saw, as one text."""
    return "\n".join(str(m.content) for m in model.calls[-1].messages)


def current(engine: ContextEngine, thread: str, query: str) -> list[str]:
    return [hit.fact.text for hit in engine.facts.search(query, scope=Scope(session_id=thread), k=20)]


def budgets(engine: ContextEngine, thread: str) -> list[str]:
    return [text for text in current(engine, thread, "my budget") if "budget" in text]


HOSTS = {"StateGraph": graph_on, "create_agent": agent_on}


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_fork_without_the_budget_shows_no_budget(tmp_path: Path, host: str) -> None:
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = HOSTS[host](engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("My destination is Lisbon.")]}, config)
    fork = app.get_state(config).config
    app.invoke({"messages": [HumanMessage("My budget is $900.")]}, config)
    app.invoke({"messages": [HumanMessage("Find me a hotel.")]}, config)
    assert "$900" in shown(model) or "CZ-7781" in shown(model)

    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, fork)
    assert "$900" not in shown(model), "a statement of the abandoned branch shown as current"
    assert "CZ-7781" not in shown(model), "a tool output of the abandoned branch shown as a fact"
    assert not any("$900" in text for text in current(engine, "trip", "my budget")), "still current in the ledger"
    assert not any("CZ-7781" in text for text in current(engine, "trip", "hotel confirmation code"))
    assert any("Lisbon" in text for text in current(engine, "trip", "my destination")), "before the fork point: stays"


@pytest.mark.parametrize("host", sorted(HOSTS))
def test_a_fork_that_states_the_budget_anew_shows_the_new_one(tmp_path: Path, host: str) -> None:
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = HOSTS[host](engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("My destination is Lisbon.")]}, config)
    app.invoke({"messages": [HumanMessage("My budget is $700.")]}, config)
    fork = app.get_state(config).config
    app.invoke({"messages": [HumanMessage("My budget is $900.")]}, config)

    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, fork)
    assert "$900" not in shown(model)
    assert "outdated" not in shown(model), "the budget said before the fork point is not marked replaced"
    assert budgets(engine, "trip") == ["My budget is $700."], "what the abandoned branch replaced is current again"

    app.invoke({"messages": [HumanMessage("My budget is $400.")]}, config)
    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, config)
    assert "$400" in shown(model) and "$900" not in shown(model)
    assert budgets(engine, "trip") == ["My budget is $400."]


def test_update_state_at_an_earlier_checkpoint(tmp_path: Path) -> None:
    """``update_state`` with an earlier checkpoint's config forks the thread there."""
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = graph_on(engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("My destination is Lisbon.")]}, config)
    fork = app.get_state(config).config
    app.invoke({"messages": [HumanMessage("My budget is $900.")]}, config)
    forked = app.update_state(fork, {"messages": [HumanMessage("I have no budget in mind yet.")]}, as_node="tools")
    app.invoke(None, forked)
    assert "$900" not in shown(model)
    assert not any("$900" in text for text in current(engine, "trip", "my budget"))


def test_a_host_that_trims_the_front_keeps_the_facts_of_what_it_dropped(tmp_path: Path) -> None:
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = graph_on(engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("My budget is $900.")]}, config)
    app.invoke({"messages": [HumanMessage("I am planning a trip to Lisbon in May.")]}, config)
    held = app.get_state(config).values["messages"]
    app.update_state(config, {"messages": [RemoveMessage(id=m.id) for m in held[:2]]})
    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, config)
    assert "My budget is $900." not in [m.content for m in app.get_state(config).values["messages"]]
    assert "$900" in shown(model), "a fact of a message trimmed from the front stays"
    assert any("$900" in text for text in current(engine, "trip", "my budget"))


def test_a_fork_seen_by_a_new_engine_after_a_restart(tmp_path: Path) -> None:
    """A new process (a new engine on the same store) that did not see the abandoned branch:
    what it stated is no longer current (each fact names the message said before its own)."""
    saver = InMemorySaver()
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = graph_on(engine, model, saver)
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("I am planning a trip to Lisbon in May.")]}, config)
    fork = app.get_state(config).config
    app.invoke({"messages": [HumanMessage("My budget is $900.")]}, config)
    del app, engine
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    graph_on(engine, model, saver).invoke({"messages": [HumanMessage("Any museums near the river?")]}, fork)
    assert "$900" not in shown(model)
    assert not any("$900" in text for text in current(engine, "trip", "my budget"))


def test_tool_output_of_the_abandoned_branch(tmp_path: Path) -> None:
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = graph_on(engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("I am planning a trip to Lisbon in May.")]}, config)
    fork = app.get_state(config).config
    app.invoke({"messages": [HumanMessage("Find me a hotel.")]}, config)
    assert any(isinstance(m, ToolMessage) for m in app.get_state(config).values["messages"])
    assert any("CZ-7781" in text for text in current(engine, "trip", "hotel confirmation code"))
    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, fork)
    assert not any("CZ-7781" in text for text in current(engine, "trip", "hotel confirmation code"))


def test_an_interrupt_left_for_an_earlier_checkpoint(tmp_path: Path) -> None:
    """The run waits on ``interrupt()``; instead of resuming it, the user goes back to before the
    message that led to it and says something else."""
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    app = graph_on(engine, model, InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    app.invoke({"messages": [HumanMessage("My destination is Lisbon.")]}, config)
    fork = app.get_state(config).config
    assert app.invoke({"messages": [HumanMessage("My budget is $900. Book Casa Azul.")]}, config)["__interrupt__"]
    app.invoke({"messages": [HumanMessage("Any museums near the river?")]}, fork)
    assert "$900" not in shown(model)
    assert budgets(engine, "trip") == []


@pytest.mark.parametrize("keep", [2, 3])
def test_create_agent_with_summarization_keeps_the_facts_of_what_it_summarized(tmp_path: Path, keep: int) -> None:
    """``SummarizationMiddleware`` rewrites the state: a summary in place of the older messages,
    the latest kept. A rewritten front, not a branch: what the older messages stated stays."""
    engine, model = ContextEngine.embedded(path=tmp_path / "ctx"), scripted()
    summarize = SummarizationMiddleware(ScriptedChatModel(default="Summary: a trip to Lisbon."), trigger=("messages", 5), keep=("messages", keep))
    agent = create_agent(model, [hotels], middleware=[summarize, ContextMiddleware(engine)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "trip"}}
    for turn in ("My budget is $900.", "My destination is Lisbon.", "Find me a hotel.", "Any museums near the river?"):
        agent.invoke({"messages": [HumanMessage(turn)]}, config)
    held = agent.get_state(config).values["messages"]
    assert "Summary" in held[0].text and not any(m.text == "My budget is $900." for m in held)
    assert budgets(engine, "trip") == ["My budget is $900."]
    assert "$900" in shown(model)
