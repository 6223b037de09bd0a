"""Answers: the semantic answer cache around a model call, after ``prepare``.

A lookup keys the call by its question, the facts it rests on and the tools it may use (see
:mod:`ctxplugin.cache`); a hit is returned instead of calling the model, and a final answer is
stored for the next call like it. A failing store is a miss (or an answer not stored) with a
warning in the call's report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxplugin._events import emit
from ctxplugin._names import CACHE_LOOKUP_EVENT
from ctxplugin.cache import AnswerCache, CacheScope, CallContext, call_context
from ctxplugin.cas import CASStore
from ctxplugin.errors import StoreError
from ctxplugin.facts import FactsLedger
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope
from ctxplugin.stages.view import log_degraded
from ctxplugin.tools import ToolRegistry


@dataclass(frozen=True, slots=True)
class Answers:
    """Look up and store answers for prepared calls.

    Attributes:
        cache: the answer cache.
        cas: the CAS (a cached answer that cites a ref is served only while the ref exists).
        registry: the engine's tool registry (tools are part of the key).
        ledger: the facts ledger when facts are on (an answer resting on a fact that changed is
            not served).
        mode: who may share an answer (``cache.scope``).
    """

    cache: AnswerCache
    cas: CASStore
    registry: ToolRegistry
    ledger: FactsLedger | None
    mode: CacheScope

    def cached(
        self, messages: Sequence[BaseMessage], report: ContextReport, *, tools: Sequence[Any], scope: Scope, model: Any
    ) -> AIMessage | None:
        """The cached answer to the call ``report`` accounts for, or None; a hit is noted in
        ``report.cached_answer``."""
        try:
            call = self._call(messages, report, tools, scope, model)
            found = self.cache.lookup(call, cas=self.cas, ledger=self.ledger) if call is not None else None
        except StoreError as exc:
            report.warnings.append(log_degraded(scope, f"answer cache unavailable; the model is called: {exc}"))
            return None
        if found is None:
            return None
        report.cached_answer = found.hit
        emit(CACHE_LOOKUP_EVENT, {"session_id": scope.session_id, "hit": found.hit, "similarity": round(found.similarity, 4), "reason": found.reason})
        return found.message

    def remember(
        self,
        messages: Sequence[BaseMessage],
        report: ContextReport,
        answer: BaseMessage,
        *,
        tools: Sequence[Any],
        scope: Scope,
        model: Any,
    ) -> bool:
        """Store ``answer`` as the reply to the call ``report`` accounts for; whether it was."""
        try:
            call = self._call(messages, report, tools, scope, model)
            return call is not None and self.cache.store_answer(call, answer) is not None
        except StoreError as exc:
            report.warnings.append(log_degraded(scope, f"answer cache unavailable; the answer was not cached: {exc}"))
            return False

    def _call(
        self, messages: Sequence[BaseMessage], report: ContextReport, tools: Sequence[Any], scope: Scope, model: Any
    ) -> CallContext | None:
        return call_context(
            messages, report, tools=tools, scope=scope, model=model,
            mode=self.mode, registry=self.registry, ledger=self.ledger,
        )


__all__ = ["Answers"]
