"""Text-mode agents: a command in a fenced block of the reply, its output back as a user message.

An agent that does not use tool calling (mini-swe-agent's text format, ReAct-style loops) ends
its reply with the command in a fenced shell block and gets what the command printed as the next
*user* message. Read as they stand, those outputs were what the user said: their values facts of
the user's, every output an exchange of its own, never stored behind a ref, and what ctxplugin
adds placed in system messages, where every change rewrites the whole cached prompt.

:class:`ReadCommands` runs first and shows the stages such a conversation as the tool calls it
stands for: each command reply an assistant message calling :data:`TEXT_COMMAND_NAME`, each
output its tool result, so that the outputs are compressed, stored, marked and read as tool
outputs are. :class:`WriteCommands` runs last and gives the view back in the agent's own form:
every assistant message without that call and every output a user message again, and each
lookup of ctxplugin's (context notes, the facts block) an assistant turn naming it followed by
a user message holding its text, as a command and its output. The output the model answers now
is sent whole, as received. A conversation that binds a tool of the host's or holds a tool call
is never read so, nor one with an assistant reply since its first command that runs none (a chat
assistant's install command answered by what the user says), nor a user turn that does not
follow such a reply (see :func:`command_outputs`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._layout import is_note, synthetic_kind
from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._names import FACTS_LOOKUP_NAME, META_TOOL_NAMES, NOTES_LOOKUP_NAME
from ctxplugin.cas.capture import EXPAND_MORE
from ctxplugin.history._dropped import without_expand_hint
from ctxplugin.stages.view import CallView
from ctxplugin.tokens import TokenCounter, content_text, count_message

TEXT_COMMAND_NAME = "command"
"""The name the command of a text-mode reply is called by while the stages read it."""

_OPENING = re.compile(r"```(bash|sh|shell|zsh|console|mswea_bash_command)[ \t]*\r?\n", re.IGNORECASE)
_OUTPUT_TAGS = re.compile(r"\A\s*<(?:returncode|output)>")
_MARK = "text_mode"
_BLOCKS: PerMessage[tuple[int, str, str] | tuple[()]] = PerMessage(8192)


def _final_block(message: AIMessage) -> tuple[int, str, str] | tuple[()]:
    """Where the fenced shell block ending ``message``'s text starts, its fence and its command,
    or ``()``: the last fence is found from the end, once per message (a reply of many blocks
    is not searched again from each of them)."""
    found = _BLOCKS.get(message)
    if found is None:
        found = ()
        text = message.content
        if isinstance(text, str):
            end = len(text.rstrip())
            opening = text.rfind("```", 0, end - 3) if text.endswith("```", 0, end) else -1
            fence = _OPENING.match(text, opening) if opening >= 0 else None
            if fence is not None and fence.end() <= end - 3 + 1:
                command = text[fence.end() : end - 3]
                command = command[:-2] if command.endswith("\r\n") else command[:-1] if command.endswith("\n") else command
                found = (opening, fence[1], command)
        _BLOCKS.put(message, found)
    return found


def _tool_names(tools: Sequence[Any]) -> set[str]:
    names: set[str] = set()
    for tool in tools:
        name = tool.get("name") or tool.get("function", {}).get("name") if isinstance(tool, dict) else getattr(tool, "name", None)
        names.add(str(name) if name else repr(tool))
    return names


def _asks_for_format(message: BaseMessage) -> bool:
    """Whether ``message`` answers a reply by asking for the command's format, as
    mini-swe-agent's format error does (its template quotes the fenced block)."""
    text = content_text(message.content)
    return "```" in text or "backticks" in text.lower()


def command_outputs(messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> list[int]:
    """Indexes of the user messages of ``messages`` that are a command's output, in a
    conversation that holds no tool call, is given no tool but ctxplugin's own, and whose
    assistant replies since the first command all run one: each ends with a fenced shell block
    (or holds one and is answered with mini-swe-agent's ``<returncode>``/``<output>`` tags),
    except a reply answered by a request for that format (mini-swe-agent's format error). It
    takes two such commands, or one answered with those tags: a chat assistant that once ends a
    reply with an install command has its user's answer read as what the user said. The first
    user message (the task) is never an output."""
    if _tool_names(tools) - META_TOOL_NAMES:
        return []
    found: list[int] = []
    commands = tagged = 0
    task = True
    for index, message in enumerate(messages):
        if isinstance(message, ToolMessage):
            return []
        if isinstance(message, HumanMessage) and task and not is_note(message):
            task = False
        if not isinstance(message, AIMessage):
            continue
        if message.tool_calls:
            return []
        after = messages[index + 1] if index + 1 < len(messages) else None
        answer = after if isinstance(after, HumanMessage) and not is_note(after) and not task else None
        tags = answer is not None and bool(_OUTPUT_TAGS.match(content_text(answer.content)))
        text = message.content
        if _final_block(message) or (tags and isinstance(text, str) and "```" in text):
            commands += 1
            tagged += tags
            if answer is not None:
                found.append(index + 1)
        elif commands and not (answer is not None and _asks_for_format(answer)):
            return []
    return found if commands >= 2 or tagged else []


_CALLS: PerMessage[dict[str, AIMessage]] = PerMessage(4096)
_RESULTS: PerMessage[dict[str, ToolMessage]] = PerMessage(4096)


def _as_call(message: AIMessage, call_id: str) -> AIMessage:
    made = _CALLS.get(message)
    if made is None:
        made = {}
        _CALLS.put(message, made)
    if call_id not in made:
        # a command at the end of the reply becomes the call's argument: compression keeps a
        # call's arguments where it shortens the text, and the block is written back after it
        text = content_text(message.content)
        found = _final_block(message)
        fence, args = (found[1], {"command": found[2]}) if found else (True, {})
        extra = {**message.additional_kwargs, META_KEY: {**annotation(message), _MARK: fence}}
        made[call_id] = message.model_copy(update={
            "content": text[: found[0]].rstrip() if found else message.content,
            "tool_calls": [{"name": TEXT_COMMAND_NAME, "args": args, "id": call_id, "type": "tool_call"}],
            "additional_kwargs": extra,
        })
    return made[call_id]


def _as_result(message: HumanMessage, call_id: str) -> ToolMessage:
    made = _RESULTS.get(message)
    if made is None:
        made = {}
        _RESULTS.put(message, made)
    if call_id not in made:
        extra = {**message.additional_kwargs, META_KEY: {**annotation(message), _MARK: True}}
        made[call_id] = ToolMessage(content=message.content, tool_call_id=call_id, name=TEXT_COMMAND_NAME, id=message.id,
                                    additional_kwargs=extra)
    return made[call_id]


def as_tool_calls(messages: Sequence[BaseMessage], outputs: Sequence[int]) -> list[BaseMessage]:
    """``messages`` with each output at ``outputs`` a tool result of the reply before it, which
    calls it (the same objects on every call for the same messages)."""
    out = list(messages)
    for index, call_id in zip(outputs, _call_ids(messages, outputs), strict=True):
        out[index - 1], out[index] = _pair(messages, index, call_id)
    return out


_DIGESTS: PerMessage[str] = PerMessage(8192)


def _digest(message: BaseMessage) -> str:
    found = _DIGESTS.get(message)
    if found is None:
        found = hashlib.sha256(content_text(message.content).encode("utf-8", "surrogatepass")).hexdigest()
        _DIGESTS.put(message, found)
    return found


def _call_ids(messages: Sequence[BaseMessage], outputs: Sequence[int]) -> list[str]:
    """The id of each command at ``outputs``: a digest of the reply and its output, and which
    repetition of that pair it is, so that a host dropping the oldest messages leaves the
    others' ids as they were."""
    seen: dict[str, int] = {}
    ids: list[str] = []
    for index in outputs:
        digest = hashlib.sha256((_digest(messages[index - 1]) + _digest(messages[index])).encode()).hexdigest()[:16]
        repeat = seen[digest] = seen.get(digest, -1) + 1
        ids.append(f"command_{digest}" + (f"_{repeat}" if repeat else ""))
    return ids


def _pair(messages: Sequence[BaseMessage], index: int, call_id: str) -> tuple[AIMessage, ToolMessage]:
    reply, output = messages[index - 1], messages[index]
    if not isinstance(reply, AIMessage) or not isinstance(output, HumanMessage):
        raise TypeError("a command's output follows the reply that ran it")
    return _as_call(reply, call_id), _as_result(output, call_id)


def _plain_meta(message: BaseMessage) -> dict[str, Any]:
    extra = dict(message.additional_kwargs)
    note = {k: v for k, v in annotation(message).items() if k != _MARK}
    if note:
        extra[META_KEY] = note
    else:
        extra.pop(META_KEY, None)
    return extra


def as_text(messages: Sequence[BaseMessage], received: Sequence[BaseMessage], outputs: Sequence[int]) -> list[BaseMessage]:
    """A view of the conversation read by :func:`as_tool_calls` in the agent's own form (see the
    module docstring); ``received`` and ``outputs`` as given to it."""
    originals: dict[int, BaseMessage] = {}
    ids = _call_ids(received, outputs)
    for index, call_id in zip(outputs, ids, strict=True):
        call, result = _pair(received, index, call_id)
        originals[id(call)], originals[id(result)] = received[index - 1], received[index]
    # the output the model answers now, whole: the agent has no expand_ref to read the rest
    latest = ids[-1] if outputs and outputs[-1] == len(received) - 1 else None
    out: list[BaseMessage] = []
    for message in messages:
        original = originals.get(id(message))
        kind = synthetic_kind(message)
        if original is not None:
            out.append(original)
        elif kind is not None and (isinstance(message, ToolMessage) or (isinstance(message, AIMessage) and message.tool_calls)):
            out.append(_written(message, _as_lookup))
        elif isinstance(message, ToolMessage) and message.name == TEXT_COMMAND_NAME:
            out.append(received[-1] if message.tool_call_id == latest else _written(message, _as_output))
        elif isinstance(message, AIMessage) and annotation(message).get(_MARK):
            out.append(_written(message, _with_command))
        else:
            out.append(message)
    return out


_WRITTEN: PerMessage[BaseMessage] = PerMessage(4096)


def _written(message: Any, write: Callable[[Any], BaseMessage]) -> BaseMessage:
    """``write(message)``, the same object for the same message on every call (what is derived
    from it, its token count, is then found by identity)."""
    made = _WRITTEN.get(message)
    if made is None:
        made = write(message)
        _WRITTEN.put(message, made)
    return made


def _as_lookup(message: BaseMessage) -> BaseMessage:
    """A message of a lookup pair (see :func:`ctxplugin._layout.lookup_pair`) as a text-mode
    agent's: the call an assistant turn naming the lookup, the result a user message holding its
    text."""
    if isinstance(message, AIMessage):
        name = FACTS_LOOKUP_NAME if synthetic_kind(message) == "facts" else NOTES_LOOKUP_NAME
        return AIMessage(content=f"[{name}]", additional_kwargs=message.additional_kwargs)
    text = content_text(message.content)
    return HumanMessage(content=without_expand_hint(text) if synthetic_kind(message) == "notes" else text,
                        additional_kwargs=message.additional_kwargs)


def _as_output(message: ToolMessage) -> HumanMessage:
    """An output read by :func:`_as_result` (stored and summarised since) as a user message; its
    ref line offers no ``expand_ref``, which the agent is not given."""
    content = message.content
    if isinstance(content, str) and content.startswith("[ref:"):
        line = content.partition("\n")[0]
        if line.endswith(EXPAND_MORE):
            content = line[: -len(EXPAND_MORE)] + "]" + content[len(line):]
    return HumanMessage(content=content, id=message.id, additional_kwargs=_plain_meta(message))


def _with_command(message: AIMessage) -> AIMessage:
    """A reply read by :func:`_as_call` (compressed since) with its command written back as the
    fenced block it was."""
    fence = annotation(message).get(_MARK)
    text = content_text(message.content)
    for call in message.tool_calls:
        command = call["args"].get("command")
        if isinstance(fence, str) and isinstance(command, str):
            text = f"{text}\n\n```{fence}\n{command}\n```" if text else f"```{fence}\n{command}\n```"
    return message.model_copy(update={"content": text, "tool_calls": [], "additional_kwargs": _plain_meta(message)})


@dataclass(frozen=True, slots=True)
class ReadCommands:
    """Show the stages a text-mode conversation as the tool calls it stands for."""

    name: ClassVar[str] = "text_mode"

    def apply(self, view: CallView) -> CallView:
        outputs = command_outputs(view.received, view.tools_given)
        if not outputs:
            return view
        return view.override(received=as_tool_calls(view.received, outputs), text_outputs=(view.received, tuple(outputs)))


@dataclass(frozen=True, slots=True)
class WriteCommands:
    """Give a text-mode conversation's view back in the agent's own form, its sections counted
    as sent (the latest output whole, not as its summary was budgeted).

    Attributes:
        counter: counts the messages written back.
    """

    name: ClassVar[str] = "text_view"
    counter: TokenCounter

    def apply(self, view: CallView) -> CallView:
        if view.text_outputs is None or view.fitted is None:
            return view
        received, outputs = view.text_outputs
        fitted = view.fitted
        messages = tuple(as_text(fitted.messages, received, outputs))
        sections = dict(fitted.sections)
        for read, sent in zip(fitted.messages, messages, strict=True):
            if read is not sent:
                kind = synthetic_kind(read)
                section = kind if kind == "facts" else "summaries" if isinstance(read, ToolMessage) and kind is None else "history"
                if section in sections:
                    sections[section] += count_message(sent, self.counter) - count_message(read, self.counter)
        # an agent that writes its commands as text calls no tool: expand_ref is not bound
        if view.expand_ref is not None and view.expand_ref in view.tools:
            sections["tools"] = max(0, sections.get("tools", 0) - view.expand_ref_tokens)
        within = fitted.within_budget and sum(sections.values()) <= view.budgets["total"]
        return view.override(
            tools=tuple(t for t in view.tools if not _tool_names([t]) & META_TOOL_NAMES),
            tool_tokens=sections.get("tools", 0),
            fitted=replace(fitted, messages=messages, sections=sections, within_budget=within),
        )


__all__ = ["TEXT_COMMAND_NAME", "ReadCommands", "WriteCommands", "as_text", "as_tool_calls", "command_outputs"]
