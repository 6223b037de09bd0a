"""A user who corrects what they said: "Scratch that, it's HAT456.", "Hold on, it's $700.", as
the ledger of a real embedded engine holds it and the view shows it after each call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery

TRIP = Scope(session_id="trip-1", user_id="traveller")


def chat(*turns: str) -> list[BaseMessage]:
    """A support chat: the user's ``turns``, each answered, then the user's "go ahead"."""
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
    for i, turn in enumerate(turns):
        messages += [HumanMessage(turn, id=f"h{i}"), AIMessage(f"Noted ({i}).", id=f"a{i}")]
    messages.append(HumanMessage("OK, please go ahead.", id="last"))
    return messages


def shown(engine: ContextEngine, messages: list[BaseMessage]) -> dict[str, str]:
    """The user messages of the last view by id; each prefix of the conversation is prepared in
    turn, as an agent would."""
    for end in [i + 1 for i, m in enumerate(messages) if isinstance(m, HumanMessage)]:
        view = engine.prepare(messages[:end], scope=TRIP)
    return {str(m.id): str(m.content) for m in view.messages if isinstance(m, HumanMessage)}


def current(engine: ContextEngine) -> list[str]:
    """The statements the ledger holds in force for the trip."""
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=TRIP, valid=True, scopes=("global", "session"))))


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.mark.parametrize("lead", ["Scratch that", "Never mind", "Nevermind", "Hold on", "Hang on", "Ignore that", "Forget that", "Disregard that"])
@pytest.mark.parametrize(
    ("first", "value", "new"),
    [
        ("My flight is HAT123.", "it's HAT456", "HAT456"),
        ("My budget is $500.", "it's $700", "$700"),
        ("My reservation is ABC123.", "it should be ABC124", "ABC124"),
    ],
)
def test_a_value_said_again_after_a_retraction_replaces_the_old_one(engine: ContextEngine, lead: str, first: str, value: str, new: str) -> None:
    """"Scratch that, it's HAT456." kept "My flight is HAT123." in force and unmarked beside an
    unkeyed statement (or, for "it's $700", no statement at all)."""
    view = shown(engine, chat(first, f"{lead}, {value}."))
    assert first not in current(engine), current(engine)
    assert any(new in fact for fact in current(engine)), current(engine)
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == f"{lead}, {value}."


@pytest.mark.parametrize("said", ["Hold on to my bags, please.", "Hold on, let me check my email.", "Ignore that email from the airline."])
def test_a_pause_or_an_ask_replaces_nothing(engine: ContextEngine, said: str) -> None:
    shown(engine, chat("My flight is HAT123.", said))
    assert "My flight is HAT123." in current(engine), current(engine)


@pytest.mark.parametrize(
    ("first", "correction"),
    [
        ("My seat is 12A.", "Not 12A — 14C."),
        ("My seat is 12A.", "Not 12A - 14C."),
        ("My seat is 12A.", "Not 12A—14C."),
        ("My flight is on the 5th.", "Not the 5th – the 6th."),
        ("My destination is LAX.", "No, not LAX - LAS."),
    ],
)
def test_a_rejected_value_set_off_by_a_dash_is_replaced(engine: ContextEngine, first: str, correction: str) -> None:
    """"Not 12A — 14C." kept "My seat is 12A." in force and unmarked ("Not 12A, 14C." replaced it)."""
    view = shown(engine, chat(first, correction))
    assert first not in current(engine), current(engine)
    assert view["h0"].startswith("[outdated:"), view["h0"]
