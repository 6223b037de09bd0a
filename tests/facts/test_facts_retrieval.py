"""Hybrid retrieval: the static embedding, the lexical index, rank fusion, identifiers first, on
every backend (memory, embedded Chroma, a Chroma server), and no network on the default path."""

from __future__ import annotations

import datetime as dt
import math
import socket
import sys
import threading
import unicodedata
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_mock import MockerFixture

from ctxplugin._lru import LRU, Memo, text_key
from ctxplugin.config import FactsConfig
from ctxplugin.facts import (
    ChromaFactStore,
    Fact,
    FactQuery,
    FactsLedger,
    HashingEmbedding,
    MemoryFactStore,
)
from ctxplugin.facts import _chroma_lexical as chroma_lexical_module
from ctxplugin.facts import _text as text_module
from ctxplugin.facts import ranking as ranking_module
from ctxplugin.facts import static as static_module
from ctxplugin.facts.embedding import as_embeddings, cosine
from ctxplugin.facts.lexical import LexicalIndex, terms
from ctxplugin.facts.ranking import exact_hits, fuse, prior, rank, tag_overlap
from ctxplugin.facts.static import StaticEmbedding
from ctxplugin.scope import Scope
from ctxplugin.testing.chroma_server import ChromaServer

S = Scope(session_id="s1", user_id="u1", tenant_id="acme")
NAMES = ["Aiden", "Bianca", "Carlos", "Dana", "Felix", "Gita", "Hugo", "Irene", "Jonas", "Kara"]
TEAMS = ["data", "web", "search", "billing", "growth", "infra"]
THINGS = ["roadmap", "design doc", "test plan", "budget", "postmortem", "hiring plan"]


def distractors() -> list[str]:
    out = []
    for i in range(240):
        name, team, thing = NAMES[i % 10], TEAMS[i % 6], THINGS[(i // 6) % 6]
        out.append(f"{name} owns the {thing} for the {team} team, week {i}.")
    return out


TARGETS = {
    "maria": "Maria speaks Portuguese and Spanish fluently.",
    "alice": "Alice is on call this week for the payments service.",
    "order": "Order #W482913 ships from Denver on Friday.",
    "order_near": "Order #W482914 ships from Denver on Friday.",
}


def fill(ledger: FactsLedger) -> dict[str, str]:
    # targets first: a Chroma server's vector query may not see the very latest writes yet
    ids = {name: ledger.write(text, scope=S).id for name, text in TARGETS.items()}
    ledger.store.add([Fact(text=t, owner=S, visibility="session") for t in distractors()])
    return ids


@pytest.fixture(params=["memory", "embedded", "server"])
def ledger(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FactsLedger]:
    if request.param == "memory":
        yield FactsLedger(MemoryFactStore())
        return
    if request.param == "embedded":
        store = ChromaFactStore.persistent(tmp_path)
    else:
        server: ChromaServer = request.getfixturevalue("chroma_server")
        store = ChromaFactStore.http(server.url, config=FactsConfig(collection=f"f{uuid.uuid4().hex[:12]}"))
    with store:
        yield FactsLedger(store)


def test_other_words_and_identifiers_are_found_among_distractors(ledger: FactsLedger) -> None:
    ids = fill(ledger)

    def top(query: str, k: int = 5) -> list[str]:
        return [h.fact.id for h in ledger.search(query, scope=S, k=k)]

    assert top("Which languages does Maria know?")[0] == ids["maria"]
    assert ids["alice"] in top("Who gets paged if the payments service breaks?")
    assert top("status of W482913")[0] == ids["order"]
    assert top("status of W482914")[0] == ids["order_near"]


def test_without_hybrid_the_ledger_ranks_by_the_embedding_alone() -> None:
    store = MemoryFactStore(embedding=HashingEmbedding())
    ledger = FactsLedger(store, FactsConfig(hybrid=False))
    fill(ledger)
    # the hashing embedding alone is drowned by distractors sharing "team" and "week"
    hybrid = FactsLedger(store)
    query = "Which languages does Maria know?"
    assert hybrid.search(query, scope=S, k=1)[0].fact.text == TARGETS["maria"]
    assert [h.fact.text for h in ledger.search(query, scope=S, k=12)] != [
        h.fact.text for h in hybrid.search(query, scope=S, k=12)
    ]


def test_lexical_index_weighs_rare_terms_and_ignores_stop_words() -> None:
    index = LexicalIndex()
    index.add((f"d{i}", text, None) for i, text in enumerate(distractors()))
    index.add([("maria", TARGETS["maria"], None), ("team", "Maria's team owns the roadmap", None)])
    hits = index.search("Which languages does Maria speak?", n=3)
    assert [d for d, _ in hits] == ["maria", "team"]
    assert index.search("what is the and of it", n=3) == []
    assert len(index.search("the roadmap of the team", n=500)) > 40


def test_lexical_index_replaces_removes_and_filters() -> None:
    index = LexicalIndex()
    index.add([("a", "Kenji prefers window seats", "x"), ("b", "Kenji likes tea", "y")])
    index.add([("a", "Lena prefers aisle seats", "x")])
    assert [d for d, _ in index.search("kenji", n=5)] == ["b"]
    assert [d for d, _ in index.search("kenji", n=5, allow=lambda _, tag: tag == "x")] == []
    index.retag("b", "x")
    assert [d for d, _ in index.search("kenji", n=5, allow=lambda _, tag: tag == "x")] == ["b"]
    index.remove(["a", "zzz"])
    assert "a" not in index and len(index) == 1
    assert index.search("aisle", n=5) == []


def test_terms_keep_identifiers_whole_and_by_their_parts() -> None:
    found = terms("Host db-prod-07 has a failing disk")
    assert found["db-prod-07"] == 1.0
    assert found["prod"] == 0.5 and found["07"] == 0.5
    assert "has" not in found and "a" not in found


_MARKED_PIECES = [
    "src/app.py", "../x/y", "a@b.co", "user@host", "http://x.y/z?q=1", "//", "@", "/", "a", "db-prod-07", "#W12", "+", "-", ":",
    " ", "\n", "\t", "\u00a0", "\u2003", "\x1c", ".", ",", "(", "'", "é", "Ω", "\u212a",
]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_MARKED_PIECES), max_size=60))
def test_paths_urls_and_addresses_are_found_as_a_scan_of_the_whole_text_finds_them(pieces: list[str]) -> None:
    # each pattern is run on the words holding its mark only
    lowered = unicodedata.normalize("NFKC", "".join(pieces)).lower()
    scanned = [match.group(0) for pattern, _ in text_module._MARKED for match in pattern.finditer(lowered)]
    assert list(text_module._marked(lowered)) == scanned


_SPACES = [" ", "\n", "\t", "\r", "\x0b", "\x0c", "\x1c", "\x1d", "\x1e", "\x1f", "\x85", "\u00a0", "\u1680", "\u2003", "\u2028", "\u2029", "\u202f", "\u205f", "\u3000", "\u200b"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(_MARKED_PIECES + _SPACES + ["#", "_", "-x", "ﬁ", "Ⅸ", "²", "x.", "db_1"]), max_size=60))
def test_words_and_identifiers_read_the_tokens_of_the_text_with_its_whitespace_collapsed(pieces: list[str]) -> None:
    # both read one token list, found in the text lowered but not collapsed
    text = "".join(pieces)
    assert list(text_module._tokens(text)) == text_module._TOKEN.findall(text_module.normalize(text))


def test_the_tokens_of_a_text_are_kept_for_the_last_few_texts_neither_short_nor_very_long(monkeypatch: pytest.MonkeyPatch) -> None:
    for memo in ("_WORDS", "_IDENTIFIERS"):
        monkeypatch.setattr(text_module, memo, LRU(2))
    monkeypatch.setattr(text_module, "_TOKENS", Memo(2))
    pad = " ships" * (text_module._TOKENS_KEPT_CHARS // 6)
    texts = [f"Order W{n}{pad}" for n in (1, 2, 3)]
    assert [text_module.words(t)[:3] for t in texts] == [["order", "w1", "ships"], ["order", "w2", "ships"], ["order", "w3", "ships"]]
    assert len(text_module._TOKENS) == 2 and text_key(texts[0]) not in text_module._TOKENS
    assert text_module.identifiers(texts[0]) == ["w1"]  # its tokens went: found again
    for other in ("Order W4 ships", "w9 " * (text_module._MEMO_MAX_CHARS // 3 + 1)):  # too short, too long
        assert text_module.identifiers(other) == [other.split()[-2].lower()]
        assert text_key(other) not in text_module._TOKENS


def test_static_embedding_knows_other_words_and_is_normalised() -> None:
    emb = StaticEmbedding()
    fact, question = emb.embed_documents([TARGETS["maria"], "Which languages does Maria know?"])
    other = emb.embed_query("Dana owns the budget for the growth team.")
    assert len(fact) == 256 and emb.identity == "wordllama256v1"
    assert abs(sum(v * v for v in fact) - 1.0) < 1e-4
    assert cosine(fact, question) > cosine(other, question) + 0.2
    assert emb.embed_query("") == [0.0] * 256
    assert isinstance(as_embeddings(None), StaticEmbedding)
    assert isinstance(as_embeddings(None, 64, "hashing"), HashingEmbedding)


def test_fuse_gives_the_first_place_of_both_rankings_full_relevance() -> None:
    a, b, c = (Fact(text=t, owner=S) for t in ("alpha", "beta", "gamma"))
    fused = dict((f.id, r) for f, r in fuse([(a, 0.9), (b, 0.8)], [(a, 7.0), (c, 3.0)]))
    assert fused[a.id] == pytest.approx(1.0)
    assert fused[b.id] < fused[a.id] and fused[c.id] < fused[a.id]
    assert fuse([(a, 1.4), (b, -0.2)]) == [(a, 1.0), (b, 0.0)]


_WORDS = ["jira-4821", "w482913", "db-prod-07", "src/app.py", "ticket", "denver", "closed", "a_b", "x9", "budget"]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.lists(st.sampled_from(_WORDS), max_size=6), st.lists(st.sampled_from(_WORDS), max_size=4),
                       st.sampled_from([None, "db-prod-07", "ticket_x9"]), st.floats(0, 1)), min_size=1, max_size=8),
    st.lists(st.sampled_from(_WORDS), max_size=12),
    st.lists(st.sampled_from(_WORDS), max_size=12),
    st.integers(1, 9),
)
def test_rank_counts_identifiers_and_tags_as_exact_hits_and_tag_overlap_define_them(
    facts: list[tuple[list[str], list[str], str | None, float]], exact: list[str], tags: list[str], k: int
) -> None:
    """Whichever side of an overlap is read (the question's identifiers and tags, or the fact's
    words and tags, repeats included), the ranking is the one of the definitions; the first
    ``k`` are those of the whole ranking, equal ones in the order given."""
    now = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    candidates = [
        (Fact(text=" ".join(["Note", *words]), owner=S, tags=tuple(fact_tags), key=key, created_at=now - dt.timedelta(hours=i)), score)
        for i, (words, fact_tags, key, score) in enumerate(facts)
    ]
    got = rank(candidates, now=now, strategy="balanced", half_life_hours=24, tags=tags, exact=exact, k=k)

    def expected(fact: Fact, similarity: float) -> tuple[tuple[int, int], float, dt.datetime]:
        score = 0.65 * similarity + 0.25 * prior(fact, now, "balanced", 24) + 0.10 * tag_overlap(fact.tags, tags)
        return (exact_hits(fact, exact), ranking_module._key_hits(fact, exact)), score, fact.created_at

    want = sorted(candidates, key=lambda pair: expected(*pair), reverse=True)
    assert [(s.fact.id, s.score, s.relevance) for s in got] == [(f.id, expected(f, sim)[1], min(1.0, max(0.0, sim))) for f, sim in want[:k]]


def test_the_words_of_a_fact_text_are_kept_for_a_bounded_number_of_texts(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ranking_module, "_HELD", Memo(2))
    facts = [Fact(text=f"Ticket JIRA-{n} is closed", owner=S) for n in (1, 2, 3)]
    assert [exact_hits(f, ["jira-1", "closed"]) for f in facts] == [2, 1, 1]
    assert len(ranking_module._HELD) == 2
    assert exact_hits(facts[0], ["jira-1"]) == 1  # read again once it went


def test_bm25_scores_are_those_of_the_formula() -> None:
    texts = {"a": "Kenji prefers window seats on trains", "b": "Kenji likes tea", "c": "Lena prefers tea and window seats"}
    index = LexicalIndex()
    index.add((doc, text, None) for doc, text in texts.items())
    asked = terms("kenji window tea")
    lengths = {doc: len([t for w in text.lower().split() for t in terms(w)]) for doc, text in texts.items()}
    average = sum(lengths.values()) / 3

    def score(doc: str) -> float:
        total = 0.0
        for term in asked:
            holders = [d for d, text in texts.items() if term in terms(text)]
            if doc in holders:
                idf = math.log(1.0 + (3 - len(holders) + 0.5) / (len(holders) + 0.5))
                total += idf * 2.2 / (1 + 1.2 * (1 - 0.75 + 0.75 * lengths[doc] / average))
        return total

    assert dict(index.search("kenji window tea", n=3)) == pytest.approx({doc: score(doc) for doc in texts}, rel=1e-12)


def test_a_fact_naming_the_asked_identifier_comes_first() -> None:
    now = dt.datetime(2025, 1, 2, tzinfo=dt.UTC)
    exact = Fact(text="Ticket JIRA-4821 is closed", owner=S, importance=0.0, created_at=now - dt.timedelta(days=30))
    near = Fact(text="Ticket JIRA-4822 is closed", owner=S, importance=1.0, created_at=now)
    ranked = rank([(near, 0.99), (exact, 0.2)], now=now, strategy="balanced", half_life_hours=24, exact=["jira-4821"], k=2)
    assert [s.fact.id for s in ranked] == [exact.id, near.id]


def test_chroma_lexical_index_catches_up_with_another_writer(chroma_server: ChromaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    config = FactsConfig(collection=f"f{uuid.uuid4().hex[:12]}")
    monkeypatch.setattr(chroma_lexical_module, "_SYNC_SECONDS", 0.0)
    with ChromaFactStore.http(chroma_server.url, config=config) as reader, ChromaFactStore.http(chroma_server.url, config=config) as writer:
        mine = FactsLedger(reader)
        mine.write("Kenji prefers window seats", scope=S)
        assert [h.fact.text for h in mine.search("Kenji", scope=S)] == ["Kenji prefers window seats"]
        theirs = FactsLedger(writer).write("Tomasz is allergic to peanuts", scope=S)
        found = reader.search_lexical("tomasz", _valid(S), n=3)
        assert [f.id for f, _ in found] == [theirs.id]
        FactsLedger(writer).write("Tomasz eats no peanuts at all", scope=S, supersedes=theirs.id)
        again = reader.search_lexical("tomasz", _valid(S), n=3)
        assert theirs.id not in [f.id for f, _ in again]


def test_chroma_lexical_ties_rank_the_same_in_every_process(chroma_server: ChromaServer, monkeypatch: pytest.MonkeyPatch) -> None:
    # two stores on one server are two processes' indexes: each adds its own writes at once and
    # the other's when it catches up, so the order facts entered differs between them
    config = FactsConfig(collection=f"f{uuid.uuid4().hex[:12]}")
    monkeypatch.setattr(chroma_lexical_module, "_SYNC_SECONDS", 0.0)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    # ids ordered against the times: ranking by id alone would not pass
    older = Fact(id=f"fact_f{uuid.uuid4().hex[:19]}", text="reservation AQLBTL belongs to sofia_kim_7287", owner=S, created_at=start)
    newer = Fact(
        id=f"fact_0{uuid.uuid4().hex[:19]}", text="reservation OI5L9G belongs to sofia_kim_7287", owner=S,
        created_at=start + dt.timedelta(seconds=1),
    )
    with ChromaFactStore.http(chroma_server.url, config=config) as one, ChromaFactStore.http(chroma_server.url, config=config) as two:
        for store in (one, two):
            assert store.search_lexical("sofia_kim_7287", _valid(S), n=2) == []  # each reads its index now
        two.add([older])
        one.add([newer])
        ranked = [[f.id for f, _ in store.search_lexical("sofia_kim_7287 reservation", _valid(S), n=2)] for store in (one, two)]
    # equal scores: the older fact first, as one process that wrote both would rank them
    assert ranked == [[older.id, newer.id]] * 2


def _valid(scope: Scope) -> FactQuery:
    return FactQuery(reader=scope, valid=True)


def test_auto_keeps_a_collection_built_with_the_hashing_embedding(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path / "old", config=FactsConfig(embedding="hashing")) as store:
        old = FactsLedger(store).write("The data team works on Project Nova", scope=S)
    with ChromaFactStore.persistent(tmp_path / "old") as store:
        hits = FactsLedger(store).search("project of the data team", scope=S)
        assert [h.fact.id for h in hits] == [old.id]
        assert store.collection_name(None) == "ctxplugin_facts_hash384v1"
        assert isinstance(store.embedding, HashingEmbedding)
    with ChromaFactStore.persistent(tmp_path / "new") as store:
        FactsLedger(store).write("The data team works on Project Nova", scope=S)
        assert store.collection_name(None) == "ctxplugin_facts_wordllama256v1"
    with ChromaFactStore.persistent(tmp_path / "old", config=FactsConfig(embedding="static")) as store:
        assert FactsLedger(store).search("project of the data team", scope=S) == []


def test_vectors_are_those_of_the_widened_table() -> None:
    import numpy as np
    from safetensors.numpy import load_file

    table = np.asarray(load_file(str(static_module.package_dir() / "weights" / "l2_supercat_256.safetensors"))["embedding.weight"], dtype=np.float32)
    text = "Maria speaks Portuguese and Spanish fluently."
    ids = static_module._table().tokenizer.encode(text, add_special_tokens=False).ids
    mean = table[ids].mean(axis=0)
    assert StaticEmbedding().embed_documents([text])[0] == (mean / float(np.linalg.norm(mean))).tolist()


_PIECES = ["the", "data", "team", "src/app/main.py", "0x1f3a9c", "def", "f(x):", "\n", "\t", "é", "日本語", "\u2581", "  ", "    ", "-", "Ω"]


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=800, max_size=2500), st.integers(0, 2**31))
def test_a_long_text_is_embedded_from_its_first_tokens_tokenized_alone(pieces: list[str], seed: int) -> None:
    # only a start of a long text is tokenized: the vector is the one of the whole text's first tokens
    import numpy as np

    joiners = [" ", "", " ", "  "]
    text = "".join(piece + joiners[(seed >> (i % 31)) & 3] for i, piece in enumerate(pieces))
    table = static_module._table()
    whole = table.tokenizer.encode(text, add_special_tokens=False).ids
    head = table.tokenizer.encode(static_module._head(text), add_special_tokens=False).ids
    assert whole[: len(head)] == head, "the start is tokenized as it is within the whole text"
    ids = whole[: static_module._MAX_TOKENS]
    mean = table.vectors[np.asarray(ids, dtype=np.int64)].astype(np.float32).mean(axis=0)
    assert StaticEmbedding().embed_documents([text])[0] == (mean / float(np.linalg.norm(mean))).tolist()


def test_a_long_text_whose_first_start_holds_too_few_tokens_is_read_from_a_longer_one() -> None:
    # long words first (one token each), then digits (two each): the shorter start holds too few
    # tokens, the longer one enough; the vector is still the one of the whole text's first tokens
    import numpy as np

    text = "information " * 190 + "7 " * 600 + "end"
    table = static_module._table()
    first = static_module._head(text, static_module._FIRST_CHARS)
    assert len(table.tokenizer.encode(first, add_special_tokens=False).ids) < static_module._MAX_TOKENS
    assert len(table.tokenizer.encode(static_module._head(text), add_special_tokens=False).ids) >= static_module._MAX_TOKENS
    ids = table.tokenizer.encode(text, add_special_tokens=False).ids[: static_module._MAX_TOKENS]
    mean = table.vectors[np.asarray(ids, dtype=np.int64)].astype(np.float32).mean(axis=0)
    assert StaticEmbedding().embed_documents([text])[0] == (mean / float(np.linalg.norm(mean))).tolist()


def test_a_long_text_is_tokenized_from_its_start() -> None:
    text = "The data team moved to Project Beta. " * 200
    assert static_module._table().split_at_spaces
    head = static_module._head(text)
    assert len(head) < len(text) and text.startswith(head)
    assert len(static_module._table().tokenizer.encode(head, add_special_tokens=False).ids) >= static_module._MAX_TOKENS


def test_the_engine_loads_the_default_embedding_when_built() -> None:
    from ctxplugin import ContextConfig, ContextEngine

    static_module._load.cache_clear()
    ContextEngine(ContextConfig(facts=FactsConfig(enabled=False)))
    assert static_module._load.cache_info().currsize == 0  # no facts, no table
    ContextEngine(ContextConfig(facts=FactsConfig(embedding="hashing")))
    assert static_module._load.cache_info().currsize == 0
    ContextEngine()
    assert static_module._load.cache_info().currsize == 1  # loaded before the first call


def test_the_default_path_makes_no_network_access(tmp_path: Path, mocker: MockerFixture, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    attempts: list[Any] = []
    # threads other tests left running (a connection pool reconnecting to its database) are
    # refused too, but only what this test's own path does is counted
    others = {t for t in threading.enumerate() if t is not threading.main_thread()}

    def refuse(*args: Any, **kwargs: Any) -> Any:
        if threading.current_thread() not in others:
            attempts.append(args)
        raise OSError("network used")

    mocker.patch.object(socket.socket, "connect", refuse)
    mocker.patch.object(socket, "create_connection", refuse)
    mocker.patch.object(socket, "getaddrinfo", refuse)
    static_module._load.cache_clear()  # load the shipped files again, under the block
    for store in (MemoryFactStore(), ChromaFactStore.persistent(tmp_path)):
        ledger = FactsLedger(store)
        fact = ledger.write("Maria speaks Portuguese and Spanish fluently.", scope=S)
        assert ledger.search("Which languages does Maria know?", scope=S, k=1)[0].fact.id == fact.id
    assert attempts == []
    assert "wordllama" not in sys.modules  # its loader (which can download) never ran


def test_a_question_after_a_long_paste_is_read_by_its_head_and_tail() -> None:
    from ctxplugin.facts import FactsLedger, MemoryFactStore
    from ctxplugin.facts._text import QUERY_CHARS, query_text

    paste = "".join(f"2026-11-24 10:{i % 60:02d}:00 INFO worker {i} heartbeat ok\n" for i in range(40_000))  # ~2 MB
    question = f"Here is the log:\n{paste}\nWhat discount can Acme get on the renewal?"
    read = query_text(question)
    assert len(read) <= QUERY_CHARS + 1
    assert read.startswith("Here is the log:") and read.endswith("What discount can Acme get on the renewal?")
    assert query_text("What discount can Acme get?") == "What discount can Acme get?"
    scope = Scope(session_id="paste")
    ledger = FactsLedger(MemoryFactStore())
    ledger.write("Acme's renewal discount is capped at 12%", key="acme_discount", scope=scope)
    ledger.write("The Lisbon office opens at 9", key="lisbon_hours", scope=scope)
    assert [f.fact.key for f in ledger.search(question, scope=scope, k=1)] == ["acme_discount"]
