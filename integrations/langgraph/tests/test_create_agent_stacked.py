"""``ContextMiddleware`` stacked with more of LangChain's middleware, in either order: context
editing, tool selection, model fallback, call limits, the todo list and a dynamic prompt.

Every request the model is sent is formatted offline by langchain-anthropic's and
langchain-openai's own request builders and checked against the rules their APIs enforce (each
tool result right after its call, every call answered, the system prompt first and exact)."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware, LLMToolSelectorMiddleware
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextCallbackHandler, Scope
from ctxplugin.facts import FactQuery
from ctxplugin.testing import RecordedCall, ScriptedChatModel, memory_engine, tool_call

ORDERS = ["context-first", "context-last"]


def arrange(order: str, context: ContextMiddleware, other: Any) -> list[Any]:
    return [context, other] if order == "context-first" else [other, context]


def run_turns(agent: Any, turns: list[str], config: Any) -> None:
    for turn in turns:
        agent.invoke({"messages": [("user", turn)]}, config)


# ---------------------------------------------------------------- what the providers accept


def anthropic_payload(call: RecordedCall) -> dict[str, Any]:
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")  # type: ignore[call-arg]
    bound = model.bind_tools(call.tools) if call.tools else model
    kwargs = dict(getattr(bound, "kwargs", {}))
    payload: dict[str, Any] = model._get_request_payload(call.messages, **kwargs)
    return payload


def openai_payload(call: RecordedCall) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o", api_key="test-key")  # type: ignore[arg-type]
    bound = model.bind_tools(call.tools) if call.tools else model
    kwargs = dict(getattr(bound, "kwargs", {}))
    payload: dict[str, Any] = model._get_request_payload(call.messages, **kwargs)
    return payload


def assert_accepted(call: RecordedCall, system: str | None = None) -> None:
    """Anthropic and OpenAI (Chat Completions) would take this request: every tool result right
    after the turn that called it, every call answered before the next turn, the system prompt
    (when given) at the start of the system text, unchanged."""
    anthropic = anthropic_payload(call)
    turns = anthropic["messages"]
    assert turns[0]["role"] == "user"
    for index, turn in enumerate(turns):
        blocks = turn["content"] if isinstance(turn["content"], list) else []
        uses = {b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
        if uses:
            after = turns[index + 1]["content"] if index + 1 < len(turns) else []
            answered = {b.get("tool_use_id") for b in after if isinstance(b, dict) and b.get("type") == "tool_result"}
            assert uses <= answered, f"Anthropic: tool_use without a tool_result: {uses - answered}"
        results = {b["tool_use_id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"}
        if results:
            before = turns[index - 1]["content"] if index else []
            called = {b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"}
            assert results <= called, f"Anthropic: tool_result without its tool_use: {results - called}"
    pending: set[str] = set()
    for message in openai_payload(call)["messages"]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, "OpenAI: a tool message answers no pending call"
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"OpenAI: calls left unanswered: {pending}"
        pending = {c["id"] for c in message.get("tool_calls") or []}
    if system is not None:
        head = call.messages[0]
        assert isinstance(head, SystemMessage) and head.text.startswith(system)


def tool_results(state: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in state if isinstance(m, ToolMessage)]


# ---------------------------------------------------------------- ContextEditingMiddleware


@pytest.mark.parametrize("order", ORDERS)
def test_with_context_editing_cleared_outputs_keep_their_facts(order: str, scenario: Any) -> None:
    # ClearToolUsesEdit leaves old tool outputs out of one request; the outputs themselves did
    # not change, so the facts read from them stay in the ledger for every later call
    engine, model = memory_engine(), scenario.scripted()
    clear = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=2000, keep=1)])
    agent = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=arrange(order, ContextMiddleware(engine), clear))
    thread = f"edit-{order}"
    config: Any = {"configurable": {"thread_id": thread}}
    scope = Scope(session_id=thread)
    held: set[str] = set()
    for turn in ["user u-100", "flights SFO JFK", "log checkout", "user u-200", "flights JFK SEA"]:
        run_turns(agent, [turn], config)
        now = {fact.id for fact in engine.facts.store.find(FactQuery(reader=scope))}
        assert held <= now, f"facts withdrawn after {turn!r}: {len(held - now)}"
        held = now
    assert any("u-100" in fact.text for fact in engine.facts.store.find(FactQuery(reader=scope)))
    if order == "context-last":
        seen = [m for m in model.calls[-1].messages if isinstance(m, ToolMessage)]
        assert sum(str(m.content) == "[cleared]" for m in seen) >= 3, "LangChain's edit reaches the model"
    for call in model.calls:
        assert_accepted(call)
    state = agent.get_state(config).values["messages"]
    for result in tool_results(state):
        ref = result.additional_kwargs.get("ctxplugin", {}).get("ref")
        if ref:
            assert engine.expand_ref(ref, scope=scope) == result.content


# ---------------------------------------------------------------- LLMToolSelectorMiddleware

WANTED = {"flights": "search_flights", "log": "read_log", "user": "get_user"}


def selector() -> ScriptedChatModel:
    """A selection model that picks the one tool the latest user turn asks for (never a
    meta-tool), as ``LLMToolSelectorMiddleware`` asks it to: a structured-output tool call."""

    def pick(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        turn = next(m.text for m in reversed(messages) if m.type == "human")
        schema = tools[0]["function"]["name"]
        return AIMessage(content="", tool_calls=[tool_call(schema, {"tools": [WANTED[turn.split()[0]]]})])

    return ScriptedChatModel(script=[pick] * 40, default=None)


def reading_policy(scenario: Any) -> Any:
    """The scenario's model, reading two items of each ref it is shown once."""

    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name in scenario.big_tools and "ref:" in str(last.content):
            ref = "ref:" + str(last.content).split("ref:", 1)[1].split()[0]
            return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref, "limit": 2})])
        reply: AIMessage = scenario.policy(messages, tools)
        return reply

    return step


def test_with_tool_selection_before_it_the_model_can_read_the_refs_it_is_shown(scenario: Any) -> None:
    # the selector narrows the agent's tools to one per call, and ctxplugin's expand_ref is not
    # among them: listed after it, ctxplugin binds its own tools again where its view needs them
    engine = memory_engine()
    model = ScriptedChatModel(script=[reading_policy(scenario)] * 40, default=None)
    select = LLMToolSelectorMiddleware(model=selector(), max_tools=1)
    agent = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=[select, ContextMiddleware(engine)])
    config: Any = {"configurable": {"thread_id": "select"}}
    run_turns(agent, scenario.turns, config)
    showing_refs = [c for c in model.calls if any(isinstance(m, ToolMessage) and "ref:" in str(m.content) for m in c.messages)]
    assert showing_refs, "big outputs should reach the model as refs"
    for call in showing_refs:
        assert "expand_ref" in call.tool_names, f"a view showing refs without expand_ref bound: {call.tool_names}"
    for call in model.calls:
        assert len(set(call.tool_names) - {"expand_ref", "load_tools"}) <= 1, "the selection is kept"
        assert_accepted(call)
    reads = [m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage) and m.name == "expand_ref"]
    assert len(reads) >= 2 and all("items 0–1 of 80" in str(m.content) or "lines 0–1 of 300" in str(m.content) for m in reads)
