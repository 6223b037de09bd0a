"""Answers held back from the answer cache until the run that made them ends.

A model's final answer goes through the agent's ``after_model`` hooks before the state keeps it,
and a hook may change it: ``PIIMiddleware(..., apply_to_output=True)`` masks an address in its
content, or, with ``strategy="block"``, stops the run. Storing the answer as the model gave it
would keep the unmasked text in the cache store and serve it to the next caller. So the
middleware holds the answer here, by message id, and stores it as the run ends
(``after_agent``, after every ``after_model`` hook whatever the middleware order), with the
content the state holds; an answer that never reached the state's end is never stored.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage

from ctxplugin._lru import LRU

_LIMIT = 256
"""Answers held at most (those of runs that stopped before their end are forgotten, oldest first)."""


@dataclass(frozen=True, slots=True)
class Held:
    """One held answer and how to store it (the engine's ``remember_answer`` with the call's
    conversation, view, tools, scope and model bound)."""

    answer: AIMessage
    remember: Callable[[AIMessage], object]

    def as_kept(self, kept: AIMessage) -> AIMessage:
        """The answer with the content the state kept (a filter may have masked it)."""
        return self.answer if kept.content == self.answer.content else self.answer.model_copy(update={"content": kept.content})


class HeldAnswers:
    """Final answers waiting for the end of their run (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._held: LRU[str, Held] = LRU(_LIMIT)
        self._lock = threading.Lock()

    def hold(self, answer_id: str, held: Held) -> None:
        with self._lock:
            self._held.put(answer_id, held)

    def take(self, messages: list[BaseMessage] | None) -> tuple[Held, AIMessage] | None:
        """The held answer the state ends with, and the message the state kept for it."""
        last = messages[-1] if messages else None
        if not isinstance(last, AIMessage) or last.id is None:
            return None
        with self._lock:
            held = self._held.pop(last.id, None)
        return None if held is None else (held, last)
