"""A host that goes back to an earlier point of a thread (time travel) sends a shorter history:
the values the tool outputs after that point stated are no longer current, and the value the
last output still in the conversation stated is current again, whether the outputs were
captured (their facts written at capture) or read whole from the conversation."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin.facts.model import FactQuery
from ctxplugin.tokens import content_text

S = Scope(session_id="s1", user_id="u1")
KEY = "reservation:OBUT9V"
Lookup = Callable[..., tuple[AIMessage, ToolMessage]]  # the reservation_lookup fixture (conftest.py)


def thread(engine: ContextEngine, reservation_lookup: Lookup, *, captured: bool, named: bool) -> list[BaseMessage]:
    """Four steps, each reading the reservation again (``fare0`` … ``fare3``)."""
    messages: list[BaseMessage] = [HumanMessage("Keep an eye on reservation OBUT9V", id="h0")]
    for step in range(4):
        ask, output = reservation_lookup(
            f"c{step}", f"fare{step}", output_id=f"t-c{step}" if named else None
        )
        if captured:
            output = engine.capture_tool_result(output, scope=S)
        messages += [
            ask,
            output,
            AIMessage("Noted.", id=f"a{step}"),
            HumanMessage(f"Check it again ({step})", id=f"h{step + 1}"),
        ]
        engine.prepare(messages, scope=S)
    return messages


def cabin(engine: ContextEngine) -> str | None:
    fact = engine.facts.current(KEY, scope=S)
    return None if fact is None else fact.text.rsplit("cabin=", 1)[-1].strip(" ;,.")


def texts(prepared: PreparedContext) -> list[str]:
    return [content_text(m.content) for m in prepared.messages]


@pytest.mark.parametrize("captured", [False, True], ids=["read", "captured"])
@pytest.mark.parametrize("named", [False, True], ids=["no-id", "id"])
def test_a_rewind_past_tool_outputs_makes_the_last_value_still_sent_current(
    engine: ContextEngine, captured: bool, named: bool, reservation_lookup: Lookup
) -> None:
    messages = thread(engine, reservation_lookup, captured=captured, named=named)
    assert cabin(engine) == "fare3"
    prepared = engine.prepare(messages[:9], scope=S)  # up to the second output and h2
    assert cabin(engine) == "fare1"
    shown = texts(prepared)
    assert not any("fare2" in t or "fare3" in t for t in shown)  # nor in a facts block
    assert not any("fare1" in t and "outdated" in t for t in shown)  # the last value sent stands


def test_going_forward_again_after_the_rewind_reads_the_new_value(engine: ContextEngine, reservation_lookup: Lookup) -> None:
    messages = thread(engine, reservation_lookup, captured=False, named=False)
    engine.prepare(messages[:9], scope=S)
    again = [
        *messages[:9],
        *reservation_lookup("n", "premium"),
        HumanMessage("And?", id="hn"),
    ]
    engine.prepare(again, scope=S)
    assert cabin(engine) == "premium"


def test_an_edited_user_message_keeps_the_captured_outputs_before_it_current(
    engine: ContextEngine,
    reservation_lookup: Lookup,
) -> None:
    """Assistant messages without ids: the outputs before the edited message are still sent
    (as the summaries their capture returned) and what they stated stays current."""
    notes = [f"segment {i}: IAH-DEN flight UA{1000 + i} seat {i}A" for i in range(300)]
    messages: list[BaseMessage] = [HumanMessage("Keep an eye on reservation OBUT9V", id="h0")]
    for step in range(2):
        payload = {"reservation_id": "OBUT9V", "cabin": f"fare{step}", "notes": notes}
        output = ToolMessage(
            json.dumps(payload), tool_call_id=f"c{step}", name="get_reservation_details"
        )
        compact = engine.capture_tool_result(output, scope=S)
        assert len(content_text(compact.content)) < len(content_text(output.content))
        ask, _ = reservation_lookup(f"c{step}", f"fare{step}")
        messages += [ask, compact, AIMessage("Noted.")]
    engine.prepare([*messages, HumanMessage("Check it", id="h1")], scope=S)
    assert engine.facts.current(KEY, scope=S) is not None
    engine.prepare([*messages, HumanMessage("Check it once more", id="h1b")], scope=S)
    fact = engine.facts.current(KEY, scope=S)
    assert fact is not None and "fare1" in fact.text


@pytest.mark.parametrize("captured", [False, True], ids=["read", "captured"])
@pytest.mark.parametrize("named", [False, True], ids=["no-id", "id"])
def test_going_back_to_the_first_branch_reads_its_outputs_again(
    engine: ContextEngine, captured: bool, named: bool, reservation_lookup: Lookup
) -> None:
    """Outputs withdrawn when the thread went back are read again once the
    conversation holds them again: the last one's value is current, not the one before them."""
    messages = thread(engine, reservation_lookup, captured=captured, named=named)
    engine.prepare(messages[:9], scope=S)
    assert cabin(engine) == "fare1"
    engine.prepare(messages, scope=S)  # the user went back to the first branch
    assert cabin(engine) == "fare3"


@pytest.mark.parametrize("captured", [False, True], ids=["read", "captured"])
def test_a_value_stated_after_the_withdrawn_output_is_not_undone_by_the_rewind(
    engine: ContextEngine, captured: bool, reservation_lookup: Lookup
) -> None:
    """The application stated the value itself after the second output (no message of the
    branch said it): going back past that output leaves that value current, alone."""
    messages = thread(engine, reservation_lookup, captured=captured, named=False)[:9]
    engine.prepare(messages, scope=S)
    assert cabin(engine) == "fare1"
    engine.facts.write("reservation OBUT9V cabin=upgraded", key=KEY, scope=S)
    engine.prepare([*messages[:5], HumanMessage("Check it later", id="h1b")], scope=S)
    assert cabin(engine) == "upgraded"
    current = [
        f.text
        for f in engine.facts.store.find(FactQuery(reader=S, valid=True))
        if f.key == "reservation:obut9v"
    ]
    assert current == ["reservation OBUT9V cabin=upgraded"]
