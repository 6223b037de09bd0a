"""Properties every prepared view holds, over generated conversations.

Conversations mix parallel tool calls, results that are missing, empty, failed or large, calls
still pending at the end, and system messages in the middle; budgets run from 250 to 8,000
tokens. Whatever the input, the view ``prepare`` returns

- is a conversation every provider accepts: each tool result follows the AI message that made
  the call (or that message's other results), each call is answered (except the calls the agent
  is about to run, at the very end), no result is orphaned or repeated;
- keeps the order of the messages it shows;
- holds its budget, or says in the report that it could not and why;
- keeps the latest user message;
- is the same, and so is its report, when the host sends deep copies of its history on every
  call (read back from a checkpoint) instead of the objects it sent before; and after the host
  edits, removes or rewinds earlier messages, shows the conversation as a fresh engine does.
"""

from __future__ import annotations

import copy
import difflib
import json
import os
import re
from collections.abc import Sequence
from typing import Any, Literal

from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    message_to_dict,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import conversation_messages, logical_clock, memory_engine
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


# A host that rebuilds its history from a checkpoint on every call sends equal copies of the
# messages, not the objects it sent before; the incremental paths that take the very same
# objects as already read must give it the views a host sending the same objects gets.

TASKS = [
    "My user id is mia_li_3668. Book flight HAT042 from Austin on 2026-11-24.",
    "Change of plans: forget the booking, cancel order #W1007 and refund it to the original card.",
    "I prefer seat 14C, and my budget is 500 dollars.",
    "Actually the date is 2026-11-25, not 2026-11-24.",
]
"""Tasks a user sets mid-session, holding values the facts and the notes read."""


@st.composite
def huge_output(draw: st.DrawFn, name: str) -> str:
    """An output far past any budget: a long log or a large JSON array."""
    size = draw(st.integers(2_000, 4_000))
    if draw(st.booleans()):
        return "\n".join(f"10:{i // 60 % 60:02d}:{i % 60:02d} WARN {name} retry {i} for order #W{1000 + i}" for i in range(size))
    return json.dumps([{"id": f"{name}-{i}", "seat": f"{i % 40}C", "price": i} for i in range(size)])


@st.composite
def sessions(draw: st.DrawFn) -> Conversation:
    """A conversation as :func:`conversations` makes it, where the user now and then sets a new
    task mid-session, a tool returns a huge output, a text comes as content blocks (with the
    thinking of an AI message), and the messages may have no ids."""
    messages = draw(conversations())
    humans = [i for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for i in draw(st.lists(st.sampled_from(humans), max_size=3, unique=True)):
        messages[i] = HumanMessage(content=draw(st.sampled_from(TASKS)), id=messages[i].id)
    results = [i for i, m in enumerate(messages) if isinstance(m, ToolMessage)]
    for i in draw(st.lists(st.sampled_from(results), max_size=2, unique=True)) if results else []:
        messages[i] = messages[i].model_copy(update={"content": draw(huge_output(str(messages[i].name))), "status": "success"})
    for i in draw(st.lists(st.integers(0, len(messages) - 1), max_size=4, unique=True)):
        text = messages[i].content
        if isinstance(text, str) and text:
            blocks: list[str | dict[str, Any]] = [{"type": "text", "text": text[: len(text) // 2]}, {"type": "text", "text": text[len(text) // 2 :]}]
            if isinstance(messages[i], AIMessage):
                blocks.insert(0, {"type": "thinking", "thinking": f"The user asked: {text[:40]}", "signature": "c2ln"})
            messages[i] = messages[i].model_copy(update={"content": blocks})
    if draw(st.booleans()):
        messages = Conversation(m.model_copy(update={"id": None}) for m in messages)
    return messages


Change = tuple[int, Literal["edit", "remove", "rewind"], float]
"""What a host changes in its history before call ``k``, at the message at that share of it
(the first message aside): ``edit`` puts an edited copy (same id, other content) in its place,
``remove`` takes it out with the results of the calls it made (as LangGraph's ``RemoveMessage``
leaves the state), ``rewind`` takes it out with all that follows (a run resumed from an earlier
checkpoint)."""

changes = st.lists(st.tuples(st.integers(1, 12), st.sampled_from(["edit", "remove", "rewind"]), st.floats(0, 0.999)), max_size=3)

_FACT_ID = re.compile(r"fact_[0-9a-f]{20}")


def _fact_ranks(text: str, ranks: dict[str, str]) -> str:
    """``text`` with each fact id (random) replaced by its rank of first appearance."""
    return _FACT_ID.sub(lambda m: ranks.setdefault(m.group(0), f"fact#{len(ranks)}"), text)


def sent(prepared: Any, ranks: dict[str, str]) -> str:
    """A view as the model is sent it (every message as LangChain serialises it, the tool
    schemas) and its report but for the timings; fact ids by rank (``ranks``: those so far)."""
    payload = {
        "messages": [message_to_dict(m) for m in prepared.messages],
        "tools": [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in prepared.tools],
        "report": prepared.report.model_dump(exclude={"timings_ms"}),
    }
    return _fact_ranks(json.dumps(payload, sort_keys=True, ensure_ascii=False, indent=1, default=repr), ranks)


def own_messages(prepared: Any) -> list[str]:
    """The conversation's own messages of a view, as LangChain serialises them."""
    ranks: dict[str, str] = {}
    return [_fact_ranks(json.dumps(message_to_dict(m), sort_keys=True, default=repr), ranks) for m in conversation_messages(prepared.messages)]


def make_change(history: list[BaseMessage], kind: str, share: float, mark: str) -> None:
    """Make a host's change (see :data:`Change`) to ``history``."""
    if len(history) < 2:
        return
    index = 1 + int(share * (len(history) - 1))
    message = history[index]
    if kind == "edit":
        text = content_text(message.content)
        history[index] = message.model_copy(update={"content": f"{mark} {text[: len(text) // 2]}"})
    elif kind == "rewind":
        del history[index:]
    else:
        calls = {c["id"] for c in message.tool_calls} if isinstance(message, AIMessage) else set()
        history[:] = [m for i, m in enumerate(history) if i != index and not (isinstance(m, ToolMessage) and m.tool_call_id in calls)]


def replay(
    config: ContextConfig, messages: Sequence[BaseMessage], edits: Sequence[Change], tools: Sequence[dict[str, Any]], *, copies: bool
) -> list[str]:
    """Every call's view (see :func:`sent`) when ``messages`` are played as an agent loop plays
    them: a model call binding ``tools`` before every AI message and one at the end, each tool
    output captured as it arrives, ``edits`` made between calls. With ``copies`` every call is
    given a deep copy of the history, else the same objects. After a change, and on the last
    call, the conversation's own messages in the view are those a fresh engine shows, when
    facts are off (the facts ledger keeps what it read from a message since edited or removed,
    and the facts take room from the history: there a fresh engine's view differs)."""
    engine = memory_engine(config, clock=logical_clock())
    scope = Scope(session_id="copies")
    history: list[BaseMessage] = []
    views: list[str] = []
    ranks: dict[str, str] = {}

    def call(last: bool = False) -> None:
        made = [(kind, share) for at, kind, share in edits if at == len(views)]
        for kind, share in made:
            make_change(history, kind, share, f"(edited before call {len(views)})")
        prepared = engine.prepare(copy.deepcopy(history) if copies else history, tools=tools, scope=scope)
        views.append(sent(prepared, ranks))
        if (made or last) and not config.facts.enabled:
            fresh = memory_engine(config).prepare(copy.deepcopy(history), tools=tools, scope=scope)
            assert_same(f"call {len(views) - 1}, after {made}: a fresh engine's view", own_messages(prepared), own_messages(fresh))

    for message in messages:
        if isinstance(message, AIMessage):
            call()
        history.append(engine.capture_tool_result(message, scope=scope) if isinstance(message, ToolMessage) else message)
    call(last=True)
    return views


def assert_same(what: str, found: Sequence[str], expected: Sequence[str]) -> None:
    """``found == expected``, or an error that names ``what`` and shows the first lines that differ."""
    if list(found) != list(expected):
        diff = difflib.unified_diff("\n".join(expected).splitlines(), "\n".join(found).splitlines(), lineterm="", n=2)
        raise AssertionError(f"differs from {what}:\n" + "\n".join(list(diff)[2:60]))


SCHEMAS = [
    {
        "type": "function",
        "function": {
            "name": name,
            "description": f"Looks up {name.replace('_', ' ')} records matching a query.",
            "parameters": {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]},
        },
    }
    for name in [*TOOLS, "list_orders", "get_order", "book_flight", "update_seat", "refund", "search_hotels", "get_weather", "send_email"]
]
"""Tools to bind: enough for the tool directory to stand in for their schemas."""


@SETTINGS
@given(
    messages=sessions(),
    total=st.integers(250, 8000),
    mode=st.sampled_from(["whole", "compact"]),
    edits=changes,
    facts=st.booleans(),
    tools=st.sampled_from([[], SCHEMAS]),
)
def test_copies_of_the_history_get_the_views_of_the_same_messages(
    messages: list[BaseMessage], total: int, mode: Literal["whole", "compact"], edits: list[Change], facts: bool, tools: list[dict[str, Any]]
) -> None:
    config = ContextConfig(mode=mode, budget={"total": total}, facts={"enabled": facts})
    same = replay(config, messages, edits, tools, copies=False)
    copied = replay(config, messages, edits, tools, copies=True)
    for index, (one, other) in enumerate(zip(copied, same, strict=True)):
        assert_same(f"call {index} given the same messages", [one], [other])
