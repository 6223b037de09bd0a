"""Passengers given one by one, each named with a date of birth, as an airline agent is told
them: each stays in force beside the others, and a correction of one still replaces it.
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
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
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
    ("first", "second"),
    [
        # the wording of the tau-bench airline users ("The passenger's name is Ivan Smith.",
        # "First name: Ivan, Last name: Smith."), with the date of birth the booking needs
        (
            "The passenger's name is Ivan Smith, born 1986-03-14.",
            "The other passenger's name is Raj Sanchez, born 1986-09-12.",
        ),
        (
            "First name: Ivan, Last name: Smith, date of birth 1986-03-14.",
            "First name: Raj, Last name: Sanchez, date of birth 1986-09-12.",
        ),
        ("Passenger: Mia Li, born 1990-05-12.", "Passenger: Noah Kim, born 1988-11-02."),
        (
            "The passenger is Mia Li, date of birth 1990-05-12.",
            "The passenger is also Noah Kim, date of birth 1988-11-02.",
        ),
        (
            "My companion is Noah Kim, born 1988-11-02.",
            "My other companion is Sean McDonald, born 1979-01-30.",
        ),
        (
            "Passenger: Sean McDonald, born 1979-01-30.",
            "Passenger: Ronald MacDonald, born 1981-07-04.",
        ),
        ("Passenger: José García, born 1975-02-14.", "Passenger: Jorge Gómez, born 1977-08-21."),
        ("Passenger: Siobhán O'Brien, DOB 1992-12-01.", "Passenger: Liam D'Arcy, DOB 1993-03-09."),
        (
            "Passenger: Anne-Marie Dubois-Laurent, born on 1985-06-30.",
            "Passenger: Zoë Ångström, born on 1999-01-15.",
        ),
        (
            "The passenger's name is Mia Li, born May 12, 1990.",
            "The passenger's name is Noah Kim, born November 2, 1988.",
        ),
    ],
)
def test_passengers_given_one_by_one_are_all_kept(
    engine: ContextEngine, first: str, second: str
) -> None:
    """The second passenger named with a date of birth replaced the first under the same key
    ("passenger"): the first passenger left the facts, marked outdated."""
    opening = "I need to book a flight for two."
    assert current(engine, chat(opening, first, second)) == sorted([opening, first, second])


def test_a_third_passenger_keeps_the_first_two(engine: ContextEngine) -> None:
    said = [
        "Passenger: Mohamed Silva, born 1960-11-26.",
        "Passenger: Raj Sanchez, born 1986-09-12.",
        "Passenger: Liam Wilson, born 1980-03-27.",
    ]
    assert current(engine, chat(*said)) == sorted(said)


@pytest.mark.parametrize(
    ("second", "correction", "gone", "now"),
    [
        (
            "The second passenger is Noah King, born 1988-11-02.",
            "Sorry, the second passenger is Noah Kim, not Noah King.",
            "born",
            "Noah Kim",
        ),
        (
            "The second passenger is Noah King, born 1988-11-02.",
            "Sorry, the second passenger is Noah Kim, born 1988-11-02.",
            "Noah King",
            "Noah Kim",
        ),
        (
            "The second passenger is Noah Kim, born 1988-11-02.",
            "Sorry, the second passenger was born 1988-11-20.",
            "1988-11-02",
            "1988-11-20",
        ),
        (
            "Passenger: Noah Kim, born 1988-11-02.",
            "Actually, the passenger is Sean McDonald, born 1979-01-30.",
            "Noah Kim",
            "Sean McDonald",
        ),
    ],
)
def test_a_correction_of_a_passenger_still_replaces_it(
    engine: ContextEngine, second: str, correction: str, gone: str, now: str
) -> None:
    """The first passenger stays; the one corrected is replaced by the correction."""
    first = "The first passenger is Mia Li, born 1990-05-12."
    held = current(engine, chat(first, second, correction))
    assert [t for t in held if t != first and gone in t] == [], held
    assert [t for t in held if now in t], held
    assert first in held, held


def test_a_passenger_said_with_other_words_is_corrected_by_name(engine: ContextEngine) -> None:
    """The person's key took every capitalized word of the statement ("Gold":
    ``passenger_noah_kim_gold``), so the corrected date of birth of Noah Kim was kept beside
    the wrong one, both in force."""
    said = [
        "Passenger: Mia Li, born 1990-05-12.",
        "Passenger: Noah Kim, born 1988-11-02, Gold member.",
        "Passenger: Noah Kim, born 1988-11-20.",
    ]
    held = current(engine, chat(*said))
    assert said[1] not in held, held
    assert said[0] in held and said[2] in held, held


def test_passengers_named_in_a_script_without_capitals_are_all_kept(
    engine: ContextEngine,
) -> None:
    """Names in a script without capital letters (李明, 王芳) were read as no name: the second
    passenger replaced the first."""
    said = ["Passenger: 李明, born 1990-05-12.", "Passenger: 王芳, born 1988-11-02."]
    assert current(engine, chat(*said)) == sorted(said)
