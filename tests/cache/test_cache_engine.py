"""The answer cache through the engine: hits, invalidation by facts, refs and TTL, scopes."""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._messages import annotation
from ctxplugin.cache import (
    CACHE_META_KEY,
    AnswerCache,
    ChromaAnswerCacheStore,
    MemoryAnswerCacheStore,
    call_context,
)
from ctxplugin.cache.context import CacheScope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import CacheConfig, CASConfig
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.testing import RequiredOnlyFactStore, ScriptedChatModel, tool_call
from ctxplugin.testing.cas_contract import FakeClock
from ctxplugin.tokens import content_text

SYSTEM = SystemMessage(content="You are a travel assistant. Be brief.")


def engine_with(scope: CacheScope = "session", *, clock: FakeClock | None = None, cas_ttl: float | None = None) -> ContextEngine:
    config = ContextConfig(cache=CacheConfig(enabled=True, scope=scope), cas=CASConfig(ttl_seconds=cas_ttl))
    clock = clock or FakeClock()
    return ContextEngine(
        config,
        cas=MemoryCASStore(clock=clock),
        facts=FactsLedger(MemoryFactStore(), config.facts),
        answer_cache=AnswerCache(MemoryAnswerCacheStore(), config.cache, clock=clock),
    )


def ask(
    engine: ContextEngine,
    model: ScriptedChatModel,
    text: str,
    scope: Scope,
    *,
    history: Sequence[BaseMessage] = (),
    system: SystemMessage = SYSTEM,
    tools: Sequence[Any] = (),
) -> AIMessage:
    """What a host does around one model call: prepare, look up, call, remember."""
    messages = [system, *history, HumanMessage(content=text)]
    prepared = engine.prepare(messages, tools=tools, scope=scope)
    cached = engine.cached_answer(messages, prepared, tools=tools, scope=scope, model=model)
    if cached is not None:
        assert prepared.report.cached_answer
        return cached
    reply = model.invoke(prepared.messages)
    assert isinstance(reply, AIMessage)
    engine.remember_answer(messages, prepared, reply, tools=tools, scope=scope, model=model)
    return reply


def scripted(*answers: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=[AIMessage(content=a) for a in answers], default=None)


S1 = Scope(session_id="s1", user_id="u1")


def test_off_by_default_and_one_switch_turns_it_on(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ContextEngine().cache is None
    monkeypatch.setenv("CTXPLUGIN_CACHE__ENABLED", "true")
    engine = ContextEngine()
    assert isinstance(engine.cache, AnswerCache)
    assert (engine.cache.config.threshold, engine.cache.config.ttl_seconds, engine.cache.config.scope) == (0.97, 3600, "session")


def test_a_disabled_cache_neither_looks_up_nor_stores() -> None:
    engine, model = ContextEngine(), scripted("Refunds take 5 days.", "Refunds take 6 days.")
    assert ask(engine, model, "How long do refunds take?", S1).content == "Refunds take 5 days."
    assert ask(engine, model, "How long do refunds take?", S1).content == "Refunds take 6 days."
    assert len(model.calls) == 2


def test_a_repeated_question_is_served_without_calling_the_model() -> None:
    engine, model = engine_with(), scripted("Refunds take 5 business days.")
    first = ask(engine, model, "How long do refunds take?", S1)
    history = [HumanMessage(content="How long do refunds take?"), first]
    again = ask(engine, model, "how long do refunds take", S1, history=history)
    assert len(model.calls) == 1
    assert again.content == "Refunds take 5 business days."
    assert again.id != first.id  # a new message in the state, not a replacement of the first
    assert again.response_metadata[CACHE_META_KEY]["hit"] is True
    assert again.usage_metadata is None


def test_tools_none_as_prepare_takes_it_is_a_call_without_tools() -> None:
    # prepare(messages, tools=None) is a call without tools; the cache pair, given the same
    # arguments as the docs ask, raised a TypeError from deep inside the signature
    engine, model = engine_with(), scripted("Refunds take 5 business days.")
    messages = [SYSTEM, HumanMessage(content="How long do refunds take?")]
    prepared = engine.prepare(messages, tools=None, scope=S1)
    assert engine.cached_answer(messages, prepared, tools=None, scope=S1, model=model) is None
    reply = model.invoke(prepared.messages)
    assert engine.remember_answer(messages, prepared, reply, tools=None, scope=S1, model=model)
    again = engine.prepare(messages, tools=None, scope=S1)
    served = engine.cached_answer(messages, again, tools=None, scope=S1, model=model)
    assert served is not None and served.content == "Refunds take 5 business days."
    assert ask(engine, model, "How long do refunds take?", S1).content == served.content  # tools=() too
    assert len(model.calls) == 1


def test_the_answer_is_invalidated_when_a_fact_it_used_is_superseded() -> None:
    engine, model = engine_with(), scripted("The Data Team is on Project Alpha.", "The Data Team is on Project Beta.")
    engine.facts.write("Data Team allocated to Project Alpha", key="data_team_allocation", scope=S1)
    question = "Which project is the Data Team on?"
    messages = [SYSTEM, HumanMessage(content=question)]
    prepared = engine.prepare(messages, scope=S1)
    assert prepared.report.facts, "the fact should be in the view"
    assert ask(engine, model, question, S1).text.endswith("Alpha.")
    assert ask(engine, model, question, S1).text.endswith("Alpha.")
    assert len(model.calls) == 1
    before = call_context(messages, prepared.report, tools=[], scope=S1, model=model, mode="session", registry=engine.registry, ledger=engine.facts)
    assert before is not None

    engine.facts.write("Data Team reallocated to Project Beta", key="data_team_allocation", scope=S1)
    # even asked in its own, old context the entry is refused as stale, and deleted
    assert isinstance(engine.cache, AnswerCache) and isinstance(engine.cache.store, MemoryAnswerCacheStore)
    stale = engine.cache.lookup(before, cas=engine.cas, ledger=engine.facts)
    assert not stale.hit and "superseded" in stale.reason
    assert engine.cache.store.get(before.key) is None
    assert ask(engine, model, question, S1).text.endswith("Beta.")
    assert len(model.calls) == 2
    assert ask(engine, model, question, S1).text.endswith("Beta.")
    assert len(model.calls) == 2


def test_entries_expire_after_the_ttl() -> None:
    clock = FakeClock()
    engine, model = engine_with(clock=clock), scripted("Bags are $35.", "Bags are $40.")
    ask(engine, model, "What does a checked bag cost?", S1)
    clock.advance(3599)
    assert ask(engine, model, "What does a checked bag cost?", S1).content == "Bags are $35."
    clock.advance(2)
    assert ask(engine, model, "What does a checked bag cost?", S1).content == "Bags are $40."
    assert len(model.calls) == 2


def flights_history() -> list[BaseMessage]:
    rows = [{"flight_number": f"HAT{i:03d}", "origin": "SFO", "destination": "JFK", "price": 100 + i} for i in range(60)]
    call = tool_call("search_flights", {"origin": "SFO", "destination": "JFK"}, call_id="c1")
    return [
        HumanMessage(content="Find flights from SFO to JFK"),
        AIMessage(content="", tool_calls=[call]),
        ToolMessage(content=json.dumps(rows), tool_call_id="c1", name="search_flights"),
    ]


def test_the_answer_is_invalidated_when_a_ref_it_used_expires() -> None:
    clock = FakeClock()
    engine, model = engine_with(clock=clock, cas_ttl=600), scripted("HAT000 is cheapest.", "It expired; search again.")
    history = flights_history()
    first = ask(engine, model, "Which flight is cheapest?", S1, history=history)
    assert engine.cache is not None
    assert ask(engine, model, "Which flight is cheapest?", S1, history=history).content == first.content
    assert len(model.calls) == 1
    clock.advance(601)
    assert ask(engine, model, "Which flight is cheapest?", S1, history=history).content == "It expired; search again."


def test_a_hit_checks_its_refs_without_reading_them(mocker: MockerFixture) -> None:
    engine, model = engine_with(), scripted("HAT000 is cheapest.")
    history = flights_history()
    ask(engine, model, "Which flight is cheapest?", S1, history=history)
    exists, get = mocker.spy(engine.cas, "exists"), mocker.spy(engine.cas, "get")
    assert ask(engine, model, "Which flight is cheapest?", S1, history=history).content == "HAT000 is cheapest."
    assert len(model.calls) == 1
    assert exists.call_count >= 1 and all(call.args[0].startswith("ref:") for call in exists.call_args_list)
    assert get.call_count == 0, "the stored output is neither loaded nor counted as read"


def test_no_hit_across_users_or_sessions_by_default() -> None:
    engine, model = engine_with(), scripted("A", "B", "C")
    ask(engine, model, "What is the refund policy?", Scope(session_id="s1", user_id="u1"))
    ask(engine, model, "What is the refund policy?", Scope(session_id="s1", user_id="u2"))
    ask(engine, model, "What is the refund policy?", Scope(session_id="s2", user_id="u1"))
    assert len(model.calls) == 3


def test_user_scope_shares_across_a_users_sessions_only() -> None:
    engine, model = engine_with("user"), scripted("A", "B", "C")
    ask(engine, model, "What is the refund policy?", Scope(session_id="s1", user_id="u1"))
    assert ask(engine, model, "What is the refund policy?", Scope(session_id="s2", user_id="u1")).content == "A"
    assert ask(engine, model, "What is the refund policy?", Scope(session_id="s3", user_id="u2")).content == "B"
    assert ask(engine, model, "What is the refund policy?", Scope(session_id="s4")).content == "C"  # no user: own session
    assert len(model.calls) == 3


def test_global_scope_shares_within_a_tenant_but_never_private_data() -> None:
    engine, model = engine_with("global"), scripted("A", "B", "C", "D")
    ask(engine, model, "What is the refund policy?", Scope(session_id="s1", user_id="u1"))
    assert ask(engine, model, "What is the refund policy?", Scope(session_id="s2", user_id="u2")).content == "A"
    assert ask(engine, model, "What is the refund policy?", Scope(session_id="s3", user_id="u3", tenant_id="t2")).content == "B"
    # an answer built from u1's own tool output is not served to u2, whose conversation lacks it
    history = flights_history()
    ask(engine, model, "Which flight is cheapest?", Scope(session_id="s1", user_id="u1"), history=history)
    assert ask(engine, model, "Which flight is cheapest?", Scope(session_id="s2", user_id="u2")).content == "D"
    assert len(model.calls) == 4


def test_answers_with_tool_calls_are_never_cached() -> None:
    engine = engine_with()
    model = ScriptedChatModel(script=[
        AIMessage(content="Let me look.", tool_calls=[tool_call("search_flights", {"origin": "SFO"})]),
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO"})]),
    ], default=None)
    ask(engine, model, "Find flights from SFO", S1)
    ask(engine, model, "Find flights from SFO", S1)
    assert len(model.calls) == 2
    assert isinstance(engine.cache, AnswerCache) and isinstance(engine.cache.store, MemoryAnswerCacheStore)
    assert len(engine.cache.store) == 0


def test_anything_new_in_the_context_is_a_miss() -> None:
    engine, model = engine_with(), scripted(*"ABCDEFG")
    question = "What is the baggage allowance?"
    ask(engine, model, question, S1)
    ask(engine, model, question, S1, system=SystemMessage(content="You are a pirate."))
    ask(engine, model, question, S1, history=[HumanMessage(content="I fly business class."), AIMessage(content="Noted.")])
    ask(engine, model, question, S1, history=flights_history())
    other_model = scripted("H").model_copy(update={"model_name": "another-model"})
    ask(engine, other_model, question, S1)
    from langchain_core.tools import tool

    @tool
    def get_user(user_id: str) -> str:
        """Get a user."""
        return user_id

    ask(engine, model, question, S1, tools=[get_user])
    assert len(model.calls) + len(other_model.calls) == 6


def test_near_duplicates_hit_and_different_places_ids_and_numbers_miss() -> None:
    engine = engine_with()
    model = ScriptedChatModel(default="an answer")
    ask(engine, model, "How long does shipping to Portland take for order #W1234?", S1)
    for same in ("how long does shipping to Portland take for order W1234", "Hi! How long does shipping to portland take for order #W1234??"):
        assert ask(engine, model, same, S1).response_metadata.get(CACHE_META_KEY), same
    for different in (
        "How long does shipping to Seattle take for order #W1234?",
        "How long does shipping to Portland take for order #W1235?",
        "How long does shipping to Portland take for order #W1234 and #W1236?",
    ):
        assert CACHE_META_KEY not in ask(engine, model, different, S1).response_metadata, different
    assert len(model.calls) == 4


def test_a_failing_cache_store_calls_the_model_and_warns(mocker: MockerFixture) -> None:
    engine, model = engine_with(), scripted("A", "B")
    assert engine.cache is not None
    mocker.patch.object(engine.cache.store, "candidates", side_effect=StoreUnavailableError("cache server down"))
    mocker.patch.object(engine.cache.store, "put", side_effect=StoreUnavailableError("cache server down"))
    messages = [SYSTEM, HumanMessage(content="What is the refund policy?")]
    prepared = engine.prepare(messages, scope=S1)
    assert engine.cached_answer(messages, prepared, scope=S1, model=model) is None
    assert not engine.remember_answer(messages, prepared, AIMessage(content="A"), scope=S1, model=model)
    assert [w for w in prepared.report.warnings if "answer cache unavailable" in w] and len(prepared.report.warnings) >= 2


def test_the_embedded_engine_keeps_answers_in_chroma_across_restarts(tmp_path: Path) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    model = scripted("Refunds take 5 days.")
    first = ContextEngine.embedded(tmp_path / "store", config)
    assert first.cache is not None and isinstance(first.cache.store, ChromaAnswerCacheStore)
    ask(first, model, "How long do refunds take?", S1)
    second = ContextEngine.embedded(tmp_path / "store", config)
    assert ask(second, model, "How long do refunds take?", S1).content == "Refunds take 5 days."
    assert len(model.calls) == 1


def test_a_scope_id_with_undecodable_bytes_is_served_from_embedded_chroma(tmp_path: Path) -> None:
    # ids decoded with surrogateescape hold lone surrogates; the cache must neither raise to
    # the host nor serve the answer to the tenant whose id differs by those bytes
    config = ContextConfig(cache=CacheConfig(enabled=True))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    odd = Scope(session_id="s1", user_id="u1", tenant_id="acme\udcff")
    model = scripted("Refunds take 5 days.", "Refunds take a week.")
    assert ask(engine, model, "How long do refunds take?", odd).content == "Refunds take 5 days."
    assert ask(engine, model, "How long do refunds take?", odd).content == "Refunds take 5 days."
    assert len(model.calls) == 1
    other = Scope(session_id="s1", user_id="u1", tenant_id="acme\ufffd")
    assert ask(engine, model, "How long do refunds take?", other).content == "Refunds take a week."


async def test_async_pair_serves_and_stores() -> None:
    engine, model = engine_with(), scripted("Refunds take 5 days.")
    messages = [SYSTEM, HumanMessage(content="How long do refunds take?")]
    prepared = await engine.aprepare(messages, scope=S1)
    assert await engine.acached_answer(messages, prepared, scope=S1, model=model) is None
    assert await engine.aremember_answer(messages, prepared, AIMessage(content="Refunds take 5 days."), scope=S1, model=model)
    again = await engine.aprepare(messages, scope=S1)
    hit = await engine.acached_answer(messages, again, scope=S1, model=model)
    assert hit is not None and hit.content == "Refunds take 5 days." and again.report.cached_answer


def payments(masked: bool) -> str:
    card = "****-****-****" if masked else "4111-1111-1111"
    return json.dumps([{"payment_id": f"PAY-{i:04d}", "card": f"{card}-{i:04d}", "amount": i} for i in range(40)])




@tool
def list_payments(customer: str) -> str:
    """List a customer's card payments."""
    return payments(masked=False)


def payments_engine(stores: str, path: Path) -> ContextEngine:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    if stores == "embedded chroma":
        return ContextEngine.embedded(path / "store", config)
    facts = FactsLedger(MemoryFactStore() if stores == "memory" else RequiredOnlyFactStore(), config.facts)
    return ContextEngine(config, cas=MemoryCASStore(), facts=facts, answer_cache=MemoryAnswerCacheStore())


def payments_history(output: ToolMessage) -> list[BaseMessage]:
    call = tool_call("list_payments", {"customer": "c1"}, call_id="c1")
    return [HumanMessage("Which card paid PAY-0003?", id="h1"), AIMessage("", tool_calls=[call], id="a1"), output,
            AIMessage("Let me look at the payments.", id="a2")]


QUESTION = "Which card paid PAY-0003?"


@pytest.mark.parametrize("stores", ["memory", "embedded chroma"])
def test_an_answer_built_from_a_tool_output_the_host_replaced_is_not_served(tmp_path: Path, stores: str) -> None:
    """A chat history keeps a tool output whole, annotated with its ref; a PII filter then
    masks the card numbers in it. The answer given from the unmasked output must not be served
    for the masked conversation."""
    engine = payments_engine(stores, tmp_path)
    model = scripted("PAY-0003 was paid with 4111-1111-1111-0003.", "PAY-0003 was paid with the card ending 0003.")
    original = ToolMessage(content=payments(masked=False), tool_call_id="c1", name="list_payments", id="t1")
    compact = engine.capture_tool_result(original, scope=S1)
    kept = original.model_copy(update={"additional_kwargs": compact.additional_kwargs})  # as ContextChatHistory keeps it
    assert annotation(kept).get("ref")
    first = ask(engine, model, QUESTION, S1, history=payments_history(kept))
    assert ask(engine, model, QUESTION, S1, history=payments_history(kept)).content == first.content
    assert len(model.calls) == 1
    masked = kept.model_copy(update={"content": payments(masked=True)})  # what PIIMiddleware does
    answer = ask(engine, model, QUESTION, S1, history=payments_history(masked))
    assert "4111" not in answer.text and len(model.calls) == 2
    assert ask(engine, model, QUESTION, S1, history=payments_history(masked)).content == answer.content
    assert len(model.calls) == 2, "the answer to the masked conversation is served"


@pytest.mark.parametrize("stores", ["memory", "embedded chroma", "facts store without withdraw"])
def test_an_answer_that_used_withdrawn_facts_is_not_served(tmp_path: Path, stores: str) -> None:
    """The facts read from a tool output are withdrawn once the host masks it: an answer whose
    view showed them is refused (and deleted) even asked in its own, old context, also when
    the facts store cannot delete them."""
    engine = payments_engine(stores, tmp_path)
    model = scripted("PAY-0003 was paid with 4111-1111-1111-0003.")
    original = ToolMessage(content=payments(masked=False), tool_call_id="c1", name="list_payments", id="t1")
    messages = [SYSTEM, *payments_history(original), HumanMessage(content=QUESTION)]
    ask(engine, model, QUESTION, S1, history=payments_history(original), tools=[list_payments])
    prepared = engine.prepare(messages, tools=[list_payments], scope=S1)
    before = call_context(messages, prepared.report, tools=[list_payments], scope=S1, model=model, mode="session", registry=engine.registry, ledger=engine.facts)
    assert before is not None and any("4111" in f.text for f in engine.facts.store.get(list(before.facts), reader=S1))
    assert engine.cache is not None and engine.cache.lookup(before, cas=engine.cas, ledger=engine.facts).hit
    masked = original.model_copy(update={"content": payments(masked=True)})
    engine.prepare([SYSTEM, *payments_history(masked), HumanMessage(content=QUESTION)], tools=[list_payments], scope=S1)
    stale = engine.cache.lookup(before, cas=engine.cas, ledger=engine.facts)
    assert not stale.hit and "withdrawn" in stale.reason, stale.reason
    assert engine.cache.store.candidates(before.partition, before.signature, QUESTION.lower(), now=time.time(), n=4) == []


def test_a_question_that_differs_by_an_operator_or_sign_goes_to_the_model(tmp_path: Path) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    model = scripted("4", "0", "-5 degrees is set.", "5 degrees is set.", "Yes, 5%.", "No fee.")
    assert ask(engine, model, "What is 2+2?", S1).content == "4"
    assert ask(engine, model, "What is 2-2?", S1).content == "0"
    assert ask(engine, model, "Set the thermostat to -5 degrees", S1).content == "-5 degrees is set."
    assert ask(engine, model, "Set the thermostat to 5 degrees", S1).content == "5 degrees is set."
    assert ask(engine, model, "Is the fee 5%?", S1).content == "Yes, 5%."
    assert ask(engine, model, "Is the fee 5?", S1).content == "No fee."
    assert ask(engine, model, "what is 2 + 2", S1).content == "4"  # spacing alone still hits
    assert len(model.calls) == 6


def test_a_name_written_in_another_case_goes_to_the_model() -> None:
    # getUser and getuser are two functions, aBc12X and AbC12x two tickets in a case-sensitive
    # system: the answer about one is not the answer about the other
    engine = engine_with(scope="user")
    model = ScriptedChatModel(default="an answer")
    cases = [  # (asked first, the same question otherwise worded, another name)
        ("What does getUser do?", "WHAT DOES getUser DO", "What does getuser do?"),
        ("What is the status of ticket aBc12X?", "what is the status of ticket aBc12X", "What is the status of ticket AbC12x?"),
        ("What does /src/App.py do?", "what does /src/App.py do", "What does /src/app.py do?"),
    ]
    for n, (first, same, other) in enumerate(cases):
        ask(engine, model, first, Scope(session_id=f"a{n}", user_id="u1"))
        assert ask(engine, model, same, Scope(session_id=f"b{n}", user_id="u1")).response_metadata.get(CACHE_META_KEY), same
        assert CACHE_META_KEY not in ask(engine, model, other, Scope(session_id=f"c{n}", user_id="u1")).response_metadata, other
    assert len(model.calls) == 6


def weather(messages: list[BaseMessage], tools: list[Any]) -> AIMessage:
    """A model that answers in the unit the conversation asked for last."""
    said = [m.content for m in messages if isinstance(m, HumanMessage)]
    if said[-1] != "How warm is it in Paris?":
        return AIMessage(content="Noted.")
    celsius = max((i for i, t in enumerate(said) if t == "Use Celsius."), default=-1)
    fahrenheit = max((i for i, t in enumerate(said) if t == "Use Fahrenheit."), default=-1)
    return AIMessage(content="It is 20°C in Paris." if celsius > fahrenheit else "It is 68°F in Paris.")


@pytest.mark.parametrize("mode", ["session", "user"])
def test_the_order_of_earlier_messages_is_part_of_the_context(tmp_path: Path, mode: CacheScope) -> None:
    # the last word on the unit is the one in force: "Use Celsius." after "Use Fahrenheit." asks
    # for another answer than the other way round, in one thread or in two of one user
    config = ContextConfig(cache=CacheConfig(enabled=True, scope=mode))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    model = ScriptedChatModel(script=[weather] * 12, default=None)

    def chat(scope: Scope, *texts: str) -> str:
        history: list[BaseMessage] = []
        for text in texts:
            history += [HumanMessage(content=text), ask(engine, model, text, scope, history=history)]
        return str(history[-1].content)

    assert chat(S1, "Use Celsius.", "Use Fahrenheit.", "How warm is it in Paris?") == "It is 68°F in Paris."
    # the same thread going back to Celsius, and another thread of the same user
    assert chat(S1, "Use Celsius.", "Use Fahrenheit.", "Use Celsius.", "How warm is it in Paris?") == "It is 20°C in Paris."
    other = Scope(session_id="s2", user_id="u1")
    assert chat(other, "Use Fahrenheit.", "Use Celsius.", "How warm is it in Paris?") == "It is 20°C in Paris."


def test_an_answer_a_provider_cut_short_is_asked_again(tmp_path: Path) -> None:
    config = ContextConfig(cache=CacheConfig(enabled=True))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    cut = AIMessage(content="Refunds take", response_metadata={"finish_reason": "MAX_TOKENS"})
    model = ScriptedChatModel(script=[cut, AIMessage(content="Refunds take 5 days.")], default=None)
    assert ask(engine, model, "How long do refunds take?", S1).content == "Refunds take"
    assert ask(engine, model, "How long do refunds take?", S1).content == "Refunds take 5 days."
    assert len(model.calls) == 2



def test_a_served_answer_does_not_chain_the_next_call_to_another_conversation(tmp_path: Path) -> None:
    # an OpenAI Responses answer names its response and output items; a model set to
    # use_previous_response_id continues from the last answer's response id, so a served answer
    # that kept it would hand the next call another session's server-side conversation
    from langchain_openai import ChatOpenAI

    config = ContextConfig(cache=CacheConfig(enabled=True, scope="user"))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    made = AIMessage(
        content=[{"type": "reasoning", "id": "rs_a1", "summary": []}, {"type": "text", "text": "Refunds take 5 days.", "id": "msg_a1"}],
        additional_kwargs={"reasoning": {"id": "rs_a1", "type": "reasoning", "summary": []}},
        response_metadata={"id": "resp_a1", "model_name": "gpt-5", "status": "completed"},
    )
    model = ScriptedChatModel(script=[made], default=None)
    ask(engine, model, "How long do refunds take?", S1)
    other = Scope(session_id="s2", user_id="u1")
    served = ask(engine, model, "How long do refunds take?", other)
    assert len(model.calls) == 1 and content_text(served.content) == "Refunds take 5 days."
    llm = ChatOpenAI(model="gpt-5", api_key="sk-test", use_responses_api=True, use_previous_response_id=True)
    payload = llm._get_request_payload([HumanMessage(content="How long do refunds take?"), served, HumanMessage(content="And for gift cards?")])
    assert "previous_response_id" not in payload
    assert "rs_a1" not in json.dumps(payload) and "msg_a1" not in json.dumps(payload)
    assert [item.get("role") for item in payload["input"]] == ["user", "assistant", "user"]


def test_a_shorter_ttl_applies_to_answers_stored_under_a_longer_one(tmp_path: Path) -> None:
    # an operator who lowers cache.ttl_seconds because answers went stale expects no answer older
    # than the new TTL to be served, including the ones stored before the change
    clock, model = FakeClock(), scripted("Bags are $35.", "Bags are $40.")

    def engine(ttl: float) -> ContextEngine:
        config = ContextConfig(cache=CacheConfig(enabled=True, ttl_seconds=ttl))
        store = ChromaAnswerCacheStore.persistent(tmp_path / "chroma")
        return ContextEngine(config, cas=MemoryCASStore(clock=clock), answer_cache=AnswerCache(store, config.cache, clock=clock))

    before = engine(3600)
    ask(before, model, "What does a checked bag cost?", S1)
    assert before.cache is not None and isinstance(before.cache.store, ChromaAnswerCacheStore)
    before.cache.store.close()
    after = engine(60)
    clock.advance(30)
    assert ask(after, model, "What does a checked bag cost?", S1).content == "Bags are $35."
    clock.advance(31)
    assert ask(after, model, "What does a checked bag cost?", S1).content == "Bags are $40."


def test_a_served_answer_that_searched_the_web_is_still_a_valid_request(tmp_path: Path) -> None:
    # a Claude answer that used its web search tool pairs a server_tool_use block, whose id the
    # API requires, with the result that names it; both must go back to the model intact
    from langchain_anthropic import ChatAnthropic

    config = ContextConfig(cache=CacheConfig(enabled=True, scope="user"))
    engine = ContextEngine.embedded(tmp_path / "store", config)
    made = AIMessage(
        content=[
            {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "refunds"}},
            {"type": "web_search_tool_result", "tool_use_id": "srvtoolu_1", "content": []},
            {"type": "text", "text": "Refunds take 5 days."},
        ],
        response_metadata={"id": "msg_a1", "stop_reason": "end_turn"},
    )
    model = ScriptedChatModel(script=[made], default=None)
    ask(engine, model, "How long do refunds take?", S1)
    served = ask(engine, model, "How long do refunds take?", Scope(session_id="s2", user_id="u1"))
    assert len(model.calls) == 1
    llm = ChatAnthropic(model="claude-sonnet-4-5", api_key="sk-test")
    payload = llm._get_request_payload([HumanMessage(content="How long do refunds take?"), served, HumanMessage(content="And for gift cards?")])
    blocks = payload["messages"][1]["content"]
    assert blocks[0] == {"type": "server_tool_use", "id": "srvtoolu_1", "name": "web_search", "input": {"query": "refunds"}}
    assert blocks[1]["tool_use_id"] == "srvtoolu_1"


def test_an_answer_building_on_an_earlier_reply_is_not_served_after_another_reply() -> None:
    # "double it" after "7" was answered "14"; after "3" (a regenerated reply, an expired entry,
    # another conversation) it is another question, not a repeat of the first
    engine = engine_with("user")
    seven = [HumanMessage(content="Pick a number between 1 and 10."), AIMessage(content="7")]
    assert ask(engine, scripted("14"), "Double it.", Scope(session_id="a", user_id="u1"), history=seven).content == "14"
    three = [HumanMessage(content="Pick a number between 1 and 10."), AIMessage(content="3")]
    model = scripted("6")
    assert ask(engine, model, "Double it.", Scope(session_id="b", user_id="u1"), history=three).content == "6"
    assert len(model.calls) == 1
    # the same reply (however it is cased or punctuated) is the same context: served
    again = scripted("unused")
    same = [HumanMessage(content="Pick a number between 1 and 10."), AIMessage(content="7.")]
    assert ask(engine, again, "double it", Scope(session_id="c", user_id="u1"), history=same).content == "14"
    assert again.calls == []


def test_a_tool_call_the_assistant_made_for_an_earlier_question_is_part_of_the_context() -> None:
    engine = engine_with("user")
    def history(city: str) -> list[BaseMessage]:
        call = tool_call("get_weather", {"city": city}, "c1")
        return [
            HumanMessage(content="What's the weather like?"),
            AIMessage(content="", tool_calls=[call]),
            ToolMessage(content="sunny", tool_call_id="c1", name="get_weather"),
            AIMessage(content="Sunny."),
        ]
    assert ask(engine, scripted("Yes, it is."), "Is it warm?", Scope(session_id="a", user_id="u1"), history=history("Rome")).content == "Yes, it is."
    model = scripted("No.")
    assert ask(engine, model, "Is it warm?", Scope(session_id="b", user_id="u1"), history=history("Oslo")).content == "No."
    assert len(model.calls) == 1


def test_a_repeat_after_a_thanks_is_still_served_though_the_assistant_answered_both() -> None:
    engine, model = engine_with(), scripted("Refunds take 5 business days.")
    first = ask(engine, model, "How long do refunds take?", S1)
    history = [
        HumanMessage(content="How long do refunds take?"), first,
        HumanMessage(content="thanks!"), AIMessage(content="You're welcome."),
    ]
    again = ask(engine, model, "how long do refunds take", S1, history=history)
    assert again.content == "Refunds take 5 business days." and len(model.calls) == 1
