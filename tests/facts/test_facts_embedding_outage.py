"""A hosted embedding API that is down (docs/facts.md: ``embedding=OpenAIEmbeddings(...)``): the
facts ledger depends on it as on its store, so its failure degrades the step as a store's does
(reliability promise 1: nothing raises to the host) instead of escaping ``prepare``."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import OpenAIEmbeddings
from pydantic import SecretStr

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore, _failures
from ctxplugin.facts.store import FactStore

S = Scope(session_id="embedding-down")


def _refused_url() -> str:
    """An API address on this machine where nothing listens: every request is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _api_down() -> OpenAIEmbeddings:
    return OpenAIEmbeddings(
        model="text-embedding-3-small", openai_api_base=_refused_url(), openai_api_key=SecretStr("sk-test"), max_retries=0,
        check_embedding_ctx_length=False,
    )


def _engine(kind: str, tmp_path: Path) -> ContextEngine:
    config = ContextConfig()
    store: FactStore = (
        ChromaFactStore.persistent(tmp_path / "chroma", config=config.facts, embedding=_api_down())
        if kind == "chroma"
        else MemoryFactStore(embedding=_api_down())
    )
    return ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))


@pytest.mark.parametrize("kind", ["chroma", "memory"])
async def test_an_embedding_api_that_is_down_degrades_the_facts_not_the_step(kind: str, tmp_path: Path) -> None:
    engine = _engine(kind, tmp_path)
    output = "\n".join(f"order #W{1000 + i} shipped to Lyon on 2026-11-{i % 28 + 1:02d}" for i in range(80))
    messages = [
        HumanMessage("my budget is 400 euros; where did my orders ship?", id="h1"),
        AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "c1", "type": "tool_call"}], id="a1"),
    ]
    try:
        compact = await engine.acapture_tool_result(ToolMessage(output, tool_call_id="c1", name="orders"), scope=S)
        messages.append(compact)
        prepared = engine.prepare(messages, scope=S)
        again = await engine.aprepare([*messages, AIMessage("They went to Lyon.", id="a2")], scope=S)
    finally:
        engine.close()

    for report in (prepared.report, again.report):
        assert any(w.startswith("facts store unavailable") and "Connection error" in w for w in report.warnings), report.warnings
    assert "my budget is 400 euros" in str(prepared.messages[-3].content)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert ref in str(prepared.messages[-1].content), "the output is stored in the CAS as usual"


class _Hanging(Embeddings):
    """A hosted embedding whose API accepts the request and never answers, until ``answer``."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self.embed_query(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        self.answer.wait(60)
        return [1.0, float(len(text) % 7), 0.5]


def test_an_embedding_that_hangs_costs_one_step_its_store_time_then_is_not_asked_for_a_while(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hanging = _Hanging()
    config = ContextConfig(stores={"timeout": 0.5})
    store = ChromaFactStore.persistent(tmp_path / "chroma", config=config.facts, embedding=hanging)
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
    messages = [HumanMessage("my budget is 400 euros", id="h1"), AIMessage("Noted.", id="a1")]
    try:
        started = time.monotonic()
        first = engine.prepare(messages, scope=S)
        waited = time.monotonic() - started
        asked = hanging.calls
        second = engine.prepare([*messages, HumanMessage("and my seat is 12A", id="h2")], scope=S)
        assert waited < 0.5 + 5, "the step waited out its store time, not the model's own timeout (60 s here)"
        assert any("no answer within the step's store time" in w for w in first.report.warnings), first.report.warnings
        assert any("not asked again" in w for w in second.report.warnings), second.report.warnings
        assert hanging.calls == asked, "a model that went silent is not asked on the next step"
        monkeypatch.setattr(_failures, "RETRY_AFTER", 0.0)
        hanging.answer.set()
        third = engine.prepare([*messages, HumanMessage("and my seat is 12A", id="h2"), AIMessage("OK.", id="a2")], scope=S)
        assert not any("embedding" in w for w in third.report.warnings), third.report.warnings
        assert hanging.calls > asked, "asked again once the wait is over"
    finally:
        hanging.answer.set()
        engine.close()
