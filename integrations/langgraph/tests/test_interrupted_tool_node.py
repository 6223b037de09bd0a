"""A ``ToolNode`` that runs parallel calls, one of which asks a human (``interrupt()``): the node's
writes are dropped, and on ``Command(resume=...)`` every call of the node runs again. A sibling
whose output changed between the two runs (a live quote) was captured twice; only the second
output reaches the state, so the facts read from the first must not stay."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition
from langgraph.types import Command, RetryPolicy, interrupt

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing import ScriptedChatModel, tool_call


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def quote_tool() -> Any:
    runs = itertools.count()

    @tool
    def quote(route: str) -> str:
        """Live fares of a route (a new quote at every call)."""
        run = next(runs)
        return json.dumps([
            {"quote_id": f"q{run}-{i}", "fare": f"F{i}", "route": route, "price": 200 + i + 1000 * run} for i in range(300)
        ])

    return quote


@tool
def book(fare: str) -> str:
    """Book a fare once a human approved it."""
    answer = interrupt({"approve": fare})
    return json.dumps({"booked": fare, "approved": answer})


def policy(messages: list[BaseMessage], tools: Any) -> AIMessage:
    if isinstance(messages[-1], HumanMessage) and "book" in messages[-1].text:
        return AIMessage(content="", tool_calls=[tool_call("quote", {"route": "SFO-JFK"}), tool_call("book", {"fare": "F1"})])
    return AIMessage(content="Done.")


def app_on(engine: ContextEngine, tools: list[Any], saver: InMemorySaver, script: Any) -> Any:
    """The user's graph: model -> tools -> model, ``hooks.tool_node()`` as its tool node."""
    hooks = ContextHooks(engine, tools)
    builder = StateGraph(State)
    builder.add_node("model", hooks.model_node(ScriptedChatModel(script=[script] * 6, default=None)))
    builder.add_node("tools", hooks.tool_node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "model")
    return builder.compile(checkpointer=saver)


@pytest.mark.parametrize("resumed_by", ["the same agent", "an agent built anew on the engine"])
@pytest.mark.parametrize("run", ["sync", "async"])
async def test_a_sibling_run_again_on_resume_keeps_only_the_facts_of_its_output_in_the_state(
    tmp_path: Path, resumed_by: str, run: str
) -> None:
    engine, saver, tools = ContextEngine.embedded(path=tmp_path / "ctx"), InMemorySaver(), [quote_tool(), book]
    app = app_on(engine, tools, saver, policy)
    config: Any = {"configurable": {"thread_id": "interrupted"}}
    turn = {"messages": [HumanMessage("book F1 on SFO-JFK")]}
    first = app.invoke(turn, config) if run == "sync" else await app.ainvoke(turn, config)
    assert first["__interrupt__"]
    if resumed_by != "the same agent":
        app = app_on(engine, tools, saver, policy)
    resume: Command[Any] = Command(resume="yes")
    state = (app.invoke(resume, config) if run == "sync" else await app.ainvoke(resume, config))["messages"]

    kept = next(m for m in state if isinstance(m, ToolMessage) and m.name == "quote")
    assert "q1-0" in str(kept.content), "the quote ran again on resume"
    facts = [hit.fact.text for hit in engine.facts.search("quote fare route price SFO-JFK", scope=Scope(session_id="interrupted"), k=50)]
    assert any("q1-" in text for text in facts), facts
    assert not any("q0-" in text for text in facts), "facts of an output the state never held"


def test_a_call_id_given_again_to_a_later_call_keeps_the_facts_of_the_first_output(tmp_path: Path) -> None:
    """A host whose model numbers its calls anew each step (``call_0`` every time): the second
    call is no run of the first again (the first's result is in the state), and what was read
    from the first output stays."""

    def again(messages: list[BaseMessage], tools: Any) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage(content="", tool_calls=[tool_call("quote", {"route": "SFO-JFK"}, call_id="call_0")])
        return AIMessage(content="Done.")

    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    app = app_on(engine, [quote_tool()], InMemorySaver(), again)
    config: Any = {"configurable": {"thread_id": "numbered"}}
    for turn in ("quote SFO-JFK", "quote SFO-JFK again"):
        app.invoke({"messages": [HumanMessage(turn)]}, config)

    facts = [hit.fact.text for hit in engine.facts.search("quote fare route price SFO-JFK", scope=Scope(session_id="numbered"), k=50)]
    assert any("q0-" in text for text in facts) and any("q1-" in text for text in facts), facts


def test_a_tool_node_retried_after_a_failing_sibling_keeps_only_the_facts_of_the_kept_output(tmp_path: Path) -> None:
    """A retry policy on the tool node: a sibling that fails once makes the node run again."""
    failures = itertools.count()

    @tool
    def flaky_seats(flight: str) -> str:
        """Seats left on a flight (its service drops the first request)."""
        if next(failures) == 0:
            raise ConnectionError("seat service reset the connection")
        return json.dumps({"flight": flight, "seats_left": 4})

    def both(messages: list[BaseMessage], tools: Any) -> AIMessage:
        if isinstance(messages[-1], HumanMessage):
            return AIMessage(content="", tool_calls=[tool_call("quote", {"route": "SFO-JFK"}), tool_call("flaky_seats", {"flight": "HAT001"})])
        return AIMessage(content="Done.")

    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    hooks = ContextHooks(engine, [quote_tool(), flaky_seats])
    builder = StateGraph(State)
    builder.add_node("model", hooks.model_node(ScriptedChatModel(script=[both] * 4, default=None)))
    builder.add_node("tools", hooks.tool_node(handle_tool_errors=False),
                     retry_policy=RetryPolicy(max_attempts=2, initial_interval=0.01, retry_on=ConnectionError))
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "model")
    state = builder.compile(checkpointer=InMemorySaver()).invoke(
        {"messages": [HumanMessage("fares and seats")]}, {"configurable": {"thread_id": "retried"}}
    )["messages"]

    assert "q1-0" in str(next(m for m in state if isinstance(m, ToolMessage) and m.name == "quote").content)
    facts = [hit.fact.text for hit in engine.facts.search("quote fare route price SFO-JFK", scope=Scope(session_id="retried"), k=50)]
    assert any("q1-" in text for text in facts) and not any("q0-" in text for text in facts), facts
