"""The report's unchanged prefix ends where what the provider is sent changed: any field of a
message a provider reads (not only its type, content and tool calls), and any tool's schema."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    InvalidToolCall,
    ToolMessage,
)
from langchain_core.tools import StructuredTool

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import count_message


def _conversation() -> list[BaseMessage]:
    return [
        HumanMessage("Find the order of Ada Lovelace", name="ada"),
        AIMessage(
            "",
            tool_calls=[{"name": "find_order", "args": {"customer": "Ada Lovelace"}, "id": "c1"}],
            additional_kwargs={"reasoning": {"id": "rs_1", "summary": [{"type": "summary_text", "text": "look it up"}]}},
        ),
        ToolMessage('{"order": "W1234", "status": "shipped"}', tool_call_id="c1", name="find_order"),
        AIMessage([{"type": "text", "text": "Order W1234 has shipped."}]),
        HumanMessage("And when does it arrive?"),
        AIMessage("", additional_kwargs={"function_call": {"name": "track", "arguments": '{"order": "W1234"}'}}),
        HumanMessage("Thanks"),
    ]


def _set(index: int, **fields: Any) -> Callable[[list[BaseMessage]], None]:
    def edit(messages: list[BaseMessage]) -> None:
        for name, value in fields.items():
            setattr(messages[index], name, value)

    return edit


def _invalid(args: str) -> InvalidToolCall:
    return {"name": "track", "args": args, "id": "c9", "error": None, "type": "invalid_tool_call"}

def _content_marked(messages: list[BaseMessage]) -> None:
    messages[3].content = [{"type": "text", "text": "Order W1234 has shipped.", "cache_control": {"type": "ephemeral"}}]


EDITS: dict[str, tuple[int, Callable[[list[BaseMessage]], None]]] = {
    "a user's name": (0, _set(0, name="grace")),
    "a reasoning item": (1, _set(1, additional_kwargs={"reasoning": {"id": "rs_1", "summary": [{"type": "summary_text", "text": "ask"}]}})),
    "a tool result's name": (2, _set(2, name="track")),
    "a tool result's status": (2, _set(2, status="error")),
    "a content block's cache mark": (3, _content_marked),
    "a legacy function call": (5, _set(5, additional_kwargs={"function_call": {"name": "track", "arguments": '{"order": "W9"}'}})),
    "an invalid tool call": (5, _set(5, invalid_tool_calls=[_invalid('{"order": "W')])),
}



@pytest.mark.parametrize("edit", list(EDITS))
def test_a_copy_differing_in_a_field_the_provider_reads_ends_the_prefix_there(edit: str) -> None:
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="prefix-fields")
    messages = _conversation()
    if edit == "an invalid tool call":
        _set(5, invalid_tool_calls=[_invalid("{")])(messages)  # answered in the view by a repair
    first = engine.prepare(messages, scope=scope)
    index, change = EDITS[edit]
    again = copy.deepcopy(messages)  # a host reading its history back from a checkpoint
    change(again)
    second = engine.prepare(again, scope=scope)
    assert len(second.messages) == len(first.messages)
    assert second.messages[index] is again[index]
    kept = sum(count_message(m, engine.counter) for m in first.messages[:index])
    assert second.report.unchanged_prefix_tokens == kept


def test_a_copy_differing_in_nothing_the_provider_reads_keeps_the_whole_prefix() -> None:
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="prefix-same")
    messages = _conversation()
    first = engine.prepare(messages, scope=scope)
    again = copy.deepcopy(messages)
    again[4].response_metadata = {"model_name": "another"}  # read back, never sent
    second = engine.prepare([*again, AIMessage("You are welcome.")], scope=scope)
    assert second.report.unchanged_prefix_tokens == sum(count_message(m, engine.counter) for m in first.messages) > 0


def _tool(description: str, parameters: dict[str, Any] | None = None) -> dict[str, Any]:
    schema = parameters or {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}
    return {"type": "function", "function": {"name": "track", "description": description, "parameters": schema}}


def _lookup(description: str) -> StructuredTool:
    def find_order(customer: str) -> str:
        return customer

    return StructuredTool.from_function(find_order, description=description)


TOOL_EDITS: dict[str, tuple[Callable[[], list[Any]], Callable[[list[Any]], list[Any]]]] = {
    "a dict's description": (lambda: [_tool("Where an order is.")], lambda tools: [_tool("Where an order is now.")]),
    "a dict's parameters": (
        lambda: [_tool("Where an order is.")],
        lambda tools: [_tool("Where an order is.", {"type": "object", "properties": {"order": {"type": "integer"}}})],
    ),
    "a tool's description": (lambda: [_lookup("Find an order.")], lambda tools: [_lookup("Find a customer's order.")]),
    "the tools' order": (lambda: [_tool("Where an order is."), _lookup("Find an order.")], lambda tools: tools[::-1]),
}


@pytest.mark.parametrize("edit", list(TOOL_EDITS))
def test_a_tool_sent_otherwise_under_the_same_name_ends_the_prefix_before_every_message(edit: str) -> None:
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="prefix-tools")
    messages = _conversation()
    make, change = TOOL_EDITS[edit]
    tools = make()
    first = engine.prepare(messages, tools=tools, scope=scope)
    assert engine.prepare(messages, tools=tools, scope=scope).report.unchanged_prefix_tokens > 0  # the same tools: kept
    second = engine.prepare(messages, tools=change(tools), scope=scope)
    assert sorted(second.report.tools_bound) == sorted(first.report.tools_bound)  # the same names
    assert second.report.unchanged_prefix_tokens == 0


def test_a_tool_dict_edited_in_place_ends_the_prefix() -> None:
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="prefix-tool-in-place")
    messages = _conversation()
    tools = [_tool("Where an order is.")]
    engine.prepare(messages, tools=tools, scope=scope)
    tools[0]["function"]["description"] = "Where an order is, and when it arrives."  # the same object
    assert engine.prepare(messages, tools=tools, scope=scope).report.unchanged_prefix_tokens == 0
    assert engine.prepare(messages, tools=tools, scope=scope).report.unchanged_prefix_tokens > 0
