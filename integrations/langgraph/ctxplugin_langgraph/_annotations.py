"""The annotation a captured tool output carries in the agent's state, and how a view tells
whether it still describes the message's content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import PerMessage
from ctxplugin._messages import META_KEY, annotation
from ctxplugin.cas import raw_hash
from ctxplugin.tokens import content_text


def stamp(message: ToolMessage, meta: dict[str, Any]) -> ToolMessage:
    """``message`` (the original output) annotated with its ref and compact form.

    The length and a digest of the content are recorded too: middleware outside ctxplugin's
    may rewrite a tool result after it was captured (LangChain's human-in-the-loop prefixes a
    note to an edited call; PII masking replaces a card number with as many characters), and a
    compact form of the old content must then not stand in for the new.
    """
    text = content_text(message.content)
    note = {**meta, "chars": len(text), "digest": _digest(text)}
    kwargs = {**message.additional_kwargs, META_KEY: note}
    return message.model_copy(update={"additional_kwargs": kwargs})


def _digest(text: str) -> str:
    return raw_hash(text)[:16]


def without_stale(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages, with annotations the content changed since capture no longer matches
    replaced by ``{"replaced": True}``: the engine stores the new content under its own ref and
    withdraws the facts it read from the old one (they may hold what a PII filter masked)."""
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage) and _stale(message):
            kwargs = {**message.additional_kwargs, META_KEY: {"replaced": True}}
            message = message.model_copy(update={"additional_kwargs": kwargs})
        out.append(message)
    return out


_STALE: PerMessage[bool] = PerMessage(8192)


def _stale(message: ToolMessage) -> bool:
    """Whether ``message`` carries an annotation its content no longer matches: read once per
    message (the thread resends the same objects on every call), not digested on every call."""
    known = _STALE.get(message)
    if known is None:
        note = annotation(message)
        chars = note.get("chars")
        known = False
        if isinstance(chars, int):
            text = content_text(message.content)
            digest = note.get("digest")  # absent from annotations made before it was recorded
            changed = len(text) != chars or (isinstance(digest, str) and _digest(text) != digest)
            known = changed and text != note.get("compact")
        _STALE.put(message, known)
    return known
