"""LangChain ``create_agent`` with ``ContextMiddleware``: the state keeps everything, the model
receives the prepared view; sync, async and streaming."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware, current_scope
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.types import Command

from ctxplugin import ContextCallbackHandler, InvalidInputError, RefNotFoundError, Scope
from ctxplugin.testing import ScriptedChatModel, conversation_messages, memory_engine, tool_call


def build(model: ScriptedChatModel, engine: Any, scenario: Any, **options: Any) -> Any:
    return create_agent(model, scenario.tools, system_prompt="Be brief.",
                        middleware=[ContextMiddleware(engine, **options)], checkpointer=InMemorySaver())


def test_multi_turn_sync(scenario: Any, handler: ContextCallbackHandler) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-sync"}, "callbacks": [handler]}
    for turn in scenario.turns:
        agent.invoke({"messages": [{"role": "user", "content": turn}]}, config)
    state = agent.get_state(config).values["messages"]
    scenario.check(model, state, engine, Scope(session_id="t-sync"), handler)
    assert handler.summary.captures == 3 and handler.summary.saved_tokens > 0
    # the report of each call rides on the AI message, and every bound tool list has the meta-tools
    assert all("ctxplugin" in m.response_metadata for m in state if isinstance(m, AIMessage))
    assert {"search_flights", "expand_ref"} <= set(model.calls[-1].tool_names)


async def test_multi_turn_async(scenario: Any, handler: ContextCallbackHandler) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-async"}, "callbacks": [handler]}
    for turn in scenario.turns:
        await agent.ainvoke({"messages": [{"role": "user", "content": turn}]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    scenario.check(model, state, engine, Scope(session_id="t-async"), handler)


def test_stream_modes(scenario: Any, handler: ContextCallbackHandler) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-stream"}, "callbacks": [handler]}
    chunks = list(agent.stream({"messages": [("user", scenario.turns[0])]}, config, stream_mode="messages"))
    streamed = [m for m, _ in chunks if isinstance(m, ToolMessage)]
    assert streamed and "ref:" in str(streamed[0].additional_kwargs["ctxplugin"]["ref"])
    for turn in scenario.turns[1:]:
        updates = list(agent.stream({"messages": [("user", turn)]}, config, stream_mode="updates"))
        assert any("tools" in u for u in updates)
    scenario.check(model, agent.get_state(config).values["messages"], engine, Scope(session_id="t-stream"), handler)


async def test_astream_and_astream_events(scenario: Any, handler: ContextCallbackHandler) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-events"}, "callbacks": [handler]}
    values = [v async for v in agent.astream({"messages": [("user", scenario.turns[0])]}, config, stream_mode="values")]
    assert len(values[-1]["messages"]) == 4
    names: list[str] = []
    async for event in agent.astream_events({"messages": [("user", scenario.turns[1])]}, config, version="v2"):
        if event["event"] == "on_custom_event":
            names.append(event["name"])
    assert names.count("ctxplugin.report") == 2 and names.count("ctxplugin.capture") == 1
    await agent.ainvoke({"messages": [("user", scenario.turns[2])]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    scenario.check(model, state, engine, Scope(session_id="t-events"), handler)


def test_keep_originals_false_keeps_only_the_compact_form(scenario: Any) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario, keep_originals=False)
    config: Any = {"configurable": {"thread_id": "t-compact"}}
    agent.invoke({"messages": [("user", scenario.turns[0])]}, config)
    result = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    ref = result.additional_kwargs["ctxplugin"]["ref"]
    assert ref in str(result.content) and len(str(result.content)) < 2000
    original = engine.expand_ref(ref, scope=Scope(session_id="t-compact"))
    assert original == scenario.tools[0].invoke({"origin": "SFO", "destination": "JFK"})


def test_model_can_expand_a_ref_through_the_middleware_tool(scenario: Any, handler: ContextCallbackHandler) -> None:
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
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-expand"}, "callbacks": [handler]}
    agent.invoke({"messages": [{"role": "user", "content": "find flights"}]}, config)
    state = agent.get_state(config).values["messages"]
    expanded = [m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref"]
    assert expanded and "HAT005" in str(expanded[0].content) and "HAT007" not in str(expanded[0].content)
    ref = state[2].additional_kwargs["ctxplugin"]["ref"]
    assert handler.expanded == [ref] and handler.summary.refs_created == 1
    assert handler.describe().startswith("3 model calls:") and "1 refs created, 1 tool outputs captured, 1 expands" in handler.describe()


def test_a_ref_from_another_thread_does_not_expand(scenario: Any) -> None:
    engine = memory_engine()
    model = scenario.scripted()
    agent = build(model, engine, scenario)
    agent.invoke({"messages": [("user", scenario.turns[0])]}, {"configurable": {"thread_id": "owner"}})
    owner_state = agent.get_state({"configurable": {"thread_id": "owner"}}).values["messages"]
    ref = next(m.additional_kwargs["ctxplugin"]["ref"] for m in owner_state if isinstance(m, ToolMessage))
    thief = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref})]),
        AIMessage(content="I could not read it."),
    ])
    other = build(thief, engine, scenario)
    other.invoke({"messages": [("user", "show me that")]}, {"configurable": {"thread_id": "other"}})
    answer = next(m for m in other.get_state({"configurable": {"thread_id": "other"}}).values["messages"]
                  if isinstance(m, ToolMessage))
    assert "HAT000" not in str(answer.content) and "no such ref" in str(answer.content)


def test_fixed_scope(scenario: Any) -> None:
    engine, model = memory_engine(), scenario.scripted()
    agent = build(model, engine, scenario, scope=Scope(session_id="pinned"))
    config: Any = {"configurable": {"thread_id": "ignored"}}
    agent.invoke({"messages": [("user", scenario.turns[0])]}, config)
    ref = next(m.additional_kwargs["ctxplugin"]["ref"] for m in agent.get_state(config).values["messages"]
               if isinstance(m, ToolMessage))
    assert engine.expand_ref(ref, scope=Scope(session_id="pinned"))
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=Scope(session_id="ignored"))


def test_scope_function_gets_the_run_config(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()

    def per_user(config: Any) -> Scope:
        return Scope(session_id=f"{config['configurable']['thread_id']}-x", user_id=config["configurable"]["user"])

    agent = build(model, engine, scenario, scope=per_user)
    config: Any = {"configurable": {"thread_id": "t9", "user": "mia"}, "callbacks": [handler]}
    for turn in scenario.turns:
        agent.invoke({"messages": [("user", turn)]}, config)
    scenario.check(model, agent.get_state(config).values["messages"], engine,
                   Scope(session_id="t9-x", user_id="mia"), handler)
    assert handler.sessions() == {"t9-x"}


def test_humans_keep_their_words(scenario: Any) -> None:
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-words"}}
    for turn in scenario.turns:
        agent.invoke({"messages": [("user", turn)]}, config)
    humans = [m.content for m in agent.get_state(config).values["messages"] if isinstance(m, HumanMessage)]
    assert humans == scenario.turns


def test_a_tool_returning_a_command_is_captured(scenario: Any) -> None:
    @tool
    def search_and_note(origin: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> Command[Any]:
        """Search flights and remember the origin."""
        output = str(scenario.tools[0].invoke({"origin": origin, "destination": "JFK"}))
        return Command(update={"messages": [ToolMessage(output, tool_call_id=tool_call_id, name="search_and_note")]})

    engine = memory_engine()
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_and_note", {"origin": "SFO"})]),
        AIMessage(content="Done."),
    ], default=None)
    agent: Any = create_agent(model, [search_and_note], middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-command"}}
    agent.invoke({"messages": [("user", "search")]}, config)
    result = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    ref = result.additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=Scope(session_id="t-command")) == result.content
    seen = next(m for m in conversation_messages(model.calls[-1].messages) if isinstance(m, ToolMessage))
    assert ref in str(seen.content) and len(str(seen.content)) < len(str(result.content)) / 3


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
@pytest.mark.parametrize("host", ["create_agent", "create_react_agent"])
@pytest.mark.parametrize("option", ["namespace", "fixed"])
def test_a_tool_reads_its_agents_refs_in_current_scope(
    scenario: Any, host: str, option: str, handler: ContextCallbackHandler
) -> None:
    # a tool of an agent with a namespace or a fixed scope works in that agent's scope, not
    # in the thread's; its read is counted as an expand, as the model's expand_ref calls are
    engine = memory_engine()

    @tool
    def first_flight(ref_id: str) -> str:
        """The first flight of a stored search."""
        first: str = engine.expand_ref(ref_id, scope=current_scope(), limit=1)
        return first

    def read_first(messages: list[Any], tools: list[Any]) -> AIMessage:
        results = [str(m.content) for m in messages if isinstance(m, ToolMessage)]
        seen = next(text for text in results if "ref:" in text)
        ref = "ref:" + seen.split("ref:", 1)[1].split()[0].rstrip("];,.)")
        return AIMessage(content="", tool_calls=[tool_call("first_flight", {"ref_id": ref})])

    search = tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[search]), read_first, AIMessage(content="Done.")],
        default=None,
    )
    pinned = Scope(session_id="pinned")
    options: Any = {"namespace": "planner"} if option == "namespace" else {"scope": pinned}
    tools = [scenario.tools[0], first_flight]
    if host == "create_agent":
        middleware = [ContextMiddleware(engine, **options)]
        agent: Any = create_agent(model, tools, middleware=middleware, checkpointer=InMemorySaver())
    else:
        hooks = ContextHooks(engine, tools, **options)
        agent = create_react_agent(
            hooks.model(model),
            hooks.tool_node(),
            pre_model_hook=hooks.pre_model_hook,
            checkpointer=InMemorySaver(),
        )
    config: Any = {"configurable": {"thread_id": "t-tool-scope"}, "callbacks": [handler]}
    agent.invoke({"messages": [("user", "first flight SFO JFK")]}, config)
    state = agent.get_state(config).values["messages"]
    answer = [m for m in state if isinstance(m, ToolMessage)][-1]
    assert answer.status != "error" and "HAT000" in str(answer.content)
    [read] = [m for m in state if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["name"] == "first_flight"]
    assert handler.expanded == [read.tool_calls[0]["args"]["ref_id"]]
    assert "1 expands" in handler.describe()


def test_the_same_output_twice_is_one_ref_used_in_the_report(scenario: Any, handler: ContextCallbackHandler) -> None:
    # the same search twice: two tool messages with one content, so one ref shown twice
    model, engine = scenario.scripted(), memory_engine()
    agent = build(model, engine, scenario)
    config: Any = {"configurable": {"thread_id": "t-twice"}, "callbacks": [handler]}
    for _ in range(2):
        agent.invoke({"messages": [{"role": "user", "content": "flights SFO JFK"}]}, config)
    state = agent.get_state(config).values["messages"]
    refs = {m.additional_kwargs["ctxplugin"]["ref"] for m in state if isinstance(m, ToolMessage)}
    [ref] = refs
    assert sum(ref in m.text for m in model.calls[-1].messages if isinstance(m, ToolMessage) and m.name == "search_flights") == 2
    assert handler.reports[-1].refs_used == [ref]
    assert [m for m in state if isinstance(m, AIMessage)][-1].response_metadata["ctxplugin"]["ctxplugin.refs_used"] == 1


@pytest.mark.parametrize("adapter", [ContextMiddleware, lambda engine: ContextHooks(engine, [])])
@pytest.mark.parametrize("engine", [".ctxplugin", None])
def test_something_other_than_an_engine_is_a_clear_error(adapter: Any, engine: Any) -> None:
    with pytest.raises(InvalidInputError, match=r"ContextEngine\.embedded\(path="):
        adapter(engine)
