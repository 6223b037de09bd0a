"""The in-memory store keeps the facts matching each query by state and takes new facts into
them as they are added: what it finds between writes is what a store given the same writes
finds from scratch."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

import pytest

from ctxplugin.facts import Fact, FactQuery, MemoryFactStore, Source
from ctxplugin.facts.store import NEAREST
from ctxplugin.scope import Scope
from ctxplugin.testing.facts_contract import ALICE, ALICE_OTHER_SESSION, BOB, T0, make_fact

Write = Callable[[MemoryFactStore], object]
CAROL = Scope(session_id="s-carol", tenant_id="acme")  # one slot: what a query finds is not sorted again

QUERIES = [
    FactQuery(reader=ALICE, valid=True, scopes=("global", "task")),
    FactQuery(reader=ALICE, valid=False, scopes=("global", "task")),
    FactQuery(reader=ALICE, valid=True, scopes=("hypothetical", "draft")),
    FactQuery(reader=ALICE, valid=True),
    FactQuery(reader=ALICE),
    FactQuery(reader=ALICE_OTHER_SESSION, valid=True),
    FactQuery(reader=BOB, valid=True, scopes=("global",)),
    FactQuery(reader=CAROL, valid=True),
]


def _fact(number: int, **fields: object) -> Fact:
    fields.setdefault("created_at", T0 + timedelta(seconds=number % 5))  # ties: the order stored decides
    return make_fact(f"Order W{number} ships to dock {number % 3}", id=f"f{number}", **fields)  # type: ignore[arg-type]


def _writes() -> list[Write]:
    shared = _fact(2, visibility="user")
    tool = _fact(3, source=Source(type="tool", call_id="call_1", digest="d-old"), authority="tool", owner=CAROL)
    replaced = _fact(1)
    return [
        lambda s: s.add([_fact(0), replaced, shared]),
        lambda s: s.add([tool, _fact(4, scope="hypothetical"), _fact(5, owner=ALICE_OTHER_SESSION)]),
        lambda s: s.add([_fact(6), _fact(7, visibility="user", owner=ALICE_OTHER_SESSION), _fact(13, owner=CAROL)]),
        # superseded: an update of a fact stored before, in place
        lambda s: s.update([replaced.model_copy(update={"is_valid": False, "superseded_by": "f8"})]),
        lambda s: s.add([_fact(8, supersedes="f1"), _fact(9, owner=BOB, visibility="workspace")]),
        lambda s: s.withdraw(CAROL, {"call_1": ()}),
        lambda s: s.add([_fact(10), _fact(14, owner=CAROL)]),
        # the withdrawn id stored again (in its first place), and an id stored before given again by add
        lambda s: s.add([tool.model_copy(update={"text": "Order W3 ships to dock 9"})]),
        lambda s: s.add([_fact(0, scope="task")]),
        lambda s: s.add([_fact(11, scope="draft"), _fact(12)]),
    ]


def _built(writes: list[Write]) -> MemoryFactStore:
    """A store made afresh by ``writes``, in order."""
    store = MemoryFactStore()
    for write in writes:
        write(store)
    return store


def test_queries_asked_between_writes_find_what_a_store_built_afresh_finds() -> None:
    store = MemoryFactStore()
    writes = _writes()
    for done in range(1, len(writes) + 1):
        writes[done - 1](store)
        fresh = _built(writes[:done])
        for query in QUERIES:
            assert [f.id for f in store.find(query)] == [f.id for f in fresh.find(query)], (done, query)
            assert [f.id for f in store.find(query)] == [f.id for f in fresh.find(query)], "asked again"
        hits = store.search("which dock does order W3 ship to", QUERIES[0], n=20)
        assert [(f.id, round(s, 9)) for f, s in hits] == [(f.id, round(s, 9)) for f, s in fresh.search("which dock does order W3 ship to", QUERIES[0], n=20)]


def test_a_fact_read_from_the_kept_pool_is_the_one_stored_now() -> None:
    store = MemoryFactStore()
    fact = _fact(0)
    store.add([fact])
    assert store.find(QUERIES[0])[0].is_valid
    store.update([fact.model_copy(update={"is_valid": False})])
    assert store.find(QUERIES[0]) == []
    assert [f.is_valid for f in store.find(QUERIES[1])] == [False]


@pytest.mark.parametrize("n", [1, 3, 8])
def test_nearest_facts_asked_again_between_writes_are_those_a_store_built_afresh_finds(n: int) -> None:
    # the store keeps each question's nearest facts and, while a slot's list only grows, scores
    # only the facts added since: updates, withdrawals and ids stored again are found as afresh
    store = MemoryFactStore()
    more: Write = lambda s: s.add([_fact(number) for number in range(15, 40)])  # noqa: E731
    writes = [*_writes(), more]
    questions = ["which dock does order W3 ship to", "order W12 ships to dock 0"]
    assert len(QUERIES) * len(questions) <= NEAREST  # each kept from one write to the next
    for done in range(1, len(writes) + 1):
        writes[done - 1](store)
        fresh = _built(writes[:done])
        for query in QUERIES:
            for question in questions:
                for _ in range(2):  # asked once after the write, once more with nothing written
                    assert store.search(question, query, n=n) == fresh.search(question, query, n=n), (done, query)
