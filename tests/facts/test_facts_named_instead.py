"""A hotel or an airline chosen by its name and then changed by name ("Make it Marriott
instead." after "I'd like the Hilton."): the new name replaces the choice of its kind, and
a name of another kind (an airline, a city) replaces nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery

TRIP = Scope(session_id="trip-1", user_id="traveller")


def chat(*turns: str) -> list[BaseMessage]:
    """The user's ``turns``, each answered without a question, then the user's "go ahead"."""
    messages: list[BaseMessage] = [SystemMessage("You are a travel booking agent.")]
    for i, said in enumerate(turns):
        messages += [HumanMessage(said, id=f"h{i}"), AIMessage(f"Noted ({i}).", id=f"a{i}")]
    return [*messages, HumanMessage("OK, please go ahead.", id="last")]


def current(engine: ContextEngine, messages: list[BaseMessage]) -> list[str]:
    """The statements in force once each prefix of ``messages`` was prepared, as an agent would."""
    for end in [i + 1 for i, m in enumerate(messages) if isinstance(m, HumanMessage)]:
        engine.prepare(messages[:end], scope=TRIP)
    return sorted(
        f.text
        for f in engine.facts.store.find(
            FactQuery(reader=TRIP, valid=True, scopes=("global", "session"))
        )
    )


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.mark.parametrize(
    ("first", "instead"),
    [
        ("I'd like the Hilton.", "Make it Marriott instead."),
        ("Book the Hilton.", "Make it Marriott instead."),
        ("I want the Hilton.", "Make it the Marriott instead."),
        ("I'd like the Hilton.", "Can we do the Hyatt instead?"),
        ("I'd like the Grand Plaza hotel.", "Make it the Fairmont hotel instead."),
        ("I'd like Delta.", "Make it United instead."),
        ("I'd like the Grandview.", "make it oakwood instead"),  # neither of a known kind
    ],
)
def test_a_name_of_the_same_kind_said_instead_replaces_the_choice(
    engine: ContextEngine, first: str, instead: str
) -> None:
    """ "Make it Marriott instead." (the hotel capitalized) was read as a name of no known kind:
    the Hilton stayed in force beside the Marriott."""
    held = current(engine, chat(first, instead))
    assert first not in held, held
    assert len(held) == 1, held


@pytest.mark.parametrize(
    "instead",
    [
        "Make it Delta instead.",
        "Can we do United instead?",
        "Make it Paris instead.",
        "Fly to Paris instead.",
        "make it chicago instead",
    ],
)
@pytest.mark.parametrize("hotel", ["I'd like the Hilton.", "Book the Hilton."])
def test_a_name_of_another_kind_said_instead_keeps_the_hotel(
    engine: ContextEngine, hotel: str, instead: str
) -> None:
    """An airline or a city said instead of something, after the hotel was chosen, must not be
    read as another hotel."""
    assert hotel in current(engine, chat(hotel, instead))


def test_a_hotel_said_instead_keeps_the_airline(engine: ContextEngine) -> None:
    held = current(
        engine, chat("I'd like Delta.", "I'd like the Hilton.", "Make it Marriott instead.")
    )
    assert "I'd like Delta." in held, held
    assert "I'd like the Hilton." not in held, held


@pytest.mark.parametrize(
    "booked", ["Book the Hilton.", "Please book the Hilton.", "Reserve the Grand Plaza."]
)
def test_a_hotel_named_to_book_is_the_choice(engine: ContextEngine, booked: str) -> None:
    """ "Book the Hilton." stated nothing: the hotel the user chose was not in the facts."""
    assert current(engine, chat(booked)) == [booked]


@pytest.mark.parametrize(
    "asked",
    [
        "Book the flight on May 20.",
        "Book the HAT136 flight.",
        "book the cheapest one",
        "Book the Monday flight.",
        "Book the Economy seat.",
        "Reserve the Basic Economy.",
        "Book the Gold plan.",
        "Book the Business Class.",
    ],
)
def test_a_booking_of_no_name_is_no_choice(engine: ContextEngine, asked: str) -> None:
    current(engine, chat(asked))
    held = engine.facts.store.find(FactQuery(reader=TRIP, valid=True, scopes=("global", "session")))
    assert [f.text for f in held if f.kind == "preference"] == [], held


def test_a_hotel_name_said_as_a_common_word_is_no_hotel(engine: ContextEngine) -> None:
    """ "courtyard" in "the courtyard view" was read as the hotel chain: "Make it Marriott
    instead." replaced the view chosen."""
    held = current(engine, chat("I'd like the courtyard view.", "Make it Marriott instead."))
    assert "I'd like the courtyard view." in held, held


def test_the_kind_said_outweighs_a_brand_of_another_kind(engine: ContextEngine) -> None:
    """ "the Delta hotel" (a hotel, named like the airline) was read as an airline: it kept
    the Hilton and was filed as the airline chosen."""
    assert current(engine, chat("I'd like the Hilton.", "Make it the Delta hotel instead.")) == [
        "Make it the Delta hotel instead."
    ]


@pytest.mark.parametrize(
    ("held", "asked"),
    [
        ("I'd like the aisle seat.", "Book the Economy seat."),
        ("I'd like the 3pm flight.", "Book the Monday flight."),
    ],
)
def test_a_booking_of_a_thing_described_replaces_no_choice(
    engine: ContextEngine, held: str, asked: str
) -> None:
    """ "Book the Economy seat." was read as a seat chosen and replaced the aisle seat; "Book
    the Monday flight." replaced the 3pm flight (a flight can be both)."""
    assert held in current(engine, chat(held, asked))
