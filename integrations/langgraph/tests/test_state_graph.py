"""A custom ``StateGraph``: a prepare node before the model node and a capturing ``ToolNode``;
subgraphs, and a multi-agent graph whose agents share one engine with their own scopes."""

from __future__ import annotations

from typing import Annotated, Any, TypedDict

from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import ToolNode, tools_condition

from ctxplugin import ContextCallbackHandler, RefNotFoundError, Scope
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]


def agent_graph(
    model: ScriptedChatModel, hooks: ContextHooks, tools: Any = None
) -> StateGraph[Any]:
    """The user's graph: prepare -> model -> tools -> prepare ... (two lines added for ctxplugin);
    ``tools``: a tool node of the user's own instead of ``hooks.tool_node()``."""

    def call_model(state: State, config: RunnableConfig) -> dict[str, Any]:
        view = state["llm_input_messages"]
        return {"messages": [hooks.bind(model, view).invoke(view, config)]}

    builder = StateGraph(State)
    builder.add_node("prepare", hooks.prepare_node())
    builder.add_node("model", call_model)
    builder.add_node("tools", hooks.tool_node() if tools is None else tools)
    builder.add_edge(START, "prepare")
    builder.add_edge("prepare", "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "prepare")
    return builder


def test_prepare_node_and_tool_node(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    graph = agent_graph(model, ContextHooks(engine, scenario.tools)).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-1"}, "callbacks": [handler]}
    for turn in scenario.turns:
        graph.invoke({"messages": [("user", turn)]}, config)
    scenario.check(model, graph.get_state(config).values["messages"], engine, Scope(session_id="g-1"), handler)


async def test_model_node_async_streaming(scenario: Any, handler: ContextCallbackHandler) -> None:
    class Plain(TypedDict):
        messages: Annotated[list[AnyMessage], add_messages]

    engine, model = memory_engine(), scenario.scripted()
    hooks = ContextHooks(engine, scenario.tools)
    builder = StateGraph(Plain)
    builder.add_node("model", hooks.model_node(model))
    builder.add_node("tools", hooks.tool_node())
    builder.add_edge(START, "model")
    builder.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    builder.add_edge("tools", "model")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-2"}, "callbacks": [handler]}
    for turn in scenario.turns:
        inputs: Any = {"messages": [("user", turn)]}
        streamed = [m async for m, _ in graph.astream(inputs, config, stream_mode="messages")]
        assert any(isinstance(m, AIMessage) for m in streamed)
    state = (await graph.aget_state(config)).values
    assert set(state) == {"messages"}, "model_node writes nothing but the reply"
    scenario.check(model, state["messages"], engine, Scope(session_id="g-2"), handler)


def test_agent_as_subgraph_node(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    inner = agent_graph(model, ContextHooks(engine, scenario.tools)).compile()
    outer = StateGraph(State)
    outer.add_node("assistant", inner)
    outer.add_edge(START, "assistant")
    outer.add_edge("assistant", END)
    graph = outer.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-sub"}, "callbacks": [handler]}
    for turn in scenario.turns:
        inputs: Any = {"messages": [("user", turn)]}
        chunks = list(graph.stream(inputs, config, subgraphs=True))
        assert any(namespace for namespace, _ in chunks), "the agent ran as a subgraph"
    scenario.check(model, graph.get_state(config).values["messages"], engine, Scope(session_id="g-sub"), handler)


def ref_in(messages: list[BaseMessage]) -> str:
    for m in reversed(messages):
        text = str(m.content)
        if "ref:" in text:
            return "ref:" + text.split("ref:", 1)[1].split()[0].rstrip("];,.)")
    raise AssertionError("no ref in view")


class Team(TypedDict):
    task: str
    research: str
    plan: str


def test_two_agents_share_an_engine_not_their_refs_or_facts(scenario: Any) -> None:
    engine = memory_engine()
    researcher_model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
        lambda messages, tools: AIMessage(content=f"Flights found; details in {ref_in(messages)}"),
    ], default=None)
    planner_model = ScriptedChatModel(script=[
        lambda messages, tools: AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref_in(messages)})]),
        AIMessage(content="I cannot read the researcher's notes; planning without them."),
    ], default=None)
    researcher = agent_graph(researcher_model, ContextHooks(engine, scenario.tools, namespace="researcher")).compile()
    planner = agent_graph(planner_model, ContextHooks(engine, scenario.tools, namespace="planner")).compile()

    def research(state: Team, config: RunnableConfig) -> dict[str, Any]:
        out = researcher.invoke({"messages": [HumanMessage(state["task"])]}, config)
        return {"research": out["messages"][-1].content}

    def plan(state: Team, config: RunnableConfig) -> dict[str, Any]:
        out = planner.invoke({"messages": [HumanMessage(f"Plan the trip. Research: {state['research']}")]}, config)
        return {"plan": out["messages"][-1].content}

    team = StateGraph(Team)
    team.add_node("research", research)
    team.add_node("plan", plan)
    team.add_edge(START, "research")
    team.add_edge("research", "plan")
    team.add_edge("plan", END)
    graph = team.compile(checkpointer=InMemorySaver())
    task: Any = {"task": "flights SFO JFK"}
    result = graph.invoke(task, {"configurable": {"thread_id": "team-1"}})

    ref = ref_in([AIMessage(content=result["research"])])
    mine, theirs = Scope(session_id="team-1/researcher"), Scope(session_id="team-1/planner")
    assert engine.expand_ref(ref, scope=mine).startswith("[")
    try:
        engine.expand_ref(ref, scope=theirs)
        raise AssertionError("the planner must not read the researcher's ref")
    except RefNotFoundError:
        pass
    denied = [m for m in planner_model.calls[-1].messages if isinstance(m, ToolMessage) and m.name == "expand_ref"]
    assert denied and "no such ref" in str(denied[0].content) and "HAT000" not in str(denied[0].content)
    # facts extracted from the researcher's tool output stay in the researcher's scope
    assert any("HAT0" in hit.fact.text for hit in engine.facts.search("flight HAT003 SFO JFK", scope=mine))
    assert not any("HAT0" in hit.fact.text for hit in engine.facts.search("flight HAT003 SFO JFK", scope=theirs))
    assert not any("HAT0" in str(m.content) for call in planner_model.calls for m in call.messages
                   if not isinstance(m, HumanMessage))


def test_a_tool_node_over_hooks_tools_without_the_wrappers_runs_expand_ref(scenario: Any) -> None:
    # hooks.bind offers expand_ref to the model: a tool node of the user's own over hooks.tools
    # runs it (outputs are then stored when the next view is prepared)
    def expand_it(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen = next(str(m.content) for m in messages if isinstance(m, ToolMessage))
        ref = "ref:" + seen.split("ref:", 1)[1].split()[0].rstrip("];,.)")
        expand = tool_call("expand_ref", {"ref_id": ref, "limit": 1})
        return AIMessage(content="", tool_calls=[expand])

    engine = memory_engine()
    search = tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[search]), expand_it, AIMessage(content="Done.")],
        default=None,
    )
    hooks = ContextHooks(engine, scenario.tools)
    assert "expand_ref" in {t.name for t in hooks.tools}
    graph = agent_graph(model, hooks, ToolNode(hooks.tools)).compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g-own-node"}}
    graph.invoke({"messages": [("user", "first flight SFO JFK")]}, config)
    state = graph.get_state(config).values["messages"]
    expanded = [m for m in state if isinstance(m, ToolMessage)][-1]
    assert expanded.name == "expand_ref" and expanded.status != "error"
    assert "HAT000" in str(expanded.content) and "HAT001" not in str(expanded.content)
