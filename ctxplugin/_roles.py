"""A ``ChatMessage`` in a role LangChain has a class for, read as a message of that class.

A host may keep a turn as ``ChatMessage(role="user")`` (an OpenAI-style dict kept as such, a
community chat model's output) where LangChain's own hosts hold a ``HumanMessage``. Every stage
tells the user's words, the system prompt and the model's turns apart by class: a user's
``ChatMessage`` left as it is would be history like any tool result, condensed or dropped, and a
leading system one would not be the header. Validation reads each such message once, as it
enters the conversation, as the message of its class with the same content, id and name; a
role LangChain has no class for (``"critic"``, ``"function"``) stays a ``ChatMessage``. The
message read is memoised by the ``ChatMessage`` object, so a conversation resent call after call is
read as the very same objects wherever it is first read (text mode reads it before validation).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import islice

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, SystemMessage

from ctxplugin._lru import RECENT_MESSAGES, PerMessage
from ctxplugin._mapped import mapped_from

_CLASSES: dict[str, type[BaseMessage]] = {
    "user": HumanMessage,
    "human": HumanMessage,
    "system": SystemMessage,
    "developer": SystemMessage,
    "assistant": AIMessage,
    "ai": AIMessage,
}
"""The roles read as a class, with the providers' names and LangChain's."""

_OPENAI_ROLE = "__openai_role__"
"""Where LangChain's OpenAI integration keeps a system message's ``"developer"`` role."""


_READ: PerMessage[BaseMessage] = PerMessage(RECENT_MESSAGES)
"""The message each ``ChatMessage`` seen lately was read as (by the object itself)."""


def role_class(message: ChatMessage) -> type[BaseMessage] | None:
    """The class ``message``'s role is read as, or None for a role without one."""
    return _CLASSES.get(_role(message))


def _role(message: ChatMessage) -> str:
    return message.role.strip().lower() if isinstance(message.role, str) else ""


def as_role_class(message: BaseMessage) -> BaseMessage:
    """``message`` as the message of its role's class when it is a ``ChatMessage`` in such a role
    (a new message with the same content, id, name and extra fields), else ``message`` itself."""
    if not isinstance(message, ChatMessage):
        return message
    found = _READ.get(message)
    if found is not None:
        return found
    role = _role(message)
    kind = _CLASSES.get(role)
    if kind is None:
        return message
    extra = dict(message.additional_kwargs)
    if role == "developer":
        extra.setdefault(_OPENAI_ROLE, "developer")  # as langchain-openai reads a developer message back
    read = kind(
        content=message.content,
        id=message.id,
        name=message.name,
        additional_kwargs=extra,
        response_metadata=dict(message.response_metadata),
    )
    _READ.put(message, read)
    return read


def with_role_classes(messages: Sequence[BaseMessage], start: int = 0) -> Sequence[BaseMessage]:
    """``messages`` with each ``ChatMessage`` from ``start`` on in a role that has a class read as
    that class (:func:`as_role_class`): ``messages`` itself when there is none, else a list.
    Whether there is any is told by the few classes of the messages (read in C), not message by
    message: text mode asks it of the whole conversation on every call."""
    if not any(issubclass(kind, ChatMessage) for kind in set(map(type, islice(messages, start, None)))):
        return messages
    return mapped_from(messages, start, as_role_class)


__all__ = ["as_role_class", "role_class", "with_role_classes"]
