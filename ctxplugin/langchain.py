"""langchain-core adapters: a Runnable, a chat message history, meta-tools, a callback handler.

- :class:`PrepareRunnable` (``engine.as_runnable()``): ``messages -> prepared view`` in an LCEL pipe.
- :class:`ContextModel` (``engine.as_model(llm)``): ``messages -> reply``: prepare, the answer
  cache and tool binding around a chat model, at the end of an LCEL pipe.
- :class:`ContextChatHistory` (``engine.history(session_id)``): for ``RunnableWithMessageHistory``;
  stores the whole conversation, returns the prepared view.
- :func:`make_meta_tools`: the ``expand_ref`` and ``load_tools`` tools a host registers.
- :class:`ContextCallbackHandler`: pass in ``callbacks=[...]`` to collect every call's report.
- :func:`with_cache_marks`: a Claude model step after ``engine.as_runnable()`` (or ``prepare``)
  whose requests are marked for the prompt cache, as ``engine.as_model`` marks its own.
"""

from __future__ import annotations

import logging
import threading
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._chat_history import ContextChatHistory
from ctxplugin._marked_calls import with_cache_marks
from ctxplugin._messages import annotation
from ctxplugin._meta_tools import (
    EXPAND_REF_DESCRIPTION,
    ExpandRefArgs,
    ScopeResolver,
    make_expand_ref_tool,
    make_meta_tools,
)
from ctxplugin._names import CACHE_LOOKUP_EVENT, CAPTURE_EVENT, EXPAND_EVENT, REPORT_EVENT
from ctxplugin._runnables import ContextModel, PreparedCall, PrepareRunnable, answered, as_messages
from ctxplugin.errors import CtxpluginError
from ctxplugin.report import ContextReport, RunSummary
from ctxplugin.scope import logged_id

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine

logger = logging.getLogger("ctxplugin")


class ContextCallbackHandler(BaseCallbackHandler):
    """Collects ctxplugin's per-call reports over runs: savings to date, refs, cache hits.

    Pass it in ``callbacks=[...]`` of any run (an agent's ``invoke``/``stream``, a chain, a
    ``RunnableWithMessageHistory``); read :attr:`summary` (a :class:`RunSummary`),
    :attr:`reports` and :attr:`captures` afterwards, or :meth:`describe` for one line. It is
    safe to share between threads and tasks; it also logs one line per prepared call at INFO.

    Example:
        >>> handler = ContextCallbackHandler()
        >>> handler.describe()
        '0 model calls: 0 -> 0 input tokens (0% saved), 0 refs created, 0 tool outputs captured, 0 expands, 0 cache hits'
    """

    def __init__(self, engine: ContextEngine | None = None) -> None:
        self.engine = engine
        self.summary = RunSummary()
        self.reports: list[ContextReport] = []
        self.captures: list[dict[str, Any]] = []
        self.expanded: list[str] = []
        self._refs: set[tuple[str, str]] = set()  # (session, ref): a ref made twice counts once
        self._lock = threading.Lock()

    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if name == REPORT_EVENT and isinstance(data, ContextReport):
            with self._lock:
                self.reports.append(data)
                self.summary.add(data)
                self._refs.update((data.session_id, ref) for ref in data.refs_created)
            logger.info(
                "session %s: %d -> %d tokens (%.0f%% saved), %d refs, %d facts",
                logged_id(data.session_id), data.tokens_before, data.tokens_after, 100 * data.reduction,
                len(data.refs_used), len(data.facts),
            )
        elif name == CAPTURE_EVENT and isinstance(data, dict):
            with self._lock:
                self.summary.captures += 1
                self.captures.append(data)
                key = (str(data.get("session_id", "")), str(data.get("ref_id") or ""))
                if key[1] and key not in self._refs:
                    self._refs.add(key)
                    self.summary.refs_created += 1
        elif name == EXPAND_EVENT and isinstance(data, dict):
            with self._lock:
                self.expanded.append(str(data.get("ref_id", "")))
        elif name == CACHE_LOOKUP_EVENT:
            with self._lock:
                self.summary.cache_lookups += 1
                # a call's report event comes before its lookup, so hits are counted here
                if isinstance(data, dict) and data.get("hit"):
                    self.summary.cache_hits += 1

    def sessions(self) -> set[str]:
        """Session ids of the prepared calls seen so far."""
        with self._lock:
            return {r.session_id for r in self.reports}

    def describe(self) -> str:
        """Savings to date in one line."""
        with self._lock:
            s = self.summary
            return (
                f"{s.calls} model calls: {s.tokens_before:,} -> {s.tokens_after:,} input tokens "
                f"({s.reduction:.0%} saved), {s.refs_created} refs created, {s.captures} tool outputs "
                f"captured, {len(self.expanded)} expands, {s.cache_hits} cache hits"
            )


def is_compact(message: BaseMessage) -> bool:
    """Whether a tool message carries a ctxplugin ref."""
    return isinstance(message, ToolMessage) and bool(annotation(message).get("ref"))


__all__ = [
    "CAPTURE_EVENT",
    "EXPAND_EVENT",
    "EXPAND_REF_DESCRIPTION",
    "REPORT_EVENT",
    "ContextCallbackHandler",
    "ContextChatHistory",
    "ContextModel",
    "CtxpluginError",
    "ExpandRefArgs",
    "PrepareRunnable",
    "PreparedCall",
    "ScopeResolver",
    "answered",
    "as_messages",
    "is_compact",
    "make_expand_ref_tool",
    "make_meta_tools",
    "with_cache_marks",
]
