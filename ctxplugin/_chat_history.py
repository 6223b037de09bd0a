"""The chat message history ``engine.history(session_id)`` returns, for
``RunnableWithMessageHistory``: it keeps the whole conversation and returns the prepared view.

It takes the engine as an argument and never imports it; :mod:`ctxplugin.langchain` is its
public home.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, RemoveMessage, ToolMessage

from ctxplugin._message_store import MessageStore, store_for
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._untrusted import not_a_message
from ctxplugin.cas import scrubbed
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import Scope

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine


class ContextChatHistory(BaseChatMessageHistory):
    """Chat history for ``RunnableWithMessageHistory``: keeps every message, returns the view.

    ``messages`` is the prepared view (what the chain sends to the model); ``full_messages``
    is the whole conversation. Tool results are captured into the CAS as they are added: the
    history keeps the original, annotated with its ref, and every view shows the compact form.

    The conversation lives in the engine's message store, not on this object, so a new history
    object for the same session (``RunnableWithMessageHistory`` asks for one per call) sees it:
    in a SQLite file under an embedded engine's path (it survives restarts), in memory
    otherwise.
    """

    def __init__(self, engine: ContextEngine, scope: Scope, store: MessageStore | None = None) -> None:
        self.engine = engine
        self.scope = scope
        self.store = store if store is not None else store_for(engine)
        self._key = scope.key()
        self._view: tuple[list[BaseMessage], list[BaseMessage]] | None = None
        self._lock = threading.Lock()

    @property
    def full_messages(self) -> list[BaseMessage]:
        """Every message of the conversation, as added (tool outputs annotated with refs)."""
        return self.store.load(self._key)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The prepared view of the conversation (empty for a new session)."""
        # read and prepared as one prepare of the scope: a clear() between the two would forget
        # what the conversation stated before this prepare read it again (see ScopeGates)
        with self.engine.gates.preparing(self._key):
            full = self.full_messages
            if not full:
                return []
            with self._lock:
                # RunnableWithMessageHistory reads this twice per call and slices its input by the
                # length it saw first; the same view for the same conversation keeps that exact. The
                # view is reused for the stored messages it was made from, not for any as many: another
                # object or process may have rewritten the conversation (a PII filter's mask) since.
                if self._view is not None and self._view[0] == full:
                    return list(self._view[1])
            view = list(self.engine.prepare(full, scope=self.scope).messages)
        with self._lock:
            self._view = (full, view)
        return list(view)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages; tool outputs are stored in the CAS first.

        Raises:
            InvalidInputError: ``messages`` is not a list of messages (nothing of it is kept: a
                value kept would break every later read of the conversation).
        """
        added = _checked(messages)
        kept = [self._capture(m) if isinstance(m, ToolMessage) else m for m in added]
        self.store.append(self._key, kept)
        with self._lock:
            self._view = None

    def _capture(self, message: ToolMessage) -> BaseMessage:
        if annotation(message).get("ref"):
            # added again with its annotation: rewritten since (a PII filter masked it), the
            # compact form the annotation holds is not stored beside the masked content, nor the
            # original in the CAS (unless the conversation still holds it whole elsewhere)
            copy = scrubbed(message)
            if copy is None:
                return message
            self.engine.revoke_masked([*self.full_messages, message], self.scope)
            return copy
        compact = self.engine.capture_tool_result(message, scope=self.scope)
        meta = compact.additional_kwargs.get(META_KEY)
        if meta is None:
            return message
        return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: meta}})

    def clear(self) -> None:
        """Forget this session's conversation and what its user messages stated (stored tool
        outputs stay in the CAS, and the facts read from them). Messages added again are read
        as new: what they state is current again (a PII filter clears the conversation and adds
        it back, one message masked)."""
        facts = self.engine.config.facts
        cleared = self.store.load(self._key) if facts.enabled and facts.extract and not self.engine.closed else []
        self.store.clear(self._key)
        with self._lock:
            self._view = None
        if cleared:
            self.engine.forget_said(cleared, self.scope)


def _checked(given: object) -> list[BaseMessage]:
    """``given`` (any iterable of messages: a list, a tuple, a generator) as a list, checked."""
    if isinstance(given, (str, bytes, BaseMessage, Mapping)) or not isinstance(given, Iterable):
        one = "; add_message() takes one" if isinstance(given, BaseMessage) else ""
        raise InvalidInputError(f"add_messages() takes a list of messages, got {type(given).__name__}{one}")
    messages = list(given)
    for index, message in enumerate(messages):
        where = f"message {index} of the {len(messages)} added"
        if isinstance(message, RemoveMessage):
            raise InvalidInputError(
                f"{where} is a RemoveMessage: an instruction to LangGraph's add_messages reducer, not a "
                "message to keep; clear() the history and add the messages to keep instead"
            )
        problem = not_a_message(where, message)
        if problem is not None:
            raise InvalidInputError(problem)
    return messages


__all__ = ["ContextChatHistory"]
