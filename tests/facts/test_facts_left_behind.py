"""A conversation that does not continue the one read before is taken for a branch its host went
back from (time travel), and what the user said after the last message both hold is no longer
current. When those messages come back (a sub-agent of the same thread was handed part of the
history, or the user went back to the first branch), what they stated is current again."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery

THREAD = Scope(session_id="t1", user_id="u1")
MAIN: list[BaseMessage] = [
    SystemMessage("You are the travel supervisor.", id="sys"),
    HumanMessage("My budget is $500.", id="h0"),
    AIMessage("Noted.", id="a0"),
    HumanMessage("My seat is 12A.", id="h1"),
]


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


def current(engine: ContextEngine) -> list[str]:
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=THREAD, valid=True, scopes=("global", "session"))))


def test_a_sub_agent_handed_part_of_the_thread_leaves_nothing_behind_for_good(engine: ContextEngine) -> None:
    """A sub-agent of the same thread, handed the first request and its task, made "My seat is
    12A." not current, and it stayed so when the supervisor sent the whole thread again."""
    engine.prepare(MAIN, scope=THREAD)
    engine.prepare([SystemMessage("You search flights.", id="sys2"), MAIN[1], HumanMessage("Find flights under $500.", id="task")], scope=THREAD)
    engine.prepare([*MAIN, AIMessage("Searching.", id="a1"), HumanMessage("What did you find?", id="h2")], scope=THREAD)
    assert current(engine) == ["My budget is $500.", "My seat is 12A."], current(engine)


def test_going_back_to_the_first_branch_makes_its_statements_current_again(engine: ContextEngine) -> None:
    engine.prepare([*MAIN, AIMessage("Noted.", id="a1"), HumanMessage("Actually, my budget is $700.", id="h2")], scope=THREAD)
    engine.prepare([*MAIN, AIMessage("Noted.", id="a1"), HumanMessage("Also, my meal is vegetarian.", id="b2")], scope=THREAD)
    assert "My budget is $700." not in current(engine), current(engine)
    engine.prepare([*MAIN, AIMessage("Noted.", id="a1"), HumanMessage("Actually, my budget is $700.", id="h2"), AIMessage("OK.", id="a2"), HumanMessage("Thanks.", id="h3")], scope=THREAD)
    assert [t for t in current(engine) if "budget" in t or "meal" in t] == ["My budget is $700."], current(engine)
