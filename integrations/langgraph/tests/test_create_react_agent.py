"""LangGraph ``create_react_agent`` with ``ContextHooks``: ``pre_model_hook`` sends the view,
the tool node captures outputs, the model callable binds the tools the view needs."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from ctxplugin import ContextCallbackHandler, ContextConfig, InvalidInputError, Scope, ToolsConfig
from ctxplugin.testing import ScriptedChatModel, conversation_messages, memory_engine, tool_call

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


def build(model: ScriptedChatModel, hooks: ContextHooks) -> Any:
    return create_react_agent(hooks.model(model), hooks.tool_node(),
                              pre_model_hook=hooks.pre_model_hook, checkpointer=InMemorySaver())


def test_multi_turn_sync(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    hooks = ContextHooks(engine, scenario.tools, prompt="Be brief.")
    agent = build(model, hooks)
    config: Any = {"configurable": {"thread_id": "r-sync"}, "callbacks": [handler]}
    for turn in scenario.turns:
        agent.invoke({"messages": [("user", turn)]}, config)
    state = agent.get_state(config).values["messages"]
    scenario.check(model, state, engine, Scope(session_id="r-sync"), handler)
    # the prompt heads the view, not the state; the state has no copy of the view
    assert isinstance(model.calls[-1].messages[0], SystemMessage)
    assert "Be brief." in model.calls[-1].messages[0].text
    assert not any(isinstance(m, SystemMessage) for m in state)
    assert {"search_flights", "expand_ref"} <= set(model.calls[-1].tool_names)


async def test_multi_turn_async_and_astream_events(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    agent = build(model, ContextHooks(engine, scenario.tools))
    config: Any = {"configurable": {"thread_id": "r-async"}, "callbacks": [handler]}
    await agent.ainvoke({"messages": [("user", scenario.turns[0])]}, config)
    chunks = [c async for c in agent.astream({"messages": [("user", scenario.turns[1])]}, config, stream_mode="updates")]
    assert any("pre_model_hook" in c for c in chunks)
    names = [e["name"] async for e in agent.astream_events({"messages": [("user", scenario.turns[2])]}, config, version="v2")
             if e["event"] == "on_custom_event"]
    assert names.count("ctxplugin.report") == 2 and names.count("ctxplugin.capture") == 1
    state = (await agent.aget_state(config)).values["messages"]
    scenario.check(model, state, engine, Scope(session_id="r-async"), handler)


def test_stream_messages(scenario: Any) -> None:
    engine, model = memory_engine(), scenario.scripted()
    agent = build(model, ContextHooks(engine, scenario.tools))
    config: Any = {"configurable": {"thread_id": "r-stream"}}
    streamed = [m for turn in scenario.turns
                for m, _ in agent.stream({"messages": [("user", turn)]}, config, stream_mode="messages")]
    # the hook's view (llm_input_messages) streams too: its lookups are told apart
    tool_results = [m for m in conversation_messages(streamed) if isinstance(m, ToolMessage)]
    assert len(tool_results) == 3 and all("ctxplugin" in m.additional_kwargs for m in tool_results[:2])
    scenario.check(model, agent.get_state(config).values["messages"], engine, Scope(session_id="r-stream"))


def test_stream_messages_without_the_hooks_view_shows_no_system_prompt(scenario: Any) -> None:
    """The prompt given to ``ContextHooks`` heads the hook's view, which streams with
    ``stream_mode="messages"`` as the node's output: a chat UI that drops what the
    ``pre_model_hook`` node streams (as docs/hosts/create-react-agent.md says) shows neither
    the prompt nor the tool directory nor the lookups, and every message the agent wrote."""
    engine, model = memory_engine(), scenario.scripted()
    agent = build(model, ContextHooks(engine, [*scenario.tools, *many_tools(8)], prompt="You are a travel desk. Never quote fares."))
    config: Any = {"configurable": {"thread_id": "r-stream-prompt"}}
    streamed = [(m, meta) for turn in scenario.turns
                for m, meta in agent.stream({"messages": [("user", turn)]}, config, stream_mode="messages")]
    assert any(isinstance(m, SystemMessage) for m, _ in streamed), "the view streams: the reason for the recipe"
    shown = [m for m, meta in streamed if meta["langgraph_node"] != "pre_model_hook"]
    assert not any(isinstance(m, SystemMessage) for m in shown)
    written = [m for m in agent.get_state(config).values["messages"] if isinstance(m, (AIMessage, ToolMessage))]
    assert [m.id for m in shown] == [m.id for m in written]


def many_tools(count: int) -> list[Any]:
    from langchain_core.tools import StructuredTool

    def make(i: int) -> Any:
        def run(account_id: str, note: str = "") -> str:
            return f"tool_{i:02d} ran for {account_id}"

        return StructuredTool.from_function(run, name=f"tool_{i:02d}", description=f"Operation number {i} on an account.")

    return [make(i) for i in range(count)]


def test_model_callable_binds_lazily_loaded_tools() -> None:
    engine = memory_engine(ContextConfig(tools=ToolsConfig(directory="always", binding="loaded")))
    tools = many_tools(12)
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("load_tools", {"names": ["tool_07"]})]),
        AIMessage(content="", tool_calls=[tool_call("tool_07", {"account_id": "acc-1"})]),
        AIMessage(content="Done with tool_07."),
    ], default=None)
    agent = build(model, ContextHooks(engine, tools))
    config: Any = {"configurable": {"thread_id": "r-lazy"}}
    agent.invoke({"messages": [("user", "run operation 7 on acc-1")]}, config)
    first, second, _ = model.calls
    assert "tool_07" not in first.tool_names and "load_tools" in first.tool_names
    assert "tool_07" in str(first.messages[0].content), "the directory lists every tool by name"
    assert "tool_07" in second.tool_names and "tool_03" not in second.tool_names
    results = [m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage)]
    assert results[-1].content == "tool_07 ran for acc-1"


def test_tool_node_alone_captures(scenario: Any) -> None:
    """``hooks.tool_node()`` works with a plain model too (no hook, all tools bound)."""
    engine, model = memory_engine(), scenario.scripted()
    hooks = ContextHooks(engine, scenario.tools)
    agent = create_react_agent(model, hooks.tool_node(), checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "r-node"}}
    agent.invoke({"messages": [("user", scenario.turns[0])]}, config)
    result = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    ref = result.additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=Scope(session_id="r-node")) == result.content


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_chat_without_tools_runs_on_a_model_that_cannot_bind_tools(mode: str) -> None:
    import itertools

    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel

    llm = GenericFakeChatModel(messages=(AIMessage("Sure. " + "Here is a long answer with details. " * 60) for _ in itertools.count()))
    hooks = ContextHooks(memory_engine(ContextConfig(mode=mode)), [], prompt="You are a chat assistant.")
    agent = create_react_agent(hooks.model(llm), [], pre_model_hook=hooks.pre_model_hook, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": f"chat-{mode}"}}
    for i in range(20):  # bind_tools raises NotImplementedError: nothing may be bound
        agent.invoke({"messages": [("user", f"Tell me about topic {i} in detail please, for order W{1000 + i}.")]}, config)
    assert len(agent.get_state(config).values["messages"]) == 40


def test_one_tool_not_in_a_list_is_refused_with_what_to_do() -> None:
    def lookup(booking_id: str) -> str:
        """Look up a booking."""
        return booking_id

    for one in (tool(lookup), lookup):
        with pytest.raises(InvalidInputError, match=r"takes a list of tools.*wrap one tool in a list"):
            ContextHooks(memory_engine(), one)  # type: ignore[arg-type]
