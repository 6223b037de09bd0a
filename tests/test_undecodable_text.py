"""Undecodable bytes in a conversation: text a host decoded with ``errors="surrogateescape"``
holds lone surrogates, which no tokenizer, embedding API or text store can encode. A call on
such a conversation is prepared like any other, on every kind of store, and nothing is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import ChromaAnswerCacheStore, call_context
from ctxplugin.config import CacheConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.facts.embedding import document_vectors, query_vector
from ctxplugin.facts.static import StaticEmbedding
from ctxplugin.testing import ScriptedChatModel, memory_engine

SCOPE = Scope(session_id="undecodable")
# "café" written in Latin-1 and read as UTF-8 with surrogateescape: the é byte becomes \udce9
QUESTION = "Is the refund for order W1007 from Caf\udce9 Lumi\udce8re approved? Max discount is 15%."
OUTPUT = "order W1007: status=refunded, shop=Caf\udce9 Lumi\udce8re\n" + "line \udcff of the log\n" * 200


def conversation() -> list[SystemMessage | HumanMessage | AIMessage | ToolMessage]:
    return [
        SystemMessage(content="You are a support agent."),
        HumanMessage(content="Look up order W1007 for Caf\udce9 Lumi\udce8re, please."),
        AIMessage(content="", tool_calls=[{"name": "get_order", "args": {"order_id": "W1007"}, "id": "call_1"}]),
        ToolMessage(content=OUTPUT, tool_call_id="call_1", name="get_order"),
        AIMessage(content="Order W1007 was refunded."),
        HumanMessage(content=QUESTION),
    ]


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> ContextEngine:
    made: ContextEngine = memory_engine(ContextConfig()) if request.param == "memory" else ContextEngine.embedded(tmp_path / "store", ContextConfig())
    return made


def test_a_question_with_undecodable_bytes_is_prepared_and_kept_exactly(engine: ContextEngine) -> None:
    messages = conversation()
    prepared = engine.prepare(messages, scope=SCOPE)
    assert prepared.messages[-1].content == QUESTION  # the user's message, byte for byte
    # the facts stage searched with the question and read the user's statements
    assert prepared.report.facts_extracted > 0
    # the next call of the session finds the same facts without failing either
    again = engine.prepare([*messages, AIMessage(content="Yes."), HumanMessage(content="And Caf\udce9 Lumi\udce8re's other orders?")], scope=SCOPE)
    assert again.messages[-1].content == "And Caf\udce9 Lumi\udce8re's other orders?"


def test_a_captured_output_with_undecodable_bytes_is_kept_exactly(engine: ContextEngine) -> None:
    compact = engine.capture_tool_result(ToolMessage(content=OUTPUT, tool_call_id="call_1", name="get_order"), SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=SCOPE) == OUTPUT
    prepared = engine.prepare([*conversation()[:3], compact, *conversation()[4:]], scope=SCOPE)
    assert prepared.messages[-1].content == QUESTION


def test_the_embedding_of_undecodable_text_is_that_of_its_readable_form() -> None:
    embedding = StaticEmbedding()
    readable = QUESTION.replace("\udce9", "\ufffd").replace("\udce8", "\ufffd")
    assert query_vector(embedding, QUESTION) == embedding.embed_query(readable)
    assert document_vectors(embedding, [QUESTION, "plain"]) == embedding.embed_documents([readable, "plain"])


def test_a_question_with_undecodable_bytes_is_not_cached(tmp_path: Path) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    assert engine.cache is not None and isinstance(engine.cache.store, ChromaAnswerCacheStore)
    model = ScriptedChatModel(script=[AIMessage(content="Yes, approved."), AIMessage(content="Approved on Monday.")], default=None)
    messages = [SystemMessage(content="You are a support agent."), HumanMessage(content=QUESTION)]
    for _ in range(2):  # the same question twice: each goes to the model
        prepared = engine.prepare(messages, scope=SCOPE)
        assert engine.cached_answer(messages, prepared, scope=SCOPE, model=model) is None
        reply = model.invoke(prepared.messages)
        engine.remember_answer(messages, prepared, reply, scope=SCOPE, model=model)
    assert len(model.calls) == 2
    assert engine.cache.store.count() == 0
    # the same question in readable text is cached as usual
    readable = [messages[0], HumanMessage(content="Is the refund for order W1007 approved?")]
    assert call_context(
        readable, prepared.report, tools=[], scope=SCOPE, model=model, mode="session", registry=engine.registry, ledger=None
    ) is not None
    assert call_context(
        messages, prepared.report, tools=[], scope=SCOPE, model=model, mode="session", registry=engine.registry, ledger=None
    ) is None



def test_a_kept_conversation_with_undecodable_bytes_survives_a_restart(tmp_path: Path) -> None:
    history = ContextEngine.embedded(tmp_path / "store").history("s1")
    history.add_messages([HumanMessage(content=QUESTION), AIMessage(content="Caf\udce9 \u5c71\u7530: yes.")])
    again = ContextEngine.embedded(tmp_path / "store").history("s1")
    assert [m.content for m in again.full_messages] == [QUESTION, "Caf\udce9 \u5c71\u7530: yes."]
    assert again.messages[-1].content == "Caf\udce9 \u5c71\u7530: yes."


def test_a_reader_whose_ids_hold_undecodable_bytes_reads_its_facts_from_chroma(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(tmp_path / "store", ContextConfig())
    scope = Scope(session_id="s\udcff1", user_id="u\udce9")
    engine.facts.write("Max discount for Acme is 15%", key="acme_discount", scope=scope)
    prepared = engine.prepare([SystemMessage(content="You are a sales agent."), HumanMessage(content="What discount can Acme get?")], scope=scope)
    assert prepared.report.warnings == []
    assert [f.key for f in prepared.report.facts] == ["acme_discount"]


def test_tools_with_undecodable_bytes_are_listed_and_bound_as_given() -> None:
    tools = [{"type": "function", "function": {"name": f"caf\udce9_tool_{i}", "description": f"Look up caf\udce9 record {i}.",
                                                "parameters": {"type": "object", "properties": {"id\udcff": {"type": "string"}}}}}
             for i in range(10)]
    engine = memory_engine(ContextConfig.model_validate({"tools": {"directory": "always", "binding": "stubs"}}))
    prepared = engine.prepare(conversation(), tools=tools, scope=SCOPE)
    assert prepared.report.warnings == []
    assert any("- caf\udce9_tool_3: Look up caf\udce9 record 3" in str(m.content) for m in prepared.messages)
    bound = {tool["function"]["name"] for tool in prepared.tools if isinstance(tool, dict) and "function" in tool}
    assert {f"caf\udce9_tool_{i}" for i in range(10)} <= bound
    assert engine.registry.get("caf\udce9_tool_3") is not None
    assert engine.registry.get("caf\udce9_tool_3").schema == tools[3]
    assert "id\udcff" in engine.registry.meta_tool().invoke({"names": ["caf\udce9_tool_3"]})


def test_outputs_of_a_session_whose_ids_hold_undecodable_bytes_are_stored_and_expand(engine: ContextEngine) -> None:
    scope = Scope(session_id="s\udcff1", user_id="u\udce9", workspace_id="w\ud800", tenant_id="t\udcfe")
    compact, report = engine.capture_with_report(ToolMessage(content=OUTPUT, tool_call_id="call_1", name="get_order"), scope)
    assert report.warnings == [] and report.ref_id is not None and compact.content != OUTPUT
    assert engine.expand_ref(report.ref_id, scope=scope) == OUTPUT
    with pytest.raises(RefNotFoundError):  # the session its escaped id spells reads nothing of it
        engine.expand_ref(report.ref_id, scope=Scope(session_id="s%ED%B3%BF1", user_id="u%ED%B3%A9", workspace_id="w%ED%A0%80", tenant_id="t%ED%B3%BE"))
