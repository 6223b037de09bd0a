"""The annotation a captured tool output carries in the agent's state. Whether it still
describes the message's content is the core's check (:func:`ctxplugin.cas.without_stale`),
which every ``prepare`` makes."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._messages import META_KEY
from ctxplugin.cas import content_marks, scrubbed, without_stale
from ctxplugin.tokens import content_text


def stamp(message: ToolMessage, meta: dict[str, Any]) -> ToolMessage:
    """``message`` (the original output) annotated with its ref and compact form.

    The length and a digest of the content are recorded too: middleware outside ctxplugin's
    may rewrite a tool result after it was captured (LangChain's human-in-the-loop prefixes a
    note to an edited call; PII masking replaces a card number with as many characters), and a
    compact form of the old content must then not stand in for the new.
    """
    note = {**meta, **content_marks(content_text(message.content))}
    kwargs = {**message.additional_kwargs, META_KEY: note}
    return message.model_copy(update={"additional_kwargs": kwargs})


def state_messages(state: Any) -> list[BaseMessage] | None:
    """The messages of an agent's ``state`` (``None`` when it has none)."""
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    return messages if isinstance(messages, list) else None


def scrubbed_messages(state: Any) -> dict[str, Any] | None:
    """The state update that replaces each message of ``state`` whose annotation still holds
    content masked since capture by its :func:`~ctxplugin.cas.scrubbed` copy (the same id), or
    ``None`` when there is none."""
    messages = state_messages(state)
    if messages is None:
        return None
    # a message is replaced by its id (``add_messages``): one without an id is left as it is
    copies = [copy for copy in map(scrubbed, messages) if copy is not None and copy.id is not None]
    return {"messages": copies} if copies else None


__all__ = ["scrubbed_messages", "stamp", "state_messages", "without_stale"]
