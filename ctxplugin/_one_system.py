"""A model that reads the system prompt only from one leading system message.

A view's header is the host's system messages as given, then the tool directory in one of its
own (and, on a conversation's first call, the facts block in another). Every provider's
LangChain integration sends consecutive leading system messages as one system prompt, except
``ChatGoogleGenerativeAI(convert_system_message_to_human=True)`` (for a model that takes no
system instruction, such as Gemma): it moves the system prompt into the first user turn only when
that turn is the second message, and otherwise sends it as a system instruction, which such a
model refuses. For that model the leading system messages are joined into one first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.runnables import Runnable

from ctxplugin._model_kind import before_model, bound_arguments, model_classes

_GEMINI = ("langchain_google_genai.chat_models", "ChatGoogleGenerativeAI")


def one_system_only(model: object, settings: Mapping[str, Any] | None = None) -> bool:
    """Whether ``model`` (possibly bound; ``settings``: the call's) reads the system prompt
    only from one leading system message: ``ChatGoogleGenerativeAI`` with
    ``convert_system_message_to_human`` on."""
    model, bound = bound_arguments(model)
    if _GEMINI not in set(model_classes(model)):
        return False
    given = {**bound, **(settings or {})}
    return bool(given.get("convert_system_message_to_human", getattr(model, "convert_system_message_to_human", False)))


def one_system(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with their leading system messages joined into one, in order: texts joined
    by a blank line, or, when one holds blocks, every part as blocks (the same list when it
    starts with one system message or none)."""
    count = next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages))
    if count < 2:
        return list(messages)
    head = messages[:count]
    if all(isinstance(m.content, str) for m in head):
        joined: str | list[Any] = "\n\n".join(str(m.content) for m in head if m.content)
    else:
        joined = [b for m in head for b in ([{"type": "text", "text": m.content}] if isinstance(m.content, str) else m.content)]
    return [SystemMessage(content=joined), *messages[count:]]


def guard_one_system(bound: Runnable[Any, Any], model: object) -> Runnable[Any, Any]:
    """``bound`` (``model`` with its tools bound), taking a message list whose leading system
    messages are joined first when ``model`` reads only one; ``bound`` itself otherwise."""
    return before_model(bound, one_system, "ctxplugin_one_system") if one_system_only(model) else bound


__all__ = ["guard_one_system", "one_system", "one_system_only"]
