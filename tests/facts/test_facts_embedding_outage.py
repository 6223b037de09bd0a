"""A hosted embedding API that is down (docs/facts.md: ``embedding=OpenAIEmbeddings(...)``): the
facts ledger depends on it as on its store, so its failure degrades the step as a store's does
(reliability promise 1: nothing raises to the host) instead of escaping ``prepare``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_openai import OpenAIEmbeddings
from pydantic import SecretStr

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
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
