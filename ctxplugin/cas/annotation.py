"""The annotation a captured tool output carries (``additional_kwargs["ctxplugin"]``), and how a
view tells whether it still describes the message's content.

A host may keep the original output annotated with its ref and compact form (a chat history,
the LangGraph adapters, a user's own loop), and something outside ctxplugin may rewrite that
content after capture: a PII filter masks a card number with as many characters,
human-in-the-loop prefixes a note to an edited call. The compact form was made from the old
content and may hold what was masked, so it must not stand in for the new content. The ref
names the content it was made from (its canonical hash); an annotation may also record that
content's length and a digest (``chars``, ``digest``: cheaper to check). A message whose content
matches neither its compact form nor the content its annotation was made from is marked
``{"replaced": True}`` instead: the engine stores the new content under its own ref and
withdraws the facts read from the old one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, overload

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import Memo, PerMessage, TextKey, text_key
from ctxplugin._mapped import mapped_from
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._untrusted import ref_as_written
from ctxplugin.cas._blocks import is_text_block
from ctxplugin.cas._canon import REF_RE, content_hash, parse_json, raw_hash
from ctxplugin.tokens import content_text

REPLACED: dict[str, Any] = {"replaced": True}
"""The annotation of an output whose content changed since its capture; with ``"summary":
True`` when the content was its compact form (kept in a state in place of the output), so
that no facts are read from it."""

WITHHELD = "withheld"
"""In the annotation :func:`scrubbed` leaves on a message whose content was masked after
capture: the ref of the content captured before, which :func:`withheld` keeps refusing."""

HOST_ANSWER = "host_answer"
"""Set (``True``) in the annotation of a tool message that its host wrote itself in answer to a
tool call, no tool having run: LangChain's reply to a structured-output call (``ToolStrategy``),
the structured response or the validation errors to fix. No tool's output, so no facts are read
from it (see :func:`host_answer`)."""


FACTS_UNREAD = "facts_unread"
"""Set (``True``) in the annotation of an output captured while the facts store failed: its
facts were not read. The process that captured it keeps it to read later; a conversation that
keeps the output whole (``keep_originals``) lets any process read it (see
:func:`facts_unread`)."""


def facts_unread(message: BaseMessage) -> bool:
    """Whether ``message`` is a tool output whose facts were not read when it was captured
    (marked :data:`FACTS_UNREAD`) and whose content is the output itself, not its compact form."""
    note = message.additional_kwargs.get(META_KEY)
    if not isinstance(message, ToolMessage) or not isinstance(note, dict) or note.get(FACTS_UNREAD) is not True:
        return False
    compact = note.get("compact")
    return not isinstance(compact, str) or compact not in content_text(message.content)


def host_answer(message: BaseMessage) -> bool:
    """Whether ``message`` is a tool message its host wrote itself (marked :data:`HOST_ANSWER`)."""
    note = message.additional_kwargs.get(META_KEY)
    return isinstance(message, ToolMessage) and isinstance(note, dict) and note.get(HOST_ANSWER) is True


def content_marks(text: str) -> dict[str, Any]:
    """What an annotation records of the content ``text`` it was made from: its length and a
    digest (``chars`` and ``digest``)."""
    return {"chars": len(text), "digest": _digest(text)}


def _digest(text: str) -> str:
    return raw_hash(text)[:16]


def current(message: ToolMessage) -> ToolMessage:
    """``message``, or a copy marked ``{"replaced": True}`` when its annotation was made from
    other content (the same copy for the same message on every call, so what later stages
    derive from it is found again by identity)."""
    note = message.additional_kwargs.get(META_KEY)
    if not isinstance(note, dict) or "compact" not in note:
        return message  # not annotated with the compact form of a capture
    content = message.content
    if content is note["compact"] or (isinstance(content, str) and content == note["compact"]):
        return message  # the compact form itself (what capture_tool_result returns): no memo needed
    known = _CURRENT.get(message)
    if known is None:
        known = (_renewed(message, note) if _stale(message, note) else None,)
        _CURRENT.put(message, known)
    return known[0] or message


def _renewed(message: ToolMessage, note: dict[str, Any]) -> ToolMessage:
    """The copy of a stale ``message`` a view shows: when text was only put before the content
    captured (LangChain's human-in-the-loop prefixes a note to an edited call's result, naming
    the call that ran), the annotation's compact form led by that text (``lead``), its ref
    still the output's; else marked ``{"replaced": True}``."""
    text = message.content
    lead = _lead(text, note) if isinstance(text, str) else None
    if lead is None or not isinstance(text, str):
        head = note["compact"].split("\n", 1)[0]
        whole = content_text(message.content)
        # the compact form a state keeps in place of the output, rewritten (a PII filter masked
        # a line of it): a summary still, whose lines state no fact
        marked = _replaced(message, summary=bool(head) and whole.startswith(head))
        if _lost_part(whole, note):  # the copy names the ref it withholds, as a scrubbed one does
            kwargs = {**marked.additional_kwargs, META_KEY: {**annotation(marked), WITHHELD: note["ref"]}}
            return marked.model_copy(update={"additional_kwargs": kwargs})
        return marked
    compact = text if text.endswith(note["compact"]) else f"{lead}\n{note['compact']}"
    fresh = {**note, "lead": lead, "compact": compact, **content_marks(text)}
    return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: fresh}})


def _lead(text: str, note: dict[str, Any]) -> str | None:
    """The text put before the content ``note`` was made from (the compact form, or the
    original by its marks), or None when ``text`` is not that content with text before it."""
    compact = note.get("compact")
    if isinstance(compact, str) and compact and text.endswith(compact):
        start = len(text) - len(compact)
    else:
        chars, digest = note.get("chars"), note.get("digest")
        if not isinstance(chars, int) or not isinstance(digest, str) or len(text) <= chars:
            return None
        start = len(text) - chars
        if _digest(text[start:]) != digest:
            return None
    lead = text[:start].removesuffix("\n")
    return lead if lead.strip() else None


def without_lead(message: ToolMessage) -> ToolMessage:
    """``message`` as it was captured: without the text its annotation says was put before the
    output after capture (see :func:`current`)."""
    note = message.additional_kwargs.get(META_KEY)
    lead = note.get("lead") if isinstance(note, dict) else None
    text = message.content
    if not isinstance(lead, str) or not isinstance(text, str) or not text.startswith(lead):
        return message
    return message.model_copy(update={"content": text[len(lead) :].removeprefix("\n")})


@overload
def without_stale(messages: list[BaseMessage], start: int = 0) -> list[BaseMessage]: ...
@overload
def without_stale(messages: Sequence[BaseMessage], start: int = 0) -> Sequence[BaseMessage]: ...
def without_stale(messages: Sequence[BaseMessage], start: int = 0) -> Sequence[BaseMessage]:
    """``messages``, with the tool outputs from ``start`` on whose annotation no longer matches
    their content marked ``{"replaced": True}`` (see :func:`current`): ``messages`` itself when
    there are none, else a list."""
    return mapped_from(messages, start, lambda message: current(message) if isinstance(message, ToolMessage) else message)


# a stale message maps to its copy, a current one to None (holding it would keep it alive)
_CURRENT: PerMessage[tuple[ToolMessage | None]] = PerMessage(8192)


def _stale(message: ToolMessage, note: dict[str, Any]) -> bool:
    ref, compact = note.get("ref"), note.get("compact")
    if not isinstance(ref, str) or not isinstance(compact, str):
        return False
    text = content_text(message.content)
    if text == compact:  # the compact form itself (what capture_tool_result returns)
        return False
    chars = note.get("chars")
    if isinstance(chars, int):
        digest = note.get("digest")  # absent from annotations made before it was recorded
        return len(text) != chars or (isinstance(digest, str) and _digest(text) != digest)
    named = REF_RE.match(ref)
    if named is None:
        return False
    hashed = named.group(2)
    if isinstance(message.content, str):
        # a chat history reloads its messages from its store as new objects: found by the text
        return _BY_TEXT.get_or_make((ref, text_key(text)), lambda: _hash_of(text) not in (None, hashed))
    return _hash_of(message.content) not in (None, hashed)


_BY_TEXT: Memo[tuple[str, TextKey], bool] = Memo(4096)


def _hash_of(content: Any) -> str | None:
    """The hash a ref names for an output of ``content`` (see :func:`~ctxplugin.cas.capture`):
    of its text, or of the JSON of its blocks when some are not text; None when it has none."""
    if isinstance(content, list) and any(not is_text_block(block) for block in content):
        try:
            original = json.dumps(content, ensure_ascii=False)
        except (TypeError, ValueError):
            return None
    else:
        original = content_text(content)
    return content_hash(original, parse_json(original))[:16]


def withheld(ref_id: str, messages: Sequence[BaseMessage]) -> bool:
    """Whether the model may not read ``ref_id`` (as the model wrote it) in a conversation of
    ``messages``: it is the ref of a captured tool output whose content something outside
    ctxplugin rewrote after capture, taking part of it away (a PII filter masked an address in
    the output, or in the compact form a state keeps in its place, which still names the ref).
    The original behind the ref holds what was masked, and even a search of it would tell. A
    rewrite that only added text (human-in-the-loop prefixes a note to an edited call's result)
    withholds nothing: the content still holds the compact form, or the original, whole."""
    ref_id = ref_as_written(ref_id)
    for message in messages:
        if not isinstance(message, ToolMessage):
            continue
        note = message.additional_kwargs.get(META_KEY)
        if not isinstance(note, dict):
            continue
        if note.get(WITHHELD) == ref_id or (note.get("ref") == ref_id and _withholds(message, note)):
            return True
    return False


def _withholds(message: ToolMessage, note: dict[str, Any]) -> bool:
    """Whether ``message``'s content no longer matches its annotation ``note`` and lost part of
    the content the annotation was made from (see :func:`withheld`)."""
    return current(message) is not message and _lost_part(content_text(message.content), note)


def _lost_part(text: str, note: dict[str, Any]) -> bool:
    """Whether ``text``, which no longer matches ``note``, holds neither its compact form nor
    the whole content it was made from."""
    compact = note.get("compact")
    return not (isinstance(compact, str) and compact in text) and not _holds_original(text, note)


def cleared_from_request(message: ToolMessage) -> bool:
    """Whether LangChain's ``ContextEditingMiddleware`` (``ClearToolUsesEdit``) put a placeholder
    in place of this output, in the request only: the output itself is unchanged in the agent's
    state, so what was read from it stands (it is not a rewrite, as a PII mask is)."""
    edit = message.response_metadata.get("context_editing")
    return isinstance(edit, dict) and edit.get("cleared") is True


def masked_refs(messages: Sequence[BaseMessage], start: int = 0) -> tuple[str, ...]:
    """The refs the tool outputs among ``messages[start:]`` withhold (see :func:`withheld`):
    outputs captured, then masked by something outside ctxplugin, and scrubbed copies of them
    (:func:`scrubbed`). A ref another message of ``messages`` still shows whole is left out:
    the same output captured twice is one ref, and the conversation still holds it."""
    found: dict[str, None] = {}
    for index in range(start, len(messages)):
        message = messages[index]
        note = message.additional_kwargs.get(META_KEY)
        if not isinstance(message, ToolMessage) or not isinstance(note, dict) or cleared_from_request(message):
            continue  # (a placeholder in one request: the state holds the output whole)
        if isinstance(note.get(WITHHELD), str):
            found[note[WITHHELD]] = None
        elif isinstance(note.get("ref"), str) and _withholds(message, note):
            found[note["ref"]] = None
    if not found:
        return ()
    for message in messages:
        note = message.additional_kwargs.get(META_KEY)
        if (
            isinstance(message, ToolMessage) and isinstance(note, dict) and note.get("ref") in found
            and (cleared_from_request(message) or not _withholds(message, note))
        ):
            del found[note["ref"]]
    return tuple(found)


def scrubbed(message: BaseMessage) -> ToolMessage | None:
    """A copy of ``message`` for a saved thread, when something outside ctxplugin took part of
    its content away after capture (see :func:`withheld`): its annotation was made from the
    old content, and its compact form may quote what was masked, where the host's filter does
    not look (``additional_kwargs``). The copy's annotation is what a view marks the message
    with (:data:`REPLACED`), plus the ref it withholds (:data:`WITHHELD`); ``None`` for any
    other message."""
    if not isinstance(message, ToolMessage):
        return None
    note = message.additional_kwargs.get(META_KEY)
    if not isinstance(note, dict) or not isinstance(note.get("ref"), str) or not _withholds(message, note):
        return None
    marked = annotation(current(message))
    kwargs = {**message.additional_kwargs, META_KEY: {**marked, WITHHELD: note["ref"]}}
    return message.model_copy(update={"additional_kwargs": kwargs})


def _holds_original(text: str, note: dict[str, Any]) -> bool:
    """Whether ``text`` begins or ends with the whole content ``note`` recorded the marks of."""
    chars, digest = note.get("chars"), note.get("digest")
    if not isinstance(chars, int) or not isinstance(digest, str) or len(text) < chars:
        return False
    return _digest(text[len(text) - chars :]) == digest or _digest(text[:chars]) == digest


def _replaced(message: ToolMessage, *, summary: bool = False) -> ToolMessage:
    kwargs = {**message.additional_kwargs, META_KEY: {**REPLACED, "summary": True} if summary else dict(REPLACED)}
    return message.model_copy(update={"additional_kwargs": kwargs})


__all__ = ["REPLACED", "WITHHELD", "cleared_from_request", "content_marks", "current", "masked_refs", "scrubbed", "withheld", "without_lead", "without_stale"]
