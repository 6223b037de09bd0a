"""ContextEngine: the single path that turns an agent's messages into the view a model sees.

``prepare`` runs the stages of :mod:`ctxplugin.stages` in order over one per-call view —
validate, tools, room, refs, facts, history, shown, fit, account — and returns a
:class:`PreparedContext` built from the last view. This module wires the stages to the stores
and keeps the public methods; each stage's work lives in its own module.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool

from ctxplugin import _tracing
from ctxplugin._chat_history import ContextChatHistory
from ctxplugin._closing import Closing, WhileOpen
from ctxplugin._counters import as_counter
from ctxplugin._deadline import step_budget
from ctxplugin._events import emit
from ctxplugin._messages import check_conversation, split_header
from ctxplugin._meta_tools import make_meta_tools, read_ref
from ctxplugin._names import REPORT_EVENT
from ctxplugin._run_scope import direct_scope
from ctxplugin._runnables import ContextModel, PrepareRunnable
from ctxplugin._scope_gates import ScopeGates
from ctxplugin._stores import Stores, embedded_stores, given_config, open_stores, sync_store
from ctxplugin.cache import AnswerCache, AnswerCacheStore, make_answer_cache
from ctxplugin.cas import CASStore, MemoryCASStore
from ctxplugin.config import ContextConfig
from ctxplugin.errors import ConfigError, CtxpluginError, InvalidInputError
from ctxplugin.facts import FactsLedger, FactStore, MemoryFactStore
from ctxplugin.facts.embedding import default_embedding
from ctxplugin.history import BackgroundSummarizer, SummarizerLike, make_summarizer
from ctxplugin.report import CaptureReport
from ctxplugin.scope import Scope, logged_id
from ctxplugin.stages import (
    Answers,
    CallView,
    Capture,
    CaptureMemo,
    ChooseFacts,
    PreparedContext,
    ReadMemo,
    ToolLike,
    choose_tools,
    pipeline,
)
from ctxplugin.tokens import TokenCounter, get_counter
from ctxplugin.tools import LOAD_TOOLS_NAME, ToolRegistry, tool_list  # noqa: F401  (LOAD_TOOLS_NAME re-exported)

logger = logging.getLogger("ctxplugin")

_FACTS_LINES_BUDGET = 800
"""Tokens of the facts block when the budgets are shares of a window known only per call."""


class ContextEngine(Closing):
    """Prepares the context of every model call of an agent.

    Build one per process and share it: it is safe to use from many threads and tasks; all
    per-call data lives in the returned :class:`PreparedContext`. :meth:`close` (or ``with``)
    releases the stores and threads it opened; afterwards its calls (``prepare``, capture,
    ``expand_ref``, ``facts``) raise :class:`~ctxplugin.errors.EngineClosedError`.

    Args:
        config: configuration; defaults read ``CTXPLUGIN_*`` environment variables.
        cas: store for tool outputs; in-memory when omitted.
        facts: facts ledger, or just its store (a ledger with ``config.facts`` on it); in memory when omitted.
        counter: token counter — an object with ``count(text)`` and a ``name``, a function
            ``str -> int`` or a tiktoken ``Encoding``; from ``config.encoding``/``config.model`` when omitted.
        summarizer: optional gist writer for old messages — a chat model, any ``Runnable``, a
            sync or async function ``str -> str``, or a :class:`BackgroundSummarizer`. It runs
            in a background thread under ``config.history.summarizer`` quotas; ``prepare``
            never waits for it.
        answer_cache: the semantic answer cache, or just its store; used only when
            ``config.cache.enabled`` (in memory when omitted). See :mod:`ctxplugin.cache`.
    """

    facts: WhileOpen[FactsLedger] = WhileOpen()  # the ledger's API is the engine's: closed with it

    def __init__(
        self,
        config: ContextConfig | None = None,
        *,
        cas: CASStore | None = None,
        facts: FactsLedger | FactStore | None = None,
        counter: TokenCounter | Callable[[str], int] | None = None,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
        answer_cache: AnswerCache | AnswerCacheStore | None = None,
    ) -> None:
        self.config = given_config(config)
        self.cas: CASStore = sync_store(cas, "ContextEngine(cas=...)") if cas is not None else MemoryCASStore()
        if facts is None or (isinstance(facts, FactStore) and not isinstance(facts, FactsLedger)):  # a store alone: its ledger
            store = facts if facts is not None else MemoryFactStore(default_embedding(self.config.facts.embedding, self.config.facts.embedding_dims))
            facts = FactsLedger(store, self.config.facts)
        self.facts = facts
        counter, note = get_counter(self.config.encoding, self.config.model) if counter is None else (as_counter(counter), None)
        self.counter = counter
        self.registry = ToolRegistry(counter=counter, binding=self.config.tools.binding, max_loaded=self.config.tools.max_loaded, pinned=self.config.tools.pinned)
        self.summarizer = make_summarizer(summarizer, config=self.config.history.summarizer, counter=counter)
        if self.summarizer is not None and self.summarizer is not summarizer:
            self.opened(self.summarizer.close)
        self.cache: AnswerCache | None = make_answer_cache(answer_cache, self.config.cache)
        self.path: Path | None = None  # set by embedded(); other stores (chat history) live beside it
        self.gates = ScopeGates()
        self._meta_tools: list[BaseTool] | None = None
        try:
            self._budgets: dict[str, int] | None = self.config.budget.resolve()
        except ConfigError:  # shares of a context window: resolved per call
            self._budgets = None
        self._captures = captures = CaptureMemo(self.cas, self.config.cas, counter)
        self.marks = captures.owners  # the tool calls each ref was stored for: whose marks count
        reads = ReadMemo()
        self._capture = Capture(self.config, self.facts, captures, reads)
        self._stages = pipeline(
            self.config, counter=counter, registry=self.registry, ledger=self.facts, summarizer=self.summarizer,
            captures=captures, reads=reads, facts_lines=self._budgets["facts"] if self._budgets else _FACTS_LINES_BUDGET, note=note,
            forget_said=self._forget_said,
        )
        ledger = self.facts if self.config.facts.enabled else None
        self._answers = Answers(self.cache, self.cas, self.registry, ledger, self.config.cache.scope) if self.cache is not None else None

    # ------------------------------------------------------------------ construction
    @classmethod
    def embedded(
        cls,
        path: str | Path | None = None,
        config: ContextConfig | None = None,
        *,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
    ) -> ContextEngine:
        """An engine on local stores: SQLite CAS and Chroma on disk under ``path`` (``config.path``).

        ``path`` is created if missing. Embedded Chroma serves one process: another process
        opening the same ``path`` waits up to ``config.stores.timeout`` seconds, then gets
        :class:`~ctxplugin.errors.StoreInUseError` (run a Chroma server for several processes).
        With ``config.chroma_url`` or ``config.postgres_dsn``
        set, use :func:`ctxplugin.connect` instead to get the server stores (here they warn).

        Raises:
            ConfigError: ``path`` is empty, or not a directory this process can create and write.
        """
        config = given_config(config)
        return cls._on(embedded_stores(path if path is not None else config.path, config, asked=True), config, summarizer)

    @classmethod
    def from_config(
        cls,
        config: ContextConfig | None = None,
        *,
        path: str | Path | None = None,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
    ) -> ContextEngine:
        """Embedded or server stores, as the configuration says (see :func:`ctxplugin.connect`)."""
        config = given_config(config)
        return cls._on(open_stores(config, path if path is not None else config.path), config, summarizer)

    @classmethod
    def _on(
        cls, stores: Stores, config: ContextConfig, summarizer: SummarizerLike | BackgroundSummarizer | None
    ) -> ContextEngine:
        engine = cls(config=config, cas=stores.cas, facts=stores.facts, summarizer=summarizer, answer_cache=stores.answers)
        engine.path = stores.path
        engine.opened(stores.close)
        return engine

    # ------------------------------------------------------------------ prepare
    def prepare(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike | Callable[..., Any]] | None = None,
        scope: Scope | None = None,
        *,
        context_window: int | None = None,
        strict_tools: bool = False,
    ) -> PreparedContext:
        """The view the model should see for this call; inputs are never mutated.

        Args:
            messages: the conversation as the agent holds it.
            tools: the agent's tools (``BaseTool``, functions or OpenAI-format dicts).
            scope: whose call this is. When omitted: the scope of the host run the call is made
                in, else the shared ``Scope(session_id="default")`` (a warning is logged once).
            context_window: the model's input window, to resolve budgets given as shares.
            strict_tools: the host binds the tools strictly (``bind_tools(..., strict=True)``,
                as ``create_agent`` does for OpenAI models with a ``response_format``): no stubs.

        Raises:
            InvalidInputError: the messages are not a valid conversation (the message says why),
                ``scope`` is not a :class:`Scope`, ``tools`` is one tool rather than a list, or
                ``context_window`` is not a positive int.
            EngineClosedError: :meth:`close` was called.
        """
        self.check_open()
        given, scope = tuple(tool_list(tools)), direct_scope(scope, "prepare")  # a misplaced scope is refused first
        check_conversation(messages)
        if context_window is not None and (isinstance(context_window, bool) or not isinstance(context_window, int) or context_window < 1):
            raise InvalidInputError(f"context_window must be a positive number of tokens, got {context_window!r}")
        with (
            self.in_use(), self.gates.preparing(scope.key()),  # after a clear of the scope running, before the next
            _tracing.child_run("ctxplugin.prepare", inputs={"messages": len(messages), "session_id": scope.session_id}) as run,
            step_budget(self.config.stores.timeout),
        ):
            prepared = self._prepare(CallView(
                scope=scope, received=messages, tools_given=given, strict_tools=strict_tools,
                budgets=self._budgets or self.config.budget.resolve(context_window, model=self.config.model), started=time.perf_counter(),
            ))
            run.finish(outputs={"messages": len(prepared.messages), "tools": len(prepared.tools)}, metadata=prepared.report.as_metadata)
        return prepared

    async def aprepare(self, messages: Sequence[BaseMessage], tools: Sequence[ToolLike | Callable[..., Any]] | None = None,
                       scope: Scope | None = None, *, context_window: int | None = None, strict_tools: bool = False) -> PreparedContext:
        """Async :meth:`prepare` (the stores are synchronous; it runs in a worker thread)."""
        return await asyncio.to_thread(self.prepare, messages, tools, scope, context_window=context_window, strict_tools=strict_tools)

    def _prepare(self, view: CallView) -> PreparedContext:
        # stage times go into the view once, for the last stage (the account), which reports them
        timings: dict[str, float] = {}
        last = self._stages[-1]
        for stage in self._stages:
            if stage is last:
                view = view.override(timings={**view.timings, **timings})
            start = time.perf_counter()
            view = stage.apply(view)
            timings[stage.name] = timings.get(stage.name, 0.0) + (time.perf_counter() - start) * 1000
        report, fitted = view.report, view.fitted
        if report is None or fitted is None:
            raise CtxpluginError("prepare() ended without a report: the account stage must run last")
        if logger.isEnabledFor(logging.DEBUG):
            logger.debug("ctxplugin.prepare session=%s tokens %d -> %d", logged_id(view.scope.session_id), report.tokens_before,
                         report.tokens_after, extra={"ctxplugin": report.as_metadata()})
        emit(REPORT_EVENT, report)
        return PreparedContext(messages=list(fitted.messages), tools=list(view.tools), report=report)

    def bound_tools(self, messages: Sequence[BaseMessage], tools: Sequence[ToolLike | Callable[..., Any]], *,
                    strict_tools: bool = False) -> list[ToolLike]:
        """Only the tool stage of :meth:`prepare`: what to bind for a call on ``messages``
        (``strict_tools`` as there).

        Cheap and free of side effects; for hosts that bind tools apart from preparing
        messages (a model callable in ``create_react_agent``)."""
        _, body = split_header(list(messages))
        choice = choose_tools(tool_list(tools), body, config=self.config.tools, counter=self.counter, registry=self.registry,
                              strict=strict_tools)
        return choice.for_view(messages)

    # ------------------------------------------------------------------ capture and expand
    def capture_tool_result(self, tool_message: ToolMessage, scope: Scope | None = None) -> ToolMessage:
        """Store a tool output and return the compact message for the conversation.

        The returned ``ToolMessage`` keeps ``tool_call_id``, ``name`` and ``id``; outputs over the
        pass-through threshold are replaced by a summary and a ref (``additional_kwargs
        ["ctxplugin"]`` holds ``ref``, ``compact`` and token counts). When the store fails the
        original is returned unchanged with a warning in ``additional_kwargs["ctxplugin"]``.

        Raises:
            InvalidInputError: ``tool_message`` is not a ``ToolMessage``.
            EngineClosedError: :meth:`close` was called.
        """
        compact, _ = self.capture_with_report(tool_message, direct_scope(scope, "capture_tool_result"))
        return compact

    async def acapture_tool_result(self, tool_message: ToolMessage, scope: Scope | None = None) -> ToolMessage:
        """Async :meth:`capture_tool_result`."""
        return await asyncio.to_thread(self.capture_tool_result, tool_message, scope)

    def capture_with_report(self, tool_message: ToolMessage, scope: Scope) -> tuple[ToolMessage, CaptureReport]:
        """:meth:`capture_tool_result` plus its :class:`CaptureReport`."""
        with self.in_use():
            return self._capture(tool_message, scope)

    def expand_ref(
        self,
        ref_id: str,
        scope: Scope | None = None,
        fields: Sequence[str] | None = None,
        offset: int = 0,
        limit: int | None = None,
        *,
        pattern: str | None = None,
        regex: bool = False,
    ) -> str:
        """The stored original of ``ref_id`` (exactly, as ``str``, without options).

        ``fields`` selects JSON paths; ``offset``/``limit`` (0: none) count items of a JSON
        array, otherwise lines; ``pattern`` keeps matching lines or items (a regex if ``regex``).
        In a LangChain run, a read sends the ``ctxplugin.expand`` event the ``expand_ref`` tool's do.

        Raises:
            RefNotFoundError: unknown, expired, or not readable from ``scope``.
            StoreError: the store failed (:class:`StoreUnavailableError`: not reached in time).
            EngineClosedError: :meth:`close` was called.
        """
        with self.in_use():
            return read_ref(self.cas, ref_id, direct_scope(scope, "expand_ref"), fields=fields, offset=offset, limit=limit,
                            pattern=pattern, regex=regex)

    def revoke_masked(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """Revoke ``scope``'s grants of the outputs among ``messages`` masked after capture, as
        ``prepare`` does (see :meth:`~ctxplugin.stages.memos.Revocations.revoke_masked`)."""
        self.check_open()
        with step_budget(self.config.stores.timeout):
            self._captures.revocations.revoke_masked(messages, scope)

    def forget_said(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """What ``messages`` (a conversation its host cleared) had the user state is no longer current
        (after the prepares of ``scope`` in flight: what they read goes too; see ScopeGates)."""
        self.check_open()
        with self.gates.clearing(scope.key()), step_budget(self.config.stores.timeout):
            self._forget_said(messages, scope)

    def _forget_said(self, messages: Sequence[BaseMessage], scope: Scope, at: Sequence[int] | None = None) -> None:
        """:meth:`forget_said` within a call of ``scope`` (``at``: only the messages there)."""
        self._capture.forget_said(messages, scope, at)
        for stage in (s for s in self._stages if isinstance(s, ChooseFacts)):
            stage.forget(scope)

    # ------------------------------------------------------------------ host helpers
    def as_runnable(self) -> Any:
        """A ``Runnable`` that maps a message list to the prepared view (scope from
        ``config["configurable"]["thread_id"]``)."""
        return PrepareRunnable(self)

    def as_model(self, model: Any, tools: Sequence[Any] = ()) -> Any:
        """A ``Runnable`` that maps a message list to ``model``'s reply on the prepared view:
        answers from the answer cache when it can, binds the tools the plan chose, caches final
        answers (see :class:`ctxplugin.langchain.ContextModel`)."""
        return ContextModel(self, model, tools)

    def history(self, session_id: str, **scope_fields: str) -> Any:
        """A chat message history for ``RunnableWithMessageHistory`` that keeps the whole
        conversation and returns the prepared view from ``.messages``."""
        return ContextChatHistory(self, Scope(session_id=session_id, **scope_fields))

    # ------------------------------------------------------------------ answer cache
    def cached_answer(
        self,
        messages: Sequence[BaseMessage],
        prepared: PreparedContext,
        *,
        tools: Sequence[Any] | None = (),  # None as in prepare: no tools
        scope: Scope | None = None,
        model: Any = None,
    ) -> AIMessage | None:
        """A cached answer to return instead of calling the model, or ``None``.

        Call it after :meth:`prepare` with the same ``messages``, ``tools`` and ``scope``;
        ``model`` is the chat model (or its name). On a hit ``prepared.report.cached_answer``
        is set and the message carries ``response_metadata["ctxplugin_cache"]``. Every lookup
        emits a ``ctxplugin.cache_lookup`` event. Always ``None`` when the cache is off; a
        failing store is a miss with a warning in the report.
        """
        self.check_open()
        if self._answers is None:
            return None
        call_scope = direct_scope(scope, "cached_answer")
        return self._answers.cached(messages, prepared.report, tools=tools or (), scope=call_scope, model=model)

    def remember_answer(
        self,
        messages: Sequence[BaseMessage],
        prepared: PreparedContext,
        answer: BaseMessage,
        *,
        tools: Sequence[Any] | None = (),  # None as in prepare: no tools
        scope: Scope | None = None,
        model: Any = None,
    ) -> bool:
        """Cache the model's ``answer`` to the call that :meth:`prepare` made ``prepared`` for
        (same arguments as :meth:`cached_answer`). Answers with tool calls, empty or cut-short
        answers are not cached. Returns whether it was stored; a failing store is a warning."""
        self.check_open()
        if self._answers is None:
            return False
        call_scope = direct_scope(scope, "remember_answer")
        return self._answers.remember(messages, prepared.report, answer, tools=tools or (), scope=call_scope, model=model)

    async def acached_answer(self, messages: Sequence[BaseMessage], prepared: PreparedContext, **kwargs: Any) -> AIMessage | None:
        """Async :meth:`cached_answer`."""
        return None if self.cache is None else await asyncio.to_thread(self.cached_answer, messages, prepared, **kwargs)

    async def aremember_answer(self, messages: Sequence[BaseMessage], prepared: PreparedContext, answer: BaseMessage, **kwargs: Any) -> bool:
        """Async :meth:`remember_answer`."""
        return False if self.cache is None else await asyncio.to_thread(self.remember_answer, messages, prepared, answer, **kwargs)

    def tools_for_model(self) -> list[BaseTool]:
        """The meta-tools a host must register with its tool node (``expand_ref``, ``load_tools``),
        the same objects on every call (their schemas are read once) in a new list."""
        self._meta_tools = self._meta_tools or make_meta_tools(self)
        return list(self._meta_tools)


__all__ = ["ContextEngine", "CtxpluginError", "PreparedContext"]
