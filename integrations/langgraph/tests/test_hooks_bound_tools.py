"""``ContextHooks`` and an LCEL ``PrepareRunnable`` bind the tools their prepared view was
planned with: in the default whole mode a conversation sent as it was shows no ref, so
``expand_ref`` is neither counted in the budget nor bound, by ``hooks.model``,
``hooks.model_node``, ``hooks.bind`` and ``PrepareRunnable.bound_tools`` alike, as
``ContextMiddleware`` does; it is bound from the call whose view shows a ref."""

from __future__ import annotations

import json
from typing import Annotated, Any, TypedDict

import pytest
from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent, tools_condition

from ctxplugin import ContextCallbackHandler, ContextConfig
from ctxplugin.langchain import PrepareRunnable
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


@tool
def search_flights(origin: str, destination: str, count: int) -> str:
    """Search flights between two airports."""
    return json.dumps([{"flight": f"HAT{i:03d}", "from": origin, "to": destination, "price": 90 + i} for i in range(count)])


def script(counts: list[int]) -> ScriptedChatModel:
    steps: list[AIMessage] = []
    for count in counts:
        steps += [AIMessage("", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK", "count": count})]),
                  AIMessage(f"{count} flights.")]
    return ScriptedChatModel(script=steps)


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]


def react(model: ScriptedChatModel, hooks: ContextHooks) -> Any:
    return create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                              checkpointer=InMemorySaver())


def model_node(model: ScriptedChatModel, hooks: ContextHooks) -> Any:
    graph = StateGraph(State)
    graph.add_node("model", hooks.model_node(model))
    graph.add_node("tools", hooks.tool_node())
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=InMemorySaver())


def prepare_node(model: ScriptedChatModel, hooks: ContextHooks) -> Any:
    def call_model(state: State, config: RunnableConfig) -> dict[str, Any]:
        view = state["llm_input_messages"]
        return {"messages": [hooks.bind(model, view).invoke(view, config)]}

    graph = StateGraph(State)
    graph.add_node("prepare", hooks.prepare_node())
    graph.add_node("model", call_model)
    graph.add_node("tools", hooks.tool_node())
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "prepare")
    return graph.compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("build", [react, model_node, prepare_node], ids=["create_react_agent", "model_node", "bind"])
def test_the_tools_bound_are_those_the_view_was_planned_with(build: Any) -> None:
    # a short output and a long one: the conversation goes whole, then outgrows 7,500 tokens
    engine, model = memory_engine(ContextConfig(mode="whole")), script([5, 400])
    handler = ContextCallbackHandler()
    agent = build(model, ContextHooks(engine, [search_flights]))
    config: Any = {"configurable": {"thread_id": "bound"}, "callbacks": [handler]}
    for turn in ["Flights SFO to JFK?", "All of them?"]:
        agent.invoke({"messages": [("user", turn)]}, config)
    assert len(model.calls) == len(handler.reports) == 4
    for call, report in zip(model.calls, handler.reports, strict=True):
        assert call.tool_names == report.tools_bound
    assert model.calls[0].tool_names == ["search_flights"]  # nothing in view for expand_ref to read
    assert "ref:search_flights:" in "".join(m.text for m in model.calls[-1].messages)
    assert model.calls[-1].tool_names == ["search_flights", "expand_ref"]


def test_an_lcel_step_binds_the_tools_its_view_was_planned_with() -> None:
    engine = memory_engine(ContextConfig(mode="whole"))
    prepare = PrepareRunnable(engine, tools=[search_flights, *engine.tools_for_model()])
    config: Any = {"configurable": {"thread_id": "lcel"}}
    messages: list[BaseMessage] = [HumanMessage("Flights SFO to JFK?", id="h1")]
    for count in [5, 400]:
        call = tool_call("search_flights", {"origin": "SFO", "destination": "JFK", "count": count})
        messages += [AIMessage("", tool_calls=[call]), ToolMessage(search_flights.invoke(call["args"]), tool_call_id=call["id"], name="search_flights")]
        view = prepare.invoke(messages, config)
        names = [t.name for t in prepare.bound_tools(view)]
        shows_ref = "ref:search_flights:" in "".join(m.text for m in view)
        assert ("expand_ref" in names) == shows_ref, (count, names)
    assert shows_ref


def _turn(count: int, n: int) -> list[BaseMessage]:
    """A user asking for ``count`` flights, the search and its output, and the answer."""
    call = tool_call("search_flights", {"origin": "SFO", "destination": "JFK", "count": count})
    return [HumanMessage(f"Flights, take {n}?", id=f"h{n}"), AIMessage("", tool_calls=[call], id=f"a{n}"),
            ToolMessage(search_flights.invoke(call["args"]), tool_call_id=call["id"], name="search_flights", id=f"t{n}"),
            AIMessage(f"{count} flights.", id=f"r{n}")]


def test_a_view_ending_like_one_planned_without_expand_ref_still_binds_it_when_it_shows_a_ref() -> None:
    # two conversations served at once end with one message object (a shared "Go on." the
    # host appends) and their views are as long: one goes whole, the other shows a ref
    hooks = ContextHooks(memory_engine(ContextConfig(mode="whole")), [search_flights])
    go_on = HumanMessage("Go on.", id="go-on")

    long = hooks.prepare({"messages": [*_turn(400, 1), go_on]}, {"configurable": {"thread_id": "long"}})
    short = hooks.prepare({"messages": [*_turn(3, 2), HumanMessage("Thanks.", id="h3"), AIMessage("Welcome.", id="r3"), go_on]},
                          {"configurable": {"thread_id": "short"}})
    assert len(long.messages) == len(short.messages) and long.messages[-1] is short.messages[-1]
    assert short.report.tools_bound == ["search_flights"]
    assert "ref:search_flights:" in "".join(m.text for m in long.messages)
    model = ScriptedChatModel(script=[AIMessage("Reading it.")])
    hooks.bind(model, long.messages).invoke(long.messages)
    assert model.calls[0].tool_names == long.report.tools_bound == ["search_flights", "expand_ref"]


def test_a_view_planned_without_expand_ref_keeps_it_out_after_another_ending_alike_is_prepared_with_it() -> None:
    # the order reversed: the conversation sent whole is prepared first, then one ending with the
    # same message object that shows a ref; the first is still bound what it was planned with
    hooks = ContextHooks(memory_engine(ContextConfig(mode="whole")), [search_flights])
    go_on = HumanMessage("Go on.", id="go-on")

    short = hooks.prepare({"messages": [*_turn(3, 2), HumanMessage("Thanks.", id="h3"), AIMessage("Welcome.", id="r3"), go_on]},
                          {"configurable": {"thread_id": "short"}})
    long = hooks.prepare({"messages": [*_turn(400, 1), go_on]}, {"configurable": {"thread_id": "long"}})
    assert long.messages[-1] is short.messages[-1] and long.report.tools_bound == ["search_flights", "expand_ref"]
    model = ScriptedChatModel(script=[AIMessage("Here they are.")])
    hooks.bind(model, short.messages).invoke(short.messages)
    assert model.calls[0].tool_names == short.report.tools_bound == ["search_flights"]
