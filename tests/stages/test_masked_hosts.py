"""A tool output kept whole with its ref annotation, outside LangGraph, that its host masks after
capture (a PII filter replacing card numbers): no later request to the model holds a card
number, in a message or in the facts block, and the view shows the masked output (or a compact
form made from it), never the compact form made from the original."""

from __future__ import annotations

import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import tool

from ctxplugin import ContextEngine, Scope
from ctxplugin._messages import META_KEY, annotation
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import RefNotFoundError
from ctxplugin.facts import FactQuery
from ctxplugin.guard import unwrap
from ctxplugin.testing import ScriptedChatModel, conversation_messages, memory_engine, tool_call

CARD = re.compile(r"4111-1111-\d{4}-\d{4}")


def payments(masked: bool) -> str:
    # a log: its compact form quotes its last lines, card numbers and all
    card = "****-****-****-" if masked else "4111-1111-1111-"
    lines = [f"2026-01-{i % 28 + 1:02d} payment PAY-{i:04d} charged card {card}{i:04d} amount {i}.00 USD" for i in range(60)]
    return "\n".join(lines)


@tool
def list_payments(customer: str) -> str:
    """List a customer's card payments."""
    return payments(masked=False)


def mask(message: BaseMessage) -> BaseMessage:
    """What a PII filter does to a message the host keeps: the content masked, the rest kept."""
    if not isinstance(message, ToolMessage) or not isinstance(message.content, str):
        return message
    return message.model_copy(update={"content": re.sub(r"4111-1111-1111-", "****-****-****-", message.content)})


def sent(model: ScriptedChatModel, start: int) -> str:
    return str([[m.content for m in call.messages] for call in model.calls[start:]])


def tool_shown(messages: list[BaseMessage]) -> str:
    return next(str(m.content) for m in conversation_messages(messages) if isinstance(m, ToolMessage))


def stored(engine: ContextEngine, scope: Scope) -> list[str]:
    return [fact.text for fact in engine.facts.store.find(FactQuery(reader=scope))]


def shown_ref(text: str) -> str:
    return "ref:" + text.split("ref:", 1)[1].split()[0]


@pytest.mark.parametrize("restarted", [False, True], ids=["same-process", "restarted"])
def test_a_plain_engine_host_that_masks_a_kept_original_sends_no_card_number(restarted: bool) -> None:
    captured_by = memory_engine()
    # after a restart the process serving the next turn learns of the masking from the message alone
    engine = ContextEngine(config=captured_by.config, cas=captured_by.cas, facts=captured_by.facts) if restarted else captured_by
    scope = Scope(session_id=f"plain-mask-{restarted}")
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[tool_call("list_payments", {"customer": "c1"})])], default="Noted.")
    messages: list[BaseMessage] = [HumanMessage("Which cards did customer c1 pay with?", id="h1")]
    reply = model.invoke(engine.prepare(messages, tools=[list_payments], scope=scope).messages)
    messages.append(reply)
    output = list_payments.invoke(reply.tool_calls[0])
    compact = captured_by.capture_tool_result(output, scope=scope)
    # the host keeps the original, with the ref annotation capture gave it
    messages.append(output.model_copy(update={"additional_kwargs": {META_KEY: annotation(compact)}}))
    assert any(CARD.search(text) for text in stored(engine, scope)), "the capture read the card numbers"
    messages = [mask(m) for m in messages]
    start = len(model.calls)
    view = engine.prepare(messages, tools=[list_payments], scope=scope)
    messages.append(model.invoke(view.messages))
    shown = tool_shown(view.messages)
    assert "****-****-****-" in shown and not CARD.search(shown)
    assert shown_ref(shown) != annotation(compact)["ref"], "a compact form of the masked output, not of the original"
    assert engine.expand_ref(shown_ref(shown), scope=scope) == messages[2].content
    for question in ["Remind me: which card paid PAY-0003?", "And which card paid PAY-0007?"]:
        messages.append(HumanMessage(question, id=f"h{len(messages)}"))
        messages.append(model.invoke(engine.prepare(messages, tools=[list_payments], scope=scope).messages))
    assert not CARD.search(sent(model, start)), "a masked card number reached the model"
    assert not any(CARD.search(text) for text in stored(engine, scope)), "the facts read before masking are withdrawn"
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(annotation(compact)["ref"], scope=scope)
    assert engine.cas.stats()["contents"] == 1, "the CAS keeps the masked output only"  # type: ignore[union-attr]


@pytest.mark.filterwarnings("ignore:RunnableWithMessageHistory is deprecated")
@pytest.mark.parametrize("stores", ["memory", "embedded"])
def test_a_chat_history_masked_after_capture_sends_no_card_number(stores: str, tmp_path: Path) -> None:
    # an embedded engine keeps the conversation in SQLite: every call reads it back as new objects
    engine = memory_engine() if stores == "memory" else ContextEngine.embedded(path=tmp_path / "ctx")
    model = ScriptedChatModel(script=[AIMessage("", tool_calls=[tool_call("list_payments", {"customer": "c1"})])], default="Noted.")
    chain: Any = RunnableWithMessageHistory(model.bind_tools([list_payments]), lambda sid: engine.history(sid))
    config: Any = {"configurable": {"session_id": "chat-mask"}}
    reply = chain.invoke([HumanMessage("Which cards did customer c1 pay with?")], config)
    history = engine.history("chat-mask")
    history.add_messages([list_payments.invoke(call) for call in reply.tool_calls])
    scope = Scope(session_id="chat-mask")
    assert any(CARD.search(text) for text in stored(engine, scope)), "the capture read the card numbers"
    # the host's PII filter rewrites the conversation it keeps
    original_ref = next(annotation(m)["ref"] for m in history.full_messages if isinstance(m, ToolMessage))
    masked = [mask(m) for m in history.full_messages]
    history.clear()
    history.add_messages(masked)
    start = len(model.calls)
    for question in ["Thanks. Which card paid PAY-0003?", "And which card paid PAY-0007?"]:
        chain.invoke([HumanMessage(question)], config)
    assert not CARD.search(sent(model, start)), "a masked card number reached the model"
    shown = tool_shown(engine.history("chat-mask").messages)
    assert "****-****-****-" in shown and not CARD.search(shown)
    kept = next(m for m in engine.history("chat-mask").full_messages if isinstance(m, ToolMessage))
    assert engine.expand_ref(shown_ref(shown), scope=scope) == kept.content
    assert not CARD.search(str(kept.additional_kwargs)), "the stored conversation kept an unmasked compact form"
    assert not any(CARD.search(text) for text in stored(engine, scope)), "the facts read before masking are withdrawn"
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(original_ref, scope=scope)
    cas = unwrap(engine.cas)
    if isinstance(cas, SQLiteCASStore):  # read from its rows
        with closing(sqlite3.connect(cas.path)) as db:
            rows = [bytes(row[0]).decode() for row in db.execute("SELECT content FROM cas_content")]
        assert rows and not CARD.search(str(rows)), "the CAS file still holds the unmasked original"
