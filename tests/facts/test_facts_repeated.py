"""A statement made again after it was changed is current again: a user message without an id
that repeats an earlier one word for word, and a tool output a later call returns unchanged,
are read as statements of their own — while the same conversation resent, as the same messages
or as copies, in this process or a new one, is read once."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery

TRIP = Scope(session_id="trip", user_id="traveller")


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


def grown(engine: ContextEngine, messages: list[BaseMessage]) -> list[BaseMessage]:
    """The view of the last call, each prefix ending in a user message or a tool output
    prepared in turn, as an agent would."""
    ends = [i + 1 for i, m in enumerate(messages) if isinstance(m, (HumanMessage, ToolMessage))]
    for end in ends:
        view = engine.prepare(messages[:end], scope=TRIP).messages
    return view


def in_force(engine: ContextEngine, key: str | None = None) -> list[str]:
    """The statements in force for the trip (``key``: of that key only)."""
    found = engine.facts.store.find(FactQuery(reader=TRIP, valid=True))
    return sorted(f.text for f in found if key is None or f.key == key)


def stored(engine: ContextEngine) -> int:
    return len(engine.facts.store.find(FactQuery(reader=TRIP, valid=None)))


def budget_chat() -> list[BaseMessage]:
    """A user who changes the budget, then says the first message again, word for word (an
    LCEL chain's messages carry no ids)."""
    return [
        SystemMessage("You help plan trips."),
        HumanMessage("My budget is $100."),
        AIMessage("Noted."),
        HumanMessage("Actually, my budget is $200."),
        AIMessage("Updated."),
        HumanMessage("My budget is $100."),
        AIMessage("Back to $100, then."),
        HumanMessage("Which hotels fit?"),
    ]


def said(view: list[BaseMessage]) -> list[str]:
    return [str(m.content) for m in view if isinstance(m, HumanMessage) and "budget" in str(m.content)]


def test_a_user_message_said_again_after_a_change_is_current_again(engine: ContextEngine) -> None:
    view = grown(engine, budget_chat())
    assert in_force(engine) == ["My budget is $100."]
    first, change, again = said(view)
    assert first == again == "My budget is $100.", "the value in force is not marked outdated where it is said"
    assert change.startswith("[outdated: my_budget is now: My budget is $100.]")


def test_the_same_conversation_resent_as_copies_is_read_once(engine: ContextEngine) -> None:
    messages = budget_chat()
    grown(engine, messages)
    count = stored(engine)
    copies = [m.model_copy() for m in messages]
    view = engine.prepare(copies, scope=TRIP).messages
    assert stored(engine) == count
    assert in_force(engine) == ["My budget is $100."]
    assert said(view)[1].startswith("[outdated:")


def test_a_new_process_reads_a_repeated_message_once(tmp_path: Path) -> None:
    messages = budget_chat()
    grown(ContextEngine.embedded(tmp_path / "ctx", ContextConfig()), messages)
    again = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    count = stored(again)
    grown(again, messages)
    assert stored(again) == count
    assert in_force(again) == ["My budget is $100."]


def test_a_message_said_three_times_is_read_each_time_it_follows_a_change(engine: ContextEngine) -> None:
    messages = [
        *budget_chat()[:-1],
        HumanMessage("Actually, my budget is $200."), AIMessage("Updated again."),
        HumanMessage("My budget is $100."), AIMessage("$100 it is."), HumanMessage("Which hotels fit?"),
    ]
    grown(engine, messages)
    assert in_force(engine) == ["My budget is $100."]


def status_checks(capture: ContextEngine | None) -> list[BaseMessage]:
    """An agent polling an order: the status changes, then changes back to what the first
    call returned (``capture``: each output stored as it arrives)."""
    messages: list[BaseMessage] = [SystemMessage("You track orders."), HumanMessage("Tell me when order A1 ships.")]
    for n, status in enumerate(["shipped", "delayed", "shipped"]):
        messages.append(AIMessage("", tool_calls=[{"name": "check_order", "args": {"order": "A1"}, "id": f"call-{n}"}]))
        output = ToolMessage(f"Order A1 status: {status}", tool_call_id=f"call-{n}", name="check_order")
        messages.append(capture.capture_tool_result(output, TRIP) if capture is not None else output)
    return messages


@pytest.mark.parametrize("captured", [False, True])
def test_a_tool_output_a_later_call_returns_again_states_its_value_again(engine: ContextEngine, captured: bool) -> None:
    grown(engine, status_checks(engine if captured else None))
    assert in_force(engine, "order_a1_status") == ["Order A1 status: shipped"]


def windowed(messages: list[BaseMessage], dropped: int) -> list[BaseMessage]:
    """``messages`` as a host keeping a window sends them: the system prompt, then all but the
    first ``dropped`` messages after it."""
    return [messages[0], *messages[1 + dropped :]]


def changed_again() -> list[BaseMessage]:
    """:func:`budget_chat` going on: the budget changes again, then the user goes back to the
    first one a third time."""
    return [
        *budget_chat(),
        AIMessage("Hotel Azul."),
        HumanMessage("Actually, my budget is $300."),
        AIMessage("Updated to $300."),
        HumanMessage("My budget is $100."),
        AIMessage("Back to $100 again."),
        HumanMessage("Which hotels fit now?"),
    ]


def test_a_message_said_again_after_the_host_trimmed_the_first_saying_is_read(engine: ContextEngine) -> None:
    messages = changed_again()
    grown(engine, budget_chat())
    count = stored(engine)
    # the host drops the first exchange, then the conversation goes on
    grown(engine, windowed(messages, 2)[: len(budget_chat()) - 2])
    assert stored(engine) == count, "a trimmed conversation is not read again"
    grown(engine, windowed(messages, 2))
    assert in_force(engine) == ["My budget is $100."]


def test_a_new_process_reads_a_trimmed_conversation_once(tmp_path: Path) -> None:
    messages = changed_again()
    grown(ContextEngine.embedded(tmp_path / "ctx", ContextConfig()), messages)
    again = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    count = stored(again)
    for dropped in (2, 4, 6):
        grown(again, windowed(messages, dropped))
        assert stored(again) == count
        assert in_force(again) == ["My budget is $100."]


def test_a_statement_said_alternately_is_read_each_time(engine: ContextEngine) -> None:
    messages: list[BaseMessage] = [SystemMessage("You help plan trips.")]
    for budget in ["$100", "$200", "$100", "$200", "$100"]:
        messages += [HumanMessage(f"My budget is {budget}."), AIMessage("Noted.")]
    grown(engine, [*messages, HumanMessage("Which hotels fit?")])
    assert in_force(engine) == ["My budget is $100."]


def test_a_repeated_message_in_view_is_not_repeated_by_the_facts_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)  # the default mode leaves out what the view shows
    engine = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    view = grown(engine, budget_chat())
    assert in_force(engine) == ["My budget is $100."]
    assert not [m for m in view if isinstance(m, SystemMessage) and "$100" in str(m.content)], "shown twice"
