"""The answer cache tells apart questions asked about different attachments: the same words
about another image, PDF or file, or about a tool's other screenshot, are another question."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import AnswerCache, MemoryAnswerCacheStore
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import CacheConfig
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.testing import ScriptedChatModel

PNG_A = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
PNG_B = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
PDF_A = "JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDMgMCBSL0ZpbHRlci9GbGF0ZURlY29kZT4+"
PDF_B = "JVBERi0xLjQKJcOkw7zDtsOfCjIgMCBvYmoKPDwvTGVuZ3RoIDQgMCBSL0ZpbHRlci9GbGF0ZURlY29kZT4+"
SYSTEM = SystemMessage("You read invoices. Be brief.")
QUESTION = "What is the total of this invoice?"


def _engine() -> ContextEngine:
    config = ContextConfig(cache=CacheConfig(enabled=True, scope="user"))
    return ContextEngine(
        config,
        cas=MemoryCASStore(),
        facts=FactsLedger(MemoryFactStore(), config.facts),
        answer_cache=AnswerCache(MemoryAnswerCacheStore(), config.cache),
    )


def _ask(
    engine: ContextEngine, model: ScriptedChatModel, messages: list[BaseMessage], session: str
) -> str:
    scope = Scope(session_id=session, user_id="u1")
    prepared = engine.prepare(messages, scope=scope)
    cached = engine.cached_answer(messages, prepared, scope=scope, model=model)
    if cached is not None:
        return f"cached: {cached.content}"
    reply = model.invoke(prepared.messages)
    assert isinstance(reply, AIMessage)
    engine.remember_answer(messages, prepared, reply, scope=scope, model=model)
    return str(reply.content)


def image(data: str) -> dict[str, Any]:
    return {"type": "image", "base64": data, "mime_type": "image/png"}


def pdf(data: str) -> dict[str, Any]:
    return {
        "type": "document",
        "source": {"type": "base64", "media_type": "application/pdf", "data": data},
    }


def _attached(block: dict[str, Any]) -> list[BaseMessage]:
    return [SYSTEM, HumanMessage(content=[{"type": "text", "text": QUESTION}, block])]


def _screenshot(block: dict[str, Any]) -> list[BaseMessage]:
    return [
        SYSTEM,
        HumanMessage("Open the latest invoice."),
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {}, "id": "c1"}]),
        ToolMessage(content=[block], tool_call_id="c1", name="screenshot"),
        AIMessage("It is open."),
        HumanMessage(QUESTION),
    ]


CASES = {
    "image in the question": (_attached, image(PNG_A), image(PNG_B)),
    "pdf in the question": (_attached, pdf(PDF_A), pdf(PDF_B)),
    "screenshot a tool returned": (_screenshot, image(PNG_A), image(PNG_B)),
}


@pytest.mark.parametrize("case", list(CASES))
def test_the_same_words_about_another_attachment_are_not_served_the_first_answer(case: str) -> None:
    build, first, other = CASES[case]
    engine = _engine()
    model = ScriptedChatModel(
        script=[AIMessage("Total 41.90 EUR."), AIMessage("Total 1,250.00 EUR.")], default=None
    )
    assert _ask(engine, model, build(first), "s1") == "Total 41.90 EUR."
    assert _ask(engine, model, build(first), "s2") == "cached: Total 41.90 EUR.", (
        "the same attachment is served"
    )
    assert _ask(engine, model, build(other), "s3") == "Total 1,250.00 EUR."
