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
is never read so, nor one with an assistant reply since its first command that runs none, nor one
where a command is answered by what reads as a person's words (a chat assistant's install
command answered "ok done, it printed 2.0.0": see :mod:`ctxplugin.stages._answers_read`), nor a
user turn that does not follow such a reply (see :func:`command_outputs`).

How a conversation is read can change as it goes on. An agent whose outputs carry no
``<returncode>``/``<output>`` tags (nor an observation lead) is read as a chat until its second
command, its first output as what the user said; the call that first reads it in text mode forgets
what that output stated as the user, and reads it again as an output. A conversation that stops
being read so (a reply since the first command that runs none, an answer a person wrote) is read as
a chat, every output what the user said, from its start: what they stated is then the user's, not a
tool's; read in text mode again (the host retried that reply), what they stated as the user is
forgotten again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._cut import CUT_WORDS
from ctxplugin._layout import synthetic_kind
from ctxplugin._lru import LRU, PerMessage
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._names import FACTS_LOOKUP_NAME, META_TOOL_NAMES, NOTES_LOOKUP_NAME
from ctxplugin._roles import with_role_classes
from ctxplugin.scope import Scope
from ctxplugin.stages._commands import MARK as _MARK
from ctxplugin.stages._commands import (
    TEXT_COMMAND_NAME,
    Reading,
    as_tool_calls,
    command_outputs,
    original,
)
from ctxplugin.stages._unbound import (
    rerun_output,
    unoffered,
    unoffered_note,
    unreffed_cut,
    unreffed_facts,
)
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView, tool_label
from ctxplugin.tokens import TokenCounter, content_text, count_message


def _plain_meta(message: BaseMessage) -> dict[str, Any]:
    extra = dict(message.additional_kwargs)
    note = {k: v for k, v in annotation(message).items() if k != _MARK}
    if note:
        extra[META_KEY] = note
    else:
        extra.pop(META_KEY, None)
    return extra


_CUT_NOTE = f" {CUT_WORDS}"
"""What tells the user message a budget cut to fit (see :func:`ctxplugin._cut.cut_text`)."""

def as_text(messages: Sequence[BaseMessage], latest: tuple[str, BaseMessage] | None = None) -> list[BaseMessage]:
    """A view of a conversation read by :func:`as_tool_calls` in the agent's own form (see the
    module docstring); ``latest``: the call id and the message as received of the output the
    conversation ends with, sent whole."""
    out: list[BaseMessage] = []
    for message in messages:
        was = original(message)
        kind = synthetic_kind(message)
        if was is not None:
            out.append(was)
        elif kind is not None and (isinstance(message, ToolMessage) or (isinstance(message, AIMessage) and message.tool_calls)):
            out.append(_written(message, _as_lookup))
        elif isinstance(message, ToolMessage) and message.name == TEXT_COMMAND_NAME:
            # the output the model answers now, whole: the agent has no expand_ref to read the rest
            if latest is not None and message.tool_call_id == latest[0]:
                out.append(latest[1])
            elif message is messages[-1]:  # the output answered now, too long to go whole
                out.append(_as_output(message, latest=True))
            else:
                out.append(_written(message, _as_output))
        elif isinstance(message, AIMessage) and annotation(message).get(_MARK):
            out.append(_written(message, _with_command))
        elif isinstance(message, HumanMessage) and isinstance(message.content, str) and _CUT_NOTE in message.content:
            out.append(_written(message, _uncut))
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
    return HumanMessage(content=unoffered_note(text, refs=False) if synthetic_kind(message) == "notes" else unreffed_facts(text),
                        additional_kwargs=message.additional_kwargs)


def _as_output(message: ToolMessage, *, latest: bool = False) -> HumanMessage:
    """An output read by :func:`_as_result` (stored and summarised since) as a user message;
    neither its ref line nor its summary offers ``expand_ref``, which the agent is not given:
    the line says what running the command again shows (see :func:`rerun_output`)."""
    content = message.content
    if isinstance(content, str):
        content = rerun_output(content, latest=latest, ref=annotation(message).get("ref"))
    return HumanMessage(content=content, id=message.id, additional_kwargs=_plain_meta(message))


def _uncut(message: HumanMessage) -> BaseMessage:
    """A user message cut to fit, its note naming neither ``expand_ref`` nor the ref."""
    text = content_text(message.content)
    bare = unreffed_cut(unoffered(text))
    return message if bare == text else message.model_copy(update={"content": bare})


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
    """Show the stages a text-mode conversation as the tool calls it stands for.

    A session's reading is carried to its next call (claimed while a call runs, as
    :class:`~ctxplugin.stages.validate.Validate` does): only the messages appended are read.

    Attributes:
        forget_said: called on a call that reads a session in text mode after calls that did
            not, with the conversation as received, the scope and the indexes of the outputs
            those calls may have read as what the user said (see :meth:`Reading.first`): what
            they stated as the user is forgotten, and they are read again as outputs.
    """

    name: ClassVar[str] = "text_mode"
    forget_said: Callable[[Sequence[BaseMessage], Scope, Sequence[int]], None] | None = None
    _sessions: LRU[str, Reading] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def apply(self, view: CallView) -> CallView:
        if any(tool_label(tool) not in META_TOOL_NAMES for tool in view.tools_given):  # a host that binds tools calls them
            return view
        key = view.scope.key()
        with self._lock:
            reading = self._sessions.pop(key, None)
        if reading is None:
            reading = Reading()
        # a user's, the model's or the system's ChatMessage read as its class first (as validation
        # reads it next: the very same objects), so that an output sent back in one is read as one
        received = with_role_classes(view.received)
        try:
            found = reading.read(received)
        except (AttributeError, TypeError):  # no message, or one whose content is no text: validate, next, says which
            return view
        said = reading.first(received, found[1]) if found is not None else []
        with self._lock:
            self._sessions.put(key, reading)
        if found is None:
            return view
        read, outputs, latest = found
        if said and self.forget_said is not None:
            self.forget_said(received, view.scope, said)
        return view.override(received=read, text_outputs=(received, outputs, latest))


@dataclass(frozen=True, slots=True)
class WriteCommands:
    """Give a text-mode conversation's view back in the agent's own form, its sections counted
    as sent (the latest output whole, not as its summary was budgeted, unless whole it would
    not fit the total budget).

    Attributes:
        counter: counts the messages written back.
    """

    name: ClassVar[str] = "text_view"
    counter: TokenCounter

    def apply(self, view: CallView) -> CallView:
        if view.text_outputs is None or view.fitted is None:
            return view
        received, _, latest = view.text_outputs
        fitted = view.fitted
        tools = dict(fitted.sections)
        # an agent that writes its commands as text calls no tool: expand_ref is not bound
        if view.expand_ref is not None and view.expand_ref in view.tools:
            tools["tools"] = max(0, tools.get("tools", 0) - view.expand_ref_tokens)
        messages, sections = self._written(fitted.messages, tools, (latest, received[-1]) if latest is not None else None)
        if latest is not None and fitted.within_budget and sum(sections.values()) > view.budgets["total"]:
            # the latest output whole would not fit: it goes as it was fitted, stored and summarised
            messages, sections = self._written(fitted.messages, tools, None)
        within = fitted.within_budget and sum(sections.values()) <= view.budgets["total"]
        return view.override(
            tools=tuple(t for t in view.tools if tool_label(t) not in META_TOOL_NAMES),
            tool_tokens=sections.get("tools", 0),
            fitted=replace(fitted, messages=messages, sections=sections, within_budget=within),
        )

    def _written(
        self, fitted: Sequence[BaseMessage], sections: dict[str, int], latest: tuple[str, BaseMessage] | None
    ) -> tuple[tuple[BaseMessage, ...], dict[str, int]]:
        """``fitted`` written back (see :func:`as_text`) and ``sections`` counted as sent."""
        messages = tuple(as_text(fitted, latest))
        sections = dict(sections)
        for read, sent in zip(fitted, messages, strict=True):
            if read is not sent:
                kind = synthetic_kind(read)
                section = kind if kind == "facts" else "summaries" if isinstance(read, ToolMessage) and kind is None else "history"
                if section in sections:
                    sections[section] += count_message(sent, self.counter) - count_message(read, self.counter)
        return messages, sections


__all__ = ["TEXT_COMMAND_NAME", "ReadCommands", "WriteCommands", "as_text", "as_tool_calls", "command_outputs"]
