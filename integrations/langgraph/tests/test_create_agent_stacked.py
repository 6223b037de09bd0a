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
from langchain.agents.middleware import ClearToolUsesEdit, ContextEditingMiddleware
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextCallbackHandler, Scope
from ctxplugin.facts import FactQuery
from ctxplugin.testing import RecordedCall, ScriptedChatModel, memory_engine

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
