"""A tool output its host replaces after capture (a PII filter masking a card number): the facts
read from the old content are withdrawn before any later call can show them."""

from __future__ import annotations

import json
import re
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import FactQuery, FactsLedger
from ctxplugin.testing import RequiredOnlyFactStore, memory_engine

CARD = re.compile(r"4111-1111-\d{4}-\d{4}")


def payments(masked: bool) -> str:
    rows = [
        {"payment_id": f"PAY-{i:04d}", "card": f"****-****-****-{i:04d}" if masked else f"4111-1111-1111-{i:04d}", "amount": i}
        for i in range(40)
    ]
    return json.dumps(rows)


def call(content: str) -> list[BaseMessage]:
    return [
        HumanMessage("Which cards did customer c1 pay with?", id="h1"),
        AIMessage("", tool_calls=[{"name": "list_payments", "args": {"customer": "c1"}, "id": "call_1"}], id="a1"),
        ToolMessage(content, tool_call_id="call_1", name="list_payments", id="t1"),
    ]


@tool
def list_payments(customer: str) -> str:
    """List a customer's card payments."""
    return payments(masked=False)


def later() -> list[BaseMessage]:
    # the host has since let the tool output go (summarized, trimmed): only the facts carry it
    return [
        HumanMessage("Which cards did customer c1 pay with?", id="h1"),
        AIMessage("Forty payments, one card each.", id="a2"),
        HumanMessage("Remind me: which card paid PAY-0003?", id="h2"),
    ]


def stored(engine: ContextEngine, scope: Scope) -> list[str]:
    return [fact.text for fact in engine.facts.store.find(FactQuery(reader=scope))]


def shown(messages: list[BaseMessage]) -> str:
    return str([m.content for m in messages])


def test_prepare_withdraws_the_facts_of_an_output_masked_after_capture() -> None:
    engine, scope = memory_engine(), Scope(session_id="mask-1")
    original = call(payments(masked=False))[-1]
    assert isinstance(original, ToolMessage)
    engine.capture_tool_result(original.model_copy(update={"id": None}), scope=scope)
    assert any(CARD.search(text) for text in stored(engine, scope)), "the capture read the card numbers"
    first = engine.prepare(call(payments(masked=True)), scope=scope)
    assert not CARD.search(shown(first.messages))
    assert not any(CARD.search(text) for text in stored(engine, scope))
    assert any("****-****-****-0003" in text for text in stored(engine, scope)), "the masked output is read"
    # facts read from tools are shown as a lookup the model made: the call binds a tool
    second = engine.prepare(later(), tools=[list_payments], scope=scope)
    assert "****-****-****-0003" in shown(second.messages), "the facts block shows what the masked output said"
    assert not CARD.search(shown(second.messages))


def test_an_unchanged_output_seen_again_keeps_its_facts() -> None:
    engine, scope = memory_engine(), Scope(session_id="mask-2")
    messages = call(payments(masked=False))
    engine.capture_tool_result(messages[-1].model_copy(update={"id": None}), scope=scope)
    before = sorted(stored(engine, scope))
    engine.prepare(messages, scope=scope)
    engine.prepare([*messages, AIMessage("Forty payments.", id="a2"), later()[-1]], scope=scope)
    assert sorted(stored(engine, scope)) == before


def test_a_failed_withdrawal_is_a_warning_and_is_done_on_the_next_call(mocker: MockerFixture) -> None:
    engine, scope = memory_engine(), Scope(session_id="mask-3")
    engine.capture_tool_result(call(payments(masked=False))[-1], scope=scope)
    store: Any = engine.facts.store
    mocker.patch.object(store, "withdraw", side_effect=StoreUnavailableError("facts server down"))
    failed = engine.prepare(call(payments(masked=True)), scope=scope)
    assert any("facts server down" in w for w in failed.report.warnings)
    assert not CARD.search(shown(failed.messages)), "without facts the call still shows only the masked output"
    mocker.stopall()
    engine.prepare(call(payments(masked=True)), scope=scope)
    assert not any(CARD.search(text) for text in stored(engine, scope))


def test_an_output_the_host_marks_replaced_is_withdrawn_by_an_engine_that_never_captured_it() -> None:
    # another process captured it; the LangGraph adapters mark an annotation the content no
    # longer matches as replaced
    first, scope = memory_engine(), Scope(session_id="mask-4")
    first.capture_tool_result(call(payments(masked=False))[-1], scope=scope)
    other = ContextEngine(config=first.config, cas=first.cas, facts=first.facts)
    messages = call(payments(masked=True))
    marked = messages[-1].model_copy(update={"additional_kwargs": {"ctxplugin": {"replaced": True}}})
    other.prepare([*messages[:-1], marked], scope=scope)
    assert not any(CARD.search(text) for text in stored(other, scope))


def test_two_outputs_sharing_a_tool_call_id_both_keep_their_facts() -> None:
    # some recordings give several outputs one call id: a second output is not a replacement
    engine, scope = memory_engine(), Scope(session_id="mask-5")
    messages = call(payments(masked=False))
    engine.prepare(messages, scope=scope)
    before = set(stored(engine, scope))
    second = ToolMessage('{"order": "W12", "status": "shipped", "carrier": "UPS"}', tool_call_id="call_1", name="orders", id="t2")
    engine.prepare([*messages, AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "call_1"}], id="a2"), second], scope=scope)
    after = set(stored(engine, scope))
    assert before <= after and len(after) > len(before)




def test_a_store_that_cannot_withdraw_leaves_the_stale_facts_out_with_one_warning() -> None:
    config = ContextConfig()
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(RequiredOnlyFactStore(), config.facts))
    scope = Scope(session_id="mask-6")
    original = call(payments(masked=False))[-1]
    assert isinstance(original, ToolMessage)
    engine.capture_tool_result(original.model_copy(update={"id": None}), scope=scope)
    first = engine.prepare(call(payments(masked=True)), scope=scope)
    notes = [w for w in first.report.warnings if "could not be withdrawn" in w]
    assert len(notes) == 1 and "withdraw" in notes[0] and "left out of the facts block" in notes[0], first.report.warnings
    assert any(CARD.search(text) for text in stored(engine, scope)), "the store keeps them: it cannot delete"
    for messages in (later(), [*later(), AIMessage("PAY-0003 was paid by card.", id="a3"), HumanMessage("and PAY-0007?", id="h3")]):
        again = engine.prepare(messages, tools=[list_payments], scope=scope)
        assert "****-****-****-0003" in shown(again.messages), "facts of the masked output are shown"
        assert not CARD.search(shown(again.messages)), "no fact of the replaced output is"
        assert not any("could not be withdrawn" in w for w in again.report.warnings), "nothing withdrawn in this call"


def test_a_facts_block_frozen_before_the_output_was_replaced_is_chosen_again() -> None:
    config = ContextConfig(facts={"placement": "window"})
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(RequiredOnlyFactStore(), config.facts))
    scope = Scope(session_id="mask-7")
    question = HumanMessage("Remind me: which card paid PAY-0003?", id="h2")
    before = engine.prepare([*call(payments(masked=False)), AIMessage("Forty payments.", id="a2"), question], tools=[list_payments], scope=scope)
    assert "4111-1111-1111-0003" in shown(before.messages)
    after = engine.prepare([*call(payments(masked=True)), AIMessage("Forty payments.", id="a2"), question], tools=[list_payments], scope=scope)
    assert not CARD.search(shown(after.messages))
    assert any("could not be withdrawn" in w for w in after.report.warnings)
