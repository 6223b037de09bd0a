"""OpenAI Responses API recordings: request bodies (``{"model", "instructions", "input",
"tools"}``) and the responses (``{"object": "response", "output": [...]}``), as chat-format
messages that :mod:`ctxplugin.replay._chat_logs` groups into conversations.

The Responses API splits what a chat message holds into items: an assistant's text is a
``message`` item and each tool call its own ``function_call`` item; a result is a
``function_call_output``. Consecutive assistant items become one assistant message with its tool
calls, as the chat format and LangChain hold them. ``reasoning`` items and the calls of tools
the provider runs itself (``web_search_call``, ``file_search_call``) carry nothing a replay can
count and are left out; any other item type is an error naming it.
"""

from __future__ import annotations

from typing import Any

from ctxplugin.errors import InvalidInputError

_SKIPPED = frozenset({"reasoning", "web_search_call", "file_search_call"})
_PART_TEXT = frozenset({"input_text", "output_text", "text", "summary_text"})


def is_request(value: Any) -> bool:
    """Whether ``value`` is a Responses API request body: ``input`` (text or items) and no
    ``messages`` list."""
    return (
        isinstance(value, dict)
        and "messages" not in value
        and isinstance(value.get("input"), (str, list))
        and ("model" in value or "instructions" in value or "tools" in value)
    )


def is_response(value: Any) -> bool:
    """Whether ``value`` is a Responses API response (``{"object": "response", "output": [...]}``)."""
    return isinstance(value, dict) and value.get("object") == "response" and isinstance(value.get("output"), list)


def body(request: dict[str, Any], index: int) -> dict[str, Any]:
    """A request as a chat request body: ``instructions`` as the system message, the input items
    as messages, function tools in the chat format, and ``previous_response_id`` kept.

    Raises:
        InvalidInputError: an item or tool this module cannot read (the message names it).
    """
    where = f"item {index}"
    raw = request["input"]
    items: list[Any] = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    messages = messages_of(items, where)
    instructions = request.get("instructions")
    if isinstance(instructions, str) and instructions:
        messages = [{"role": "system", "content": instructions}, *messages]
    out: dict[str, Any] = {"messages": messages, "tools": tools(request.get("tools"), where)}
    if isinstance(request.get("previous_response_id"), str):
        out["previous_response_id"] = request["previous_response_id"]
    return out


def messages_of(items: list[Any], where: str) -> list[dict[str, Any]]:
    """Input or output items as chat-format messages."""
    out: list[dict[str, Any]] = []
    for position, item in enumerate(items):
        if not isinstance(item, dict):
            raise InvalidInputError(f"{where}, input item {position} is a {type(item).__name__}, not an item")
        kind = item.get("type", "message")
        if kind in _SKIPPED:
            continue
        if kind == "function_call":
            call = {"id": item.get("call_id"), "type": "function", "function": {"name": item.get("name"), "arguments": item.get("arguments")}}
            last = out[-1] if out else None
            if last is not None and last["role"] == "assistant":  # the same turn's text, or its earlier calls
                last.setdefault("tool_calls", []).append(call)
            else:
                out.append({"role": "assistant", "content": "", "tool_calls": [call]})
        elif kind == "function_call_output":
            out.append({"role": "tool", "tool_call_id": item.get("call_id"), "content": _content(item.get("output"), where, position)})
        elif kind == "message" and isinstance(item.get("role"), str):
            out.append({"role": item["role"], "content": _content(item.get("content"), where, position)})
        else:
            raise InvalidInputError(f"{where}, input item {position} has type {kind!r}, which a replay cannot read")
    return out


def name_results(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``messages`` with each tool result named for the call it answers, as a chat recording
    names it (a ``function_call_output`` carries only the call id)."""
    names: dict[Any, Any] = {}
    out: list[dict[str, Any]] = []
    for message in messages:
        for call in message.get("tool_calls") or ():
            names[call.get("id")] = call.get("function", {}).get("name")
        if message.get("role") == "tool" and "name" not in message and isinstance(names.get(message.get("tool_call_id")), str):
            message = {**message, "name": names[message["tool_call_id"]]}
        out.append(message)
    return out


def _content(value: Any, where: str, position: int) -> str | list[dict[str, Any]]:
    """Text, or content parts as chat-format blocks (text parts joined when there is nothing else)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        raise InvalidInputError(f"{where}, input item {position} has content of type {type(value).__name__}")
    parts: list[dict[str, Any]] = []
    for part in value:
        if not isinstance(part, dict):
            raise InvalidInputError(f"{where}, input item {position} has a content part that is not an object")
        kind = part.get("type")
        if kind in _PART_TEXT:
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif kind == "refusal":
            parts.append({"type": "text", "text": str(part.get("refusal") or "")})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"], "detail": part.get("detail", "auto")}})
        else:
            parts.append(dict(part))
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


def tools(value: Any, where: str) -> list[dict[str, Any]]:
    """Function tools (flat: ``{"type": "function", "name", "parameters"}``) in the chat format;
    the provider's own tools are left out."""
    if not isinstance(value, list):
        return []
    out: list[dict[str, Any]] = []
    for position, tool in enumerate(value):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            continue
        if not isinstance(tool.get("name"), str) or not tool["name"]:
            raise InvalidInputError(f"{where}, tool {position} is a function without a name")
        function = {k: tool[k] for k in ("name", "description", "parameters") if k in tool}
        out.append({"type": "function", "function": function})
    return out


def output(response: dict[str, Any], index: int) -> list[dict[str, Any]]:
    """A response's output items as chat-format messages."""
    return messages_of(response["output"], f"item {index}")


__all__ = ["body", "is_request", "is_response", "messages_of", "name_results", "output", "tools"]
