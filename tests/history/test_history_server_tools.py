"""Tools the provider runs (Anthropic's web search, fetch and code execution, OpenAI's built-in
tools, Gemini's code execution) leave their call and their result in the assistant's message,
not in a tool message. When the history condenses such an exchange into a context note, the
note keeps what they were asked and what they found, as it does for the agent's own tools, and
an exchange still in view keeps the blocks whole, each call beside its result.

Replies are parsed by langchain-anthropic and langchain-openai from responses as the APIs return
them, offline; requests are built by those packages' own request builders.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import context_notes, memory_engine

CONFIG = {
    "history": {
        "verbatim_exchanges": 1,
        "trimmed_exchanges": 1,
        "block_size": 2,
        "max_tokens": 400,
        "archive_blocks": 2,
    }
}
ENCRYPTED = "EqUCCkYIBxgCIkBmb3VuZCBpdCBvbiB0aGUgcmVsZWFzZSBwYWdl" * 20


def _anthropic(content: list[dict[str, Any]]) -> AIMessage:
    from anthropic.types import Message
    from langchain_anthropic import ChatAnthropic

    data = Message.model_validate(
        {
            "id": "msg_search",
            "type": "message",
            "role": "assistant",
            "model": "claude-sonnet-4-5",
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 10, "output_tokens": 10},
            "content": content,
        }
    )
    message = (
        ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
        ._format_output(data)
        .generations[0]
        .message
    )
    assert isinstance(message, AIMessage)
    return message


def anthropic_search() -> AIMessage:
    return _anthropic(
        [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_01",
                "name": "web_search",
                "input": {"query": "libfoo 2.4 release date"},
            },
            {
                "type": "web_search_tool_result",
                "tool_use_id": "srvtoolu_01",
                "content": [
                    {
                        "type": "web_search_result",
                        "url": "https://libfoo.example.org/releases/v2-4",
                        "title": "libfoo release notes",
                        "encrypted_content": ENCRYPTED,
                        "page_age": "March 3, 2025",
                    }
                ],
            },
            {
                "type": "text",
                "text": "It was released in March.",
                "citations": [
                    {
                        "type": "web_search_result_location",
                        "url": "https://libfoo.example.org/releases/v2-4",
                        "title": "libfoo release notes",
                        "encrypted_index": ENCRYPTED[:120],
                        "cited_text": "libfoo 2.4 is out",
                    }
                ],
            },
        ]
    )


def anthropic_code() -> AIMessage:
    return _anthropic(
        [
            {
                "type": "server_tool_use",
                "id": "srvtoolu_02",
                "name": "code_execution",
                "input": {"code": "print(sum_checksums('build-7731'))"},
            },
            {
                "type": "code_execution_tool_result",
                "tool_use_id": "srvtoolu_02",
                "content": {
                    "type": "code_execution_result",
                    "stdout": "checksum 5f3a9c21e0b4\n",
                    "stderr": "",
                    "return_code": 0,
                    "content": [],
                },
            },
            {"type": "text", "text": "The checksum is computed."},
        ]
    )


def openai_search() -> AIMessage:
    from langchain_openai.chat_models.base import _construct_lc_result_from_responses_api
    from openai.types.responses import Response

    response = Response.model_validate(
        {
            "id": "resp_1",
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
                    "id": "rs_1",
                    "summary": [],
                    "encrypted_content": ENCRYPTED,
                },
                {
                    "type": "web_search_call",
                    "id": "ws_1",
                    "status": "completed",
                    "action": {
                        "type": "search",
                        "query": "libfoo 2.4 release date",
                        "sources": [
                            {"type": "url", "url": "https://libfoo.example.org/releases/v2-4"}
                        ],
                    },
                },
                {
                    "type": "message",
                    "id": "msg_1",
                    "role": "assistant",
                    "status": "completed",
                    "content": [
                        {
                            "type": "output_text",
                            "text": "It was released in March.",
                            "annotations": [],
                        }
                    ],
                },
            ],
        }
    )
    message = (
        _construct_lc_result_from_responses_api(response, output_version="responses/v1")
        .generations[0]
        .message
    )
    assert isinstance(message, AIMessage)
    return message


def gemini_code() -> AIMessage:
    return AIMessage(
        content=[
            {
                "type": "executable_code",
                "executable_code": "print(sum_checksums('build-7731'))",
                "language": "PYTHON",
            },
            {
                "type": "code_execution_result",
                "code_execution_result": "checksum 5f3a9c21e0b4",
                "outcome": "OUTCOME_OK",
            },
            {"type": "text", "text": "The checksum is computed."},
        ],
        response_metadata={"model_provider": "google_genai"},
    )


def _thread(reply: AIMessage, later: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        HumanMessage("Track the libfoo upgrade."),
        AIMessage("On it."),
        HumanMessage("When was libfoo 2.4 released, and what is the build checksum?"),
        reply,
    ]
    for step in range(later):
        done = " ".join(
            f"Module m{step}_{n} of item {step} now builds against libfoo." for n in range(8)
        )
        messages += [HumanMessage(f"Next item {step}, please."), AIMessage(done)]
    return messages


CASES = {
    "anthropic web search": (
        anthropic_search,
        ["libfoo 2.4 release date", "https://libfoo.example.org/releases/v2-4"],
    ),
    "anthropic code execution": (
        anthropic_code,
        ["print(sum_checksums('build-7731'))", "5f3a9c21e0b4"],
    ),
    "openai web search": (
        openai_search,
        ["libfoo 2.4 release date", "https://libfoo.example.org/releases/v2-4"],
    ),
    "gemini code execution": (gemini_code, ["print(sum_checksums('build-7731'))", "5f3a9c21e0b4"]),
}


LOOKUP = {
    "type": "function",
    "function": {"name": "lookup", "description": "Look a module up.", "parameters": {"type": "object", "properties": {}}},
}
"""A tool of the agent's own: the request has a tool list, so notes are lookups (tool results)."""


@pytest.mark.parametrize("case", list(CASES))
def test_a_condensed_exchange_keeps_what_a_provider_tool_was_asked_and_found(case: str) -> None:
    make, (asked, found) = CASES[case]
    engine = memory_engine(ContextConfig.model_validate(CONFIG))
    prepared = engine.prepare(_thread(make(), 8), tools=[LOOKUP], scope=Scope(session_id=case))
    notes = "\n".join(context_notes(prepared.messages))
    assert notes, "the first exchange was not condensed"
    assert not any(m.content == make().content for m in prepared.messages)
    for value in (asked, found):
        assert value in notes, f"{value!r} is in no context note: {notes}"
    assert ENCRYPTED[:40] not in notes
    # without a tool list the notes go in system messages, where nothing a tool found is listed
    bare = engine.prepare(_thread(make(), 8), scope=Scope(session_id=case)).messages
    system = "\n".join(str(m.content) for m in bare if isinstance(m, SystemMessage))
    assert asked in system and found not in system


def _anthropic_request(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    from langchain_anthropic import ChatAnthropic

    payload = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")._get_request_payload(
        messages
    )
    return list(payload["messages"])


def _responses_request(messages: list[BaseMessage]) -> list[dict[str, Any]]:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-5", api_key="test-key", use_responses_api=True)
    return list(model._get_request_payload(messages)["input"])


def test_every_view_sends_anthropic_server_tool_blocks_whole_and_paired() -> None:
    """Call after call, while the exchange moves from verbatim to trimmed to a note, the request
    either holds the assistant turn's blocks exactly as the model wrote them, each
    ``server_tool_use`` beside its result, or holds none of them."""
    reply = anthropic_search()
    thread = _thread(reply, 8)
    engine = memory_engine(ContextConfig.model_validate(CONFIG))
    shown = 0
    for end in range(3, len(thread) + 1, 2):
        prepared = engine.prepare(thread[:end], scope=Scope(session_id="paired"))
        turns = [m for m in _anthropic_request(prepared.messages) if isinstance(m["content"], list)]
        blocks = [b for m in turns for b in m["content"] if b.get("type") != "text"]
        if blocks:
            shown += 1
            assert [b["type"] for b in blocks] == ["server_tool_use", "web_search_tool_result"]
            assert blocks[1]["tool_use_id"] == blocks[0]["id"]
            assert blocks[1]["content"] == reply.content[1]["content"]  # type: ignore[index]
    assert shown >= 2, "the exchange was never in view"


def test_every_view_sends_openai_reasoning_before_its_item() -> None:
    reply = openai_search()
    thread = _thread(reply, 8)
    engine = memory_engine(ContextConfig.model_validate(CONFIG))
    shown = 0
    for end in range(3, len(thread) + 1, 2):
        prepared = engine.prepare(thread[:end], scope=Scope(session_id="reasoning"))
        items = _responses_request(prepared.messages)
        kinds = [item.get("type") for item in items]
        if "reasoning" in kinds:
            shown += 1
            at = kinds.index("reasoning")
            assert items[at]["encrypted_content"] == ENCRYPTED
            assert kinds[at + 1 : at + 3] == ["web_search_call", "message"]
    assert shown >= 2, "the exchange was never in view"
