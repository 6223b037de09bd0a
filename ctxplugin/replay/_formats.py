"""The formats recordings come in: which one parsed content is in, and how each one's content
becomes conversations (see :mod:`ctxplugin.replay.loaders` for the list)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, get_args

from langchain_core.messages import BaseMessage

from ctxplugin.errors import InvalidInputError
from ctxplugin.replay import _anthropic, _chat_logs, _langsmith, _responses
from ctxplugin.replay._conversation import Conversation, ExpectedAction, RecordedUsage
from ctxplugin.replay._messages import (
    is_langchain_message,
    is_message,
    is_openai_message,
    to_message,
    to_messages,
)
from ctxplugin.replay._tools_file import holds_tool_schemas

Format = Literal["openai", "anthropic", "langchain", "langsmith", "swe", "tau"]
FORMATS: tuple[Format, ...] = get_args(Format)


SWE_BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the repository and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command to run"}},
            "required": ["command"],
        },
    },
}
"""The one tool of a mini-swe-agent recording, which holds no schema: what a replay that needs the
agent's tool list binds for it."""


def detect(data: Any) -> Format:
    """The format of parsed file content.

    Raises:
        InvalidInputError: no supported format matches (the message lists them).
    """
    if isinstance(data, dict):
        if str(data.get("trajectory_format", "")).startswith("mini-swe-agent"):
            return "swe"
        if isinstance(data.get("runs"), list) or _langsmith.is_run(data):
            return "langsmith"
        messages = data.get("messages")
        if isinstance(messages, list) and messages:
            if any(isinstance(m, dict) and "extra" in m for m in messages) and "instance_id" in data:
                return "swe"
            if _anthropic.is_request(data):
                return "anthropic"
            return _chat_dialect(messages)
        if _responses.is_request(data):
            return "openai"
        if state := _chat_logs.state_messages(data):
            return _chat_dialect(state)
    elif isinstance(data, list) and data:
        first = data[0]
        if _responses.is_request(first):
            return "openai"
        if state := _chat_logs.state_messages(first):
            return _chat_dialect(state)
        if isinstance(first, dict) and "traj" in first and "task_id" in first:
            return "tau"
        if _langsmith.is_run(first):
            return "langsmith"
        if _anthropic.is_request(first) or _anthropic.is_response(first):
            return "anthropic"
        if is_message(first):
            return _chat_dialect(data)
        if isinstance(first, dict) and isinstance(first.get("messages"), list) and first["messages"]:
            return _chat_dialect(first["messages"])
        if isinstance(first, list) and first:
            return _chat_dialect(first)
    if data == [] or (isinstance(data, list) and all(item == [] for item in data)):
        raise InvalidInputError("the file holds an empty list: no conversation to replay")
    if isinstance(data, dict) and data.get("messages") == []:
        raise InvalidInputError("'messages' is an empty list: no conversation to replay")
    if holds_tool_schemas(data):
        raise InvalidInputError("the file holds tool schemas, not a conversation: give it with --tools FILE")
    raise InvalidInputError(
        "unknown format: expected OpenAI chat messages or Responses API requests, Anthropic Messages API requests, LangChain message dumps, a LangSmith run "
        f"export, a mini-swe-agent .traj.json or a tau-bench trajectory list (or pass --format {{{','.join(FORMATS)}}})"
    )


def _chat_dialect(messages: Sequence[Any]) -> Format:
    first = messages[0]
    if _anthropic.has_tool_blocks(messages):
        return "anthropic"
    if is_openai_message(first):
        return "openai"
    if is_langchain_message(first):
        return "langchain"
    raise InvalidInputError(f"unknown format: the first item is not a chat message ({_describe(first)})")


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:6]}"
    return f"a {type(value).__name__}"


Builder = tuple[str, Any]  # (conversation id, zero-argument callable building a Conversation)


def _chat(data: Any, stem: str) -> list[Builder]:
    if isinstance(data, dict):
        if not isinstance(data.get("messages"), list) and not _responses.is_request(data) and _chat_logs.state_messages(data) is None:
            raise InvalidInputError("expected a 'messages' list (or a Responses API request's 'input')")
        data = [data]
    elif isinstance(data, list) and data and all(is_message(m) for m in data):
        data = [data]
    elif isinstance(data, list) and data and is_message(data[0]):  # a message list with a stray item
        index, item = next((i, m) for i, m in enumerate(data) if not is_message(m))
        raise InvalidInputError(f"item {index} is {_describe(item)}, not a message like the items before it")
    if not isinstance(data, list):
        raise InvalidInputError("expected a message list, a conversation or a list of them")
    logged = _chat_logs.group(data)
    if not logged:
        raise InvalidInputError("no conversation found")
    named = [(item.id or (stem if len(logged) == 1 else f"{stem}#{index}"), item) for index, item in enumerate(logged)]
    seen: set[str] = set()
    for index, (cid, item) in enumerate(named):  # an id names one conversation, as in a tau file
        if cid in seen:
            named[index] = (cid := f"{cid}#{index}", item)
        seen.add(cid)
    return [
        (
            cid,
            lambda item=item, cid=cid: Conversation(
                id=cid, messages=tuple(to_messages(item.messages)), usage=tuple(item.usage), tools=item.tools
            ),
        )
        for cid, item in named
    ]


def _swe(data: Any, stem: str) -> list[Builder]:
    if not isinstance(data, dict) or not isinstance(data.get("messages"), list):
        raise InvalidInputError("a mini-swe-agent trajectory needs a 'messages' list")
    cid = str(data.get("instance_id") or stem)
    return [(cid, lambda: _swe_conversation(cid, data["messages"]))]


def _swe_conversation(cid: str, raw_messages: list[Any]) -> Conversation:
    messages: list[BaseMessage] = []
    usage: list[RecordedUsage] = []
    for index, raw in enumerate(raw_messages):
        if not isinstance(raw, dict):
            raise InvalidInputError(f"message {index} is {_describe(raw)}, not a message")
        if raw.get("role") == "exit":  # the run's submission record, not a chat message
            continue
        extra = _mapping(raw.get("extra"))
        response = _mapping(extra.get("response"))
        fields = {k: v for k, v in raw.items() if k in ("role", "content", "name", "tool_call_id")}
        if raw.get("role") == "assistant":
            fields["tool_calls"] = raw.get("tool_calls") or _response_tool_calls(response)
            figures = _chat_logs.openai_usage(response.get("usage"))
            if figures is not None:
                usage.append(figures)
        message = to_message(fields, index)
        messages.append(message.model_copy(update={"id": f"msg-{index}"}))
    return Conversation(id=cid, messages=tuple(messages), usage=tuple(usage))


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _response_tool_calls(response: dict[str, Any]) -> list[Any]:
    choices = response.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if isinstance(message, dict):
            calls = message.get("tool_calls")
            return calls if isinstance(calls, list) else []
    return []


def _tau(data: Any, stem: str) -> list[Builder]:
    if not isinstance(data, list):
        raise InvalidInputError("a tau-bench file is a list of {task_id, trial, traj} records")
    builders: list[Builder] = []
    seen: set[str] = set()
    for index, record in enumerate(data):
        if not isinstance(record, dict) or not isinstance(record.get("traj"), list):
            raise InvalidInputError(f"record {index} has no 'traj' list")
        cid = f"task-{record.get('task_id', index)}-trial-{record.get('trial', 0)}"
        if cid in seen:
            cid = f"{cid}#{index}"
        seen.add(cid)
        builders.append(
            (
                cid,
                lambda record=record, cid=cid: Conversation(
                    id=cid, messages=tuple(to_messages(record["traj"])), actions=_tau_actions(record)
                ),
            )
        )
    return builders


def _tau_actions(record: dict[str, Any]) -> tuple[ExpectedAction, ...]:
    """The task's ground-truth tool calls: ``info.task.actions`` (else ``info.reward_info.actions``);
    malformed entries are left out (they only feed a metric)."""
    info = _mapping(record.get("info"))
    actions = _mapping(info.get("task")).get("actions")
    if not isinstance(actions, list):
        actions = _mapping(info.get("reward_info")).get("actions")
    if not isinstance(actions, list):
        return ()
    return tuple(
        ExpectedAction(name=item["name"], kwargs=_mapping(item.get("kwargs")))
        for item in actions
        if isinstance(item, dict) and isinstance(item.get("name"), str)
    )


PARSERS: dict[Format, Any] = {
    "openai": _chat,
    "anthropic": _anthropic.parse,
    "langchain": _chat,
    "langsmith": _langsmith.parse,
    "swe": _swe,
    "tau": _tau,
}


__all__ = ["FORMATS", "PARSERS", "SWE_BASH_TOOL", "Builder", "Format", "detect"]
