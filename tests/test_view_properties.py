"""Properties every prepared view holds, over generated conversations.

Conversations mix parallel tool calls, results that are missing, empty, failed or large, calls
still pending at the end, and system messages in the middle; budgets run from 250 to 8,000
tokens. Whatever the input, the view ``prepare`` returns

- is a conversation every provider accepts: each tool result follows the AI message that made
  the call (or that message's other results), each call is answered (except the calls the agent
  is about to run, at the very end), no result is orphaned or repeated;
- keeps the order of the messages it shows;
- holds its budget, or says in the report that it could not and why;
- keeps the latest user message.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text, count_messages

SETTINGS = settings(
    # CTXPLUGIN_TEST_EXAMPLES=500 explores further
    max_examples=int(os.environ.get("CTXPLUGIN_TEST_EXAMPLES", "30")),
    deadline=None,
    database=None,
    # shrinking long conversations takes minutes; a failure prints the whole example instead
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

TOOLS = ["search_flights", "read_log", "get_user", "cancel"]
# with undecodable bytes as a host that decodes with surrogateescape passes them (a lone
# surrogate), and text that is not Latin
WORDS = ["flight", "HAT042", "refund", "Austin", "order #W1007", "error", "seat 14C", "2026-11-24", "ok", "why", "Caf\udce9", "\u5c71\u7530"]


@st.composite
def text(draw: st.DrawFn, *, most: int = 12) -> str:
    return " ".join(draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=most)))


@st.composite
def tool_output(draw: st.DrawFn, name: str) -> tuple[str, str]:
    """An output and its status: short, empty, a large JSON array, a long log, or an error."""
    kind = draw(st.sampled_from(["short", "empty", "json", "log", "error"]))
    if kind == "empty":
        return "", "success"
    if kind == "short":
        return draw(text()), "success"
    if kind == "error":
        size = draw(st.integers(1, 200))
        return f"Error: {name} failed\n" + "\n".join(f"  at frame {i} in {name}.py" for i in range(size)), "error"
    size = draw(st.integers(20, 300))
    if kind == "json":
        return json.dumps([{"id": f"{name}-{i}", "price": 100 + i, "note": draw(text(most=3))} for i in range(size)]), "success"
    return "\n".join(f"10:{i // 60:02d}:{i % 60:02d} INFO {name} request {i} done" for i in range(size)), "success"


def short(message: BaseMessage) -> str:
    """One message in a few characters: what a failing example prints."""
    text = content_text(message.content)
    body = f"{text[:24]!r}" + (f"+{len(text) - 24}" if len(text) > 24 else "")
    if isinstance(message, AIMessage) and message.tool_calls:
        body += " calls=" + ",".join(str(c["id"]) for c in message.tool_calls)
    if isinstance(message, ToolMessage):
        body = f"{message.tool_call_id}:{message.status}:{body}"
    return f"{type(message).__name__[:-7] or 'Human'}({body})"


class Conversation(list[BaseMessage]):
    """A generated conversation that prints short (hypothesis prints failing examples)."""

    def __repr__(self) -> str:
        return "[" + ", ".join(short(m) for m in self) + "]"


@st.composite
def conversations(draw: st.DrawFn) -> Conversation:
    counter = iter(range(10_000))

    def mid() -> str:
        return f"m{next(counter)}"

    messages = Conversation()
    if draw(st.booleans()):
        messages.append(SystemMessage(content="You are a travel agent. " + draw(text()), id=mid()))
    turns = draw(st.integers(1, 7))
    for turn in range(turns):
        messages.append(HumanMessage(content=draw(text()), id=mid()))
        for step in range(draw(st.integers(0, 3))):
            names: list[str] = draw(st.lists(st.sampled_from(TOOLS), min_size=1, max_size=3))
            calls = [{"name": n, "args": {"q": draw(text(most=3))}, "id": f"call-{turn}-{step}-{i}", "type": "tool_call"}
                     for i, n in enumerate(names)]
            messages.append(AIMessage(content=draw(st.sampled_from(["", "Let me check."])), tool_calls=calls, id=mid()))
            answered: list[dict[str, Any]] = [c for c in calls if draw(st.integers(0, 5)) > 0]  # now and then a result is missing
            for call in draw(st.permutations(answered)):
                content, status = draw(tool_output(str(call["name"])))
                messages.append(ToolMessage(content=content, tool_call_id=call["id"], name=call["name"], status=status, id=mid()))
            if draw(st.integers(0, 6)) == 0:
                messages.append(SystemMessage(content="Note: " + draw(text()), id=mid()))
        if turn < turns - 1 or draw(st.booleans()):
            messages.append(AIMessage(content=draw(text()), id=mid()))
    ending = draw(st.sampled_from(["human", "pending", "results", "as is"]))
    if ending == "human":
        messages.append(HumanMessage(content=draw(text()), id=mid()))
    elif ending == "pending":  # calls the agent is about to run
        messages.append(AIMessage(content="", tool_calls=[{"name": "cancel", "args": {}, "id": "call-pending", "type": "tool_call"}], id=mid()))
    elif ending == "results":
        messages.append(AIMessage(content="", tool_calls=[{"name": "get_user", "args": {}, "id": "call-last", "type": "tool_call"}], id=mid()))
        content, status = draw(tool_output("get_user"))
        messages.append(ToolMessage(content=content, tool_call_id="call-last", name="get_user", status=status, id=mid()))
    return messages


def provider_problems(view: Sequence[BaseMessage]) -> list[str]:
    """What a provider's request builder would refuse about the tool-call structure."""
    problems = []
    open_calls: set[str] = set()
    seen: set[str] = set()
    for index, message in enumerate(view):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in open_calls:
                problems.append(f"message {index}: result {message.tool_call_id!r} does not follow its call")
            if message.tool_call_id in seen:
                problems.append(f"message {index}: a second result for {message.tool_call_id!r}")
            open_calls.discard(message.tool_call_id)
            seen.add(message.tool_call_id)
            continue
        if open_calls:
            problems.append(f"message {index}: calls {sorted(open_calls)} have no result before it")
        open_calls = {c["id"] for c in message.tool_calls if c["id"]} if isinstance(message, AIMessage) else set()
    return problems


@SETTINGS
@given(messages=conversations(), total=st.integers(250, 8000))
def test_every_view_is_valid_ordered_within_budget_and_keeps_the_latest_question(messages: list[BaseMessage], total: int) -> None:
    engine = memory_engine(ContextConfig(budget={"total": total}))
    before = [m.model_copy(deep=True) for m in messages]
    prepared = engine.prepare(messages, scope=Scope(session_id="props"))
    view, report = prepared.messages, prepared.report
    note(f"view: {Conversation(view)!r}\nwarnings: {report.warnings}")
    assert messages == before, "the caller's messages are never changed"

    assert provider_problems(view) == []

    # order: the input messages the view shows (by id) keep their relative order
    position = {m.id: i for i, m in enumerate(messages)}
    shown = [position[m.id] for m in view if m.id in position]
    assert shown == sorted(shown), "the view reorders messages"

    # budget: held, or the report says it was not and why
    counted = count_messages(view, engine.counter)
    assert report.budget_total == total
    if report.within_budget:
        assert report.tokens_after <= total and counted <= total, (counted, report.tokens_after, total, report.warnings)
    else:
        assert any("budget" in w for w in report.warnings), report.warnings

    # the latest user message is there, unchanged
    latest = next(m for m in reversed(messages) if isinstance(m, HumanMessage))
    kept = [m for m in view if isinstance(m, HumanMessage) and m.id == latest.id]
    assert kept and content_text(kept[0].content) == content_text(latest.content), "the latest user message was lost"


@SETTINGS
@given(messages=conversations(), total=st.integers(250, 8000))
def test_a_view_prepared_again_from_its_compact_results_is_still_valid(messages: list[BaseMessage], total: int) -> None:
    """What a host does on the next call: its state holds the compact results capture made."""
    engine = memory_engine(ContextConfig(budget={"total": total}))
    scope = Scope(session_id="props-again")
    state: list[BaseMessage] = [
        engine.capture_tool_result(m, scope=scope) if isinstance(m, ToolMessage) else m for m in messages
    ]
    view = engine.prepare(state, scope=scope).messages
    assert provider_problems(view) == []
    again = engine.prepare([*state, HumanMessage(content="and now?", id="next")], scope=scope)
    assert provider_problems(again.messages) == []
    assert any(m.id == "next" for m in again.messages)

