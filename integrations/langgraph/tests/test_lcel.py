"""LCEL: ``engine.as_runnable()`` piped before a model, and ``engine.history(session_id)`` for
``RunnableWithMessageHistory`` (whole conversation stored, prepared view returned)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from ctxplugin import ContextCallbackHandler, ContextConfig, ContextEngine, InvalidInputError, Scope
from ctxplugin.cache import CACHE_META_KEY
from ctxplugin.config import CacheConfig
from ctxplugin.langchain import ContextChatHistory, PrepareRunnable, make_expand_ref_tool
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call
from ctxplugin.tokens import count_messages

history_deprecated = pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")

PROMPT = ChatPromptTemplate.from_messages([("system", "Be brief."), MessagesPlaceholder("messages")])


def drive(chain: Any, scenario: Any, config: Any) -> list[BaseMessage]:
    """The user's loop: the conversation is theirs; the chain sees it through ctxplugin."""
    tools = {t.name: t for t in scenario.tools}
    messages: list[BaseMessage] = []
    for turn in scenario.turns:
        messages.append(HumanMessage(turn))
        reply = chain.invoke({"messages": messages}, config)
        messages.append(reply)
        for call in reply.tool_calls:
            messages.append(tools[call["name"]].invoke(call))
        if reply.tool_calls:
            messages.append(chain.invoke({"messages": messages}, config))
    return messages


def test_pipe_before_the_model(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    chain = PROMPT | engine.as_runnable() | model.bind_tools(scenario.tools)
    messages = drive(chain, scenario, {"configurable": {"thread_id": "l-1"}, "callbacks": [handler]})
    scenario.check(model, messages, engine, Scope(session_id="l-1"), handler, annotated=False)
    assert all(c.messages[0].text.startswith("Be brief.") for c in model.calls)


async def test_pipe_async_stream_and_events(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    chain = PROMPT | engine.as_runnable() | model.bind_tools(scenario.tools)
    config: Any = {"configurable": {"thread_id": "l-2"}, "callbacks": [handler]}
    tools = {t.name: t for t in scenario.tools}
    messages: list[BaseMessage] = []
    for index, turn in enumerate(scenario.turns):
        messages.append(HumanMessage(turn))
        chunks = [c async for c in chain.astream({"messages": messages}, config)]
        reply = AIMessage(content=chunks[-1].content, tool_calls=chunks[-1].tool_calls, id=chunks[-1].id)
        messages.append(reply)
        messages.extend([await tools[c["name"]].ainvoke(c) for c in reply.tool_calls])
        if index == 0:
            events = [e async for e in chain.astream_events({"messages": messages}, config, version="v2")]
            assert [e["name"] for e in events if e["event"] == "on_custom_event"] == ["ctxplugin.report"]
            messages.append(next(e["data"]["output"] for e in events if e["event"] == "on_chat_model_end"))
        else:
            messages.append(await chain.ainvoke({"messages": messages}, config))
    scenario.check(model, messages, engine, Scope(session_id="l-2"), handler, annotated=False)


def test_sync_stream_and_batch(scenario: Any) -> None:
    engine = memory_engine()
    prepare = engine.as_runnable()
    views = prepare.batch([[HumanMessage("hi")], [HumanMessage("hello")]],
                          [{"configurable": {"thread_id": "b-1"}}, {"configurable": {"thread_id": "b-2"}}])
    assert [v[-1].text for v in views] == ["hi", "hello"]
    assert list(prepare.stream([("user", "hi")]))[-1][-1].text == "hi"


def test_bad_input_is_a_clear_error() -> None:
    prepare = memory_engine().as_runnable()
    with pytest.raises(InvalidInputError, match="messages"):
        prepare.invoke("just a string")
    with pytest.raises(InvalidInputError, match="'messages' key"):
        prepare.invoke({"question": "hi"})


def test_runnable_with_tools_plans_the_directory(scenario: Any) -> None:
    engine = memory_engine()
    prepare = PrepareRunnable(engine, tools=scenario.tools)
    view = prepare.invoke([HumanMessage("hi")], {"configurable": {"thread_id": "d-1"}})
    assert view[-1].text == "hi"
    assert {getattr(t, "name", None) for t in prepare.bound_tools(view)} >= {"search_flights"}


@history_deprecated
def test_history_stores_everything_and_returns_the_view(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    chain = RunnableWithMessageHistory(model.bind_tools(scenario.tools), lambda sid: engine.history(sid))
    config: Any = {"configurable": {"session_id": "h-1"}, "callbacks": [handler]}
    tools = {t.name: t for t in scenario.tools}
    for turn in scenario.turns:
        reply = chain.invoke([HumanMessage(turn)], config)
        # tool results go into the history first: stored in the CAS, then seen compact
        engine.history("h-1").add_messages([tools[c["name"]].invoke(c) for c in reply.tool_calls])
        chain.invoke([], config)
    history = engine.history("h-1")
    assert isinstance(history, ContextChatHistory)
    scenario.check(model, history.full_messages, engine, Scope(session_id="h-1"), None)
    # every call but the first (a new session has no history to prepare) was prepared
    assert len(handler.reports) == 5 and all(r.within_budget for r in handler.reports)
    view, full = history.messages, history.full_messages
    assert count_messages(view, engine.counter) < count_messages(full, engine.counter) / 3


@history_deprecated
def test_history_model_reads_a_ref_back_with_the_session_expand_ref(tmp_path: Path) -> None:
    """The page's tool loop with ``expand_ref`` bound for the chain's sessions: the model's call
    on a ref its view showed reads the stored output of that session."""

    @tool
    def list_orders(customer: str) -> str:
        """List a customer's orders."""
        return json.dumps([{"order": f"ORD-{i:05d}", "customer": customer, "total": 10 + i} for i in range(3000)])

    def ask_expand(messages: list[BaseMessage], tools: Any) -> AIMessage:
        refs = [m.additional_kwargs.get("ctxplugin", {}).get("ref") for m in messages if isinstance(m, ToolMessage)]
        ref = next(r for r in refs if r)
        return AIMessage("", tool_calls=[tool_call("expand_ref", {"ref_id": ref, "pattern": "ORD-02999"})])

    engine = ContextEngine.embedded(path=tmp_path)
    model = ScriptedChatModel(script=[
        AIMessage("", tool_calls=[tool_call("list_orders", {"customer": "mia"})]), ask_expand, AIMessage("done"),
    ])
    def session(config: Any) -> Scope:
        return Scope(session_id=config["configurable"]["session_id"])

    expand = make_expand_ref_tool(engine, scope=session)
    tools = {t.name: t for t in [list_orders, expand]}
    chain = RunnableWithMessageHistory(model.bind_tools(list(tools.values())), engine.history)
    config: Any = {"configurable": {"session_id": "mia"}}
    reply = chain.invoke([HumanMessage("Mia's last order?")], config)
    while reply.tool_calls:
        engine.history("mia").add_messages([tools[c["name"]].invoke(c, config) for c in reply.tool_calls])
        reply = chain.invoke([], config)
    read = engine.history("mia").full_messages[-2]
    assert isinstance(read, ToolMessage) and read.name == "expand_ref"
    assert '"order": "ORD-02999", "customer": "mia", "total": 3009' in read.text
    engine.close()


@history_deprecated
async def test_history_async_with_prompt_keys(scenario: Any) -> None:
    engine = memory_engine()
    model = ScriptedChatModel(script=[lambda m, t: AIMessage(content=f"seen {len(m)} messages")] * 4, default=None)
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Be brief."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = RunnableWithMessageHistory(prompt | model, engine.history,
                                       input_messages_key="question", history_messages_key="history")
    config: Any = {"configurable": {"session_id": "h-2"}}
    for question in ["first question", "second question", "third question"]:
        await chain.ainvoke({"question": question}, config)
    full = engine.history("h-2").full_messages
    assert [m.text for m in full if isinstance(m, HumanMessage)] == ["first question", "second question", "third question"]
    assert [m.text for m in full if isinstance(m, AIMessage)] == ["seen 2 messages", "seen 4 messages", "seen 6 messages"]
    assert not any(isinstance(m, SystemMessage) for m in full), "the prompt is not stored"
    engine.history("h-2").clear()
    assert engine.history("h-2").full_messages == [] and engine.history("other").messages == []


def test_embedded_history_survives_a_new_engine(tmp_path: Path, scenario: Any) -> None:
    first = ContextEngine.embedded(path=tmp_path / "ctx")
    history = first.history("persisted", user_id="mia")
    history.add_messages([HumanMessage("flights SFO JFK")])
    call = scenario.policy([HumanMessage("flights SFO JFK")], [])
    history.add_messages([call, scenario.tools[0].invoke(call.tool_calls[0])])
    history.add_messages([AIMessage("Read search_flights.")])
    ref = history.full_messages[2].additional_kwargs["ctxplugin"]["ref"]

    second = ContextEngine.embedded(path=tmp_path / "ctx")
    again = second.history("persisted", user_id="mia")
    assert [type(m) for m in again.full_messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    assert again.full_messages[2].content == history.full_messages[2].content
    assert second.expand_ref(ref, scope=Scope(session_id="persisted", user_id="mia")) == again.full_messages[2].content
    view = again.messages
    assert any(isinstance(m, ToolMessage) and ref in str(m.content) for m in view)
    assert second.history("persisted", user_id="someone-else").full_messages == []


def test_model_step_runs_the_whole_loop(scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    chain = PROMPT | engine.as_model(model, tools=scenario.tools)
    messages = drive(chain, scenario, {"configurable": {"thread_id": "m-1"}, "callbacks": [handler]})
    scenario.check(model, messages, engine, Scope(session_id="m-1"), handler, annotated=False)
    assert all(c.messages[0].text.startswith("Be brief.") for c in model.calls)


def cached_engine() -> ContextEngine:
    return memory_engine(ContextConfig(cache=CacheConfig(enabled=True)))  # type: ignore[no-any-return]


def test_model_step_answers_from_the_cache_without_calling_the_model() -> None:
    engine = cached_engine()
    model = ScriptedChatModel(script=[AIMessage("Refunds take 5 days."), AIMessage("Refunds take 6 days.")], default=None)
    step = engine.as_model(model)
    config: Any = {"configurable": {"thread_id": "c-1"}}
    first = step.invoke([HumanMessage("How long do refunds take?")], config)
    again = step.invoke([HumanMessage("How long do refunds take?")], config)
    assert first.text == again.text == "Refunds take 5 days."
    assert len(model.calls) == 1, "the second answer came from the cache"
    assert again.response_metadata[CACHE_META_KEY]["hit"] is True
    other = step.invoke([HumanMessage("How long do refunds take?")], {"configurable": {"thread_id": "c-2"}})
    assert other.text == "Refunds take 6 days.", "another session asks the model"

    uncached = memory_engine().as_model(ScriptedChatModel(script=[AIMessage("a"), AIMessage("b")], default=None))
    assert [uncached.invoke([HumanMessage("q")], config).text for _ in range(2)] == ["a", "b"]


async def test_model_step_async_caches_and_traces_the_model_as_a_child(handler: ContextCallbackHandler) -> None:
    engine = cached_engine()
    model = ScriptedChatModel(script=[AIMessage("Check-in opens 24 hours before departure.")], default=None)
    step = engine.as_model(model)
    config: Any = {"configurable": {"thread_id": "a-1"}, "callbacks": [handler]}
    events = [e async for e in step.astream_events([HumanMessage("When does check-in open?")], config, version="v2")]
    starts = [(e["event"], e["name"]) for e in events if e["event"] in ("on_chain_start", "on_chat_model_start")]
    assert starts[0] == ("on_chain_start", "ContextModel") and ("on_chat_model_start", "ScriptedChatModel") in starts
    again = await step.ainvoke([HumanMessage("When does check-in open?")], config)
    assert again.text == "Check-in opens 24 hours before departure." and len(model.calls) == 1
