"""Anthropic Messages API recordings: request bodies (``{"system", "messages", "tools"}``), one
per call or only the last, with the responses between them or not, as langchain-core messages.

Tool calls are ``tool_use`` blocks of assistant messages and their results ``tool_result``
blocks of the user message that follows; both become the messages a LangChain agent holds
(``AIMessage.tool_calls``, ``ToolMessage``). Blocks that are neither (images, documents,
thinking) are kept as they are.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolCall,
    ToolMessage,
)

from ctxplugin.errors import InvalidInputError
from ctxplugin.replay._conversation import Conversation, RecordedUsage
from ctxplugin.replay._log_index import PrefixIndex

_CALL_BLOCKS = frozenset({"tool_use", "tool_result"})


def has_tool_blocks(messages: Sequence[Any]) -> bool:
    """Whether a message list holds ``tool_use`` / ``tool_result`` blocks (Anthropic only)."""
    return any(
        isinstance(m, dict)
        and isinstance(m.get("content"), list)
        and any(isinstance(b, dict) and b.get("type") in _CALL_BLOCKS for b in m["content"])
        for m in messages
    )


def is_request(value: Any) -> bool:
    """Whether ``value`` is an Anthropic request body: a ``messages`` list beside a top-level
    ``system``, ``input_schema`` tools or tool blocks (an OpenAI request has none of these)."""
    if not isinstance(value, dict) or not isinstance(value.get("messages"), list):
        return False
    tools = value.get("tools")
    return (
        "system" in value
        or (isinstance(tools, list) and any(isinstance(t, dict) and "input_schema" in t for t in tools))
        or has_tool_blocks(value["messages"])
    )


def is_response(value: Any) -> bool:
    """Whether ``value`` is a Messages API response (``{"type": "message", "role": "assistant"}``)."""
    return isinstance(value, dict) and value.get("type") == "message" and value.get("role") == "assistant"


Builder = tuple[str, Any]


def parse(data: Any, stem: str) -> list[Builder]:
    """The conversations of an Anthropic recording: a request body, a list (or JSONL) of them,
    possibly with each response after its request, or a bare message list.

    Request bodies whose messages continue an earlier body's (``cache_control`` markers aside)
    are calls of one conversation, read from the longest.
    """
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data:
        raise InvalidInputError("an Anthropic recording is a request body {'messages': [...]} or a list of them")
    if all(isinstance(m, dict) and "role" in m and not is_response(m) for m in data):
        data = [{"messages": data}]  # a bare message list
    groups: list[dict[str, Any]] = []
    usage: list[list[RecordedUsage]] = []  # per group, one entry per response that reports it
    keys: list[list[str]] = []  # per group, its messages without cache_control, after a place for its system prompt
    # a request continues the group whose messages it begins with, whatever its system prompt: a
    # host that puts the date or the time in its prompt sends a new one on every call (the
    # conversation is read with the prompt of its latest call); a row without a model keeps its prompt
    index_ = PrefixIndex()
    current: int | None = None  # the group of the latest request, which a response answers
    for index, item in enumerate(data):
        if is_response(item):
            if current is None:
                raise InvalidInputError(f"item {index} is a response with no request before it")
            body = groups[current]
            reply = {"role": "assistant", "content": item.get("content")}
            groups[current] = {**body, "messages": [*body["messages"], reply]}
            keys[current] = [*keys[current], _plain(reply)]
            index_.put(current, keys[current])
            figures = recorded_usage(item.get("usage"))
            if figures is not None:
                usage[current].append(figures)
            continue
        if isinstance(item, list):  # one conversation's messages per line
            item = {"messages": item}
        if not isinstance(item, dict) or not isinstance(item.get("messages"), list):
            raise InvalidInputError(f"item {index} is not an Anthropic request body (no 'messages' list)")
        # rows of a data set (no model, no reply) that differ only in their prompts stay apart
        called = "model" in item or (index + 1 < len(data) and is_response(data[index + 1]))
        item_keys = ["system" if called else _plain(item.get("system")), *(_plain(m) for m in item["messages"])]
        current = index_.continued(item_keys)
        if current is None:
            current = len(groups)
            groups.append(item)
            usage.append([])
            keys.append(item_keys)
        else:
            groups[current], keys[current] = item, item_keys
        index_.put(current, item_keys)
    return [
        (cid, lambda body=body, cid=cid, figures=tuple(figures): conversation(cid, body, figures))
        for (cid, body), figures in zip(_named(groups, stem), usage, strict=True)
    ]


def recorded_usage(value: Any) -> RecordedUsage | None:
    """A response's ``usage`` as the provider's own figures, or None when it has no input counts.

    ``input_tokens`` counts only the uncached part of the prompt: the whole prompt is that plus
    the tokens read from and written to the cache, of which the reads are the cache hits.
    """
    if not isinstance(value, dict):
        return None
    counts = [value.get("input_tokens"), value.get("cache_read_input_tokens"), value.get("cache_creation_input_tokens")]
    if counts[0] is None or not all(_count(c) for c in counts):
        return None
    uncached, read, written = (int(c or 0) for c in counts)
    return RecordedUsage(prompt_tokens=uncached + read + written, cached_tokens=read)


def _count(value: Any) -> bool:
    """A token count: a non-negative int, or null for a count the provider left empty."""
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def _named(groups: list[dict[str, Any]], stem: str) -> list[tuple[str, dict[str, Any]]]:
    if len(groups) == 1:
        return [(str(groups[0].get("id") or stem), groups[0])]
    return [(str(body.get("id") or f"{stem}#{index}"), body) for index, body in enumerate(groups)]


def _plain(value: Any) -> str:
    """Canonical JSON without ``cache_control`` markers, which clients move from call to call."""

    def strip(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: strip(x) for k, x in v.items() if k != "cache_control"}
        if isinstance(v, list):
            return [strip(x) for x in v]
        return v

    return json.dumps(strip(value), sort_keys=True)


def conversation(cid: str, body: dict[str, Any], usage: tuple[RecordedUsage, ...] = ()) -> Conversation:
    """One request body as a conversation (its tools as OpenAI-format schemas), with the
    provider's figures of its recorded responses.

    Raises:
        InvalidInputError: a message or tool that is not in the Messages API's shape.
    """
    messages = [*_system(body.get("system")), *to_messages(body["messages"])]
    messages = [m.model_copy(update={"id": f"msg-{i}"}) if m.id is None else m for i, m in enumerate(messages)]
    return Conversation(id=cid, messages=tuple(messages), usage=usage, tools=tools(body.get("tools")))


def _system(value: Any) -> list[BaseMessage]:
    if value is None or value == "" or value == []:
        return []
    if isinstance(value, str):
        return [SystemMessage(content=value)]
    if isinstance(value, list):
        blocks = [_block(b, "system", i) for i, b in enumerate(value)]
        return [SystemMessage(content=_content(blocks))]
    raise InvalidInputError(f"'system' is a {type(value).__name__}; expected text or a list of text blocks")


def tools(value: Any) -> tuple[dict[str, Any], ...]:
    """Anthropic tool definitions as OpenAI-format schemas; provider tools (``web_search``,
    ``bash`` ...), which have no ``input_schema``, are left out as the provider defines them."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise InvalidInputError(f"'tools' is a {type(value).__name__}; expected a list of tool definitions")
    return tuple(schema for index, item in enumerate(value) if (schema := tool(item, f"tool {index}")) is not None)


def tool(value: Any, where: str) -> dict[str, Any] | None:
    """One Anthropic tool definition as an OpenAI-format schema; None for a provider tool (no
    ``input_schema``). ``where`` names the tool in errors ("tool 3").

    Raises:
        InvalidInputError: no name, or an ``input_schema`` that is not an object.
    """
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        raise InvalidInputError(f"{where} has no name")
    if "input_schema" not in value:
        return None
    if not isinstance(value["input_schema"], dict):
        raise InvalidInputError(f"{where} ({value['name']}) has an input_schema that is not an object")
    function = {"name": value["name"], "description": str(value.get("description") or ""), "parameters": value["input_schema"]}
    return {"type": "function", "function": function}


def to_messages(raw: Sequence[Any]) -> list[BaseMessage]:
    """Anthropic messages as langchain-core messages: a user message with ``tool_result``
    blocks becomes one ``ToolMessage`` per result, then a ``HumanMessage`` for the rest, if any."""
    out: list[BaseMessage] = []
    names: dict[str, str] = {}  # tool_use id -> tool name, for the results
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise InvalidInputError(f"message {index} is a {type(message).__name__}, not a message")
        role, content = message.get("role"), message.get("content")
        if role not in ("user", "assistant"):
            raise InvalidInputError(
                f"message {index} has role {role!r}; Anthropic messages are user or assistant (the system prompt is the top-level 'system')"
            )
        if isinstance(content, str) or content is None:
            out.append(HumanMessage(content=content or "") if role == "user" else AIMessage(content=content or ""))
            continue
        if not isinstance(content, list):
            raise InvalidInputError(f"message {index} has content of type {type(content).__name__}; expected text or content blocks")
        blocks = [_block(b, f"message {index}", i) for i, b in enumerate(content)]
        if role == "assistant":
            out.append(_assistant(blocks, index, names))
        else:
            out.extend(_user(blocks, index, names))
    return out


def _block(block: Any, where: str, position: int) -> dict[str, Any]:
    if not isinstance(block, dict) or not isinstance(block.get("type"), str):
        raise InvalidInputError(f"{where}, block {position} is not a content block (an object with a 'type')")
    if block["type"] == "text" and not isinstance(block.get("text"), str):
        raise InvalidInputError(f"{where}, block {position} is a text block without text")
    return block


def _content(blocks: list[dict[str, Any]]) -> str | list[str | dict[str, Any]]:
    """Text blocks as one string; anything else (images, documents, thinking) kept as blocks."""
    if all(b["type"] == "text" for b in blocks):
        return "\n".join(b["text"] for b in blocks)
    return [{"type": "text", "text": b["text"]} if b["type"] == "text" else b for b in blocks]


def _assistant(blocks: list[dict[str, Any]], index: int, names: dict[str, str]) -> AIMessage:
    calls: list[ToolCall] = []
    rest: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        if block["type"] == "tool_result":
            raise InvalidInputError(f"message {index}, block {position} is a tool_result in an assistant message")
        if block["type"] != "tool_use":
            rest.append(block)
            continue
        name, call_id, args = block.get("name"), block.get("id"), block.get("input", {})
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"message {index}, block {position} is a tool_use without a name")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"message {index}, block {position} ({name}) is a tool_use without an id")
        if not isinstance(args, dict):
            raise InvalidInputError(f"message {index}, block {position} ({name}) has an input that is not an object")
        names[call_id] = name
        calls.append(ToolCall(name=name, args=dict(args), id=call_id, type="tool_call"))
    return AIMessage(content=_content(rest), tool_calls=calls)


def _user(blocks: list[dict[str, Any]], index: int, names: dict[str, str]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    rest: list[dict[str, Any]] = []
    for position, block in enumerate(blocks):
        if block["type"] == "tool_use":
            raise InvalidInputError(f"message {index}, block {position} is a tool_use in a user message")
        if block["type"] != "tool_result":
            rest.append(block)
            continue
        call_id, content = block.get("tool_use_id"), block.get("content")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"message {index}, block {position} is a tool_result without a tool_use_id")
        if isinstance(content, list):
            content = _content([_block(b, f"message {index}, block {position}", i) for i, b in enumerate(content)])
        elif content is not None and not isinstance(content, str):
            raise InvalidInputError(
                f"message {index}, block {position} has tool_result content of type {type(content).__name__}; expected text or content blocks"
            )
        status = "error" if block.get("is_error") is True else "success"
        out.append(ToolMessage(content=content or "", tool_call_id=call_id, name=names.get(call_id), status=status))
    if rest or not out:
        out.append(HumanMessage(content=_content(rest)))
    return out


__all__ = ["conversation", "has_tool_blocks", "is_request", "is_response", "parse", "recorded_usage", "to_messages", "tool", "tools"]
