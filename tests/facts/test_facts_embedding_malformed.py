"""An embedding you plugged in that answers with something other than one vector per text (a
hosted API's odd response, a function with a bug in its output): the facts degrade for the step,
as they do when the embedding's API is down, and ``prepare`` and the capture go on. A plain
function is bounded by the step's store time as a LangChain ``Embeddings`` is."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy
import pytest
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.errors import StoreError
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.facts.embedding import document_vectors, query_vector
from ctxplugin.facts.store import FactStore

S = Scope(session_id="embedding-malformed")


def _raise(exc: Exception) -> Callable[[list[str]], Any]:
    def answer(texts: list[str]) -> Any:
        raise exc

    return answer


ANSWERS: dict[str, Callable[[list[str]], Any]] = {
    "one vector too few": lambda texts: [[0.1, 0.2, 0.3]] * (len(texts) - 1),
    "one vector too many": lambda texts: [[0.1, 0.2, 0.3]] * (len(texts) + 1),
    "no vectors": lambda texts: [],
    "None": lambda texts: None,
    "a dict": lambda texts: {"data": [[0.1, 0.2, 0.3] for _ in texts]},
    "a string": lambda texts: "0.1,0.2,0.3",
    "None for a vector": lambda texts: [None for _ in texts],
    "empty vectors": lambda texts: [[] for _ in texts],
    "words for numbers": lambda texts: [["a", "b", "c"] for _ in texts],
    "NaN values": lambda texts: [[math.nan, 0.2, 0.3] for _ in texts],
    "infinite values": lambda texts: [[math.inf, 0.2, 0.3] for _ in texts],
    "vectors of two widths": lambda texts: [[0.1] * (3 + i % 2) for i, _ in enumerate(texts)],
    "an integer no float holds": lambda texts: [[10**400, 1, 2] for _ in texts],
    "numpy numbers for vectors": lambda texts: [numpy.array(0.5) for _ in texts],
    "KeyError inside": _raise(KeyError("data")),
    "IndexError inside": _raise(IndexError("list index out of range")),
}


class _Answering(Embeddings):
    """A LangChain embedding (a hosted model's client) whose every answer is ``answer(texts)``."""

    def __init__(self, answer: Callable[[list[str]], Any]) -> None:
        self.answer = answer

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.answer(texts)  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        vectors = self.answer([text, text])  # the query's own answer is as malformed as the documents'
        return vectors if not isinstance(vectors, list) or not vectors else vectors[0]


def _conversation(engine: ContextEngine) -> tuple[list[BaseMessage], ToolMessage]:
    output = "\n".join(f"order #W{1000 + i} shipped to Lyon on 2026-11-{i % 28 + 1:02d}" for i in range(80))
    compact = engine.capture_tool_result(ToolMessage(output, tool_call_id="c1", name="orders"), scope=S)
    messages: list[BaseMessage] = [
        HumanMessage("my budget is 400 euros and my seat is 12A; where did my orders ship?", id="h1"),
        AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "c1", "type": "tool_call"}], id="a1"),
        compact,
    ]
    return messages, compact


@pytest.mark.parametrize("kind", ["chroma", "memory"])
@pytest.mark.parametrize("plain", [False, True], ids=["Embeddings", "function"])
@pytest.mark.parametrize("name", list(ANSWERS))
def test_a_malformed_embedding_answer_degrades_the_facts_not_the_step(name: str, plain: bool, kind: str, tmp_path: Path) -> None:
    answer = ANSWERS[name]
    embedding: Embeddings | Callable[[list[str]], Any] = answer if plain else _Answering(answer)
    config = ContextConfig()
    store: FactStore = (
        ChromaFactStore.persistent(tmp_path / "chroma", config=config.facts, embedding=embedding)
        if kind == "chroma"
        else MemoryFactStore(embedding=embedding)
    )
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
    try:
        messages, compact = _conversation(engine)
        prepared = engine.prepare(messages, scope=S)
        again = engine.prepare([*messages, AIMessage("To Lyon.", id="a2"), HumanMessage("actually my budget is 500 euros", id="h2")], scope=S)
    finally:
        engine.close()

    for report in (prepared.report, again.report):
        assert any(w.startswith("facts store unavailable") and "embedding" in w for w in report.warnings), report.warnings
    assert "my budget is 400 euros" in " ".join(str(m.content) for m in prepared.messages)
    assert "actually my budget is 500 euros" in " ".join(str(m.content) for m in again.messages)
    assert compact.additional_kwargs["ctxplugin"]["ref"] in str(prepared.messages[-1].content)


def test_a_query_vector_of_another_width_than_the_stored_ones_fails_the_search_as_the_store() -> None:
    widths = iter([3, 3, 5, 5, 5, 5])
    store = MemoryFactStore(embedding=lambda texts: [[0.5] * next(widths) for _ in texts])
    config = ContextConfig()
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(store, config.facts))
    try:
        first = engine.prepare([HumanMessage("my budget is 400 euros", id="h1")], scope=S)
        second = engine.prepare([HumanMessage("my budget is 400 euros", id="h1"), AIMessage("Noted.", id="a1"),
                                 HumanMessage("which budget did I give?", id="h2")], scope=S)
    finally:
        engine.close()
    assert not any("embedding" in w for w in first.report.warnings), first.report.warnings
    assert any("vectors of [3, 5] numbers" in w for w in second.report.warnings), second.report.warnings


def test_the_answer_is_checked_at_the_boundary_and_the_error_says_what_was_wrong() -> None:
    with pytest.raises(StoreError, match=r"the embedding _Answering answered 1 vectors? for 2 texts"):
        document_vectors(_Answering(ANSWERS["one vector too few"]), ["a", "b"])
    with pytest.raises(StoreError, match="not a finite number"):
        query_vector(_Answering(ANSWERS["NaN values"]), "a")
    assert document_vectors(_Answering(lambda texts: [(1, 2.5)] * len(texts)), ["a", "b"]) == [[1.0, 2.5], [1.0, 2.5]]


def test_a_plain_function_that_hangs_is_bounded_by_the_step_store_time() -> None:
    answered = threading.Event()

    def hanging(texts: list[str]) -> list[list[float]]:
        answered.wait(60)
        return [[1.0, 0.5, 0.25] for _ in texts]

    config = ContextConfig(stores={"timeout": 0.5})
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(MemoryFactStore(embedding=hanging), config.facts))
    try:
        started = time.monotonic()
        prepared = engine.prepare([HumanMessage("my budget is 400 euros", id="h1")], scope=S)
        waited = time.monotonic() - started
    finally:
        answered.set()
        engine.close()
    assert waited < 0.5 + 5, f"the step waited {waited:.1f}s: the function was not bounded"
    assert any("no answer within the step's store time" in w for w in prepared.report.warnings), prepared.report.warnings
