"""The contract every fact store backend passes (memory, Chroma embedded, Chroma server, yours).

Subclass :class:`FactStoreContract` in a test module and provide a ``store`` fixture that
returns a fresh, empty store; pytest collects the inherited tests.

Example:
    >>> import pytest
    >>> from ctxplugin.facts import MemoryFactStore
    >>> class TestMemoryFactStore(FactStoreContract):
    ...     @pytest.fixture
    ...     def store(self) -> MemoryFactStore:
    ...         return MemoryFactStore()
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ctxplugin.config import FactsConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts import Fact, FactQuery, FactsLedger, FactStore, Source
from ctxplugin.scope import Scope

ALICE = Scope(session_id="s-alice", user_id="alice", workspace_id="w1", tenant_id="acme")
ALICE_OTHER_SESSION = Scope(session_id="s-alice-2", user_id="alice", workspace_id="w1", tenant_id="acme")
ALICE_OTHER_WORKSPACE = Scope(session_id="s-alice", user_id="alice", workspace_id="w2", tenant_id="acme")
BOB = Scope(session_id="s-bob", user_id="bob", workspace_id="w1", tenant_id="acme")
MALLORY = Scope(session_id="s-alice", user_id="alice", workspace_id="w1", tenant_id="other")
T0 = datetime(2025, 3, 1, 12, 0, 0, 123456, tzinfo=UTC)


def make_fact(text: str, *, owner: Scope = ALICE, **fields: Any) -> Fact:
    """A fact owned by ``owner`` (defaults filled in)."""
    return Fact(text=text, owner=owner, **fields)


class FactStoreContract:
    """Behaviour shared by every :class:`~ctxplugin.facts.FactStore`."""

    @pytest.fixture
    def store(self) -> FactStore:
        raise NotImplementedError("a FactStoreContract subclass must define a `store` fixture")

    @pytest.fixture
    def ledger(self, store: FactStore) -> FactsLedger:
        return FactsLedger(store, FactsConfig())

    # ------------------------------------------------------------------ store level
    def test_add_then_get_keeps_every_field(self, store: FactStore) -> None:
        fact = make_fact(
            "Max discount is 15% — Zürich office, order #W1234",
            key="Discount Policy",
            kind="constraint",
            visibility="user",
            scope="task",
            scope_id="task-7",
            memory_type="organizational",
            source=Source(type="tool", ref="ref:doc:0123456789abcdef", turn_index=3, call_id="call_7", digest="00ff"),
            authority="tool",
            tags=("pricing", "w1234"),
            importance=0.9,
            created_at=T0,
            supersedes="fact_old",
            depends_on=("fact_a", "fact_b"),
            needs_review=True,
            constraint_type="budget",
            note="why",
        )
        store.add([fact])
        (back,) = store.get([fact.id], reader=ALICE)
        assert back.model_dump() == fact.model_dump()
        assert back.key == "discount_policy"

    def test_get_keeps_the_order_asked_and_skips_unknown_ids(self, store: FactStore) -> None:
        a, b = make_fact("alpha"), make_fact("beta")
        store.add([a, b])
        assert [f.id for f in store.get([b.id, "fact_missing", a.id], reader=ALICE)] == [b.id, a.id]

    def test_update_changes_status_and_keeps_text(self, store: FactStore) -> None:
        fact = make_fact("The order is approved", key="order")
        store.add([fact])
        store.update([fact.model_copy(update={"is_valid": False, "superseded_by": "fact_new", "needs_review": True})])
        (back,) = store.get([fact.id], reader=ALICE)
        assert (back.is_valid, back.superseded_by, back.needs_review, back.text) == (
            False, "fact_new", True, "The order is approved",
        )

    def test_write_adds_and_updates_as_the_two_calls_do(self, store: FactStore) -> None:
        writer = getattr(store, "write", None)
        if not callable(writer):
            pytest.skip("this store has no write(added, updated); add and update are used")
        old = make_fact("The order ships on Monday", key="ship_day")
        other = make_fact("The order ships from Lyon", key="ship_from", visibility="tenant")
        store.add([old, other])
        before = dict(store.search("when does the order ship", FactQuery(reader=ALICE, key="ship_day"), n=5))
        new = make_fact("The order ships on Friday", key="ship_day", supersedes=old.id)
        gone = make_fact("never stored", key="ghost")
        writer([new], [old.model_copy(update={"is_valid": False, "superseded_by": new.id}), gone])
        by_id = {f.id: f for f in store.get([old.id, new.id, other.id, gone.id], reader=ALICE)}
        assert set(by_id) == {old.id, new.id, other.id}, "a changed fact that was not stored is not written"
        assert (by_id[old.id].is_valid, by_id[old.id].superseded_by, by_id[old.id].text) == (False, new.id, old.text)
        assert by_id[new.id].is_valid and by_id[new.id].supersedes == old.id
        after = store.search("when does the order ship", FactQuery(reader=ALICE, valid=False), n=5)
        assert [(f.id, round(score, 6)) for f, score in after] == [
            (f.id, round(score, 6)) for f, score in before.items() if f.id == old.id
        ], "the changed fact keeps its vector"
        assert [f.id for f in store.find(FactQuery(reader=ALICE, key="ship_day", valid=True))] == [new.id]

    def test_lookup_finds_by_key_or_text_in_any_state_what_the_reader_may_read(self, store: FactStore) -> None:
        lookup = getattr(store, "lookup", None)
        if not callable(lookup):
            pytest.skip("this store has no lookup(reader, keys=..., hashes=...); find is used")
        old = make_fact("Gate is B12", key="gate", is_valid=False)
        new = make_fact("Gate is C4", key="gate")
        said = make_fact("Boarding starts at 9:40")
        theirs = make_fact("Gate is D1", key="gate", owner=BOB)
        other = make_fact("Seat is 12A", key="seat")
        store.add([old, new, said, theirs, other])
        assert {f.id for f in lookup(ALICE, keys=["gate"], hashes=[said.text_hash])} == {old.id, new.id, said.id}
        assert {f.id for f in lookup(ALICE, keys=[], hashes=[other.text_hash])} == {other.id}
        assert {f.id for f in lookup(BOB, keys=["gate", "seat"], hashes=[])} == {theirs.id}
        assert lookup(ALICE, keys=[], hashes=[]) == []

    def test_lookup_of_more_values_than_one_query_may_bind_finds_each_fact_once(self, store: FactStore) -> None:
        # the first call on a long conversation looks up every key and text hash it holds at once
        lookup = getattr(store, "lookup", None)
        if not callable(lookup):
            pytest.skip("this store has no lookup(reader, keys=..., hashes=...); find is used")
        gate = make_fact("Gate is C4", key="gate")
        seat = make_fact("Seat is 12A", key="seat")
        store.add([gate, seat])
        keys = [f"k{i}" for i in range(20_000)] + ["gate"]
        hashes = [f"{i:016x}" for i in range(20_000)] + [seat.text_hash, gate.text_hash]
        found = lookup(ALICE, keys=keys, hashes=hashes)
        assert sorted(f.id for f in found) == sorted([gate.id, seat.id])

    def test_from_messages_finds_what_an_owner_read_from_these_messages(self, store: FactStore) -> None:
        finder = getattr(store, "from_messages", None)
        if not callable(finder):
            pytest.skip("this store has no from_messages(owner, refs); an edited message's old statements stay")
        said = Source(type="conversation", ref="m1", digest="d1")
        old = make_fact("Budget is 500", key="budget", source=said, is_valid=False)
        kept = make_fact("Seat is 12A", key="seat", source=said)
        odd = make_fact("Gate is C4", key="gate", source=Source(type="conversation", ref="m\udc80", digest="d1"))
        other = make_fact("Gate is D1", key="gate", source=Source(type="conversation", ref="m2", digest="d2"))
        theirs = make_fact("Budget is 900", key="budget", source=said, owner=BOB)
        output = make_fact("Fare is 120", key="fare", source=Source(type="tool", ref="m1", call_id="m1", digest="d1"))
        store.add([old, kept, odd, other, theirs, output])
        assert {f.id for f in finder(ALICE, ["m1"])} == {old.id, kept.id}
        assert {f.id for f in finder(ALICE, ["m1", "m\udc80", "m3"])} == {old.id, kept.id, odd.id}
        assert {f.id for f in finder(BOB, ["m1", "m2"])} == {theirs.id}
        assert finder(ALICE, []) == []

    def test_said_after_finds_what_an_owner_read_from_the_user_message_after_these(self, store: FactStore) -> None:
        finder = getattr(store, "said_after", None)
        if not callable(finder):
            pytest.skip("this store has no said_after(owner, ids); a branch gone back from after a restart stays current")
        changed = make_fact("Budget is 900", key="budget", source=Source(type="conversation", ref="m2", digest="d2", after="a1"), is_valid=False)
        odd = make_fact("Gate is C4", key="gate", source=Source(type="conversation", ref="m3", digest="d3", after="a\udc80"))
        unanchored = make_fact("Seat is 12A", key="seat", source=Source(type="conversation", ref="m1", digest="d1"))
        theirs = make_fact("Budget is 500", key="budget", source=Source(type="conversation", ref="m2", digest="d2", after="a1"), owner=BOB)
        output = make_fact("Fare is 120", key="fare", source=Source(type="tool", ref="a1", call_id="a1", digest="d1"))
        store.add([changed, odd, unanchored, theirs, output])
        assert [f.model_dump() for f in finder(ALICE, ["a1"])] == [changed.model_dump()]
        assert {f.id for f in finder(ALICE, ["a1", "a\udc80", "m1", "m2"])} == {changed.id, odd.id}
        assert {f.id for f in finder(BOB, ["a1", "a\udc80"])} == {theirs.id}
        assert finder(ALICE, []) == []

    def test_revisions_change_with_what_is_in_force_and_only_with_it(self, store: FactStore) -> None:
        if not isinstance(getattr(store, "revisions", None), int):
            pytest.skip("this store does not count revisions (the facts in force are read on every call)")

        def counts() -> tuple[int, int]:
            return getattr(store, "generation"), getattr(store, "revisions")  # noqa: B009

        current = make_fact("The venue is Lyon", key="venue")
        written, revised = counts()
        store.add([current])
        assert counts()[0] != written and counts()[1] == revised, "one more current fact revises nothing"
        revised = counts()[1]
        store.add([make_fact("Maybe the venue is Porto", key="venue", scope="hypothetical")])
        assert counts()[1] != revised, "a provisional fact is counted"
        revised = counts()[1]
        store.add([make_fact("The venue is Nice", key="venue", is_valid=False, superseded_by=current.id)])
        assert counts()[1] != revised, "a fact stored not current is counted"
        revised = counts()[1]
        store.update([current.model_copy(update={"needs_review": True})])
        assert counts()[1] != revised, "an update is counted"
        revised = counts()[1]
        store.get([current.id], reader=ALICE)
        store.find(FactQuery(reader=ALICE, key="venue"))
        assert counts()[1] == revised, "reads are not"

    def test_session_facts_stay_in_their_session(self, store: FactStore) -> None:
        fact = make_fact("Alice's seat is 12A")
        store.add([fact])
        assert store.get([fact.id], reader=ALICE_OTHER_SESSION) == []
        assert store.get([fact.id], reader=BOB) == []
        assert store.find(FactQuery(reader=BOB)) == []
        assert store.search("seat 12A", FactQuery(reader=BOB), n=5) == []
        # a thread id reused in another workspace names another session
        assert store.get([fact.id], reader=ALICE_OTHER_WORKSPACE) == []
        assert store.find(FactQuery(reader=ALICE_OTHER_WORKSPACE)) == []
        assert store.search("seat 12A", FactQuery(reader=ALICE_OTHER_WORKSPACE), n=5) == []

    def test_user_and_workspace_visibility(self, store: FactStore) -> None:
        mine = make_fact("Alice prefers aisle seats", visibility="user")
        team = make_fact("The team uses Postgres", visibility="workspace")
        store.add([mine, team])
        assert [f.id for f in store.get([mine.id, team.id], reader=ALICE_OTHER_SESSION)] == [mine.id, team.id]
        assert [f.id for f in store.get([mine.id, team.id], reader=BOB)] == [team.id]
        assert {f.id for f, _ in store.search("aisle seats postgres", FactQuery(reader=BOB), n=10)} == {team.id}

    def test_tenants_never_mix(self, store: FactStore) -> None:
        fact = make_fact("Acme's budget is 50k", visibility="tenant")
        store.add([fact])
        assert store.get([fact.id], reader=BOB) != []
        assert store.get([fact.id], reader=MALLORY) == []
        assert store.search("budget", FactQuery(reader=MALLORY), n=5) == []

    def test_find_filters_and_orders_newest_first(self, store: FactStore) -> None:
        old = make_fact("Meeting on Tuesday", key="meeting", created_at=T0, is_valid=False)
        new = make_fact("Meeting on Thursday", key="meeting", created_at=T0 + timedelta(hours=1), depends_on=("fact_x",))
        draft = make_fact("Meeting on Friday?", key="meeting", scope="draft", created_at=T0 + timedelta(hours=2))
        other = make_fact("Budget is 50k", key="budget", created_at=T0 + timedelta(hours=3))
        store.add([old, new, draft, other])

        def ids(facts: list[Fact]) -> list[str]:
            return [f.id for f in facts]

        assert ids(store.find(FactQuery(reader=ALICE, key="meeting"))) == [draft.id, new.id, old.id]
        assert ids(store.find(FactQuery(reader=ALICE, key="meeting", valid=True, scopes=("global",)))) == [new.id]
        assert ids(store.find(FactQuery(reader=ALICE, valid=False))) == [old.id]
        assert ids(store.find(FactQuery(reader=ALICE, depends_on="fact_x"))) == [new.id]
        assert ids(store.find(FactQuery(reader=ALICE, text_hash=other.text_hash))) == [other.id]
        assert ids(store.find(FactQuery(reader=ALICE), limit=2)) == [other.id, draft.id]

    def test_search_ranks_by_similarity_within_the_filter(self, store: FactStore) -> None:
        facts = [
            make_fact("Data Team reallocated to Project Beta"),
            make_fact("The marketing budget is 50k"),
            make_fact("Order #W1234 was cancelled by the customer"),
            make_fact("Data Team on Project Alpha", is_valid=False),
        ]
        store.add(facts)
        hits = store.search("which project is the data team on?", FactQuery(reader=ALICE, valid=True), n=3)
        assert hits[0][0].id == facts[0].id
        assert all(f.is_valid for f, _ in hits)
        assert all(-1.0 <= s <= 1.0001 for _, s in hits)
        assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
        exact = store.search("W1234", FactQuery(reader=ALICE), n=1)
        assert exact[0][0].id == facts[2].id

    def test_search_asks_for_more_than_stored_or_for_none(self, store: FactStore) -> None:
        store.add([make_fact("only one fact")])
        assert len(store.search("fact", FactQuery(reader=ALICE), n=50)) == 1
        assert store.search("fact", FactQuery(reader=ALICE), n=0) == []
        assert store.search("fact", FactQuery(reader=BOB), n=5) == []

    def test_search_finds_a_readers_few_facts_among_many_closer_ones(self, store: FactStore) -> None:
        crowd = [make_fact(f"Bob's budget for project {i} is {i}k", owner=BOB) for i in range(60)]
        mine = [make_fact("Alice's budget is 50k"), make_fact("Alice's team is in Lisbon")]
        store.add([*crowd, *mine])
        for _ in range(2):  # a second search may take another path; it must agree
            hits = store.search("budget for project 7", FactQuery(reader=ALICE), n=4)
            assert {f.id for f, _ in hits} == {m.id for m in mine}
        assert len(store.search("budget for project 7", FactQuery(reader=BOB), n=4)) == 4

    def test_search_finds_valid_facts_behind_many_superseded_ones(self, store: FactStore) -> None:
        superseded = [make_fact(f"The budget for project {i} is {i}k", is_valid=False) for i in range(60)]
        current = [make_fact("The budget is 50k"), make_fact("The team is in Lisbon")]
        store.add([*superseded, *current])
        hits = store.search("budget for project 7", FactQuery(reader=ALICE, valid=True), n=4)
        assert {f.id for f, _ in hits} == {c.id for c in current}

    def test_withdraw_removes_only_what_the_owner_read_from_other_content_of_the_call(self, store: FactStore) -> None:
        withdraw = getattr(store, "withdraw", None)
        if not callable(withdraw):
            pytest.skip("this store cannot withdraw facts")

        def read(text: str, call_id: str, digest: str, owner: Scope = ALICE, **fields: Any) -> Fact:
            return make_fact(text, owner=owner, source=Source(type="tool", call_id=call_id, digest=digest), authority="tool", **fields)

        unmasked = read("Card 4111-1111-1111-1111 is on file", "call_1", "d-old")
        shared = read("Card 4111-1111-1111-1111 is the default", "call_1", "d-old", visibility="user", is_valid=False)
        masked = read("Card ****-****-****-1111 is on file", "call_1", "d-new")
        other_call = read("Order W12 shipped", "call_2", "d-old")
        other_session = read("Card 4111-1111-1111-1111 is on file", "call_1", "d-old", owner=ALICE_OTHER_SESSION)
        said = make_fact("My card is 4111-1111-1111-1111", source=Source(type="conversation", ref="call_1"))
        store.add([unmasked, shared, masked, other_call, other_session, said])
        removed = withdraw(ALICE, {"call_1": ("d-new",), "call_9": ()})
        assert {f.id for f in removed} == {unmasked.id, shared.id}
        left = {f.id for f in store.find(FactQuery(reader=ALICE))}
        assert left == {masked.id, other_call.id, said.id}
        assert [f.id for f in store.find(FactQuery(reader=ALICE_OTHER_SESSION))] == [other_session.id]
        hits = {f.id for f, _ in store.search("card 4111-1111-1111-1111 on file", FactQuery(reader=ALICE), n=10)}
        assert hits == left
        lexical = getattr(store, "search_lexical", None)
        if callable(lexical):
            found = {f.id for f, _ in lexical("4111-1111-1111-1111", FactQuery(reader=ALICE), n=10)}
            assert unmasked.id not in found and shared.id not in found
        assert withdraw(ALICE, {"call_1": ("d-new", "d-other")}) == [], "withdrawing again removes nothing"
        assert [f.id for f in withdraw(ALICE, {"call_1": ()})] == [masked.id]

    def test_from_outputs_finds_what_an_owner_read_from_these_tool_outputs(self, store: FactStore) -> None:
        finder = getattr(store, "from_outputs", None)
        if not callable(finder):
            pytest.skip("this store has no from_outputs(owner, call_ids); every withdrawal takes the write locks")

        def read(text: str, call_id: str, owner: Scope = ALICE, **fields: Any) -> Fact:
            return make_fact(text, owner=owner, source=Source(type="tool", call_id=call_id, digest="d1"), authority="tool", **fields)

        old, new, odd = read("Fare is 100", "c1", is_valid=False), read("Fare is 120", "c1"), read("Gate is C4", "c\udc80")
        theirs, other = read("Fare is 90", "c1", owner=BOB, visibility="tenant"), read("Seat is 12A", "c2")  # (Alice reads it)
        store.add([old, new, odd, theirs, other, make_fact("Fare is 80", source=Source(type="conversation", ref="c1"))])
        assert {f.id for f in finder(ALICE, ["c1"])} == {old.id, new.id}
        assert {f.id for f in finder(ALICE, ["c1", "c\udc80", "c9"])} == {old.id, new.id, odd.id}
        assert {f.id for f in finder(BOB, ["c1", "c2"])} == {theirs.id}
        assert finder(ALICE, []) == []

    # ------------------------------------------------------------------ through the ledger
    def test_ledger_withdraws_the_facts_read_from_an_output_the_host_replaced(self, ledger: FactsLedger) -> None:
        from langchain_core.messages import ToolMessage

        from ctxplugin.facts import output_digest

        original = ToolMessage("Card on file for customer c1: 4111-1111-1111-1111, status active.", tool_call_id="call_1")
        masked = original.model_copy(update={"content": "Card on file for customer c1: ****-****-****-1111, status active."})
        assert ledger.ingest([original], scope=ALICE)
        ledger.write("Customer c1 asked about the card on file", scope=ALICE)
        removed = ledger.withdraw({"call_1": [output_digest(str(masked.content))]}, scope=ALICE)
        assert removed and all("4111-1111-1111-1111" in f.text for f in removed)
        assert ledger.withdraw({"call_1": []}, scope=BOB) == [], "only the scope that read them withdraws them"
        ledger.ingest([masked], scope=ALICE)
        texts = [h.fact.text for h in ledger.search("card on file for customer c1", scope=ALICE, k=10)]
        assert any("****-****-****-1111" in t for t in texts) and not any("4111-1111-1111-1111" in t for t in texts)
        assert ledger.withdraw({"call_1": [output_digest(str(masked.content))]}, scope=ALICE) == []
    def test_supersession_chain_is_readable_and_only_its_head_is_retrieved(self, ledger: FactsLedger) -> None:
        a = ledger.write("Data Team on Project Alpha", key="data_team_allocation", scope=ALICE)
        b = ledger.write("Data Team moved to Project Gamma", key="data_team_allocation", scope=ALICE)
        c = ledger.write("Data Team reallocated to Project Beta", key="data_team_allocation", scope=ALICE)
        assert [f.id for f in ledger.history("data_team_allocation", scope=ALICE)] == [a.id, b.id, c.id]
        current = ledger.current("data_team_allocation", scope=ALICE)
        assert current is not None and current.id == c.id
        old_a, old_b = ledger.get(a.id, scope=ALICE), ledger.get(b.id, scope=ALICE)
        assert old_a is not None and old_b is not None
        assert (old_a.superseded_by, old_b.superseded_by, c.supersedes) == (b.id, c.id, b.id)
        hits = ledger.search("Data Team project Alpha Gamma Beta", scope=ALICE, k=10)
        assert [h.fact.id for h in hits] == [c.id]

    def test_implicit_supersession_finds_the_fact_it_contradicts(self, ledger: FactsLedger) -> None:
        for i in range(20):  # neighbours the store's search has to look past
            ledger.write(f"Workshop {i} is on Monday at {i % 12 + 1}pm", key=f"workshop_{i}", scope=ALICE)
        old = ledger.write("The board meeting is Tuesday at 2pm", key="board_meeting", scope=ALICE)
        new = ledger.write("Let's hold the board meeting on Thursday at 3pm instead", scope=ALICE)
        assert new.supersedes == old.id and new.key == "board_meeting"
        current = ledger.current("board_meeting", scope=ALICE)
        assert current is not None and current.id == new.id
        bob = ledger.write("Let's hold the board meeting on Friday at 9am", scope=BOB)
        assert bob.supersedes is None, "another session's fact is never a candidate"

    def test_users_do_not_see_or_supersede_each_other(self, ledger: FactsLedger) -> None:
        mine = ledger.write("I prefer window seats", key="pref_seats", scope=ALICE, visibility="user")
        theirs = ledger.write("I prefer aisle seats", key="pref_seats", scope=BOB, visibility="user")
        assert ledger.current("pref_seats", scope=ALICE_OTHER_SESSION) == ledger.get(mine.id, scope=ALICE)
        assert [h.fact.id for h in ledger.search("seat preference", scope=BOB)] == [theirs.id]
        assert ledger.get(theirs.id, scope=ALICE) is None

    def test_facts_read_from_an_output_whose_call_id_holds_undecodable_bytes_are_kept_and_withdrawn(self, ledger: FactsLedger) -> None:
        from langchain_core.messages import ToolMessage

        from ctxplugin.facts import output_digest

        # the call id escaped as percent-encoding is another call: its facts stay apart
        ids = ("call_1\udcff", "call_1%ED%B3%BF")
        for call_id, card in zip(ids, ("4111-1111-1111-1111", "5500-0000-0000-0004"), strict=True):
            assert ledger.ingest([ToolMessage(f"Card on file for customer c1: {card}, status active.", tool_call_id=call_id)], scope=ALICE)
        read = {f.source.call_id for f in ledger.store.find(FactQuery(reader=ALICE))}
        assert read == set(ids)
        removed = ledger.withdraw({ids[0]: [output_digest("masked")]}, scope=ALICE)
        assert removed and all("4111" in f.text and f.source.call_id == ids[0] for f in removed)
        assert {f.source.call_id for f in ledger.store.find(FactQuery(reader=ALICE))} == {ids[1]}

    def test_fact_ids_with_undecodable_bytes_name_no_fact(self, ledger: FactsLedger) -> None:
        # no store keeps lone surrogates in an id: such an id is unknown, or refused where it is made
        budget = ledger.write("The budget is 900 EUR", key="budget", fact_id="budget-1", scope=ALICE)
        assert ledger.get("budget-1\udcff", scope=ALICE) is None
        with pytest.raises(InvalidInputError, match="budget-2"):
            ledger.write("The budget is 950 EUR", key="budget", fact_id="budget-2\udcff", scope=ALICE)
        with pytest.raises(InvalidInputError):  # neither an id nor a key that is there
            ledger.write("The budget is 990 EUR", supersedes="budget-1\udcff", scope=ALICE)
        derived = ledger.write("The travel budget is 300 EUR", depends_on=["budget-1", "plan\udcff"], scope=ALICE)
        assert derived.depends_on == (budget.id, "plan\ufffd")
        assert getattr(ledger.get("budget-1", scope=ALICE), "id", None) == budget.id


__all__ = ["ALICE", "ALICE_OTHER_SESSION", "BOB", "MALLORY", "FactStoreContract", "make_fact"]
