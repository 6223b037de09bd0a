"""The ledger's memory of which records each tool output stated, and what each call asked for."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from langchain_core.messages import ToolMessage

from ctxplugin import Scope
from ctxplugin.facts import FactDraft, FactQuery, FactsLedger, MemoryFactStore, RuleExtractor
from ctxplugin.facts._polls import Polls, call_identity
from ctxplugin.facts.model import Fact

S = Scope(session_id="polls")


def output(call_id: str, status: str) -> ToolMessage:
    return ToolMessage(json.dumps({"status": status}), tool_call_id=call_id, name="get_order_status", id=f"m-{call_id}")


def current(ledger: FactsLedger) -> list[str]:
    return sorted(f.text for f in ledger.store.find(FactQuery(reader=S, valid=True)))


def test_what_a_call_asks_for_is_its_tool_and_canonical_arguments() -> None:
    assert call_identity("get_order_status", {"order": "7731", "verbose": True}) == call_identity(
        "get_order_status", {"verbose": True, "order": "7731"}
    )
    assert call_identity("get_order_status", {"order": "7731"}) != call_identity("get_order_status", {"order": "7732"})
    assert call_identity("get_order_status", {"order": "7731"}) != call_identity("cancel_order", {"order": "7731"})
    assert call_identity("t", {1: "a", "b": 2}) == call_identity("t", {1: "a", "b": 2}), "keys of mixed types"


def test_outputs_read_in_one_ingest_are_settled_in_order() -> None:
    ledger = FactsLedger(MemoryFactStore())
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.polls.asked([("c1", same), ("c2", same), ("c3", same)], scope=S)
    ledger.ingest([output("c1", "processing"), output("c2", "shipped"), output("c3", "processing")], scope=S)
    replaced = ledger.polls.answered([("c1", same), ("c2", same), ("c3", same)], scope=S)
    # the first two were settled as the reading moved on (c3 then found "processing" replaced,
    # and stated it anew), the last one here
    assert [f.text for f in replaced] == ["order_status: status=shipped"]
    assert current(ledger) == ["order_status: status=processing"]
    assert [f.source.call_id for f in ledger.store.find(FactQuery(reader=S, valid=True))] == ["c3"]


def test_an_output_read_before_its_call_is_known_is_settled_when_it_is() -> None:
    ledger = FactsLedger(MemoryFactStore())
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.ingest([output("c1", "processing")], scope=S)  # as a capture reads it
    ledger.ingest([output("c2", "shipped")], scope=S)
    assert len(current(ledger)) == 2
    replaced = ledger.polls.answered([("c1", same), ("c2", same)], scope=S)
    assert [f.text for f in replaced] == ["order_status: status=processing"]
    assert current(ledger) == ["order_status: status=shipped"]
    assert ledger.polls.answered([("c1", same), ("c2", same)], scope=S) == [], "a call is settled once"


def test_the_memory_is_bounded() -> None:
    ledger = FactsLedger(MemoryFactStore())
    ledger.polls = Polls(ledger.store, threading.RLock(), size=1)
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.ingest([output("c1", "processing")], scope=S)
    ledger.ingest([output("c2", "shipped")], scope=S)  # c1's facts are forgotten
    assert ledger.polls.answered([("c1", same), ("c2", same)], scope=S) == []
    assert len(current(ledger)) == 2


def test_an_extractor_of_ones_own_marks_records() -> None:
    def records(message: object) -> list[dict[str, object]]:
        return [{"text": f"order 7731 is {json.loads(str(getattr(message, 'content', '{}')))['status']}", "record": True}]

    ledger = FactsLedger(MemoryFactStore(), extractor=records)
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.ingest([output("c1", "processing")], scope=S)
    ledger.ingest([output("c2", "shipped")], scope=S)
    ledger.polls.answered([("c1", same), ("c2", same)], scope=S)
    assert current(ledger) == ["order 7731 is shipped"]


class SlotLock:
    """A write lock shared by processes: the names held now."""

    def __init__(self) -> None:
        self.held: list[str] = []

    @contextmanager
    def hold(self, name: str) -> Iterator[None]:
        self.held.append(name)
        try:
            yield
        finally:
            self.held.remove(name)


class Watched(MemoryFactStore):
    """A store shared by processes: which facts were changed while no write lock was held."""

    def __init__(self, lock: SlotLock) -> None:
        super().__init__()
        self.lock = lock
        self.unlocked: list[str] = []

    def update(self, facts: Sequence[Fact]) -> None:
        if not self.lock.held:
            self.unlocked += [f.text for f in facts]
        super().update(facts)


def test_a_call_made_again_replaces_under_the_shared_write_lock() -> None:
    # two workers on one store: another process's write to the same slot waits for this one
    lock = SlotLock()
    store = Watched(lock)
    ledger = FactsLedger(store, lock=lock)
    same = call_identity("get_order_status", {"order": "7731"})
    ledger.ingest([output("c1", "processing")], scope=S)
    ledger.ingest([output("c2", "shipped")], scope=S)
    assert [f.text for f in ledger.polls.answered([("c1", same), ("c2", same)], scope=S)] == ["order_status: status=processing"]
    assert current(ledger) == ["order_status: status=shipped"]
    assert store.unlocked == []


def test_a_record_compares_as_the_same_draft_written_by_hand() -> None:
    # the flag says where a draft comes from, as its source_ref does, and is left out of its repr:
    # two drafts printed alike are equal, and an extractor's tests written before it still hold
    (draft,) = RuleExtractor().from_json([{"status": "shipped"}], "get_order_status")
    assert draft.record
    assert draft == FactDraft(text=draft.text, kind="entity", tags=draft.tags, importance=0.5)
    assert len({draft, replace(draft, record=False)}) == 1
