"""Tool call ids made unique within a view.

A model may give a later tool call the id of an earlier one (the airline recordings made with
gpt-4o hold such reuses), and a host keeps its messages as they came. Anthropic refuses a
request in which two ``tool_use`` blocks share an id, and the OpenAI Responses formatter keeps
only one of the two calls: such a conversation, sent as it is, fails there. In the view, a call
whose id an earlier call of the view already has gets that id with ``_<n>`` appended (``n``: the
how-manieth call of the view with that id; a digest of it past the 40 characters OpenAI takes,
as :func:`~ctxplugin._names.own_call_id` makes the id of a late result), and so does the tool result that answers it — the
first result with that id after the call. The ids of the content blocks that stand for the
call (``tool_use``, ``tool_call``, ``function_call``) follow, so a formatter that reads the
blocks finds one call, not two.

A renamed copy is made once per message and number, so an unchanged view is the same objects
call after call (a provider's prompt cache serves it).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin._lru import PerMessage
from ctxplugin._names import own_call_id

_BLOCK_ID = {"tool_use": "id", "tool_call": "id", "function_call": "call_id"}
"""Content block types that stand for a call, and the key of the call's id in each."""

_RENAMED: PerMessage[tuple[tuple[str, ...], BaseMessage]] = PerMessage(1024)
"""Each renamed copy, by the message it was made from and the ids it was given."""


def unique_call_ids(messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
    """``messages`` with every tool call id used again by a later call renamed there, and in
    the tool result that answers it; ``messages`` itself when no id is used twice."""
    made = [c.get("id") or "" for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    if len(made) == len(set(made)) or not any(made):
        return messages
    taken = set(made)
    uses: dict[str, int] = {}
    waiting: dict[str, deque[str]] = {}  # id -> the ids the next results with it answer, in order
    out: list[BaseMessage] | None = None
    for index, message in enumerate(messages):
        names: tuple[str, ...] = ()  # the message's call ids (its result's id) as the view gives them
        if isinstance(message, AIMessage) and message.tool_calls:
            given: list[str] = []
            for call in message.tool_calls:
                call_id = name = call.get("id") or ""
                if call_id:
                    uses[call_id] = number = uses.get(call_id, 0) + 1
                    if number > 1:
                        name = own_call_id(call_id, str(number), taken.__contains__)
                        taken.add(name)
                    waiting.setdefault(call_id, deque()).append(name)
                given.append(name)
            if any(new != (call.get("id") or "") for new, call in zip(given, message.tool_calls, strict=True)):
                names = tuple(given)
        elif isinstance(message, ToolMessage) and message.tool_call_id in waiting:
            queue = waiting[message.tool_call_id]
            name = queue.popleft() if queue else message.tool_call_id
            if name != message.tool_call_id:
                names = (name,)
        if names:
            if out is None:
                out = list(messages[:index])
            out.append(_renamed(message, names))
        elif out is not None:
            out.append(message)
    return messages if out is None else out


def _renamed(message: BaseMessage, names: tuple[str, ...]) -> BaseMessage:
    """A copy of ``message`` whose calls (or whose result) have the ids ``names``."""
    found = _RENAMED.get(message)
    if found is not None and found[0] == names:
        return found[1]
    if isinstance(message, ToolMessage):
        copy: BaseMessage = message.model_copy(update={"tool_call_id": names[0]})
    else:
        assert isinstance(message, AIMessage)
        calls = [{**call, "id": name} if call.get("id") else call for call, name in zip(message.tool_calls, names, strict=True)]
        copy = message.model_copy(update={"tool_calls": calls, "content": _renamed_blocks(message.content, message.tool_calls, names)})
    _RENAMED.put(message, (names, copy))
    return copy


def _renamed_blocks(content: Any, calls: Sequence[Any], names: Sequence[str]) -> Any:
    """``content`` with the ids of its call blocks renamed as ``calls`` are to ``names``: the
    blocks with one id, in order, take the new ids of the calls with that id, in order."""
    if not isinstance(content, list):
        return content
    pending: dict[str, deque[str]] = {}
    for call, name in zip(calls, names, strict=True):
        if call.get("id"):
            pending.setdefault(call["id"], deque()).append(name)
    blocks: list[Any] = []
    for block in content:
        key = _BLOCK_ID.get(str(block.get("type"))) if isinstance(block, dict) else None
        queue = pending.get(str(block.get(key))) if key is not None else None
        blocks.append({**block, key: queue.popleft()} if queue and key is not None else block)
    return blocks


__all__ = ["unique_call_ids"]
