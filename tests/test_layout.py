"""Where ctxplugin's notes and facts go in a view (ctxplugin._layout)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._layout import (
    CONTEXT_READ,
    Placement,
    _ends_for_lookup,
    _openings,
    context_notes,
    lay_out,
    lookup_fits,
)
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._note_marks import NOTE_MARKS


def note(text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={META_KEY: {"condensed": True}})


def exchange(n: int) -> list[BaseMessage]:
    call = {"name": "bash", "args": {"command": f"ls /src/{n}"}, "id": f"c{n}", "type": "tool_call"}
    return [AIMessage("", tool_calls=[call]), ToolMessage(f"file_{n}.py", tool_call_id=f"c{n}")]


def test_each_note_is_its_own_lookup_so_an_older_one_stays_the_same_message() -> None:
    """Block notes are added after the archive note as the history grows: the archive's lookup
    must not change with them, or the prompt cache stops serving everything after the task."""
    task = HumanMessage("Fix the bug in /src/app.py")
    archive = note("[context note: exchanges 1-8 ...: /src/a.py | ERR-4411]")
    block = note("[context note: exchanges 9-10 ...: /src/b.py]")
    before = lay_out([task, archive, *exchange(11), *exchange(12)], "").body
    after = lay_out([task, archive, block, *exchange(12), *exchange(13)], "").body
    assert context_notes(after) == [archive.content, block.content]
    assert [m.model_dump() for m in after[:3]] == [m.model_dump() for m in before[:3]]  # task, archive call, result
    assert after[3].tool_calls[0]["name"] == "context_notes"  # type: ignore[attr-defined]
    assert after[4].content == block.content


def test_facts_come_after_the_first_note_placed_at_the_same_opening() -> None:
    """The archive note, then the facts, then the block notes: a block note added later goes
    after the facts, which stay the same messages."""
    task = HumanMessage("Fix it")
    archive, block = note("[context note: a]"), note("[context note: b]")
    before = lay_out([task, archive, *exchange(1)], "Known facts: x", "head").body
    body = lay_out([task, archive, block, *exchange(1)], "Known facts: x", "head").body
    kinds = [m.additional_kwargs.get(META_KEY, {}).get("synthetic") for m in body if isinstance(m, ToolMessage)]
    assert kinds[:3] == ["notes", "facts", "notes"]
    assert [m.model_dump() for m in body[:5]] == [m.model_dump() for m in before[:5]]  # task, archive, facts


def assert_valid_conversation(view: list[BaseMessage]) -> None:
    """What the providers' rules ask of lookups: every tool call answered right after it (Anthropic,
    Bedrock), a call only after a user turn or a tool result (Google GenAI), a tool result never
    followed by a user turn (Mistral)."""
    for index, message in enumerate(view):
        following = view[index + 1] if index + 1 < len(view) else None
        if isinstance(message, AIMessage) and message.tool_calls:
            assert index and isinstance(view[index - 1], (HumanMessage, ToolMessage)), f"call at {index}"
            assert isinstance(following, ToolMessage) and following.tool_call_id == message.tool_calls[0]["id"]
        if isinstance(message, ToolMessage):
            assert not isinstance(following, HumanMessage), f"user turn right after the tool result at {index}"


def chat_turn(n: int) -> list[BaseMessage]:
    return [HumanMessage(f"question {n}"), AIMessage(f"answer {n}")]


def test_notes_before_a_user_turn_go_before_it_and_stay_when_it_is_condensed() -> None:
    """A chat's exchanges open with the user. Notes that stand before such a turn used to be
    pushed after it (a lookup fits only before an assistant turn), and moved back once the turn
    itself was condensed: a change right after the task on every user turn."""
    task = HumanMessage("Hi, I need help with a booking")
    archive = note("[context note: exchanges 1-8 ...: ORD-4411]")
    kept = lay_out([task, archive, *chat_turn(9), HumanMessage("question 10")], "").body
    assert [type(m).__name__ for m in kept[:5]] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage", "HumanMessage"]
    assert kept[2].content == archive.content and kept[3] is CONTEXT_READ and kept[4].content == "question 9"
    assert_valid_conversation(kept)
    block = note("[context note: exchanges 9-9 ...]")
    later = lay_out([task, archive, block, *chat_turn(10), HumanMessage("question 11")], "").body
    assert [m.model_dump() for m in later[:3]] == [m.model_dump() for m in kept[:3]]  # the archive stays cached
    assert later[4].content == block.content and later[5] is CONTEXT_READ
    assert_valid_conversation(later)
    # after a tool result as well; before an assistant turn no bridge is needed
    after_tool = lay_out([task, *exchange(1), archive, HumanMessage("next")], "").body
    assert after_tool[-2] is CONTEXT_READ and after_tool[-1].content == "next"
    assert CONTEXT_READ not in lay_out([task, archive, *exchange(2)], "").body
    # with no lookups at all (no tool bound, none called) the notes go after the header
    assert CONTEXT_READ not in lay_out([task, archive, *chat_turn(9)], "", lookups=False).body


def test_the_view_never_ends_with_a_lookup_the_conversation_did_not_end_with() -> None:
    """With extended thinking on, Anthropic takes a request ending with a tool result only when
    the call's assistant turn starts with its signed thinking, which a lookup has none of: the
    facts block of every placement goes before the latest message when the conversation has a
    place for it."""
    task = HumanMessage("Hi, I need help with a booking")
    archive = note("[context note: exchanges 1-8 ...]")
    history = [task, archive, *chat_turn(9), HumanMessage("question 10")]
    placements: tuple[Placement, ...] = ("tail", "head", "window")
    for placement in placements:
        assert lay_out(history, "Known facts: x", placement, anchor=history[2]).body[-1] is history[-1]
    # with every earlier turn condensed there is no assistant turn to go before: the block goes
    # before the latest user message with the notes, the view still ending with that message
    alone = [task, archive, HumanMessage("question 10")]
    body = lay_out(alone, "Known facts: x", "window", anchor=alone[2], facts_from_tools=True).body
    assert body[-1] is alone[-1] and body[-2] is CONTEXT_READ
    assert [m.content for m in body if isinstance(m, ToolMessage)] == [archive.content, "Known facts: x"]


@st.composite
def conversations(draw: st.DrawFn) -> tuple[list[BaseMessage], int]:
    """A conversation as validation leaves it (no user turn right after a tool result), with
    context notes at some places, and the index of an anchor message."""
    out: list[BaseMessage] = [HumanMessage("the task")]
    for n in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["user", "answer", "call"]))
        if draw(st.booleans()):
            out.append(note(f"[context note: {n}]"))
        if kind == "user":
            if isinstance(out[-1], ToolMessage):
                out.append(AIMessage(f"answer {n}"))
            out.append(HumanMessage(f"question {n}"))
        elif kind == "answer":
            out.append(AIMessage(f"answer {n}"))
        else:
            out.extend(exchange(n))
    plain = [i for i, m in enumerate(out) if not isinstance(m, HumanMessage) or not m.additional_kwargs]
    return out, draw(st.sampled_from(plain))


@settings(max_examples=400, deadline=None)
@given(conversations(), st.sampled_from(["tail", "head", "window"]), st.booleans())
def test_every_layout_keeps_the_providers_rules(drawn: tuple[list[BaseMessage], int], placement: str, facts: bool) -> None:
    history, anchor = drawn
    made = lay_out(history, "Known facts: x" if facts else "", placement, anchor=history[anchor])  # type: ignore[arg-type]
    body = made.body
    for index, message in enumerate(body):  # the rules, for what the layout added
        if not (message.additional_kwargs or {}).get(META_KEY):
            continue
        following = body[index + 1] if index + 1 < len(body) else None
        if isinstance(message, AIMessage) and message.tool_calls:
            assert index and isinstance(body[index - 1], (HumanMessage, ToolMessage)), f"lookup call at {index}"
            assert isinstance(following, ToolMessage) and following.tool_call_id == message.tool_calls[0]["id"]
        if isinstance(message, ToolMessage):
            assert not isinstance(following, HumanMessage), f"user turn right after the lookup result at {index}"
    shown = [m for m in body if not (m.additional_kwargs or {}).get(META_KEY)]
    assert shown == [m for m in history if not m.additional_kwargs], "the conversation's own messages, in order"
    if facts and not made.header_extra:
        assert sum(1 for m in body if isinstance(m, ToolMessage) and m.content == "Known facts: x") == 1


_KINDS: dict[str, BaseMessage] = {
    "user": HumanMessage("question"),
    "condensed note": note("[context note: a]"),
    "omitted note": HumanMessage("[context note: b]", additional_kwargs={META_KEY: {"omitted": True}}),
    "user marked otherwise": HumanMessage("question", additional_kwargs={META_KEY: {"stands_in": True}}),
    "answer": AIMessage("answer"),
    "call": exchange(0)[0],
    "result": exchange(0)[1],
    "lookup": CONTEXT_READ,
    "system": SystemMessage("the rules"),
}


def _old_lookup_fits(history: list[BaseMessage]) -> bool:
    """The definition ``lookup_fits`` had before it stopped at the first place found."""
    plain = [m for m in history if not (isinstance(m, HumanMessage) and any(annotation(m).get(k) for k in NOTE_MARKS))]
    return bool(_openings(plain)) or _ends_for_lookup(plain)


@settings(max_examples=500, deadline=None)
@given(conversations(), st.integers(0, 3), st.lists(st.sampled_from(list(_KINDS)), max_size=10))
def test_a_lookup_fits_where_it_did_before_it_stopped_at_the_first_place(
    drawn: tuple[list[BaseMessage], int], cut: int, kinds: list[str]
) -> None:
    history = drawn[0][: max(0, len(drawn[0]) - cut)]  # ending anywhere: on an assistant message too
    assert lookup_fits(history) is _old_lookup_fits(history)
    anything = [_KINDS[k] for k in kinds]  # any order, empty, notes first, what validation would refuse
    assert lookup_fits(anything) is _old_lookup_fits(anything)
