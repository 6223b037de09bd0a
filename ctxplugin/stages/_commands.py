"""A text-mode conversation read as the tool calls it stands for (see :mod:`ctxplugin.stages.text_mode`).

What is read of one message (the fenced block ending a reply, a digest of its text, its form as
a tool call or result) is read once and memoised by the message. A session's reading is carried
from one call to the next (:class:`Reading`): a host that resends its conversation with a few
messages appended has only those read, so a call costs the same early and late in a session.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._layout import is_note
from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._names import META_TOOL_NAMES
from ctxplugin._prefix import Prefix
from ctxplugin.stages._answers_read import output_form, written_by_person
from ctxplugin.stages.view import tool_label
from ctxplugin.tokens import content_text

TEXT_COMMAND_NAME = "command"
"""The name the command of a text-mode reply is called by while the stages read it."""

MARK = "text_mode"
"""The annotation that tells a message read from a text-mode one."""

_OPENING = re.compile(r"```(bash|sh|shell|zsh|console|mswea_bash_command)[ \t]*\r?\n", re.IGNORECASE)
_BLOCKS: PerMessage[tuple[int, str, str] | tuple[()]] = PerMessage(8192)


def final_block(message: AIMessage) -> tuple[int, str, str] | tuple[()]:
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
            if fence is not None and fence.end() <= end - 3:
                command = text[fence.end() : end - 3]
                command = command[:-2] if command.endswith("\r\n") else command[:-1] if command.endswith("\n") else command
                found = (opening, fence[1], command)
        _BLOCKS.put(message, found)
    return found


def _asks_for_format(message: BaseMessage) -> bool:
    """Whether ``message`` answers a reply by asking for the command's format, as
    mini-swe-agent's format error does (its template quotes the fenced block)."""
    text = content_text(message.content)
    return "```" in text or "backticks" in text.lower()


_READ_AS: PerMessage[dict[str, BaseMessage]] = PerMessage(8192)
_ORIGINALS: PerMessage[BaseMessage] = PerMessage(8192)


def original(message: BaseMessage) -> BaseMessage | None:
    """The message of the agent's that ``message`` (a call or result read from it) stands for."""
    return _ORIGINALS.get(message)


def _read_as(message: BaseMessage, call_id: str, make: Callable[[Any, str], BaseMessage]) -> BaseMessage:
    """``make(message, call_id)``, the same object for the same message and id on every call,
    remembered as standing for ``message`` (see :func:`original`)."""
    made = _READ_AS.get(message)
    if made is None:
        made = {}
        _READ_AS.put(message, made)
    if call_id not in made:
        made[call_id] = read = make(message, call_id)
        _ORIGINALS.put(read, message)
    return made[call_id]


def _as_call(message: AIMessage, call_id: str) -> AIMessage:
    # a command at the end of the reply becomes the call's argument: compression keeps a
    # call's arguments where it shortens the text, and the block is written back after it
    text = content_text(message.content)
    found = final_block(message)
    fence, args = (found[1], {"command": found[2]}) if found else (True, {})
    extra = {**message.additional_kwargs, META_KEY: {**annotation(message), MARK: fence}}
    return message.model_copy(update={
        "content": text[: found[0]].rstrip() if found else message.content,
        "tool_calls": [{"name": TEXT_COMMAND_NAME, "args": args, "id": call_id, "type": "tool_call"}],
        "additional_kwargs": extra,
    })


def _as_result(message: HumanMessage, call_id: str) -> ToolMessage:
    extra = {**message.additional_kwargs, META_KEY: {**annotation(message), MARK: True}}
    return ToolMessage(content=message.content, tool_call_id=call_id, name=TEXT_COMMAND_NAME, id=message.id, additional_kwargs=extra)


_DIGESTS: PerMessage[str] = PerMessage(8192)


def _digest(message: BaseMessage) -> str:
    found = _DIGESTS.get(message)
    if found is None:
        found = hashlib.sha256(content_text(message.content).encode("utf-8", "surrogatepass")).hexdigest()
        _DIGESTS.put(message, found)
    return found


class _Scan:
    """How far the reading of one conversation got: the state before the reply at ``upto``.

    Each command's id is a digest of the reply and its output, and which repetition of that
    pair it is, so that a host dropping the oldest messages leaves the others' ids as they were."""

    __slots__ = ("commands", "dead", "ids", "outputs", "read", "seen", "tagged", "task", "upto")

    def __init__(self) -> None:
        self.upto = 0
        self.read: list[BaseMessage] = []  # the messages before upto as tool calls
        self.outputs: list[int] = []
        self.ids: list[str] = []
        self.seen: dict[str, int] = {}
        self.commands = self.tagged = 0
        self.task = True  # the first user message (the task) not met yet
        self.dead = False  # a tool call, a reply since the first command that runs none, or a person answering a command

    def copy(self) -> _Scan:
        other = _Scan()
        other.upto, other.read, other.outputs, other.ids, other.seen = self.upto, self.read[:], self.outputs[:], self.ids[:], dict(self.seen)
        other.commands, other.tagged, other.task, other.dead = self.commands, self.tagged, self.task, self.dead
        return other

    def go_on(self, messages: Sequence[BaseMessage], stop: int) -> None:
        """Read ``messages[upto:stop]``; a reply's answer may be past ``stop``."""
        self.read.extend(messages[len(self.read) : stop])
        for index in range(self.upto, stop):
            if self.dead:
                break
            message = messages[index]
            if isinstance(message, ToolMessage):
                self.dead = True
            elif isinstance(message, HumanMessage):
                self.task = self.task and is_note(message)
            elif isinstance(message, AIMessage):
                self._reply(messages, index, message)
        self.upto = stop

    def _reply(self, messages: Sequence[BaseMessage], index: int, message: AIMessage) -> None:
        if message.tool_calls:
            self.dead = True
            return
        after = messages[index + 1] if index + 1 < len(messages) else None
        answer = after if isinstance(after, HumanMessage) and not self.task and not is_note(after) else None
        text = message.content
        tagged = answer is not None and output_form(answer)
        if final_block(message) or (isinstance(text, str) and "```" in text and tagged):
            self.commands += 1
            if answer is None:
                return
            if not tagged and written_by_person(answer):  # a person answering the command they were given: a chat
                self.dead = True
                return
            self.tagged += tagged
            digest = hashlib.sha256((_digest(message) + _digest(answer)).encode()).hexdigest()[:16]
            repeat = self.seen[digest] = self.seen.get(digest, -1) + 1
            call_id = f"command_{digest}" + (f"_{repeat}" if repeat else "")
            self.outputs.append(index + 1)
            self.ids.append(call_id)
            if len(self.read) <= index + 1:
                self.read.append(answer)
            self.read[index], self.read[index + 1] = _read_as(message, call_id, _as_call), _read_as(answer, call_id, _as_result)
        elif self.commands and not (answer is not None and _asks_for_format(answer)):
            self.dead = True

    @property
    def commanded(self) -> bool:
        """Whether the conversation read is a text-mode agent's: no tool call, every reply since
        the first command one (or answered by a request for the format), no command answered by
        a person (see :mod:`ctxplugin.stages._answers_read`), two commands or one answered in an
        output's form (mini-swe-agent's ``<returncode>``/``<output>`` tags, an observation lead)."""
        return not self.dead and (self.commands >= 2 or self.tagged > 0)


def command_outputs(messages: Sequence[BaseMessage], tools: Sequence[Any] = ()) -> list[int]:
    """Indexes of the user messages of ``messages`` that are a command's output, in a conversation that
    holds no tool call, is given no tool but ctxplugin's own, and whose assistant replies since the
    first command all run one: each ends with a fenced shell block (or holds one and is answered
    with mini-swe-agent's ``<returncode>``/``<output>`` tags or an observation lead), except a reply
    answered by a request for that format (mini-swe-agent's format error), and none of whose
    commands is answered by what reads as a person's words (first-person words, a question, thanks…:
    see :mod:`ctxplugin.stages._answers_read`): a chat assistant that ends its replies with commands
    to run has its user's answers read as what the user said. It takes two such commands, or one
    answered in an output's form (those tags, an observation lead such as ``Observation:``). The
    first user message (the task) is never an output."""
    if any(tool_label(tool) not in META_TOOL_NAMES for tool in tools):
        return []
    scan = _Scan()
    scan.go_on(messages, len(messages))
    return scan.outputs if scan.commanded else []


def as_tool_calls(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with each command's output a tool result of the reply before it, which calls
    it (the same objects on every call for the same messages); as they are if they are no
    text-mode agent's."""
    scan = _Scan()
    scan.go_on(messages, len(messages))
    return scan.read if scan.commanded else list(messages)


class Reading:
    """One session's reading carried to its next call: the messages received and the scan up
    to its last reply (whose output may come next). Not locked: its owner claims it per call."""

    __slots__ = ("mode", "prefix", "saved")

    def __init__(self) -> None:
        self.prefix = Prefix()
        self.saved = _Scan()
        # how the calls so far read the session (kept over a reset): "" as no command's answer yet,
        # "chat" its answers as what the user said, "text" as outputs
        self.mode = ""

    def read(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], tuple[int, ...], str | None] | None:
        """``messages`` as tool calls, the indexes of the outputs and the id of the latest one
        when it ends them; None for a conversation that is no text-mode agent's."""
        if self.prefix.changed(messages) != []:  # not the last call's messages with more appended
            self.prefix.clear()
            self.saved = _Scan()
        scan = self.saved
        stop = next((i for i in range(len(messages) - 1, scan.upto - 1, -1) if isinstance(messages[i], AIMessage)), scan.upto)
        if stop > scan.upto and not scan.dead:
            scan = scan.copy()
            scan.go_on(messages, stop)
            self.saved = scan  # never changed once saved: the next call goes on from a copy
        self.prefix.extend(messages[len(self.prefix) :])
        if not scan.dead:
            scan = scan.copy()
            scan.go_on(messages, len(messages))
        if scan.dead or not scan.commanded:
            self.mode = "chat" if scan.outputs else self.mode
            return None
        latest = scan.ids[-1] if scan.outputs and scan.outputs[-1] == len(messages) - 1 else None
        return scan.read, tuple(scan.outputs), latest

    def first(self, messages: Sequence[BaseMessage], outputs: Sequence[int]) -> list[int]:
        """On a call that reads the session in text mode after calls that did not, the outputs
        among ``messages`` (at ``outputs``) those calls may have read as what the user said: all
        of them, since a call in another process (an engine per request) may have read them as a
        chat (those without mini-swe-agent's tags until the second command; all of them after a
        reply that runs no command, see :func:`command_outputs`); none while it goes on being
        read in text mode."""
        was, self.mode = self.mode, "text"
        return [] if was == "text" else list(outputs)


__all__ = ["MARK", "TEXT_COMMAND_NAME", "Reading", "as_tool_calls", "command_outputs", "final_block", "original"]
