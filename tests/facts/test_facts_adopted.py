""""Let's do that" takes up a hypothetical only when the user supposed it in the message just
before: a rejection ("no, let's not") or anything else the user said since closes it, however
the ledger is fed — one message per call, a whole thread at once, a thread read again by a new
process, a history trimmed at the front, messages without ids, two sessions interleaved."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import Scope
from ctxplugin.facts import ChromaFactStore, FactQuery, FactsLedger, MemoryFactStore

S = Scope(session_id="offsite")
DENVER = "The team offsite is in Denver."
AUSTIN = "What if we held the offsite in Austin instead?"


@pytest.fixture(params=["memory", "chroma"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> FactsLedger:
    return FactsLedger(MemoryFactStore() if request.param == "memory" else ChromaFactStore.persistent(tmp_path))


def thread(*said: str, ids: bool = True) -> list[BaseMessage]:
    """The user's messages, each answered."""
    messages: list[BaseMessage] = []
    for i, text in enumerate(said):
        messages += [HumanMessage(text, id=f"h{i}" if ids else None), AIMessage(f"Noted ({i}).", id=f"a{i}" if ids else None)]
    return messages


def one_by_one(ledger: FactsLedger, messages: list[BaseMessage], scope: Scope = S) -> None:
    for message in messages:
        ledger.ingest([message], scope=scope)


def offsite(ledger: FactsLedger, scope: Scope = S) -> str:
    found = ledger.current("team_offsite", scope=scope)
    assert found is not None
    return found.text


def supposed(ledger: FactsLedger, scope: Scope = S) -> list[str]:
    return [f.text for f in ledger.store.find(FactQuery(reader=scope, valid=True, scopes=("hypothetical",)))]


@pytest.mark.parametrize("ids", [True, False])
def test_taken_up_right_after_it_was_supposed(ledger: FactsLedger, ids: bool) -> None:
    one_by_one(ledger, thread(DENVER, AUSTIN, "Let's do that.", ids=ids))
    assert "Austin" in offsite(ledger)
    assert supposed(ledger) == []


@pytest.mark.parametrize("between", ["No, let's not.", "Never mind.", "Forget it.", "No thanks, keep Denver.", "How far is the airport?"])
@pytest.mark.parametrize("ids", [True, False])
def test_anything_the_user_said_since_closes_it(ledger: FactsLedger, between: str, ids: bool) -> None:
    one_by_one(ledger, thread(DENVER, AUSTIN, between, "Let's do that.", ids=ids))
    assert offsite(ledger) == DENVER
    assert supposed(ledger) == [AUSTIN]


def test_several_exchanges_since_close_it(ledger: FactsLedger) -> None:
    one_by_one(ledger, thread(DENVER, AUSTIN, "Which hotels are near the venue?", "Thanks.", "Let's do that."))
    assert offsite(ledger) == DENVER


def test_read_whole_in_one_call(ledger: FactsLedger) -> None:
    ledger.ingest(thread(DENVER, AUSTIN, "Never mind.", "Let's do that."), scope=S)
    assert offsite(ledger) == DENVER
    ledger.ingest(thread(DENVER, AUSTIN, "Let's do that.")[:6], scope=Scope(session_id="other"))
    assert "Austin" in offsite(ledger, Scope(session_id="other"))


def test_read_again_by_a_new_process_writes_nothing(tmp_path: Path) -> None:
    declined = thread(DENVER, AUSTIN, "No, let's not.", "Let's do that.")
    first = FactsLedger(ChromaFactStore.persistent(tmp_path))
    one_by_one(first, declined)
    again = FactsLedger(ChromaFactStore.persistent(tmp_path))
    assert again.ingest(declined, scope=S) == []
    assert offsite(again) == DENVER and supposed(again) == [AUSTIN]
    taken = Scope(session_id="taken")
    one_by_one(first, thread(DENVER, AUSTIN, "Let's do that."), taken)
    assert again.ingest(thread(DENVER, AUSTIN, "Let's do that."), scope=taken) == []
    assert "Austin" in offsite(again, taken)


def test_a_history_trimmed_at_the_front_and_sent_again(ledger: FactsLedger) -> None:
    messages = thread(DENVER, AUSTIN, "Never mind.", "Let's do that.")
    one_by_one(ledger, messages[:6])
    ledger.ingest(messages[4:], scope=S)  # "never mind" sent again, then "let's do that"
    assert offsite(ledger) == DENVER
    ledger.ingest(messages[6:], scope=S)
    assert offsite(ledger) == DENVER


def test_the_agreement_sent_again_alone_after_a_trim_takes_up_nothing(ledger: FactsLedger) -> None:
    messages = thread(DENVER, AUSTIN, "Never mind.", "Let's do that.", "Which hotels are near?")
    one_by_one(ledger, messages)
    ledger.ingest(messages[6:], scope=S)  # the front trimmed: "let's do that" first
    assert offsite(ledger) == DENVER


def test_two_sessions_interleaved(ledger: FactsLedger) -> None:
    a, b = Scope(session_id="a"), Scope(session_id="b")
    ledger.ingest(thread(DENVER)[:1], scope=a)
    ledger.ingest(thread(DENVER)[:1], scope=b)
    ledger.ingest([HumanMessage(AUSTIN, id="a1")], scope=a)
    ledger.ingest([HumanMessage(AUSTIN, id="b1")], scope=b)
    ledger.ingest([HumanMessage("Never mind.", id="b2")], scope=b)
    ledger.ingest([HumanMessage("Let's do that.", id="a2")], scope=a)
    ledger.ingest([HumanMessage("Let's do that.", id="b3")], scope=b)
    assert "Austin" in offsite(ledger, a)
    assert offsite(ledger, b) == DENVER


def test_a_process_that_never_saw_the_message_before_takes_up_the_latest_hypothetical(tmp_path: Path) -> None:
    messages = thread(DENVER, AUSTIN, "Let's do that.")
    one_by_one(FactsLedger(ChromaFactStore.persistent(tmp_path)), messages[:4])
    later = FactsLedger(ChromaFactStore.persistent(tmp_path))
    later.ingest(messages[4:], scope=S)  # what came before is unknown to it: the hypothetical is the latest statement
    assert "Austin" in offsite(later)


def test_a_long_thread_read_again_keeps_the_order_of_its_messages(ledger: FactsLedger) -> None:
    # more user messages than are remembered, read whole twice (a store that failed mid-ingest, a
    # host sending its thread again): those read again are still older than the last one
    said = thread(DENVER, *(f"Which room is free on floor {i}?" for i in range(68)), AUSTIN)
    ledger.ingest(said, scope=S)
    ledger.ingest(said, scope=S)
    ledger.ingest([HumanMessage("Let's do that.", id="h-last")], scope=S)
    assert "Austin" in offsite(ledger)
