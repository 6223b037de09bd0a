"""The in-memory store's vectors (ctxplugin.facts._vectors): cosines as computed one fact at a
time, across chunks, after replacement, with zero vectors; one width per store, refused before
anything is written; the cosines kept per query vector are those worked out afresh, never a
replaced or dropped vector's, for a bounded number of queries."""

from __future__ import annotations

import math
import random

import pytest

from ctxplugin.errors import StoreError
from ctxplugin.facts import FactQuery, MemoryFactStore
from ctxplugin.facts._vectors import CHUNK, QUERIES, Vectors
from ctxplugin.testing.facts_contract import ALICE, make_fact


def cosine(a: list[float], b: list[float]) -> float:
    na, nb = math.sqrt(sum(x * x for x in a)), math.sqrt(sum(x * x for x in b))
    return sum(x * y for x, y in zip(a, b, strict=True)) / (na * nb) if na and nb else 0.0


def test_cosines_are_those_of_each_pair_in_the_order_asked_across_chunks() -> None:
    rng = random.Random(5)
    vectors = Vectors()
    kept = {f"f{i}": [rng.uniform(-1, 1) for _ in range(16)] for i in range(CHUNK + 300)}
    for fact_id, vector in kept.items():
        vectors.put(fact_id, vector)
    asked = [*rng.sample(sorted(kept), 500), "f0", f"f{CHUNK}", f"f{CHUNK + 299}"]
    query = [rng.uniform(-1, 1) for _ in range(16)]
    got = vectors.cosines(asked, query)
    assert got == pytest.approx([cosine(kept[i], query) for i in asked], abs=1e-12)
    assert len(vectors) == CHUNK + 300


def test_a_replaced_vector_is_the_one_scored_and_zero_vectors_score_zero() -> None:
    vectors = Vectors()
    vectors.put("a", [1.0, 0.0])
    vectors.put("b", [0.0, 0.0])
    vectors.put("a", [0.0, 2.0])
    assert vectors.cosines(["a", "b"], [0.0, 1.0]) == [1.0, 0.0]
    assert vectors.cosines(["a", "b"], [0.0, 0.0]) == [0.0, 0.0]
    assert vectors.cosines([], [1.0, 0.0]) == []
    assert len(vectors) == 2


def test_vectors_of_another_width_are_refused() -> None:
    vectors = Vectors()
    vectors.put("a", [1.0, 0.0])
    with pytest.raises(ValueError, match="one embedding per store"):
        vectors.put("b", [1.0, 0.0, 0.0])


def test_the_memory_store_refuses_vectors_of_another_width_and_keeps_what_it_held() -> None:
    widths = iter([3, 4])

    def embed(texts: list[str]) -> list[list[float]]:
        width = next(widths, 3)
        return [[1.0] * width for _ in texts]

    store = MemoryFactStore(embedding=embed)
    kept = make_fact("The deploy target is staging")
    store.add([kept])
    with pytest.raises(StoreError, match="one embedding's vectors"):
        store.add([make_fact("The region is eu-west-1")])
    assert len(store) == 1
    found = store.search("deploy", FactQuery(reader=ALICE), n=5)
    assert [fact.id for fact, _ in found] == [kept.id]


def test_single_precision_vectors_are_kept_in_four_bytes_and_score_as_they_would_in_eight() -> None:
    """An embedding whose numbers are single precision (the static embedding's) is kept so; the
    first vector that is not widens what is kept, and no cosine changes by a bit."""
    import numpy as np

    rng = np.random.default_rng(3)
    kept = {f"f{i}": rng.standard_normal(64).astype(np.float32).tolist() for i in range(CHUNK + 40)}
    narrow, wide = Vectors(), Vectors()
    wide.put("double", [1 / 3] * 64)  # not single precision: every row is kept in doubles
    for fact_id, vector in kept.items():
        narrow.put(fact_id, vector)
        wide.put(fact_id, vector)
    assert (narrow.nbytes, wide.nbytes) == (2 * CHUNK * (64 * 4 + 8), 2 * CHUNK * (64 * 8 + 8))  # (norms: doubles)
    asked = [*rng.permutation(sorted(kept)).tolist()[:700], f"f{CHUNK + 39}"]
    for query in (rng.standard_normal(64).tolist(), rng.standard_normal(64).astype(np.float32).tolist()):
        assert narrow.cosines(asked, query) == wide.cosines(asked, query)
    narrow.put("double", [1 / 3] * 64)
    assert narrow.nbytes == wide.nbytes
    assert narrow.cosines([*asked, "double"], query) == wide.cosines([*asked, "double"], query)


def test_kept_cosines_are_to_the_bit_those_worked_out_afresh_whatever_was_asked_before() -> None:
    import numpy as np

    rng = np.random.default_rng(11)
    rows = {f"f{i}": rng.standard_normal(32).astype(np.float32).tolist() for i in range(CHUNK + 60)}
    kept, fresh = Vectors(), Vectors()
    for fact_id, vector in rows.items():
        kept.put(fact_id, vector)
    query = rng.standard_normal(32).tolist()
    ids = sorted(rows)
    # asked in pieces, some twice in one request, the rest later among ones asked before
    for part in (ids[:5], [ids[7], ids[7], ids[3]], ids[CHUNK - 3 : CHUNK + 5], ids):
        assert kept.cosines(part, query) == [fresh_cosine(fresh, rows, i, query) for i in part]


def fresh_cosine(fresh: Vectors, rows: dict[str, list[float]], fact_id: str, query: list[float]) -> float:
    """The cosine of one fact's vector worked out by a store holding that fact alone."""
    fresh.put(fact_id, rows[fact_id])
    (cosine_of,) = fresh.cosines([fact_id], query)
    fresh.drop(fact_id)
    return cosine_of


def test_a_replaced_or_dropped_vector_is_not_served_the_cosine_kept_for_it() -> None:
    vectors = Vectors()
    vectors.put("a", [1.0, 0.0])
    vectors.put("b", [1.0, 1.0])
    query = [1.0, 0.0]
    assert vectors.cosines(["a", "b"], query) == [1.0, pytest.approx(math.sqrt(0.5))]
    vectors.put("a", [0.0, 3.0])
    assert vectors.cosines(["a", "b"], query) == [0.0, pytest.approx(math.sqrt(0.5))]
    vectors.drop("b")
    vectors.put("b", [2.0, 0.0])  # the same id again, with another vector
    assert vectors.cosines(["b", "a"], query) == [1.0, 0.0]


def test_cosines_are_kept_for_the_last_queries_only() -> None:
    vectors = Vectors()
    vectors.put("a", [1.0, 0.0])
    queries = [[1.0, float(i)] for i in range(QUERIES + 1)]
    for query in queries:
        vectors.cosines(["a"], query)
    kept = vectors._scored
    assert len(kept) == QUERIES
    import numpy as np

    assert np.asarray(queries[0], dtype=np.float64).tobytes() not in kept
    assert np.asarray(queries[-1], dtype=np.float64).tobytes() in kept
