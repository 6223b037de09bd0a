"""Recorded message dicts (OpenAI chat format or LangChain dumps) to langchain-core messages.

Recordings come in several dialects; each message is converted by its own shape, so a file that
mixes them still loads. Problems raise :class:`~ctxplugin.errors.InvalidInputError` with the
position of the message, and the caller adds the file name.
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
    messages_from_dict,
)

from ctxplugin._untrusted import json_depth_exceeds
from ctxplugin.errors import InvalidInputError

_LC_CLASSES = {
    "HumanMessage": "human",
    "HumanMessageChunk": "human",
    "AIMessage": "ai",
    "AIMessageChunk": "ai",
    "SystemMessage": "system",
    "SystemMessageChunk": "system",
    "ToolMessage": "tool",
    "ToolMessageChunk": "tool",
}
_LC_TYPES = frozenset({"human", "ai", "system", "tool"})


def is_openai_message(raw: object) -> bool:
    """Whether ``raw`` looks like an OpenAI chat message (a dict with a ``role``)."""
    return isinstance(raw, dict) and isinstance(raw.get("role"), str)


def is_langchain_message(raw: object) -> bool:
    """Whether ``raw`` looks like a LangChain dump (``messages_to_dict`` or ``dumpd``)."""
    if not isinstance(raw, dict):
        return False
    if raw.get("lc") == 1 and raw.get("type") == "constructor":
        return True
    return isinstance(raw.get("type"), str) and ("data" in raw or "content" in raw)


def is_message(raw: object) -> bool:
    """Whether ``raw`` is a message in any supported dialect."""
    return is_openai_message(raw) or is_langchain_message(raw)


def to_message(raw: object, index: int) -> BaseMessage:
    """One recorded message as a langchain-core message.

    Raises:
        InvalidInputError: ``raw`` is not a message this module understands.
    """
    if isinstance(raw, BaseMessage):
        return raw
    if is_openai_message(raw):
        return _from_openai(raw, index)  # type: ignore[arg-type]
    if is_langchain_message(raw):
        return _from_langchain(raw, index)  # type: ignore[arg-type]
    kind = type(raw).__name__
    keys = f" with keys {sorted(raw)[:6]}" if isinstance(raw, dict) else ""
    raise InvalidInputError(
        f"message {index} is a {kind}{keys}, not a chat message (expected an OpenAI "
        "{'role': ..., 'content': ...} dict or a LangChain message dump)"
    )


def to_messages(raw: Sequence[object]) -> list[BaseMessage]:
    """A recorded message list as langchain-core messages (ids filled in when missing)."""
    out: list[BaseMessage] = []
    for index, item in enumerate(_function_calls_as_tool_calls(raw)):
        message = to_message(item, index)
        if message.id is None:
            # Deterministic ids keep replays reproducible and let stages key on them.
            message = message.model_copy(update={"id": f"msg-{index}"})
        out.append(message)
    return out


def _function_calls_as_tool_calls(raw: Sequence[object]) -> list[object]:
    """The older function-calling messages in the tool-calling shape: an assistant's
    ``function_call`` as its one tool call (id ``call-<index>``: the API gave none), a
    ``function`` message as the result of the latest unanswered call of its name.

    Raises:
        InvalidInputError: a function result with no call of that name before it.
    """
    out: list[object] = []
    pending: dict[object, str] = {}  # function name -> id of its latest unanswered call
    for index, item in enumerate(raw):
        if is_openai_message(item):
            fields: dict[str, Any] = item  # type: ignore[assignment]
            call = fields.get("function_call")
            if fields["role"] == "assistant" and isinstance(call, dict) and not fields.get("tool_calls"):
                pending[call.get("name")] = call_id = f"call-{index}"
                item = {**fields, "tool_calls": [{"id": call_id, "type": "function", "function": call}]}
            elif fields["role"] == "function":
                name = fields.get("name")
                if name not in pending:
                    raise InvalidInputError(
                        f"message {index} is the result of function {name!r}, but no earlier assistant message called it"
                    )
                item = {**fields, "role": "tool", "tool_call_id": pending.pop(name)}
        out.append(item)
    return out


def _text_content(value: object, index: int) -> str | list[str | dict[str, Any]]:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, (str, dict)) for b in value):
        return list(value)
    raise InvalidInputError(f"message {index} has content of type {type(value).__name__}; expected text or content blocks")


def parse_arguments(arguments: object) -> dict[str, Any]:
    """Tool-call arguments as a dict (OpenAI sends them as a JSON string)."""
    if isinstance(arguments, dict):
        return dict(arguments)
    if arguments is None or arguments == "":
        return {}
    if isinstance(arguments, str):
        if json_depth_exceeds(arguments):
            return {"input": arguments}  # kept as text, as broken JSON is: the parser would recurse too deep
        try:
            parsed = json.loads(arguments, strict=False)
        except json.JSONDecodeError:
            # Models sometimes emit broken JSON; keep the text so nothing the model sent is lost.
            return {"input": arguments}
        return parsed if isinstance(parsed, dict) else {"input": parsed}
    return {"input": arguments}


def tool_calls_from_openai(raw_calls: object, index: int) -> list[ToolCall]:
    """OpenAI ``tool_calls`` (or LangChain-style ``{name, args, id}``) as ``ToolCall``s."""
    if raw_calls is None:
        return []
    if not isinstance(raw_calls, list):
        raise InvalidInputError(f"message {index} has tool_calls of type {type(raw_calls).__name__}; expected a list")
    calls: list[ToolCall] = []
    for position, call in enumerate(raw_calls):
        if not isinstance(call, dict):
            raise InvalidInputError(f"message {index}, tool call {position} is not an object")
        function = call.get("function")
        if isinstance(function, dict):
            name, args = function.get("name"), parse_arguments(function.get("arguments"))
        else:
            name, args = call.get("name"), parse_arguments(call.get("args"))
        call_id = call.get("id")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"message {index}, tool call {position} has no function name")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"message {index}, tool call {position} ({name}) has no id")
        calls.append(ToolCall(name=name, args=args, id=call_id, type="tool_call"))
    return calls


def _from_openai(raw: dict[str, Any], index: int) -> BaseMessage:
    role = raw["role"]
    content = _text_content(raw.get("content"), index)
    name = raw.get("name") if isinstance(raw.get("name"), str) else None
    if role in ("system", "developer"):
        return SystemMessage(content=content, name=name)
    if role == "user":
        return HumanMessage(content=content, name=name)
    if role == "assistant":
        if not content and isinstance(raw.get("refusal"), str):  # a refusal's text is what the model said
            content = raw["refusal"]
        return AIMessage(content=content, name=name, tool_calls=tool_calls_from_openai(raw.get("tool_calls"), index))
    if role == "tool":
        call_id = raw.get("tool_call_id")
        if not isinstance(call_id, str) or not call_id:
            raise InvalidInputError(f"message {index} is a tool result without a tool_call_id")
        return ToolMessage(content=content, tool_call_id=call_id, name=name)
    raise InvalidInputError(
        f"message {index} has role {role!r}; expected system, developer, user, assistant or tool"
    )


def _from_langchain(raw: dict[str, Any], index: int) -> BaseMessage:
    if raw.get("lc") == 1:
        ident = raw.get("id")
        class_name = ident[-1] if isinstance(ident, list) and ident else None
        kind = _LC_CLASSES.get(str(class_name))
        data = raw.get("kwargs")
        if kind is None or not isinstance(data, dict):
            raise InvalidInputError(f"message {index} is a LangChain dump of {class_name!r}, not a chat message")
    elif "data" in raw:
        kind, data = raw.get("type"), raw.get("data")
    else:
        kind, data = raw.get("type"), raw
    # messages_to_dict names a streamed chunk by its class ("AIMessageChunk"): the message it builds
    kind = _LC_CLASSES.get(kind, kind) if isinstance(kind, str) else kind
    if kind not in _LC_TYPES or not isinstance(data, dict):
        raise InvalidInputError(f"message {index} has LangChain type {kind!r}; expected one of {sorted(_LC_TYPES)}")
    payload = {k: v for k, v in data.items() if k != "type"}
    payload.setdefault("content", "")
    try:
        message = messages_from_dict([{"type": kind, "data": payload}])[0]
    except (ValueError, TypeError) as exc:
        raise InvalidInputError(f"message {index} is not a valid LangChain {kind} message: {exc}") from exc
    if isinstance(message, AIMessage) and message.invalid_tool_calls:
        message = _unparsed_calls_kept(message)
    return message


def _unparsed_calls_kept(message: AIMessage) -> AIMessage:
    """An AI message whose ``invalid_tool_calls`` (arguments that are not JSON) are tool calls
    with their text kept, as an OpenAI recording's are: the agent answered them."""
    calls = list(message.tool_calls)
    left: list[Any] = []
    for call in message.invalid_tool_calls:
        if call.get("id") and call.get("name"):
            calls.append(ToolCall(name=str(call["name"]), args=parse_arguments(call.get("args")), id=str(call["id"]), type="tool_call"))
        else:
            left.append(call)
    return message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": left})


def pairing_problem(messages: Sequence[BaseMessage]) -> str | None:
    """Why tool calls and results in ``messages`` do not pair up, or None when they do.

    A result must answer a call made earlier, and every call must be answered before the next
    non-tool message. Calls in the final assistant message may be unanswered: the recording
    ended while they ran.
    """
    pending: dict[str, tuple[str, int]] = {}
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                return (
                    f"message {index} is a tool result for tool_call_id={message.tool_call_id!r}, "
                    "but no earlier assistant message made that call"
                )
            pending.pop(message.tool_call_id)
            continue
        if pending:
            call_id, (name, at) = next(iter(pending.items()))
            return (
                f"tool call {call_id!r} ({name}) in message {at} was never answered "
                f"(message {index} follows without its result)"
            )
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                pending[str(call.get("id"))] = (call["name"], index)
    return None
