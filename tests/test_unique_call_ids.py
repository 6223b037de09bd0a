"""A tool call id a model gave to two calls is sent as two ids, so providers take the view."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_anthropic import ChatAnthropic
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import SecretStr

from ctxplugin import ContextConfig, Scope
from ctxplugin._unique_calls import unique_call_ids
from ctxplugin.testing import memory_engine

TAU = Path(__file__).resolve().parents[2] / "shared" / "data" / "trajectories" / "tau"


def reused() -> list[BaseMessage]:
    return [
        SystemMessage("You are an airline agent."),
        HumanMessage("Cancel reservation ABC123 and tell me my balance."),
        AIMessage("", tool_calls=[{"id": "call_1", "name": "get_reservation", "args": {"id": "ABC123"}}]),
        ToolMessage('{"id": "ABC123", "status": "active"}', tool_call_id="call_1", name="get_reservation"),
        AIMessage("", tool_calls=[{"id": "call_1", "name": "cancel_reservation", "args": {"id": "ABC123"}},
                                  {"id": "call_2", "name": "get_balance", "args": {}}]),
        ToolMessage('{"status": "cancelled"}', tool_call_id="call_1", name="cancel_reservation"),
        ToolMessage('{"balance": 40}', tool_call_id="call_2", name="get_balance"),
        AIMessage("Done. Your balance is $40."),
        HumanMessage("Thanks, check it again."),
    ]


def anthropic_payload(messages: list[BaseMessage]) -> dict[str, Any]:
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key=SecretStr("sk-test"))
    return model._get_request_payload(messages)


def assert_anthropic_pairs_each_id_once(payload: dict[str, Any]) -> None:
    uses = [b["id"] for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_use"]
    results = [b["tool_use_id"] for m in payload["messages"] if isinstance(m["content"], list) for b in m["content"] if b.get("type") == "tool_result"]
    assert len(uses) == len(set(uses)), uses
    assert sorted(uses) == sorted(results), (uses, results)


def test_the_view_gives_a_reused_call_id_a_name_of_its_own_and_its_result_follows() -> None:
    history = reused()
    with pytest.raises(AssertionError):
        assert_anthropic_pairs_each_id_once(anthropic_payload(history))  # as the host holds it, refused
    view = memory_engine(ContextConfig()).prepare(history, scope=Scope(session_id="s")).messages
    assert_anthropic_pairs_each_id_once(anthropic_payload(list(view)))
    calls = [c for m in view if isinstance(m, AIMessage) for c in m.tool_calls if c["name"] == "cancel_reservation"]
    [result] = [m for m in view if isinstance(m, ToolMessage) and m.name == "cancel_reservation"]
    assert calls[0]["id"] == result.tool_call_id == "call_1_2"
    assert view[0].content == history[0].content and view[-1] is history[-1]


def test_views_without_reuse_are_the_very_messages_and_renamed_copies_are_made_once() -> None:
    plain = reused()[:4]
    assert unique_call_ids(plain) is plain
    history = reused()
    first, second = unique_call_ids(history), unique_call_ids(history)
    assert all(a is b for a, b in zip(first, second, strict=True)), "the same copies call after call (prompt caches)"
    assert first[2] is history[2] and first[4] is not history[4]


def test_two_calls_of_one_message_with_one_id_and_their_blocks_are_told_apart() -> None:
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": "Looking both up."},
              {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "a"}},
              {"type": "tool_use", "id": "toolu_9", "name": "lookup", "input": {"q": "b"}}]
    history: list[BaseMessage] = [
        HumanMessage("look up a and b"),
        AIMessage(blocks, tool_calls=[{"id": "toolu_9", "name": "lookup", "args": {"q": "a"}},
                                      {"id": "toolu_9", "name": "lookup", "args": {"q": "b"}}]),
        ToolMessage("A", tool_call_id="toolu_9"), ToolMessage("B", tool_call_id="toolu_9"),
    ]
    out = unique_call_ids(history)
    assert isinstance(out[1], AIMessage)
    assert [c["id"] for c in out[1].tool_calls] == ["toolu_9", "toolu_9_2"]
    assert [b.get("id") for b in out[1].content if isinstance(b, dict)] == [None, "toolu_9", "toolu_9_2"]
    assert [m.tool_call_id for m in out[2:] if isinstance(m, ToolMessage)] == ["toolu_9", "toolu_9_2"]
    assert_anthropic_pairs_each_id_once(anthropic_payload([SystemMessage("s"), *out]))


@pytest.mark.skipif(not TAU.is_dir(), reason=f"recordings not found at {TAU}")
def test_the_airline_recordings_views_send_each_call_id_once() -> None:
    from ctxplugin.replay.loaders import load_file

    checked = 0
    for path in sorted(TAU.glob("*.json")):
        for conversation in load_file(path).conversations:
            ids = [c["id"] for m in conversation.messages if isinstance(m, AIMessage) for c in m.tool_calls]
            if len(ids) == len(set(ids)):
                continue
            engine = memory_engine(ContextConfig())
            for index in conversation.call_indexes():
                view = engine.prepare(conversation.messages[:index], scope=Scope(session_id=conversation.id)).messages
                sent = [c["id"] for m in view if isinstance(m, AIMessage) for c in m.tool_calls]
                assert len(sent) == len(set(sent)), (conversation.id, index)
                checked += 1
    assert checked, "the recordings hold a reused call id"


def test_a_renamed_id_stays_within_the_40_characters_openai_takes_and_is_no_other_calls_id() -> None:
    long_id = "call_" + "x" * 35  # 40 characters
    history: list[BaseMessage] = [
        HumanMessage("go"),
        AIMessage("", tool_calls=[{"id": long_id, "name": "t", "args": {}}]), ToolMessage("1", tool_call_id=long_id),
        AIMessage("", tool_calls=[{"id": "a", "name": "t", "args": {}}]), ToolMessage("2", tool_call_id="a"),
        AIMessage("", tool_calls=[{"id": "a_2", "name": "t", "args": {}}]), ToolMessage("3", tool_call_id="a_2"),
        AIMessage("", tool_calls=[{"id": long_id, "name": "t", "args": {}}, {"id": "a", "name": "t", "args": {}}]),
        ToolMessage("4", tool_call_id=long_id), ToolMessage("5", tool_call_id="a"),
    ]
    out = unique_call_ids(history)
    ids = [c["id"] for m in out if isinstance(m, AIMessage) for c in m.tool_calls]
    assert len(ids) == len(set(ids)) and all(len(i or "") <= 40 for i in ids), ids
    assert [m.tool_call_id for m in out if isinstance(m, ToolMessage)] == ids
