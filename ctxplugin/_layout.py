"""Where ctxplugin's own texts go in a view, so that every chat provider accepts it.

ctxplugin adds two kinds of text to a conversation: context notes (condensed or omitted history)
and the facts block. None of them is something the user said, and the system prompt is the one
thing every provider requires at the start (Anthropic and Bedrock accept only leading system
content; Google GenAI and Bedrock move any later system message into the system prompt). So
each is shown as what it is — ctxplugin's answer to a lookup — a tool call with no arguments and
its result:

    AIMessage(tool_calls=[{"name": "known_facts", "args": {}, "id": ...}])
    ToolMessage("Known facts ...", tool_call_id=..., name="known_facts")

Such a pair is placed right before an assistant message that follows a user turn or a tool
result: a function call must come right after a user turn or a function response (Google
GenAI), a tool result must be followed by an assistant turn (Mistral), a tool result must follow
its call at once (Anthropic, Bedrock). So the latest message of the conversation stays the last
message of the view: with extended thinking on, Anthropic also takes a request that ends with a
tool result only when the assistant turn that made the call starts with its (signed) thinking,
which a lookup has none of. Notes that stand before a user turn which follows a user turn or a
tool result (a chat whose exchanges open with the user) go right there, followed by a short
assistant turn (:data:`CONTEXT_READ`), rather than after that turn: when the turn is condensed in
its turn the notes before it stay where they were. A pair carries an id derived from its text,
so an unchanged block is the same message on the next call (prompt caches). When the
conversation has no such position yet (its first call: a system prompt and one user message),
the text goes in a system message right after the header, which every provider reads as part
of the system prompt — unless it holds text a tool returned (context notes, facts read from
tool outputs), which never speaks in a system message: such pairs then follow the
conversation's last message (a user turn), the one case where the view does not end with it,
and the model's reply answers both. A request that binds no tool and whose conversation has no
tool call of its own has no tool list, and Bedrock refuses tool calls and results in such a
request: there the texts go after the header too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctxplugin._lru import Memo
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._names import FACTS_LOOKUP_NAME, NOTES_LOOKUP_NAME
from ctxplugin._note_marks import NOTE_MARKS
from ctxplugin.tokens import content_text

Kind = Literal["facts", "notes"]
Placement = Literal["tail", "head", "window"]


def is_note(message: BaseMessage) -> bool:
    """Whether ``message`` is a context note the history or budget stage wrote in place of
    exchanges (condensed to their values, or left out)."""
    if not isinstance(message, HumanMessage):  # most messages: their annotation is not read
        return False
    note = annotation(message)
    return any(note.get(mark) for mark in NOTE_MARKS)


def is_condensed(message: BaseMessage) -> bool:
    """Whether ``message`` is a context note that lists the values of condensed exchanges (an
    archive or block note; not the note standing for exchanges left out)."""
    return isinstance(message, HumanMessage) and bool(annotation(message).get("condensed"))


def is_user_turn(message: BaseMessage) -> bool:
    """Whether ``message`` is something a user said: a human message that is not a note."""
    return isinstance(message, HumanMessage) and not is_note(message)


USER_ROLES = frozenset({"user", "human"})
"""The roles of a ``ChatMessage`` that a user wrote (the providers' name and LangChain's)."""


def from_user(message: BaseMessage) -> bool:
    """Whether ``message`` is something a user said in any form a host sends: a user turn
    (:func:`is_user_turn`), or a ``ChatMessage`` in the user's role (an OpenAI-style
    ``{"role": "user"}`` kept as such)."""
    return is_user_turn(message) or (isinstance(message, ChatMessage) and message.role in USER_ROLES)


def synthetic_kind(message: BaseMessage) -> Kind | None:
    """``"facts"`` or ``"notes"`` for a message of a lookup pair this module wrote, else None."""
    value = annotation(message).get("synthetic")
    return value if value in ("facts", "notes") else None


_PAIRS: Memo[tuple[Kind, str], tuple[AIMessage, ToolMessage]] = Memo(1024)


def lookup_pair(kind: Kind, text: str) -> list[BaseMessage]:
    """The tool call and result that show ``text`` (facts or notes) in the conversation.

    An unchanged block is shown as the same two message objects on every call (memoised,
    bounded), so what is derived from them (token counts) is found by identity."""
    return list(_PAIRS.get_or_make((kind, text), lambda: _lookup_pair(kind, text)))


def _lookup_pair(kind: Kind, text: str) -> tuple[AIMessage, ToolMessage]:
    name = FACTS_LOOKUP_NAME if kind == "facts" else NOTES_LOOKUP_NAME
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    call_id = f"ctxplugin_{kind}_{digest}"
    meta = {META_KEY: {"synthetic": kind}}
    return (
        AIMessage(
            content="",
            tool_calls=[{"name": name, "args": {}, "id": call_id, "type": "tool_call"}],
            additional_kwargs=meta,
        ),
        ToolMessage(content=text, tool_call_id=call_id, name=name, additional_kwargs=meta),
    )


CONTEXT_READ = AIMessage(content="[context read]", additional_kwargs={META_KEY: {"synthetic": "notes"}})
"""The assistant turn between lookups and the user turn they stand before."""


@dataclass
class Layout:
    """The view's body with ctxplugin's texts placed, and what had to go after the header."""

    body: list[BaseMessage]
    header_extra: list[SystemMessage] = field(default_factory=list)
    extra_kinds: list[Kind] = field(default_factory=list)

    def messages(self, header: Sequence[SystemMessage]) -> list[BaseMessage]:
        """The whole view: header, the system messages that follow it, the body."""
        return [*header, *self.header_extra, *self.body]


def _openings(plain: Sequence[BaseMessage]) -> list[int]:
    """Indexes before which a lookup pair fits: an assistant message after a user turn or a
    tool result."""
    return [
        i
        for i in range(1, len(plain))
        if isinstance(plain[i], AIMessage) and isinstance(plain[i - 1], (HumanMessage, ToolMessage))
    ]


def _ends_for_lookup(plain: Sequence[BaseMessage]) -> bool:
    """Whether a lookup pair fits after the last message: a user turn or a tool result, which a
    function call may follow and whose answer the model's reply then is."""
    return bool(plain) and isinstance(plain[-1], (HumanMessage, ToolMessage))


def lookup_fits(history: Sequence[BaseMessage]) -> bool:
    """Whether ``history`` has a place for a lookup pair: before an assistant message that
    follows a user turn or a tool result, or after its last message when that is one of them
    (else what ctxplugin adds goes in a system message after the header)."""
    before: BaseMessage | None = None  # the last message that is not a note
    for message in history:  # the first place found will do: most histories have one near their start
        if is_note(message):
            continue
        if isinstance(message, AIMessage) and isinstance(before, (HumanMessage, ToolMessage)):
            return True
        before = message
    return isinstance(before, (HumanMessage, ToolMessage))


def calls_tools(history: Sequence[BaseMessage]) -> bool:
    """Whether the conversation holds a tool call or a tool result of its own."""
    return any(isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls) for m in history)


def _at_or_after(openings: list[int], index: int) -> int | None:
    later = [i for i in openings if i >= index]
    if later:
        return later[0]
    return openings[-1] if openings else None


def lay_out(
    history: Sequence[BaseMessage],
    facts_text: str,
    placement: Placement = "tail",
    anchor: BaseMessage | None = None,
    *,
    facts_from_tools: bool = False,
    lookups: bool = True,
) -> Layout:
    """Place the context notes of ``history`` and the facts block (see the module docstring).

    Args:
        history: the compressed history, notes in it as the history and budget stages wrote them.
        facts_text: the facts block ('' for none).
        placement: ``tail``: as late as fits (before the assistant message that answers the
            latest user turn or tool result, or the latest one that fits); ``head``: as early
            as fits (after the task); ``window``: at ``anchor`` (the start of the verbatim tier)
            or the first place after it that fits.
        anchor: the message the block goes before with ``window``.
        facts_from_tools: the block holds lines read from tool outputs. With no place before an
            assistant message, text a tool returned is never put in a system message: such a
            block, and the context notes (values of tool results among them), go after the last
            message as lookups, when it is a user turn or a tool result.
        lookups: whether lookup pairs may be used at all (False: the request binds no tool and
            the conversation calls none, so every text goes in a system message after the header).
    """
    plain: list[BaseMessage] = []
    notes_at: dict[int, list[str]] = {}
    anchor_index: int | None = None
    for message in history:
        if message is anchor:
            anchor_index = len(plain)
        if is_note(message):
            notes_at.setdefault(len(plain), []).append(content_text(message.content))
        else:
            plain.append(message)
    openings = _openings(plain) if lookups else []
    inserts: dict[int, list[tuple[Kind, str]]] = {}
    header_extra: list[SystemMessage] = []
    kinds: list[Kind] = []
    at_end = lookups and not openings and _ends_for_lookup(plain)

    def put(kind: Kind, text: str, at: int | None) -> None:
        if at is None and at_end and (kind == "notes" or facts_from_tools):
            inserts.setdefault(len(plain), []).append((kind, text))
        elif at is None:
            header_extra.append(SystemMessage(content=text, additional_kwargs={META_KEY: {"synthetic": kind}}))
            kinds.append(kind)
        else:
            inserts.setdefault(at, []).append((kind, text))

    # a user turn right after a user turn or a tool result: notes that stand before it go there,
    # with an assistant turn after them (a tool result must be followed by one: Mistral), rather
    # than after it, where they would move when the turn is condensed in its turn
    bridged = {i for i in range(1, len(plain)) if is_user_turn(plain[i]) and isinstance(plain[i - 1], (HumanMessage, ToolMessage))}
    for index, texts in notes_at.items():
        for text in texts:
            put("notes", text, index if lookups and index in bridged else _at_or_after(openings, index))
    if facts_text:
        if placement == "head":
            at = openings[0] if openings else None
        elif placement == "window" and anchor_index is not None:
            at = _at_or_after(openings, anchor_index)
        else:
            at = openings[-1] if openings else None
        if at is None and lookups and bridged:
            at = max(bridged)  # before the latest user turn that follows one (the view still ends with the latest message)
        put("facts", facts_text, at)
    body: list[BaseMessage] = []
    for index, message in enumerate(plain):
        for kind, text in _merged(inserts.get(index, [])):
            body.extend(lookup_pair(kind, text))
        if index in inserts and not isinstance(message, AIMessage):
            body.append(CONTEXT_READ)
        body.append(message)
    for kind, text in _merged(inserts.get(len(plain), [])):
        body.extend(lookup_pair(kind, text))
    return Layout(body=body, header_extra=header_extra, extra_kinds=kinds)


def _merged(items: list[tuple[Kind, str]]) -> list[tuple[Kind, str]]:
    """Lookups placed at one position: each note its own (in order), facts after the first.

    A note never shares a lookup with a later one: the archive note then stays the same message
    while block notes are added after it, and the prompt cache keeps serving it. The facts go
    right after that first note, before the block notes: a block move adds its note after them,
    so they stay in the cached prefix until the archive itself changes."""
    notes = [("notes", text) for kind, text in items if kind == "notes"]
    facts = [("facts", text) for kind, text in items if kind == "facts"]
    return [*notes[:1], *facts, *notes[1:]]  # type: ignore[list-item]


def is_synthetic(message: BaseMessage) -> bool:
    """Whether ``message`` is one ctxplugin wrote to show its own texts (a lookup call, its
    result, or the system message that holds them on a conversation's first call)."""
    return synthetic_kind(message) is not None


def header_cut(given: Sequence[SystemMessage], sent: Sequence[SystemMessage]) -> str:
    """What the last resort cut of the header: the host's system prompt, the tool directory
    (a message of its own after it) or both; "" when it cut neither."""
    cut = {is_directory(a) for a, b in zip(given, sent, strict=True) if a is not b}
    if not cut:
        return ""
    what = {frozenset({True}): "the tool directory was", frozenset({False}): "the system prompt was"}.get(
        frozenset(cut), "the system prompt and the tool directory were")
    return what + " cut at head and tail to fit the total budget"


def is_directory(message: BaseMessage) -> bool:
    """Whether ``message`` is the system message that shows the tool directory (after the
    host's system prompt, in the header)."""
    return isinstance(message, SystemMessage) and annotation(message).get("tool_directory") is True


def header_length(messages: Sequence[BaseMessage]) -> int:
    """How many messages the header of a prepared view has: its leading system messages up to
    the last that is not one of ctxplugin's texts placed after the header (facts or notes on a
    conversation's first call, which change from call to call)."""
    length = 0
    for index, message in enumerate(messages):
        if not isinstance(message, SystemMessage):
            break
        if not is_synthetic(message):
            length = index + 1
    return length


def tool_directory(messages: Sequence[BaseMessage]) -> str:
    """The tool directory a prepared view shows ('' when it shows none)."""
    return next((content_text(m.content) for m in messages[: header_length(messages)] if is_directory(m)), "")


def facts_index(messages: Sequence[BaseMessage]) -> int | None:
    """Index of the message that holds the facts block in a prepared view, or None."""
    for index, message in enumerate(messages):
        if synthetic_kind(message) == "facts" and not isinstance(message, AIMessage):
            return index
    return None


def facts_block(messages: Sequence[BaseMessage]) -> str:
    """The facts block of a prepared view ('' when it shows none)."""
    index = facts_index(messages)
    return "" if index is None else content_text(messages[index].content)


def context_notes(messages: Sequence[BaseMessage]) -> list[str]:
    """The context notes of a prepared view (condensed or omitted history), in order."""
    return [
        content_text(m.content)
        for m in messages
        if synthetic_kind(m) == "notes" and not isinstance(m, AIMessage)
    ]


def conversation_messages(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """A prepared view without ctxplugin's lookups and tool directory: the conversation's own
    messages."""
    return [m for m in messages if not is_synthetic(m) and not is_directory(m)]
