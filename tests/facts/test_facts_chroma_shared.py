"""One embedded Chroma collection shared by many readers (one engine serving many threads): what
a reader's search finds does not depend on what the others stored."""

from __future__ import annotations

from pathlib import Path

from ctxplugin.facts import ChromaFactStore, Fact, FactQuery
from ctxplugin.scope import Scope

A = Scope(session_id="reader-a")
B = Scope(session_id="reader-b")
QUERY = "which region is the deploy target of the billing service"
N = 10

PLACES = ["eu-west-3", "us-east-1", "ap-south-2", "eu-central-1", "sa-east-1", "ca-central-1"]
SERVICES = ["billing", "search", "auth", "export", "mail", "queue", "reports", "gateway"]


def _a_facts() -> list[Fact]:
    near = [f"The deploy target of the {s} service is {p}." for s, p in zip(SERVICES, PLACES * 2, strict=False)]
    far = [f"Team lunch {i} is booked at the noodle bar on floor {i % 7}." for i in range(24)]
    return [Fact(text=text, owner=A) for text in near + far]


def _b_facts(start: int, count: int) -> list[Fact]:
    return [
        Fact(text=f"The billing service deploy target region {i} is {PLACES[i % len(PLACES)]}, ticket OPS-{i}.", owner=B)
        for i in range(start, start + count)
    ]


def _ids(store: ChromaFactStore, reader: Scope) -> list[str]:
    return [fact.id for fact, _ in store.search(QUERY, FactQuery(reader=reader), n=N)]


def test_a_readers_nearest_facts_are_the_same_whatever_another_reader_stored(tmp_path: Path) -> None:
    mine = _a_facts()
    with ChromaFactStore.persistent(tmp_path / "alone") as alone:
        alone.add(mine)
        expected = _ids(alone, A)
    assert len(expected) == N
    with ChromaFactStore.persistent(tmp_path / "shared") as shared:
        shared.add(mine)
        assert _ids(shared, A) == expected
        for start in range(0, 240, 8):
            shared.add(_b_facts(start, 8))  # the other reader's facts crowd around A's question
            assert _ids(shared, A) == expected, f"after {start + 8} facts of another reader"
        assert len(_ids(shared, B)) == N
