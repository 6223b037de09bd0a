"""Writes of one ingest go to the store together, and the in-memory store reads only the slots
its reader can see."""

from __future__ import annotations

from datetime import UTC
from pathlib import Path

import chromadb
import chromadb.errors
import pytest
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin.errors import StoreError
from ctxplugin.facts import ChromaFactStore, Fact, FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.facts import _memory_slots as slots_module
from ctxplugin.facts import store as store_module
from ctxplugin.facts.extract import FactDraft
from ctxplugin.scope import Scope

S = Scope(session_id="s1")
RECORDS = ToolMessage(
    '[{"id": "W-1", "status": "open", "owner": "ana"}, {"id": "W-2", "status": "closed", "owner": "bo"},'
    ' {"id": "W-3", "status": "open", "owner": "cy"}]',
    tool_call_id="call_1",
    name="list_orders",
)


def test_an_ingest_adds_its_facts_in_one_write(mocker: MockerFixture) -> None:
    store = MemoryFactStore()
    ledger = FactsLedger(store)
    add = mocker.spy(store, "add")
    written = ledger.ingest([HumanMessage("The budget is 50k. The deadline is Friday."), RECORDS], scope=S)
    assert len(written) > 2
    assert add.call_count == 1
    assert {f.id for f in add.call_args.args[0]} >= {f.id for f in written}


def test_an_ingest_that_replaces_facts_sends_them_in_one_write(mocker: MockerFixture) -> None:
    def extractor(message: BaseMessage) -> list[FactDraft]:
        return [FactDraft(text="Data team on Project Gamma", key="data_team"), FactDraft(text="Budget owner is Bo", key="budget_owner")]

    store = MemoryFactStore()
    ledger = FactsLedger(store, extractor=extractor)
    old = [ledger.write("Data team on Project Alpha", key="data_team", scope=S), ledger.write("Budget owner is Ana", key="budget_owner", scope=S)]
    write = mocker.spy(store, "write")
    written = ledger.ingest([HumanMessage("The data team moved to Project Gamma and Bo owns the budget.")], scope=S)
    assert [f.text for f in written] == ["Data team on Project Gamma", "Budget owner is Bo"]
    assert write.call_count == 1
    assert {f.id for f in write.call_args.args[0]} == {f.id for f in written}
    assert {f.id for f in write.call_args.args[1]} == {f.id for f in old}
    assert [ledger.current(k, scope=S).text for k in ("data_team", "budget_owner")] == [f.text for f in written]  # type: ignore[union-attr]


def test_facts_decided_in_one_ingest_see_each_other() -> None:
    ledger = FactsLedger(MemoryFactStore())
    ledger.ingest([HumanMessage("The meeting is Tuesday at 2pm."), HumanMessage("The meeting is Tuesday at 2pm.")], scope=S)
    texts = [f.text for f in ledger.store.find(FactQuery(reader=S))]
    assert len(texts) == len(set(texts)), "a statement repeated within one ingest is stored once"


def test_chroma_gets_one_upsert_per_ingest(tmp_path: Path, mocker: MockerFixture) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store)
        ledger.write("warm up", scope=S)
        upsert = mocker.spy(type(store.raw_collection()), "upsert")
        written = ledger.ingest([HumanMessage("The budget is 50k. The deadline is Friday."), RECORDS], scope=S)
        assert len(written) > 2
        assert upsert.call_count == 1


def test_a_search_reads_only_the_slots_its_reader_can_see(mocker: MockerFixture) -> None:
    store = MemoryFactStore()
    ledger = FactsLedger(store)
    for session in range(20):
        ledger.write(f"Order W-{session} ships on Friday", scope=Scope(session_id=f"other-{session}"))
    mine = ledger.write("Order W-99 ships on Monday", scope=S)
    checked = [mocker.spy(store_module, "matches"), mocker.spy(slots_module, "matches")]  # BM25's, the slots' pools
    hits = ledger.search("when does order W-99 ship?", scope=S)
    assert [h.fact.id for h in hits] == [mine.id]
    assert all(spy.call_count for spy in checked)
    assert {call.args[0].owner.session_id for spy in checked for call in spy.call_args_list} == {"s1"}


def test_chroma_replaces_facts_in_the_same_upsert_and_keeps_their_vectors(tmp_path: Path, mocker: MockerFixture) -> None:
    def extractor(message: BaseMessage) -> list[FactDraft]:
        return [FactDraft(text="Data team on Project Gamma", key="data_team"), FactDraft(text="Release train is R7", key="release")]

    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store, extractor=extractor)
        old = ledger.write("Data team on Project Alpha", key="data_team", scope=S)
        collection = store.raw_collection()
        before = collection.get(ids=[old.id], include=["embeddings", "documents"])
        upsert, update = mocker.spy(type(collection), "upsert"), mocker.spy(type(collection), "update")
        written = ledger.ingest([HumanMessage("The data team moved to Project Gamma.")], scope=S)
        assert [f.text for f in written] == ["Data team on Project Gamma", "Release train is R7"]
        assert (upsert.call_count, update.call_count) == (1, 0)
        assert set(upsert.call_args.kwargs["ids"]) == {old.id, *(f.id for f in written)}
        after = collection.get(ids=[old.id], include=["embeddings", "documents"])
        assert after["documents"] == before["documents"]
        assert list(after["embeddings"][0]) == list(before["embeddings"][0])
        replaced = store.get([old.id], reader=S)[0]
        assert not replaced.is_valid and replaced.superseded_by == written[0].id
        assert ledger.current("data_team", scope=S).text == "Data team on Project Gamma"  # type: ignore[union-attr]
        # the replaced fact is still found by its words, as no longer valid
        assert [f.id for f in store.find(FactQuery(reader=S, key="data_team", valid=False))] == [old.id]


def test_a_failed_write_leaves_the_old_fact_current(tmp_path: Path, mocker: MockerFixture) -> None:
    def extractor(message: BaseMessage) -> list[FactDraft]:
        return [FactDraft(text="Data team on Project Gamma", key="data_team")]

    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store, extractor=extractor)
        old = ledger.write("Data team on Project Alpha", key="data_team", scope=S)
        mocker.patch.object(type(store.raw_collection()), "upsert", side_effect=chromadb.errors.InternalError("disk full"))
        with pytest.raises(StoreError):
            ledger.ingest([HumanMessage("The data team moved to Project Gamma.")], scope=S)
        mocker.stopall()
        assert ledger.current("data_team", scope=S).id == old.id  # type: ignore[union-attr]


def test_the_dependents_of_a_fact_are_found_without_reading_the_others(mocker: MockerFixture) -> None:
    store = MemoryFactStore()
    ledger = FactsLedger(store)
    base = ledger.write("Budget is 50k", key="budget", scope=S)
    for i in range(30):
        ledger.write(f"Order W-{i} ships on Friday", key=f"order_{i}", scope=S)
    derived = ledger.write("Budget in USD is 55k", key="budget_usd", scope=S, depends_on=[base.id])
    checked = mocker.spy(slots_module, "matches")
    found = store.find(FactQuery(reader=S, valid=True, depends_on=base.id))
    assert [f.id for f in found] == [derived.id]
    assert checked.call_count == 1
    ledger.write("Budget is 60k", key="budget", scope=S)
    flagged = store.get([derived.id], reader=S)[0]
    assert flagged.needs_review and flagged.is_valid
    assert store.find(FactQuery(reader=S, depends_on=derived.id)) == []


def _key_or_text_lookups(get_calls: list) -> int:  # type: ignore[type-arg]
    """The reads of a collection by key or by text hash (where clauses on kv / hv)."""
    def by_key_or_text(where: object) -> bool:
        text = repr(where)
        return "'kv'" in text or "'hv'" in text

    return sum(1 for call in get_calls if by_key_or_text(call.kwargs.get("where")))


def test_an_ingest_reads_what_its_decisions_look_up_in_one_request(tmp_path: Path, mocker: MockerFixture) -> None:
    def extractor(message: BaseMessage) -> list[FactDraft]:
        owner, count = str(message.content).split()  # "<owner> <tickets>"
        return [FactDraft(text=f"Ticket T-{i} is assigned to {owner}", key=f"ticket_{i}") for i in range(int(count))]

    def read(content: str, call: str) -> list[Fact]:
        return ledger.ingest([ToolMessage(content, tool_call_id=call, name="tickets")], scope=S)

    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store, extractor=extractor)
        assert len(read("Bo 3", "c0")) == 3
        get = mocker.spy(type(store.raw_collection()), "get")
        written = read("Ana 6", "c1")
        assert len(written) == 6, "three new facts, three that replace Bo's"
        assert _key_or_text_lookups(get.call_args_list) == 1, "six decisions, one read by key or text"
        assert sorted(f.text for f in store.find(FactQuery(reader=S, valid=True))) == sorted(f.text for f in written)
        get.reset_mock()
        assert read("Ana 6", "c2") == [], "the same statements are found as stored"
        assert _key_or_text_lookups(get.call_args_list) == 1


def _outcome(ledger: FactsLedger) -> list[tuple[str, str | None, bool, str | None]]:
    facts = ledger.store.find(FactQuery(reader=S))
    texts = {f.id: f.text for f in facts}
    return sorted((f.text, f.key, f.is_valid, texts.get(f.superseded_by or "", f.superseded_by)) for f in facts)


def test_decisions_made_from_what_was_read_at_once_equal_those_read_one_by_one(tmp_path: Path) -> None:
    turns: list[BaseMessage] = [
        HumanMessage("The budget is 50k. The deadline is Friday. My manager is Dana."),
        ToolMessage('{"budget": "40k", "owner": "Eli", "status": "open"}', tool_call_id="c1", name="crm"),
        HumanMessage("Actually the deadline is Monday. The budget is 60k."),
        ToolMessage('{"budget": "40k", "owner": "Eli", "status": "closed"}', tool_call_id="c2", name="crm"),
        ToolMessage('{"budget": "40k", "owner": "Eli", "status": "closed"}', tool_call_id="c3", name="crm"),
        HumanMessage("The deadline is Monday. The meeting is Tuesday at 2pm."),
        HumanMessage("Let's do the meeting Thursday at 3pm instead."),
    ]
    with ChromaFactStore.persistent(tmp_path) as store:
        chroma, memory = FactsLedger(store), FactsLedger(MemoryFactStore())
        for turn in turns:
            chroma.ingest([turn], scope=S)
            memory.ingest([turn], scope=S)
        assert _outcome(chroma) == _outcome(memory)
        assert any(not valid for _, _, valid, _ in _outcome(chroma)), "some facts were replaced or refused"


def test_an_embedded_store_counts_the_writes_of_every_store_on_its_directory(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path) as one, ChromaFactStore.persistent(tmp_path) as two:
        before = one.generation
        assert isinstance(before, int) and two.generation == before
        FactsLedger(two).write("The budget is 50k", key="budget", scope=S)
        assert one.generation != before, "a write through another store on the directory is counted"
        seen = one.generation
        one.get(["fact_missing"], reader=S)
        one.find(FactQuery(reader=S))
        assert one.generation == seen, "reads are not"
    with ChromaFactStore.from_client(chromadb.EphemeralClient()) as passed:
        assert passed.generation is None, "a client passed in may be written by others: not counted"


def test_chroma_returns_only_the_provisional_facts_asked_for(tmp_path: Path, mocker: MockerFixture) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store)
        for i in range(12):
            ledger.write(f"Order W-{i} ships on Friday", key=f"order_{i}", scope=S)
        maybe = ledger.write("Maybe the offsite moves to Porto", key="venue", scope=S, fact_scope="hypothetical")
        draft = ledger.write("Draft: the budget could be 60k", key="budget", scope=S, fact_scope="draft")
        get = mocker.spy(type(store.raw_collection()), "get")
        found = store.find(FactQuery(reader=S, valid=True, scopes=("hypothetical", "draft")))
        assert {f.id for f in found} == {maybe.id, draft.id}
        assert len(get.spy_return["ids"]) == 2, "Chroma returns the provisional facts, not every current one"


def test_pending_facts_are_found_by_their_text_as_they_are_now() -> None:
    from datetime import datetime, timedelta

    from ctxplugin.facts._batch import WriteBatch
    from ctxplugin.testing.facts_contract import make_fact

    start = datetime(2026, 1, 1, tzinfo=UTC)
    first, other, again = (
        make_fact(text, owner=S, created_at=start + timedelta(seconds=i))
        for i, text in enumerate(["Gate B12 closes at 9", "Gate C3 is open", "gate b12 closes at 9"])
    )
    batch = WriteBatch(MemoryFactStore())
    batch.add([first, other, again])
    same_text = FactQuery(reader=S, text_hash=first.text_hash)
    assert [f.id for f in batch.find(same_text)] == [again.id, first.id]  # newest first
    batch.update([first.model_copy(update={"is_valid": False})])
    assert [f.id for f in batch.find(FactQuery(reader=S, valid=True, text_hash=first.text_hash))] == [again.id]
    reworded = again.model_copy(update={"text": "Gate B12 closes at 10"})
    batch.update([reworded])  # still to be added: found by its new text only
    assert [f.id for f in batch.find(same_text)] == [first.id]
    assert [f.id for f in batch.find(FactQuery(reader=S, text_hash=reworded.text_hash))] == [again.id]
    batch.flush()
    assert [f.id for f in batch.find(FactQuery(reader=S, text_hash=reworded.text_hash))] == [again.id]


def test_pending_facts_are_found_by_their_key_as_it_is_now() -> None:
    from datetime import datetime, timedelta

    from ctxplugin.facts._batch import WriteBatch
    from ctxplugin.testing.facts_contract import make_fact

    start = datetime(2026, 1, 1, tzinfo=UTC)
    gate, seat, later = (
        make_fact(text, owner=S, key=key, created_at=start + timedelta(seconds=i))
        for i, (text, key) in enumerate([("Gate B12", "gate"), ("Seat 4A", "seat"), ("Gate C3", "gate")])
    )
    batch = WriteBatch(MemoryFactStore())
    batch.add([gate, seat, later])
    assert [f.id for f in batch.find(FactQuery(reader=S, key="gate"))] == [later.id, gate.id]  # newest first
    batch.update([gate.model_copy(update={"is_valid": False})])
    assert [f.id for f in batch.find(FactQuery(reader=S, key="gate", valid=True))] == [later.id]
    rekeyed = later.model_copy(update={"key": "seat"})
    batch.update([rekeyed])  # still to be added: found under its new key only
    assert [f.id for f in batch.find(FactQuery(reader=S, key="gate"))] == [gate.id]
    assert [f.id for f in batch.find(FactQuery(reader=S, key="seat"))] == [later.id, seat.id]
    assert [f.id for f in batch.find(FactQuery(reader=S, key="seat", valid=True))] == [later.id, seat.id]
    assert batch.find(FactQuery(reader=S, key="gate", valid=True)) == []
    unkeyed = seat.model_copy(update={"key": None})
    batch.update([unkeyed])
    assert [f.id for f in batch.find(FactQuery(reader=S, key="seat"))] == [later.id]
    assert {f.id for f in batch.find(FactQuery(reader=S))} == {gate.id, seat.id, later.id}
    batch.flush()
    assert [f.id for f in batch.find(FactQuery(reader=S, key="seat"))] == [later.id]


def test_a_thread_read_again_after_a_restart_finds_every_fact_as_stored(tmp_path: Path) -> None:
    """A new process reads the whole thread at once: each draft's duplicate or key is looked up
    among the facts read in one request, by its own text or key."""
    turns: list[BaseMessage] = [
        HumanMessage(f"Ticket T-{i} is assigned to {('Ana', 'Bo', 'Cy')[i % 3]}. The budget of T-{i} is {i}k.")
        for i in range(120)
    ]
    turns += [HumanMessage(f"Actually ticket T-{i} is assigned to Dee.") for i in range(0, 120, 7)]
    with ChromaFactStore.persistent(tmp_path) as store:
        FactsLedger(store).ingest(turns, scope=S)
        before = _outcome(FactsLedger(store))
    with ChromaFactStore.persistent(tmp_path) as store:
        ledger = FactsLedger(store)
        assert ledger.ingest(turns, scope=S) == []
        assert _outcome(ledger) == before
        assert any(not valid for _, _, valid, _ in before)


def test_the_decisions_after_a_similarity_search_are_still_read_at_once(tmp_path: Path, mocker: MockerFixture) -> None:
    """A correction looks for what it corrects by similarity, which sends the writes so far:
    the decisions after it find what was read at once, with those writes in it."""

    def extractor(message: BaseMessage) -> list[FactDraft]:
        if str(message.content) == "first":
            return [FactDraft(text="The seat is economy class"), FactDraft(text="Ticket T-1 is assigned to Bo", key="ticket_1")]
        return [
            FactDraft(text="Ticket T-0 is assigned to Ana", key="ticket_0"),
            FactDraft(text="The seat is business class", replaces="economy class"),
            *(FactDraft(text=f"Ticket T-{i} is assigned to Ana", key=f"ticket_{i}") for i in range(5)),
        ]

    with ChromaFactStore.persistent(tmp_path) as store:
        chroma, memory = FactsLedger(store, extractor=extractor), FactsLedger(MemoryFactStore(), extractor=extractor)
        for ledger in (chroma, memory):
            ledger.ingest([HumanMessage("first", id="m1")], scope=S)
        get = mocker.spy(type(store.raw_collection()), "get")
        written = chroma.ingest([HumanMessage("second", id="m2")], scope=S)
        assert _key_or_text_lookups(get.call_args_list) == 1, "seven decisions, one read by key or text"
        memory.ingest([HumanMessage("second", id="m2")], scope=S)
        assert [f.text for f in written] == ["Ticket T-0 is assigned to Ana", "The seat is business class", *(f"Ticket T-{i} is assigned to Ana" for i in range(1, 5))]
        assert _outcome(chroma) == _outcome(memory)
        assert [t for t, _, valid, _ in _outcome(chroma) if not valid] == ["The seat is economy class", "Ticket T-1 is assigned to Bo"]


def test_pending_changes_are_found_by_their_key_and_what_they_depend_on_as_they_are_now() -> None:
    from datetime import datetime

    from ctxplugin.facts._batch import WriteBatch
    from ctxplugin.testing.facts_contract import make_fact

    at = datetime(2026, 1, 1, tzinfo=UTC)  # one instant: equal times keep the order they were put in
    gate, seat, belt = (make_fact(text, owner=S, key=key, created_at=at) for text, key in [("Gate B12", "gate"), ("Seat 4A", "seat"), ("Belt 7", "belt")])
    store = MemoryFactStore()
    store.add([gate, seat, belt])
    batch = WriteBatch(store)
    batch.update([belt.model_copy(update={"key": "gate"}), gate.model_copy(update={"is_valid": False})])
    assert [(f.id, f.is_valid) for f in batch.find(FactQuery(reader=S, key="gate"))] == [(gate.id, False), (belt.id, True)]
    assert batch.find(FactQuery(reader=S, key="belt")) == [], "found under its new key only"
    batch.update([seat.model_copy(update={"key": "gate"}), belt.model_copy(update={"key": "belt"})])
    assert [f.id for f in batch.find(FactQuery(reader=S, key="gate"))] == [gate.id, seat.id]
    assert [f.id for f in batch.find(FactQuery(reader=S, key="belt"))] == [belt.id]
    derived, other = (make_fact(text, owner=S, created_at=at, depends_on=(gate.id,)) for text in ("Gate B12 in words", "Gate B12 again"))
    batch.add([derived, other])
    assert [f.id for f in batch.find(FactQuery(reader=S, depends_on=gate.id))] == [derived.id, other.id]
    batch.update([derived.model_copy(update={"depends_on": (seat.id,)})])
    assert [f.id for f in batch.find(FactQuery(reader=S, depends_on=gate.id))] == [other.id]
    assert [f.id for f in batch.find(FactQuery(reader=S, depends_on=seat.id))] == [derived.id]
    batch.flush()
    assert [f.id for f in batch.find(FactQuery(reader=S, key="gate"))] == [gate.id, seat.id]


def test_a_key_stated_many_times_in_one_ingest_is_decided_among_its_current_facts(mocker: MockerFixture) -> None:
    """A long thread read at once that restates one key (``my order is ...``) hundreds of times:
    each statement is checked against the key's current fact, not against every earlier one
    it replaced (the work grew with the square of the statements)."""
    from ctxplugin.facts import _batch

    ledger = FactsLedger(MemoryFactStore())
    statements = 300
    checked = mocker.spy(_batch, "matches")
    ledger.ingest([HumanMessage(f"My order is ORD{i:05d}.", id=f"m{i}") for i in range(statements)], scope=S)
    current = ledger.store.find(FactQuery(reader=S, key="my_order", valid=True))
    assert [f.text for f in current] == [f"My order is ORD{statements - 1:05d}."]
    assert len(ledger.store.find(FactQuery(reader=S, key="my_order"))) == statements, "the replaced ones stay, not current"
    assert checked.call_count < 10 * statements, "each statement reads a few pending facts"
