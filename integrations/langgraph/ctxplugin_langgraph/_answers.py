"""The answer cache in LangGraph hosts without middleware (``create_react_agent``, custom graphs).

``create_agent`` has one hook around the model call; ``create_react_agent`` splits it in two:
``pre_model_hook`` prepares the view, then the model callable receives only that view. The
prepared call (full conversation, report, scope) is handed from the first to the second through
:class:`AnswerHandoff`, found by the view's message objects (or, for a copy of the view, by the
scope and what the view says), so the model step can look up a
cached answer and store the final one (:func:`ctxplugin.langchain.answered`, which LCEL's
``engine.as_model`` uses too). Nothing here runs when the cache is off.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from operator import is_
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig

from ctxplugin import ContextEngine, Scope
from ctxplugin.langchain import PreparedCall, answered

_PENDING = 256


class AnswerHandoff:
    """Prepared calls waiting for their model step, keyed by scope and view (bounded, thread-safe).

    An entry nobody picks up (a custom graph whose model node does not use
    :meth:`ContextHooks.model`) is dropped once ``_PENDING`` newer ones arrived.
    """

    def __init__(self, engine: ContextEngine) -> None:
        self.engine = engine
        self._pending: OrderedDict[str, PreparedCall] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, call: PreparedCall) -> None:
        """Remember a prepared call for the model step that will receive its view."""
        if self.engine.cache is None:
            return
        key = _view_key(call.scope, call.prepared.messages)
        with self._lock:
            self._pending[key] = call
            self._pending.move_to_end(key)
            while len(self._pending) > _PENDING:
                self._pending.popitem(last=False)

    def model(
        self, bound: Runnable[Any, Any], view: Sequence[BaseMessage], scope: Callable[[RunnableConfig | None], Scope], model: Any
    ) -> Runnable[Any, Any]:
        """``bound`` behind the cache if the call that produced ``view`` is known, else ``bound``.

        ``scope`` maps the running graph's config to the call's scope; it is only asked when
        the cache is on and ``view`` is not the list the hook returned (a copy of it)."""
        if self.engine.cache is None:
            return bound
        call = self._take_prepared(view)
        if call is None:  # a copy of the view: told by what it says, in the scope of the config
            key = _view_key(scope(_run_config()), view)
            with self._lock:
                call = self._pending.pop(key, None)
        return bound if call is None else answered(self.engine, bound, call, model)

    def _take_prepared(self, view: Sequence[BaseMessage]) -> PreparedCall | None:
        """The call whose view is the very message list the hook returned, with the scope the
        hook found: without a thread id that scope came from the state's first message, which
        the model step, handed only the view, cannot see."""
        with self._lock:
            for key in reversed(self._pending):
                kept = self._pending[key].prepared.messages
                if kept and len(kept) == len(view) and all(map(is_, kept, view)):
                    return self._pending.pop(key)
        return None


def _run_config() -> RunnableConfig | None:
    """The config of the running graph (a model callable is not handed one)."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:  # outside a graph run
        return None


def _view_key(scope: Scope, view: Sequence[BaseMessage]) -> str:
    """The view told by what each message says, not by its id: between the hook and the model
    step, ``stream_mode="messages"`` gives an id to each message of the view that had none (the
    prompt, the lookups) as it streams them."""
    digest = hashlib.sha256(scope.key().encode("utf-8", "surrogatepass"))
    for message in view:
        calls = [(c["name"], c["args"], c["id"]) for c in message.tool_calls] if isinstance(message, AIMessage) else None
        answers = message.tool_call_id if isinstance(message, ToolMessage) else None
        said = (message.type, message.content, calls, answers)
        digest.update(repr(said).encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


__all__ = ["AnswerHandoff", "PreparedCall", "answered"]
