"""A tool result without its call: a clear error that says how to repair the thread, or an
opt-in repair (drop or pair) with a warning in the report."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, InvalidInputError, Scope
from ctxplugin._messages import NO_ANSWER, NO_EARLIER, annotation, validate
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="orphans")


def call(call_id: str, name: str = "lookup") -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": {"q": call_id}, "id": call_id}])


def thread_with_orphan() -> list[BaseMessage]:
    return [
        SystemMessage(content="You help with orders."),
        HumanMessage(content="where is order 7?"),
        ToolMessage(content="order 7: shipped", tool_call_id="gone", name="order_status", id="tool-msg-1"),
        AIMessage(content="It shipped."),
        HumanMessage(content="and order 8?"),
    ]


def assert_valid(messages: list[BaseMessage]) -> None:
    """Every tool result right after the AI message (or its sibling results) that made the call."""
    open_calls: set[str] = set()
    for message in messages:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, f"orphan {message.tool_call_id}"
            open_calls.discard(message.tool_call_id)
        else:
            assert not open_calls or not isinstance(message, (HumanMessage, AIMessage, SystemMessage)), open_calls
            open_calls = {c["id"] for c in message.tool_calls if c["id"]} if isinstance(message, AIMessage) else set()


def test_the_error_names_the_message_and_how_to_repair_it() -> None:
    with pytest.raises(InvalidInputError) as raised:
        memory_engine().prepare(thread_with_orphan(), scope=SCOPE)
    text = str(raised.value)
    assert "message 2 is a tool result for tool_call_id='gone'" in text
    assert "RemoveMessage(id='tool-msg-1')" in text, "names the message to remove"
    assert "orphan_tool_results='pair'" in text and "CTXPLUGIN_ORPHAN_TOOL_RESULTS" in text


def test_drop_leaves_the_orphan_out_with_a_warning() -> None:
    messages = thread_with_orphan()
    engine = memory_engine(ContextConfig(orphan_tool_results="drop"))
    prepared = engine.prepare(messages, scope=SCOPE)
    assert not any(isinstance(m, ToolMessage) for m in prepared.messages)
    assert prepared.messages[-1].text == "and order 8?"
    assert any("tool_call_id='gone'" in w and "left out of the view" in w for w in prepared.report.warnings)
    assert len(messages) == 5 and isinstance(messages[2], ToolMessage), "the caller's list is untouched"


def test_pair_puts_a_marked_stand_in_call_before_the_orphan() -> None:
    engine = memory_engine(ContextConfig(orphan_tool_results="pair"))
    prepared = engine.prepare(thread_with_orphan(), scope=SCOPE)
    body = [m for m in prepared.messages if not isinstance(m, SystemMessage)]
    stand_in, result = body[1], body[2]
    assert isinstance(stand_in, AIMessage) and isinstance(result, ToolMessage)
    assert stand_in.tool_calls[0]["id"] == "gone" and stand_in.tool_calls[0]["name"] == "order_status"
    assert annotation(stand_in)["repaired"]
    assert "order 7: shipped" in str(result.content)
    assert any("stand-in call" in w for w in prepared.report.warnings)
    assert_valid(prepared.messages)


def test_pair_keeps_a_parallel_group_together() -> None:
    """An orphan among the results of another call goes before that call's AI message."""
    messages: list[BaseMessage] = [
        HumanMessage(content="two things"),
        AIMessage(content="", tool_calls=[
            {"name": "a", "args": {}, "id": "c1"}, {"name": "b", "args": {}, "id": "c2"},
        ]),
        ToolMessage(content="A", tool_call_id="c1", name="a"),
        ToolMessage(content="stray", tool_call_id="zz", name="z"),
        ToolMessage(content="B", tool_call_id="c2", name="b"),
        HumanMessage(content="thanks"),
    ]
    out, notes = validate(messages, orphans="pair")
    assert [type(m).__name__ for m in out] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "ToolMessage", "ToolMessage", "AIMessage", "HumanMessage",
    ]
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ["zz", "c1", "c2"]
    assert out[-2].content == NO_ANSWER  # the user wrote before the results were answered
    assert len(notes) == 1
    assert_valid(out)


def test_a_second_result_for_an_answered_call_is_dropped_even_in_pair_mode() -> None:
    messages: list[BaseMessage] = [
        HumanMessage(content="go"), call("c1"), ToolMessage(content="first", tool_call_id="c1"),
        ToolMessage(content="again", tool_call_id="c1"), HumanMessage(content="ok"),
    ]
    with pytest.raises(InvalidInputError, match=r"already answered"):
        validate(messages)
    out, notes = validate(messages, orphans="pair")
    assert [m.content for m in out if isinstance(m, ToolMessage)] == ["first"]
    assert "already answered" in notes[0] and "left out of the view" in notes[0]
    assert_valid(out)


def test_the_mode_is_read_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_ORPHAN_TOOL_RESULTS", "drop")
    assert ContextConfig().orphan_tool_results == "drop"
    monkeypatch.setenv("CTXPLUGIN_ORPHAN_TOOL_RESULTS", "fix")
    with pytest.raises(ValueError, match=r"CTXPLUGIN_ORPHAN_TOOL_RESULTS='fix'.*'raise', 'drop' or 'pair'"):
        ContextConfig()


def test_a_last_group_with_some_results_gets_placeholders_for_the_others() -> None:
    """The tools have run (some results are in): every call of the group must be answered."""
    messages: list[BaseMessage] = [
        HumanMessage(content="two things"),
        AIMessage(content="", tool_calls=[{"name": "a", "args": {}, "id": "c1"}, {"name": "b", "args": {}, "id": "c2"}]),
        ToolMessage(content="B", tool_call_id="c2", name="b"),
    ]
    out, notes = validate(messages)
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ["c2", "c1"]
    assert "'c1' (a) had no result" in notes[0]
    untouched, none = validate(messages[:2])
    assert len(untouched) == 2 and none == [], "calls with no result yet are the ones about to run"
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    assert_valid(prepared.messages)



@pytest.mark.parametrize("mode", ["pair", "drop"])
def test_a_last_call_followed_only_by_an_orphan_gets_a_placeholder(mode: str) -> None:
    """A tool that returned its own message under a stale call id: the tools have run, so the
    call is answered in the view, which no longer ends with a call no result follows."""
    messages: list[BaseMessage] = [
        HumanMessage(content="where is order 7?"),
        call("c1"),
        ToolMessage(content="order 7: shipped", tool_call_id="stale", name="lookup"),
    ]
    out, notes = validate(messages, orphans=mode)  # type: ignore[arg-type]
    answered = {m.tool_call_id for m in out if isinstance(m, ToolMessage)}
    assert {c["id"] for m in out if isinstance(m, AIMessage) for c in m.tool_calls} <= answered
    assert any("'c1' (lookup) had no result" in n for n in notes)
    assert_valid(out)
    assert isinstance(out[-1], ToolMessage)
    prepared = memory_engine(ContextConfig(orphan_tool_results=mode)).prepare(messages, scope=SCOPE)
    assert isinstance(prepared.messages[-1], ToolMessage)
    untouched, _ = validate([*messages[:2]], orphans=mode)  # type: ignore[arg-type]
    assert len(untouched) == 2, "a call with nothing after it is still the one about to run"


@pytest.mark.parametrize("mode", ["pair", "drop"])
@pytest.mark.parametrize("header", [[], [SystemMessage(content="You are a support agent.")]], ids=["no-system", "system"])
def test_a_view_a_repaired_orphan_begins_starts_with_a_user_turn(mode: str, header: list[BaseMessage]) -> None:
    """A history trimmed in the middle of an exchange begins with an orphan result: paired, the
    view began with the stand-in call, and dropped, with the assistant's reply; Anthropic and
    Bedrock refuse a conversation whose first turn is the assistant's."""
    messages: list[BaseMessage] = [
        *header,
        ToolMessage(content="order 7: shipped", tool_call_id="gone", name="lookup"),
        AIMessage(content="Order 7 has shipped."),
        HumanMessage(content="and order 8?"),
    ]
    engine = memory_engine(ContextConfig(orphan_tool_results=mode))
    first = engine.prepare(messages, scope=SCOPE).messages
    turns = [m for m in first if not isinstance(m, SystemMessage)]
    assert isinstance(turns[0], HumanMessage) and turns[0].content == NO_EARLIER, [type(m).__name__ for m in first]
    assert annotation(turns[0]).get("repaired"), "the user turn is marked as a repair"
    assert [m.content for m in turns[-2:]] == ["Order 7 has shipped.", "and order 8?"]
    assert ("order 7: shipped" in [m.content for m in turns]) is (mode == "pair")
    assert_valid(first)
    following = [*messages, AIMessage(content="Order 8 is packed."), HumanMessage(content="thanks")]
    assert engine.prepare(following, scope=SCOPE).messages[: len(first)] == first, "the same view goes on growing"
    # a view that begins with a user turn, or an orphan before which one stands, is left as it was
    kept, _ = validate([HumanMessage(content="hi"), *messages[len(header):]], orphans=mode)  # type: ignore[arg-type]
    assert NO_EARLIER not in [m.content for m in kept]
    followed, _ = validate([*messages[len(header):-2], HumanMessage(content="next")], orphans="drop")
    assert [type(m) for m in followed] == [HumanMessage], "the dropped orphan's next turn is the user's own"


def test_a_call_whose_arguments_did_not_parse_takes_a_result() -> None:
    """An invalid tool call is sent to the provider with the others: its result is not an
    orphan, and a missing one gets a placeholder like any call."""
    bad = AIMessage(content="", invalid_tool_calls=[
        {"name": "lookup", "args": '{"q": "tr', "id": "bad-1", "error": "malformed", "type": "invalid_tool_call"},
    ])
    answered = ToolMessage(content="arguments were malformed", tool_call_id="bad-1", name="lookup", status="error")
    out, notes = validate([HumanMessage(content="go"), bad, answered, HumanMessage(content="again")])
    assert out[2] is answered and notes == []
    out, notes = validate([HumanMessage(content="go"), bad, HumanMessage(content="again")])
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ["bad-1"]
    assert "'bad-1' (lookup) had no result" in notes[0]


def test_a_call_without_a_name_that_did_not_parse_is_no_call() -> None:
    """langchain-anthropic leaves out an invalid call that has no name: a result for it would
    answer nothing the provider was sent, so it is an orphan like any other."""
    nameless = AIMessage(content="", invalid_tool_calls=[
        {"name": None, "args": '{"q": ', "id": "bad-2", "error": "truncated JSON", "type": "invalid_tool_call"},
    ])
    answer = ToolMessage(content="malformed arguments", tool_call_id="bad-2", status="error")
    with pytest.raises(InvalidInputError, match=r"bad-2"):
        validate([HumanMessage(content="go"), nameless, answer, HumanMessage(content="again")])
    out, notes = validate([HumanMessage(content="go"), nameless, HumanMessage(content="again")])
    assert not any(isinstance(m, ToolMessage) for m in out) and notes == []


def test_a_system_message_between_a_call_and_its_result_goes_after_the_results() -> None:
    """A tool returning a LangGraph ``Command`` may add a system message next to its result:
    with parallel calls it lands between one call's result and the next. The view keeps every
    result with its call and shows the system message after them, with a warning."""
    note = SystemMessage(content="The refund tool is rate limited.")
    messages: list[BaseMessage] = [
        SystemMessage(content="You help with orders."),
        HumanMessage(content="refund order 7 and check order 8"),
        AIMessage(content="", tool_calls=[
            {"name": "refund", "args": {"order": 7}, "id": "c1"}, {"name": "order_status", "args": {"order": 8}, "id": "c2"},
        ]),
        ToolMessage(content="refund 7: queued", tool_call_id="c1", name="refund"),
        note,
        ToolMessage(content="order 8: shipped", tool_call_id="c2", name="order_status"),
        AIMessage(content="Refund queued; order 8 shipped."),
        HumanMessage(content="thanks"),
    ]
    out, notes = validate(messages)
    assert out == [*messages[:4], messages[5], note, *messages[6:]]
    assert len(notes) == 1 and "message 4 is a system message between the tool calls of message 2" in notes[0]
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    assert_valid(prepared.messages)
    text = "\n".join(m.text for m in prepared.messages)
    assert "refund 7: queued" in text and "order 8: shipped" in text and "rate limited" in text
    assert not any("had no result" in w for w in prepared.report.warnings)


def test_a_system_message_after_a_call_waits_for_its_result_from_call_to_call() -> None:
    """Checked one call at a time, the result that comes after the system message on the next
    call still answers the call (no placeholder, no orphan)."""
    engine = memory_engine()
    scope = Scope(session_id="system-between")
    messages: list[BaseMessage] = [HumanMessage(content="where is order 7?"), call("c1", "order_status")]
    messages.append(SystemMessage(content="Order data may be an hour old."))
    early = engine.prepare(messages, scope=scope)
    assert_valid(early.messages)
    messages.append(ToolMessage(content="order 7: shipped", tool_call_id="c1", name="order_status"))
    prepared = engine.prepare(messages, scope=scope)
    assert_valid(prepared.messages)
    results = [m for m in prepared.messages if isinstance(m, ToolMessage)]
    assert [str(m.content) for m in results] == ["order 7: shipped"]
    assert "hour old" in prepared.messages[-1].text


def test_a_result_after_another_message_says_what_came_between() -> None:
    messages: list[BaseMessage] = [
        HumanMessage(content="go"), call("c1"), HumanMessage(content="hurry"), ToolMessage(content="r", tool_call_id="c1"),
    ]
    with pytest.raises(InvalidInputError) as raised:
        validate(messages)
    text = str(raised.value)
    assert "no earlier AI message" not in text
    assert "message 1 made that call, but message 2 came between the call and this result" in text


def late_result_thread() -> list[BaseMessage]:
    """A call closed by a user turn before its result came (the tool finished late)."""
    return [
        HumanMessage(content="where is order 7?"),
        call("c1", "order_status"),
        HumanMessage(content="hurry please"),
        ToolMessage(content="order 7: shipped", tool_call_id="c1", name="order_status"),
        AIMessage(content="It shipped."),
        HumanMessage(content="thanks"),
    ]


def _call_ids(messages: list[BaseMessage]) -> list[str]:
    return [str(c["id"]) for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]


def test_pair_gives_a_late_result_its_own_call_id_and_the_placeholder_says_it_came_later() -> None:
    messages = late_result_thread()
    out, notes = validate(messages, orphans="pair")
    ids = _call_ids(out)
    assert len(ids) == len(set(ids)), f"two calls share an id in the view: {ids}"
    assert_valid(out)
    results = [m for m in out if isinstance(m, ToolMessage)]
    placeholder, late = results
    assert placeholder.tool_call_id == "c1"
    assert "no result was recorded" not in str(placeholder.content)
    assert late.tool_call_id in str(placeholder.content) and "later" in str(placeholder.content)
    assert late.content == "order 7: shipped" and late.tool_call_id != "c1"
    assert [m.text for m in out if isinstance(m, HumanMessage)] == ["where is order 7?", "hurry please", "thanks"]
    assert any("stand-in call" in n for n in notes)
    assert isinstance(messages[3], ToolMessage) and messages[3].tool_call_id == "c1", "the caller's message is untouched"


def test_a_late_result_reads_the_same_checked_at_once_or_call_by_call() -> None:
    messages = late_result_thread()
    engine = memory_engine(ContextConfig(orphan_tool_results="pair"))
    scope = Scope(session_id="late")
    for end in range(1, len(messages) + 1):
        stepwise = engine.prepare(messages[:end], scope=scope)
    whole = memory_engine(ContextConfig(orphan_tool_results="pair")).prepare(messages, scope=scope)
    assert [(m.type, m.content, getattr(m, "tool_call_id", None)) for m in stepwise.messages] == [
        (m.type, m.content, getattr(m, "tool_call_id", None)) for m in whole.messages
    ]
    ids = _call_ids(stepwise.messages)
    assert len(ids) == len(set(ids))
    assert_valid(stepwise.messages)


def test_a_late_result_id_does_not_take_the_id_of_another_call() -> None:
    first, _ = validate(late_result_thread(), orphans="pair")
    taken = [m for m in first if isinstance(m, ToolMessage)][-1].tool_call_id
    messages = late_result_thread()
    messages[3:3] = [call(taken), ToolMessage(content="other", tool_call_id=taken)]
    out, _ = validate(messages, orphans="pair")
    ids = _call_ids(out)
    assert len(ids) == len(set(ids)), ids
    assert_valid(out)
    assert [str(m.content) for m in out if isinstance(m, ToolMessage)][-2:] == ["other", "order 7: shipped"]


def test_a_late_result_id_stays_within_the_length_providers_take() -> None:
    # OpenAI takes call ids of at most 40 characters; a 36-character id with "_late3" appended is 42
    long_id = "call_0b7a6c2e-9f1d-4e8a-b3c5-7d2e1f0a9b8c"[:36]
    messages = late_result_thread()
    for message in messages:
        if isinstance(message, AIMessage) and message.tool_calls:
            message.tool_calls[0]["id"] = long_id
        if isinstance(message, ToolMessage):
            message.tool_call_id = long_id
    out, _ = validate(messages, orphans="pair")
    ids = _call_ids(out)
    assert len(ids) == len(set(ids)) == 2, ids
    assert all(len(i) <= 40 for i in ids), ids
    assert_valid(out)


def test_a_call_a_user_turn_closed_is_answered_then_the_assistant_says_it_made_no_reply() -> None:
    # Mistral takes no user message right after a tool result: the placeholder is followed by an
    # assistant turn, marked as a repair, and the user's message comes later unchanged
    engine = memory_engine()
    thread: list[BaseMessage] = [HumanMessage("Look up booking BK-77."), call("c1"), HumanMessage("Any news?")]
    first = engine.prepare(thread, scope=SCOPE).messages
    placeholder = next(i for i, m in enumerate(first) if isinstance(m, ToolMessage) and m.tool_call_id == "c1")
    at = next(i for i, m in enumerate(first) if isinstance(m, AIMessage) and annotation(m).get("repaired"))
    bridge, asked = first[at], [i for i, m in enumerate(first) if isinstance(m, HumanMessage) and m.content == "Any news?"]
    assert isinstance(bridge, AIMessage) and not bridge.tool_calls and bridge.text.strip()
    assert placeholder < at < asked[0], "between the placeholder and the user's message"
    assert not [i for i in range(len(first) - 1) if isinstance(first[i], ToolMessage) and isinstance(first[i + 1], HumanMessage)]
    # an assistant message closing the call needs none; the next call shows the same object
    assert [type(m).__name__ for m in validate([HumanMessage("Go."), call("c2"), AIMessage("Done.")])[0]] == [
        "HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    later = engine.prepare([*thread, AIMessage("Still waiting on it."), HumanMessage("OK.")], scope=SCOPE).messages
    assert any(m is bridge for m in later)


def test_a_system_message_held_after_a_call_a_user_turn_closed_follows_the_no_reply_turn() -> None:
    # a tool's Command may add a system message beside its result: held after the placeholder, it
    # comes after the assistant's turn too, so no tool result is followed by anything but a call's
    view, _ = validate([HumanMessage("Look up BK-77."), call("c1"), SystemMessage("The lookup is slow."), HumanMessage("Any news?")])
    assert [type(m).__name__ for m in view] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "SystemMessage", "HumanMessage"]
    assert annotation(view[3]).get("repaired")
