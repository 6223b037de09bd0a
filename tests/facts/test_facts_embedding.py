"""The offline hashing embedding, and other embeddings plugged into the stores."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.embeddings import DeterministicFakeEmbedding

from ctxplugin import ConfigError
from ctxplugin.config import FactsConfig
from ctxplugin.facts import (
    ChromaFactStore,
    FactQuery,
    FactsLedger,
    HashingEmbedding,
    MemoryFactStore,
)
from ctxplugin.facts.embedding import as_embeddings, cosine
from ctxplugin.scope import Scope

S = Scope(session_id="s1")


def test_vectors_are_unit_length_and_of_the_asked_size() -> None:
    emb = HashingEmbedding(dims=128)
    vector = emb.embed_query("Data Team reallocated to Project Beta")
    assert len(vector) == 128
    assert math.isclose(sum(v * v for v in vector), 1.0, rel_tol=1e-9)
    assert emb.embed_query("") == [0.0] * 128
    assert emb.embed_query("the and of") == [0.0] * 128, "stopwords alone carry no meaning"


@settings(max_examples=40, deadline=None)
@given(st.text(max_size=200))
def test_any_text_embeds_to_a_finite_unit_or_zero_vector(text: str) -> None:
    vector = HashingEmbedding(dims=64).embed_query(text)
    norm = math.sqrt(sum(v * v for v in vector))
    assert norm == 0.0 or math.isclose(norm, 1.0, rel_tol=1e-9)


def test_vectors_are_the_same_in_another_process() -> None:
    text = "order #W1234 moved to src/app/main.py"
    here = HashingEmbedding(dims=64).embed_query(text)
    code = (
        "from ctxplugin.facts import HashingEmbedding;"
        f"print(repr(HashingEmbedding(dims=64).embed_query({text!r})))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env={"PYTHONHASHSEED": "123", "PATH": ""})
    assert eval(out.stdout) == here


@pytest.mark.parametrize(
    ("query", "best", "worse"),
    [
        ("status of W1234", "Order #W1234 was cancelled", "Order #W1235 was cancelled"),
        ("which project is the data team on?", "Data team reallocated to Project Beta", "Marketing budget is 50k"),
        ("allocation of engineers", "Engineers were allocated to the migration", "Engineers like coffee"),
        ("src/app/main.py", "The bug is in src/app/main.py line 40", "The bug is in src/app/util.py line 40"),
        ("sofia.kim1937@example.com", "Email is sofia.kim1937@example.com", "Email is juan@example.com"),
    ],
)
def test_similarity_prefers_shared_words_forms_and_exact_identifiers(query: str, best: str, worse: str) -> None:
    emb = HashingEmbedding()
    q = emb.embed_query(query)
    assert cosine(q, emb.embed_query(best)) > cosine(q, emb.embed_query(worse))


def test_dims_are_validated() -> None:
    with pytest.raises(ConfigError):
        HashingEmbedding(dims=8)
    with pytest.raises(ValueError):
        FactsConfig(embedding_dims=10)


def test_a_langchain_embeddings_plugs_into_memory_and_chroma(tmp_path: Path) -> None:
    fake = DeterministicFakeEmbedding(size=32)
    for store in (MemoryFactStore(embedding=fake), ChromaFactStore.persistent(tmp_path, embedding=fake)):
        ledger = FactsLedger(store)
        fact = ledger.write("Budget is 50k", scope=S)
        # the fake gives the same vector for the same text: an exact query finds it first
        hits = store.search("Budget is 50k", FactQuery(reader=S), n=1)
        assert hits[0][0].id == fact.id and hits[0][1] == pytest.approx(1.0, abs=1e-5)


class TinyChromaFunction:
    """A Chroma-style embedding function (callable on a list of texts, with a name)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, input: list[str]) -> list[list[float]]:
        self.calls += 1
        return [[float(len(t) % 7), 1.0, float(t.count("a"))] for t in input]

    @staticmethod
    def name() -> str:
        return "tiny"

    def get_config(self) -> dict[str, Any]:
        return {}

    @staticmethod
    def build_from_config(config: dict[str, Any]) -> TinyChromaFunction:
        return TinyChromaFunction()


def test_a_chroma_embedding_function_plugs_in_and_names_the_collection(tmp_path: Path) -> None:
    function = TinyChromaFunction()
    store = ChromaFactStore.persistent(tmp_path, embedding=function)
    FactsLedger(store).write("alpha beta", scope=S)
    assert function.calls >= 1
    assert store.collection_name(None) == "ctxplugin_facts_tiny"
    assert as_embeddings(function).embed_query("aaa") == [3.0, 1.0, 3.0]


def test_the_default_collection_carries_our_embedding_not_chromas(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path) as store:
        FactsLedger(store).write("alpha", scope=S)
        config = store.raw_collection().configuration_json
        assert config["embedding_function"]["name"] == "ctxplugin"
        assert config["embedding_function"]["config"] == {"identity": "wordllama256v1"}
        assert config["hnsw"]["space"] == "cosine"
        assert store.collection_name(None) == "ctxplugin_facts_wordllama256v1"


def test_bad_embedding_is_a_config_error() -> None:
    with pytest.raises(ConfigError):
        as_embeddings(42)  # type: ignore[arg-type]
