"""An LCEL app or chat history whose messages carry no ids goes back too: it edits a turn, or
regenerates from an earlier point, and sends its list with the messages it kept and others after
them (its own objects, or copies). What the user said only on the branch left is no longer
current; what the user says again, or what a list trimmed from the front dropped, stays current."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery

CHAT = Scope(session_id="c1", user_id="u1")


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> ContextEngine:
    return ContextEngine(ContextConfig()) if request.param == "memory" else ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.fixture
def main() -> list[BaseMessage]:
    return [
        SystemMessage("You are the travel assistant."),
        HumanMessage("My budget is $500."),
        AIMessage("Noted."),
        HumanMessage("My seat is 12A."),
    ]


def current(engine: ContextEngine) -> list[str]:
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=CHAT, valid=True, scopes=("global", "session"))))


def test_an_edited_turn_leaves_what_the_old_text_stated(engine: ContextEngine, main: list[BaseMessage]) -> None:
    engine.prepare([*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")], scope=CHAT)
    assert "Also, my meal is vegetarian." in current(engine)
    edited = [*main, AIMessage("Noted."), HumanMessage("Also, my seat should be an aisle seat.")]
    prepared = engine.prepare(edited, scope=CHAT)
    assert "Also, my meal is vegetarian." not in current(engine), current(engine)
    assert {"My budget is $500.", "My seat is 12A."} <= set(current(engine))  # before the edit: kept
    assert not any("vegetarian" in str(m.content) for m in prepared.messages)


def test_going_back_to_the_first_branch_makes_its_statement_current_again(engine: ContextEngine, main: list[BaseMessage]) -> None:
    reply, said = AIMessage("Noted."), HumanMessage("Actually, my budget is $700.")
    engine.prepare([*main, reply, said], scope=CHAT)
    engine.prepare([*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")], scope=CHAT)
    assert not any("$700" in t for t in current(engine)), current(engine)
    engine.prepare([*main, reply, said, AIMessage("OK."), HumanMessage("Thanks.")], scope=CHAT)
    assert [t for t in current(engine) if "budget" in t or "meal" in t] == ["My budget is $700."], current(engine)


def test_the_same_words_sent_as_a_new_message_stay_current(engine: ContextEngine, main: list[BaseMessage]) -> None:
    engine.prepare([*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")], scope=CHAT)
    engine.prepare([*main, AIMessage("Noted!"), HumanMessage("Also, my meal is vegetarian.")], scope=CHAT)  # a copy, made anew
    assert "Also, my meal is vegetarian." in current(engine), current(engine)


def test_a_list_trimmed_from_the_front_leaves_nothing(engine: ContextEngine, main: list[BaseMessage]) -> None:
    later = [*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")]
    engine.prepare(later, scope=CHAT)
    engine.prepare([main[0], *later[3:], AIMessage("Sure."), HumanMessage("Book it.")], scope=CHAT)  # the first turns dropped
    assert {"My budget is $500.", "My seat is 12A.", "Also, my meal is vegetarian."} <= set(current(engine)), current(engine)


def test_messages_made_anew_on_every_call_are_not_taken_for_a_branch(engine: ContextEngine) -> None:
    def fresh() -> list[BaseMessage]:  # a chat history read back from a database: new objects, same text
        return [SystemMessage("You are the travel assistant."), HumanMessage("My budget is $500."), AIMessage("Noted."),
                HumanMessage("Also, my meal is vegetarian.")]

    engine.prepare(fresh(), scope=CHAT)
    engine.prepare([*fresh(), AIMessage("Noted."), HumanMessage("Book it.")], scope=CHAT)
    assert {"My budget is $500.", "Also, my meal is vegetarian."} <= set(current(engine)), current(engine)


def test_a_host_that_sends_copies_is_read_as_one_that_sends_its_list(engine: ContextEngine, main: list[BaseMessage]) -> None:
    engine.prepare(copy.deepcopy([*main, AIMessage("Noted."), HumanMessage("Also, my meal is vegetarian.")]), scope=CHAT)
    engine.prepare(copy.deepcopy([*main, AIMessage("Noted."), HumanMessage("Also, my seat should be an aisle seat.")]), scope=CHAT)
    assert "Also, my meal is vegetarian." not in current(engine), current(engine)
    assert {"My budget is $500.", "My seat is 12A."} <= set(current(engine))
