"""Keys of the answer cache: partitions, the signature, and what may be stored."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import Scope
from ctxplugin.cache import (
    CACHE_META_KEY,
    AnswerCache,
    CallContext,
    MemoryAnswerCacheStore,
    call_context,
    model_identity,
    partition,
    uncacheable,
)
from ctxplugin.report import ContextReport
from ctxplugin.testing import ScriptedChatModel, memory_engine


def test_partitions_never_mix_tenants_and_need_a_user_for_user_scope() -> None:
    a = Scope(session_id="s1", user_id="u1", workspace_id="w", tenant_id="t1")
    assert partition(a, "session") != partition(a.model_copy(update={"session_id": "s2"}), "session")
    assert partition(a, "user") == partition(a.model_copy(update={"session_id": "s2"}), "user")
    assert partition(a, "user") != partition(a.model_copy(update={"user_id": "u2"}), "user")
    assert partition(a, "global") == partition(a.model_copy(update={"user_id": "u2", "session_id": "s9"}), "global")
    assert partition(a, "global") != partition(a.model_copy(update={"tenant_id": "t2"}), "global")
    anonymous = Scope(session_id="s1")
    assert partition(anonymous, "user") == partition(anonymous, "session")


def test_model_identity_names_the_model() -> None:
    assert model_identity(None) == ""
    assert model_identity("gpt-4o") == "gpt-4o"
    assert model_identity(ScriptedChatModel()) == "ScriptedChatModel:ctxplugin-scripted"


def test_the_signature_holds_the_models_answer_changing_settings() -> None:
    engine = memory_engine()
    asked = [SystemMessage(content="Be brief."), HumanMessage(content="What is the refund policy?")]

    def signature(model: object) -> str:
        call = call_context(asked, ContextReport(session_id="s"), tools=[], scope=Scope(session_id="s"), model=model,
                            mode="session", registry=engine.registry, ledger=None)
        assert call is not None
        return call.signature

    model = ScriptedChatModel(model_name="m")
    assert model_identity(model.bind(temperature=0.0)) == model_identity(model)
    plain, cold = signature(model), signature(model.bind(temperature=0.0))
    assert len({plain, cold, signature(model.bind(temperature=1.0)), signature(model.bind(tool_choice="any")),
                signature(model.bind(temperature=0.0, max_tokens=50))}) == 5
    # how the answer travels is not part of it; the outer binding wins
    assert signature(model.bind(temperature=0.0, stream=True, timeout=30)) == cold
    # nor are its request headers (a per-request trace id, a rotated key)
    assert signature(model.bind(temperature=0.0, extra_headers={"X-Request-Id": "r-1"})) == cold
    assert signature(model.bind(temperature=0.0, extra_headers={"Authorization": "Bearer k2"})) == cold
    assert signature(model.bind(temperature=1.0).bind(temperature=0.0)) == cold
    # a model that names its parameters only to its traces (ChatOllama) is told by them
    from langchain_ollama import ChatOllama

    assert signature(ChatOllama(model="llama3", temperature=0.0)) != signature(ChatOllama(model="llama3", temperature=0.9))


def test_a_failed_tool_call_since_the_question_keeps_the_answer_out() -> None:
    engine = memory_engine()
    asked = [HumanMessage(content="Where is order W1?"),
             AIMessage(content="", tool_calls=[{"name": "track", "args": {}, "id": "c1", "type": "tool_call"}])]

    def ctx(messages: Sequence[BaseMessage]) -> CallContext:
        call = call_context(messages, ContextReport(session_id="s"), tools=[], scope=Scope(session_id="s"), model="m",
                            mode="session", registry=engine.registry, ledger=None)
        assert call is not None
        return call

    failed = [*asked, ToolMessage(content="Error: timeout", tool_call_id="c1", name="track", status="error")]
    worked = [*asked, ToolMessage(content="In transit.", tool_call_id="c1", name="track")]
    assert ctx(failed).failed and not ctx(worked).failed
    assert not ctx([*failed, AIMessage(content="Could not reach it."), HumanMessage(content="Try again?")]).failed
    cache = AnswerCache(MemoryAnswerCacheStore())
    assert cache.store_answer(ctx(failed), AIMessage(content="I could not reach the tracker.")) is None
    assert cache.store_answer(ctx(worked), AIMessage(content="It is in transit.")) is not None


def test_repeating_the_question_keeps_the_signature_and_the_key() -> None:
    engine = memory_engine()
    system = SystemMessage(content="Be brief.")
    first = [system, HumanMessage(content="What is the refund policy?")]
    again = [*first, AIMessage(content="30 days."), HumanMessage(content="what is the refund policy")]
    other = [*first, AIMessage(content="30 days."), HumanMessage(content="and for gift cards?")]

    def ctx(messages: Sequence[BaseMessage]) -> CallContext | None:
        return call_context(messages, ContextReport(session_id="s"), tools=[], scope=Scope(session_id="s"),
                            model="m", mode="session", registry=engine.registry, ledger=engine.facts)

    a, b, c = ctx(first), ctx(again), ctx(other)
    assert a is not None and b is not None and c is not None
    assert a.signature == b.signature and a.key == b.key
    assert a.signature != c.signature
    assert ctx([system]) is None  # no user question: nothing to key an answer by


def test_only_complete_final_answers_may_be_cached() -> None:
    assert uncacheable(AIMessage(content="Refunds take 5 days.")) is None
    call = {"name": "search", "args": {}, "id": "c1", "type": "tool_call"}
    assert uncacheable(AIMessage(content="Searching.", tool_calls=[call])) == "it calls tools"
    assert uncacheable(AIMessage(content="", additional_kwargs={"function_call": {"name": "f"}})) == "it calls tools"
    assert uncacheable(AIMessage(content="  ")) == "it is empty"
    assert uncacheable(AIMessage(content="Refunds take", response_metadata={"finish_reason": "length"})) == "it was cut short (length)"
    assert uncacheable(AIMessage(content="x", response_metadata={CACHE_META_KEY: {"hit": True}})) == "it was served from the cache"
    assert uncacheable(ToolMessage(content="x", tool_call_id="c1")) == "a ToolMessage is not a model answer"


@pytest.mark.parametrize(
    "metadata",
    [
        {"finish_reason": "MAX_TOKENS"},  # Gemini names its reasons in capitals
        {"finish_reason": "SAFETY"},
        {"finish_reason": "RECITATION"},
        {"stop_reason": "refusal"},  # Claude stopped by its safety classifier, mid-answer
        {"stop_reason": "model_context_window_exceeded"},
        {"stopReason": "max_tokens"},  # Bedrock Converse
        {"stopReason": "guardrail_intervened"},
        {"stopReason": "content_filtered"},
        {"done_reason": "length"},  # Ollama
        {"finish_reason": "model_length"},  # Mistral, at the model's context length
        {"finish_reason": "error"},  # Mistral, the generation failed
        {"stop_reason": "pause_turn"},  # Claude paused a long server-tool turn, to be resumed
        {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},  # OpenAI Responses
    ],
)
def test_answers_every_provider_reports_cut_short_are_not_cached(metadata: dict[str, object]) -> None:
    assert uncacheable(AIMessage(content="Refunds take", response_metadata=metadata)) is not None

