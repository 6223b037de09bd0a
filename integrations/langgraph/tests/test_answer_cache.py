"""The answer cache in real agents: ``create_agent`` middleware, ``create_react_agent`` hooks and
a custom ``StateGraph`` model node. The scripted model raises if it is called more often than
scripted, so a served answer provably skipped the model."""

from __future__ import annotations

import json
from typing import Annotated, Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent
from typing_extensions import TypedDict

from ctxplugin import ContextCallbackHandler, ContextConfig, ContextEngine, Scope
from ctxplugin.cache import CACHE_META_KEY, CacheScope, MemoryAnswerCacheStore
from ctxplugin.config import CacheConfig
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

QUESTION = "What is the status of order #W2378156?"
runs: list[str] = []


@tool
def get_order(order_id: str) -> str:
    """Get an order's status and items."""
    runs.append(order_id)
    return json.dumps({"order_id": order_id, "status": "delivered", "items": [{"name": "Hiking Boots", "price": 250.1}]})


def engine_on(scope: CacheScope = "session") -> ContextEngine:
    engine: ContextEngine = memory_engine(ContextConfig(cache=CacheConfig(enabled=True, scope=scope)))
    return engine


def order_model(*finals: str) -> ScriptedChatModel:
    """Per answer: a tool call, then the final answer; nothing more (a further call raises)."""
    script: list[Any] = []
    for final in finals:
        script += [AIMessage(content="", tool_calls=[tool_call("get_order", {"order_id": "#W2378156"})]), AIMessage(content=final)]
    return ScriptedChatModel(script=script, default=None)


def agent_for(model: ScriptedChatModel, engine: ContextEngine) -> Any:
    return create_agent(model, [get_order], system_prompt="You are a retail assistant.",
                        middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())


def last_ai(agent: Any, config: Any) -> AIMessage:
    message = agent.get_state(config).values["messages"][-1]
    assert isinstance(message, AIMessage)
    return message


def test_create_agent_serves_a_repeated_question_without_the_model_or_the_tool() -> None:
    engine, model, handler = engine_on(), order_model("Order #W2378156 was delivered."), ContextCallbackHandler()
    agent = agent_for(model, engine)
    config: Any = {"configurable": {"thread_id": "t-sync"}, "callbacks": [handler]}
    runs.clear()
    agent.invoke({"messages": [("user", QUESTION)]}, config)
    first = last_ai(agent, config)
    agent.invoke({"messages": [("user", QUESTION)]}, config)
    served = last_ai(agent, config)
    assert len(model.calls) == 2 and runs == ["#W2378156"]
    assert served.content == first.content and served.id != first.id
    assert served.response_metadata[CACHE_META_KEY]["hit"] is True
    assert served.response_metadata["ctxplugin"]["ctxplugin.cached_answer"] is True
    assert first.response_metadata["ctxplugin"]["ctxplugin.cached_answer"] is False
    assert len(agent.get_state(config).values["messages"]) == 6  # both turns kept, nothing replaced
    # three lookups (two calls of the first turn, one of the second), one hit
    assert (handler.summary.cache_lookups, handler.summary.cache_hits) == (3, 1)
    assert handler.summary.cache_hit_rate == pytest.approx(1 / 3)
    # only the final answer was stored, never the reply with tool calls
    assert engine.cache is not None and isinstance(engine.cache.store, MemoryAnswerCacheStore)
    assert len(engine.cache.store) == 1


async def test_create_agent_async_serves_a_repeated_question() -> None:
    engine, model = engine_on(), order_model("Delivered.")
    agent = agent_for(model, engine)
    config: Any = {"configurable": {"thread_id": "t-async"}}
    await agent.ainvoke({"messages": [("user", QUESTION)]}, config)
    await agent.ainvoke({"messages": [("user", "what is the status of order W2378156")]}, config)
    state = (await agent.aget_state(config)).values["messages"]
    assert len(model.calls) == 2
    assert state[-1].content == "Delivered." and CACHE_META_KEY in state[-1].response_metadata


def test_a_superseded_fact_makes_the_next_ask_miss() -> None:
    engine = engine_on()
    model = ScriptedChatModel(script=[AIMessage(content="Project Alpha."), AIMessage(content="Project Beta.")], default=None)
    agent: Any = create_agent(model, [], middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-facts"}}
    scope = Scope(session_id="t-facts")
    engine.facts.write("Data Team allocated to Project Alpha", key="data_team_allocation", scope=scope)
    ask = "Which project is the Data Team on?"
    for expected in ("Project Alpha.", "Project Alpha."):
        agent.invoke({"messages": [("user", ask)]}, config)
        assert last_ai(agent, config).content == expected
    assert len(model.calls) == 1
    engine.facts.write("Data Team reallocated to Project Beta", key="data_team_allocation", scope=scope)
    agent.invoke({"messages": [("user", ask)]}, config)
    assert last_ai(agent, config).content == "Project Beta." and len(model.calls) == 2
    assert CACHE_META_KEY not in last_ai(agent, config).response_metadata


def test_no_hit_across_users() -> None:
    engine = engine_on("user")
    model = ScriptedChatModel(script=[AIMessage(content="30 days, u1."), AIMessage(content="30 days, u2.")], default=None)
    agent: Any = create_agent(model, [], middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())

    def ask(thread: str, user: str) -> AIMessage:
        config: Any = {"configurable": {"thread_id": thread, "user_id": user}}
        agent.invoke({"messages": [("user", "What is the return window?")]}, config)
        return last_ai(agent, config)

    assert ask("a1", "u1").content == "30 days, u1."
    assert ask("a2", "u1").content == "30 days, u1."  # the same user's other session shares it
    assert ask("b1", "u2").content == "30 days, u2."  # another user never does
    assert len(model.calls) == 2


def test_the_environment_switch_turns_the_cache_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_CACHE__ENABLED", "true")
    engine = memory_engine()
    model = ScriptedChatModel(script=[AIMessage(content="Yes.")], default=None)
    agent: Any = create_agent(model, [], middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t-env"}}
    for _ in range(3):
        agent.invoke({"messages": [("user", "Is the store open on Sundays?")]}, config)
    assert len(model.calls) == 1


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
async def test_create_react_agent_hooks_serve_repeats_sync_and_async() -> None:
    engine, model = engine_on(), order_model("Delivered.", "Delivered again.")
    hooks = ContextHooks(engine, [get_order], prompt="You are a retail assistant.")
    agent: Any = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               checkpointer=InMemorySaver())
    sync_config: Any = {"configurable": {"thread_id": "r-sync"}}
    agent.invoke({"messages": [("user", QUESTION)]}, sync_config)
    agent.invoke({"messages": [("user", QUESTION)]}, sync_config)
    assert len(model.calls) == 2
    assert CACHE_META_KEY in agent.get_state(sync_config).values["messages"][-1].response_metadata
    async_config: Any = {"configurable": {"thread_id": "r-async"}}
    await agent.ainvoke({"messages": [("user", QUESTION)]}, async_config)
    await agent.ainvoke({"messages": [("user", QUESTION)]}, async_config)
    assert len(model.calls) == 4
    state = (await agent.aget_state(async_config)).values["messages"]
    assert state[-1].content == "Delivered again." and CACHE_META_KEY in state[-1].response_metadata


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
@pytest.mark.parametrize("mode", ["messages", ["updates", "messages"]])
def test_create_react_agent_hooks_serve_repeats_while_streaming_messages(mode: Any) -> None:
    """``stream_mode="messages"`` gives an id to each message of the hook's view that has none
    (the prompt) as it streams, between the hook and the model step: the step must still find
    the call the hook prepared."""
    engine, model = engine_on(), order_model("Delivered.", "Delivered again.")
    hooks = ContextHooks(engine, [get_order], prompt="You are a retail assistant.")
    agent: Any = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                                    checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "r-stream"}}
    for _ in range(2):
        for _chunk in agent.stream({"messages": [("user", QUESTION)]}, config, stream_mode=mode):
            pass
    assert len(model.calls) == 2
    assert CACHE_META_KEY in agent.get_state(config).values["messages"][-1].response_metadata


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
async def test_create_react_agent_hooks_serve_a_repeat_in_a_run_without_a_thread_id() -> None:
    """Without a thread id the run's scope comes from the state's first message, which the model
    callable (handed only the view) cannot see: it must still find the call the hook prepared."""
    engine, model = engine_on(), order_model("Delivered.", "Delivered again.", "Delivered once more.")
    hooks = ContextHooks(engine, [get_order], prompt="You are a retail assistant.")
    agent: Any = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook)
    first = agent.invoke({"messages": [("user", QUESTION)]})
    again = agent.invoke({"messages": [*first["messages"], ("user", QUESTION)]})
    assert len(model.calls) == 2
    assert again["messages"][-1].content == "Delivered." and CACHE_META_KEY in again["messages"][-1].response_metadata
    other = agent.invoke({"messages": [("user", QUESTION)]})  # another run: a scope of its own
    assert len(model.calls) == 4 and other["messages"][-1].content == "Delivered again."
    assert CACHE_META_KEY not in other["messages"][-1].response_metadata
    asked = await agent.ainvoke({"messages": [*other["messages"], ("user", QUESTION)]})
    assert len(model.calls) == 4 and asked["messages"][-1].content == "Delivered again."


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def test_custom_graph_model_node_serves_repeats() -> None:
    engine, model = engine_on(), order_model("Delivered.")
    hooks = ContextHooks(engine, [get_order])
    graph = StateGraph(State)
    graph.add_node("model", hooks.model_node(model))
    graph.add_node("tools", hooks.tool_node())
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", lambda s: "tools" if s["messages"][-1].tool_calls else END)
    graph.add_edge("tools", "model")
    app: Any = graph.compile(checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "g1"}}
    app.invoke({"messages": [("user", QUESTION)]}, config)
    app.invoke({"messages": [("user", QUESTION)]}, config)
    assert len(model.calls) == 2
    assert app.get_state(config).values["messages"][-1].response_metadata[CACHE_META_KEY]["hit"] is True


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_react_hooks_give_a_scope_function_the_runs_config() -> None:
    engine = engine_on()
    model = ScriptedChatModel(script=[AIMessage(content="Yes.")], default=None)

    def scope_of(config: Any) -> Scope:  # needs the config: None would fail here
        return Scope(session_id=f"{config['configurable']['thread_id']}-support")

    hooks = ContextHooks(engine, [], scope=scope_of)
    agent: Any = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                                    checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "r-scope"}}
    for _ in range(2):
        agent.invoke({"messages": [("user", "Is the store open on Sundays?")]}, config)
    assert len(model.calls) == 1
