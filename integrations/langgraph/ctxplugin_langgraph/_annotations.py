"""The annotation a captured tool output carries in the agent's state, and how a view tells
whether it still describes the message's content."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._messages import META_KEY, annotation
from ctxplugin.tokens import content_text


def stamp(message: ToolMessage, meta: dict[str, Any]) -> ToolMessage:
    """``message`` (the original output) annotated with its ref and compact form.

    The length of the content is recorded too: middleware outside ctxplugin's may rewrite a
    tool result after it was captured (LangChain's human-in-the-loop prefixes a note to an
    edited call), and a compact form of the old content must then not stand in for the new.
    """
    note = {**meta, "chars": len(content_text(message.content))}
    return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: note}})


def without_stale(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """The messages, with annotations dropped where the content changed since capture (the
    engine then stores the new content under its own ref)."""
    out: list[BaseMessage] = []
    for message in messages:
        note = annotation(message) if isinstance(message, ToolMessage) else {}
        chars = note.get("chars")
        if isinstance(chars, int):
            text = content_text(message.content)
            if len(text) != chars and text != note.get("compact"):
                kept = {k: v for k, v in message.additional_kwargs.items() if k != META_KEY}
                message = message.model_copy(update={"additional_kwargs": kept})
        out.append(message)
    return out
