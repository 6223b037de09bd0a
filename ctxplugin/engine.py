"""ContextEngine: the single path that turns an agent's messages into the view a model sees.

``prepare`` runs the stages in order — validate, tool directory, tool outputs to refs, facts,
history compression, budget — and returns a :class:`PreparedContext`. Stages live in their own
modules; this one coordinates them and owns the one rule that a failing store never fails the
agent: the original passes through and the report says what was skipped.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import _tracing
from ctxplugin._events import emit
from ctxplugin._lru import LRU
from ctxplugin._messages import (
    META_KEY,
    annotation,
    exchange_spans,
    expanded_refs,
    last_human_text,
    merge_system,
    split_header,
    validate,
)
from ctxplugin._names import (
    CACHE_LOOKUP_EVENT,
    CAPTURE_EVENT,
    EXPAND_REF_NAME,
    META_TOOL_NAMES,
    REPORT_EVENT,
)
from ctxplugin._run_scope import direct_scope
from ctxplugin.budget import FactLine, Parts, enforce, section_tokens, total_tokens
from ctxplugin.cache import (
    AnswerCache,
    AnswerCacheStore,
    ChromaAnswerCacheStore,
    call_context,
    make_answer_cache,
)
from ctxplugin.cas import (
    Captured,
    CASStore,
    MemoryCASStore,
    SQLiteCASStore,
    capture,
    compact_message,
    expand,
)
from ctxplugin.config import ContextConfig
from ctxplugin.errors import ConfigError, CtxpluginError, InvalidInputError, StoreError
from ctxplugin.facts import FactsLedger, MemoryFactStore, mark_outdated
from ctxplugin.facts.embedding import default_embedding
from ctxplugin.facts.outdated import exploratory_spans
from ctxplugin.facts.render import current_once, fact_line
from ctxplugin.guard import step_budget
from ctxplugin.history import (
    BackgroundSummarizer,
    HistoryBudget,
    HistoryView,
    SummarizerLike,
    compress_history,
    make_summarizer,
    tier_bounds,
)
from ctxplugin.report import CaptureReport, ContextReport, FactUse
from ctxplugin.scope import Scope
from ctxplugin.tokens import (
    TokenCounter,
    content_text,
    count_message,
    count_messages,
    count_tool_schemas,
    get_counter,
)
from ctxplugin.tools import LOAD_TOOLS_NAME, ToolRegistry, plan_tools  # noqa: F401  (LOAD_TOOLS_NAME re-exported)

logger = logging.getLogger("ctxplugin")


ToolLike = BaseTool | dict[str, Any]

_MEMO_SIZE = 4096
_SESSIONS_TRACKED = 1024


@dataclass
class PreparedContext:
    """What the model should see for one call.

    Attributes:
        messages: header (system + tool directory), compressed history and the facts block.
        tools: tools to bind for this call (meta-tools plus loaded schemas, or all tools).
        report: what was done, with token counts per section and timings.
    """

    messages: list[BaseMessage]
    tools: list[ToolLike]
    report: ContextReport

    @property
    def system_message(self) -> SystemMessage | None:
        """The leading system message of the view, if any."""
        first = self.messages[0] if self.messages else None
        return first if isinstance(first, SystemMessage) else None

    @property
    def conversation(self) -> list[BaseMessage]:
        """The view without its leading system message (for hosts that pass it separately)."""
        return self.messages[1:] if self.system_message is not None else list(self.messages)


@dataclass
class _Stopwatch:
    timings: dict[str, float] = field(default_factory=dict)

    @contextmanager
    def stage(self, name: str) -> Iterator[None]:
        start = time.perf_counter()
        try:
            yield
        finally:
            self.timings[name] = self.timings.get(name, 0.0) + (time.perf_counter() - start) * 1000


class ContextEngine:
    """Prepares the context of every model call of an agent.

    Build one per process and share it: it is safe to use from many threads and tasks; all
    per-call data lives in the returned :class:`PreparedContext`.

    Args:
        config: configuration; defaults read ``CTXPLUGIN_*`` environment variables.
        cas: store for tool outputs; in-memory when omitted.
        facts: facts ledger; an in-memory ledger when omitted.
        counter: token counter; chosen from ``config.encoding``/``config.model`` when omitted.
        summarizer: optional gist writer for old messages — a chat model, any ``Runnable``, a
            sync or async function ``str -> str``, or a :class:`BackgroundSummarizer`. It runs
            in a background thread under ``config.history.summarizer`` quotas; ``prepare``
            never waits for it.
        answer_cache: the semantic answer cache, or just its store; used only when
            ``config.cache.enabled`` (in memory when omitted). See :mod:`ctxplugin.cache`.
    """

    def __init__(
        self,
        config: ContextConfig | None = None,
        *,
        cas: CASStore | None = None,
        facts: FactsLedger | None = None,
        counter: TokenCounter | None = None,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
        answer_cache: AnswerCache | AnswerCacheStore | None = None,
    ) -> None:
        self.config = config or ContextConfig()
        self.cas: CASStore = cas if cas is not None else MemoryCASStore()
        if facts is None:
            embedding = default_embedding(self.config.facts.embedding, self.config.facts.embedding_dims)
            facts = FactsLedger(MemoryFactStore(embedding), self.config.facts)
        self.facts: FactsLedger = facts
        if counter is None:
            counter, note = get_counter(self.config.encoding, self.config.model)
            self._counter_note = note
        else:
            self._counter_note = None
        self.counter = counter
        self.registry = ToolRegistry(counter=counter)
        self.registry.binding = self.config.tools.binding
        self.summarizer = make_summarizer(summarizer, config=self.config.history.summarizer, counter=counter)
        self.cache: AnswerCache | None = make_answer_cache(answer_cache, self.config.cache)
        self.path: Path | None = None  # set by embedded(); other stores (chat history) live beside it
        self._lock = threading.Lock()
        self._meta_schema_tokens: dict[int, tuple[Any, int]] = {}
        self._compact_memo: LRU[str, Captured] = LRU(_MEMO_SIZE)
        self._ingested: LRU[str, bool] = LRU(_MEMO_SIZE * 4)
        self._last_view: LRU[str, tuple[str, list[tuple[str, int]]]] = LRU(_SESSIONS_TRACKED)
        # facts.placement="window": the lines shown per session and the tier position they
        # were chosen at, reused until the boundary moves (or the question changes)
        self._window_facts: LRU[str, tuple[str, tuple[FactLine, ...]]] = LRU(_SESSIONS_TRACKED)
        try:
            self._budgets: dict[str, int] | None = self.config.budget.resolve()
        except ConfigError:  # shares of a context window: resolved per call
            self._budgets = None

    # ------------------------------------------------------------------ construction
    @classmethod
    def embedded(
        cls,
        path: str | Path = ".ctxplugin",
        config: ContextConfig | None = None,
        *,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
    ) -> ContextEngine:
        """An engine on local stores: SQLite CAS and Chroma on disk under ``path``.

        ``path`` is created if missing. Embedded Chroma serves one process: another process
        opening the same ``path`` waits up to ``config.stores.timeout`` seconds, then gets
        :class:`~ctxplugin.errors.StoreInUseError` (run a Chroma server for several processes).
        With ``config.chroma_url`` or ``config.postgres_dsn``
        set, use :func:`ctxplugin.connect` instead to get the server stores.
        """
        from ctxplugin.facts import ChromaFactStore

        config = config or ContextConfig()
        root = Path(path)
        root.mkdir(parents=True, exist_ok=True)
        wait = config.stores.timeout
        cas = SQLiteCASStore(root / "cas.sqlite3", busy_timeout_ms=int(wait * 1000))
        store = ChromaFactStore.persistent(root / "chroma", config=config.facts, wait_s=wait)
        answers = ChromaAnswerCacheStore.persistent(root / "chroma", wait_s=wait) if config.cache.enabled else None
        engine = cls(
            config=config, cas=cas, facts=FactsLedger(store, config.facts), summarizer=summarizer, answer_cache=answers
        )
        engine.path = root
        return engine

    @classmethod
    def from_config(
        cls,
        config: ContextConfig | None = None,
        *,
        path: str | Path | None = None,
        summarizer: SummarizerLike | BackgroundSummarizer | None = None,
    ) -> ContextEngine:
        """Embedded or server stores, as the configuration says (see :func:`ctxplugin.connect`)."""
        from ctxplugin._connect import connect

        return connect(config, path=path, summarizer=summarizer)

    # ------------------------------------------------------------------ prepare
    def prepare(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike | Callable[..., Any]] | None = None,
        scope: Scope | None = None,
        *,
        context_window: int | None = None,
    ) -> PreparedContext:
        """The view the model should see for this call; inputs are never mutated.

        Args:
            messages: the conversation as the agent holds it.
            tools: the agent's tools (``BaseTool``, functions or OpenAI-format dicts).
            scope: whose call this is. When omitted: the scope of the host run the call is made
                in, else the shared ``Scope(session_id="default")`` (a warning is logged once).
            context_window: the model's input window, to resolve budgets given as shares.

        Raises:
            InvalidInputError: the messages are not a valid conversation (the message says why).
        """
        scope = direct_scope(scope, "prepare")
        with (
            _tracing.child_run("ctxplugin.prepare", inputs={"messages": len(messages), "session_id": scope.session_id}) as run,
            step_budget(self.config.stores.timeout),
        ):
            prepared = self._prepare(messages, list(tools or []), scope, context_window)
            run.finish(outputs={"messages": len(prepared.messages), "tools": len(prepared.tools)}, metadata=prepared.report.as_metadata())
        return prepared

    async def aprepare(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike | Callable[..., Any]] | None = None,
        scope: Scope | None = None,
        *,
        context_window: int | None = None,
    ) -> PreparedContext:
        """Async :meth:`prepare` (the stores are synchronous; it runs in a worker thread)."""
        return await asyncio.to_thread(self.prepare, messages, tools, scope, context_window=context_window)

    def _prepare(
        self,
        messages: Sequence[BaseMessage],
        tools: list[Any],
        scope: Scope,
        context_window: int | None,
    ) -> PreparedContext:
        clock = _Stopwatch()
        report = ContextReport(session_id=scope.session_id, encoding=self.counter.name)
        if self._counter_note:
            report.warnings.append(self._counter_note)
        start = time.perf_counter()
        with clock.stage("validate"):
            valid, notes = validate(messages, orphans=self.config.orphan_tool_results)
            report.warnings.extend(notes)
            header_parts, body = split_header(valid)
            report.messages_before = len(messages)
            report.refs_expanded = expanded_refs(body, EXPAND_REF_NAME)
        with clock.stage("tools"):
            meta = {_tool_name(t): t for t in tools if _tool_name(t) in META_TOOL_NAMES}
            user_tools = [t for t in tools if _tool_name(t) not in META_TOOL_NAMES]
            plan = plan_tools(user_tools, body, config=self.config.tools, counter=self.counter, registry=self.registry)
            bound = [meta.get(_tool_name(t), t) for t in plan.bound]
            schema_tokens = plan.schema_tokens_sent
            if EXPAND_REF_NAME in meta:
                bound.append(meta[EXPAND_REF_NAME])
                schema_tokens += self._schema_tokens(meta[EXPAND_REF_NAME])
            report.tools_directory = plan.active
            report.tools_bound = [_tool_name(t) for t in bound]
            report.tools_loaded = list(plan.loaded)
            report.sections["tools"].before = plan.schema_tokens_full
        report.tokens_before = count_messages(list(messages), self.counter) + plan.schema_tokens_full
        before_sections = {
            "header": sum(count_message(m, self.counter) for m in header_parts),
            "history": sum(count_message(m, self.counter) for m in body if not isinstance(m, ToolMessage)),
            "summaries": sum(count_message(m, self.counter) for m in body if isinstance(m, ToolMessage)),
        }
        # Omitted history is announced by notes in the history, never here: the header starts
        # every cached prefix.
        header = merge_system(header_parts, [plan.directory_text] if plan.directory_text else [])
        outside = schema_tokens + (count_message(header, self.counter) if header is not None else 0)
        whole = self._sent_whole(body, outside, context_window)
        if whole and EXPAND_REF_NAME in meta and not _calls_tool(body, EXPAND_REF_NAME):
            # nothing in a view sent whole is stored behind a ref: expand_ref joins the tools
            # when compression starts, the call that breaks the prefix anyway
            bound.remove(meta[EXPAND_REF_NAME])
            schema_tokens -= self._schema_tokens(meta[EXPAND_REF_NAME])
            report.tools_bound = [_tool_name(t) for t in bound]
        with clock.stage("refs"):
            raw_body = body
            if not whole:
                body = self._compact_tool_results(body, scope, report)
        query = last_human_text(body)
        facts_lines: tuple[FactLine, ...] = ()
        if self.config.facts.enabled:
            with clock.stage("facts"):
                window = self._window_key(body, query)
                sources = _fact_sources(raw_body, body)
                standing = _standing_text(header_parts, body)
                body, facts_lines = self._facts_stage(body, query, scope, report, window, sources, standing)
        anchor: BaseMessage | None = None
        if self.config.history.enabled:
            with clock.stage("history"):
                view = self._history_stage(body, scope, context_window, report, outside=outside)
                body = view.messages
                if view.verbatim_from is not None and view.verbatim_from < len(body):
                    anchor = body[view.verbatim_from]
        if facts_lines and self.config.facts.skip_shown:
            facts_lines = _not_shown(facts_lines, raw_body, body)
        with clock.stage("budget"):
            budgets = self._budgets or self.config.budget.resolve(context_window)
            parts = Parts(
                header=header,
                history=body,
                facts_title="Known facts (current; newer facts replace older ones):",
                facts=facts_lines,
                tools_tokens=schema_tokens,
                facts_anchor=anchor,
                facts_placement=self.config.facts.placement,
            )
            outcome = enforce(parts, budgets, self.counter, block_size=self.config.history.block_size)
            parts = outcome.parts
            report.warnings.extend(outcome.warnings)
            report.within_budget = outcome.within and total_tokens(parts, self.counter) <= budgets["total"]
            report.budget_total = budgets["total"]
            report.dropped_exchanges += parts.dropped_exchanges
            report.facts = [FactUse(id=f.fact_id, key=f.key, score=round(f.score, 4)) for f in parts.facts]
        out = parts.layout().messages(parts.header_message())
        after = section_tokens(parts, self.counter)
        for name, tokens in after.items():
            section = report.sections[name]
            section.after = tokens
            section.before = before_sections.get(name, section.before)
            if name != "tools":
                section.budget = budgets.get(name)
        report.sections["facts"].before = after["facts"]
        report.tokens_after = sum(after.values())
        report.messages_after = len(out)
        report.unchanged_prefix_tokens = self._prefix_tokens(scope, out, bound)
        report.timings_ms = dict(clock.timings)
        report.timings_ms["total"] = (time.perf_counter() - start) * 1000
        logger.debug(
            "ctxplugin.prepare session=%s tokens %d -> %d",
            scope.session_id,
            report.tokens_before,
            report.tokens_after,
            extra={"ctxplugin": report.as_metadata()},
        )
        emit(REPORT_EVENT, report)
        return PreparedContext(messages=out, tools=bound, report=report)

    def bound_tools(
        self,
        messages: Sequence[BaseMessage],
        tools: Sequence[ToolLike | Callable[..., Any]],
    ) -> list[ToolLike]:
        """Only the tool stage of :meth:`prepare`: what to bind for a call on ``messages``.

        Cheap and free of side effects; for hosts that bind tools apart from preparing
        messages (a model callable in ``create_react_agent``)."""
        tools = list(tools)
        meta = {_tool_name(t): t for t in tools if _tool_name(t) in META_TOOL_NAMES}
        user_tools = [t for t in tools if _tool_name(t) not in META_TOOL_NAMES]
        _, body = split_header(list(messages))
        plan = plan_tools(user_tools, body, config=self.config.tools, counter=self.counter, registry=self.registry)
        bound = [meta.get(_tool_name(t), t) for t in plan.bound]
        if EXPAND_REF_NAME in meta:
            bound.append(meta[EXPAND_REF_NAME])
        return bound

    # ------------------------------------------------------------------ stages
    def _compact_tool_results(self, body: list[BaseMessage], scope: Scope, report: ContextReport) -> list[BaseMessage]:
        if not self.config.cas.enabled:
            return body
        out: list[BaseMessage] = []
        for message in body:
            if not isinstance(message, ToolMessage) or message.name in META_TOOL_NAMES:
                out.append(message)
                continue
            note = annotation(message)
            if note.get("ref") and isinstance(note.get("compact"), str):
                compact_text = note["compact"]
                ref = str(note["ref"])
                created = False
            else:
                try:
                    captured = self._capture_memo(message, scope)
                except StoreError as exc:
                    _degraded(report, scope, f"CAS unavailable; tool output {message.tool_call_id!r} passed through: {exc}")
                    out.append(message)
                    continue
                if captured.passthrough or captured.ref_id is None:
                    out.append(message)
                    continue
                compact_text, ref, created = captured.text, captured.ref_id, captured.created
            if created:
                report.refs_created.append(ref)
            report.refs_used.append(ref)
            out.append(compact_message(message, compact_text, ref))
        return out

    def _capture_memo(self, message: ToolMessage, scope: Scope) -> Captured:
        content = message.content
        text_key = content if isinstance(content, str) else repr(content)
        key = f"{scope.key()}\x00{message.tool_call_id}\x00{len(text_key)}\x00{hash(text_key)}"
        with self._lock:
            hit = self._compact_memo.get(key)
        if hit is not None:
            return hit
        captured = capture(
            content,
            store=self.cas,
            scope=scope,
            config=self.config.cas,
            counter=self.counter,
            tool_name=message.name,
            is_error=message.status == "error",
        )
        with self._lock:
            self._compact_memo.put(key, captured)
        return captured

    def _window_key(self, body: list[BaseMessage], query: str) -> str | None:
        """With ``facts.placement="window"``: what the facts block is chosen for — the start of
        the verbatim tier and the question. None with any other placement."""
        if self.config.facts.placement != "window" or not self.config.history.enabled:
            return None
        verbatim_start = tier_bounds(len(exchange_spans(body)), self.config.history)[1]
        return f"{verbatim_start}\x00{hashlib.sha256(query.encode('utf-8', 'surrogatepass')).hexdigest()}"

    def _facts_stage(
        self,
        body: list[BaseMessage],
        query: str,
        scope: Scope,
        report: ContextReport,
        window: str | None,
        sources: list[BaseMessage],
        standing: str = "",
    ) -> tuple[list[BaseMessage], tuple[FactLine, ...]]:
        """Extract facts from ``sources`` not read before, mark outdated statements in ``body``
        and choose the facts block for ``query``, leaving out facts that ``standing`` (the text
        every call shows whole: system prompt and task) already states."""
        fresh: list[BaseMessage] = []
        try:
            if self.config.facts.extract:
                fresh = [m for m in _exploratory(sources) if not self._seen(m, scope)]
                if fresh:
                    written = self.facts.ingest(fresh, scope=scope)
                    report.facts_extracted += len(written)
                    fresh = []
            if self.config.facts.mark_outdated:
                # the latest user message is shown exactly as sent
                latest = max((i for i, m in enumerate(body) if isinstance(m, HumanMessage)), default=-1)
                body, marked = mark_outdated(body, ledger=self.facts, scope=scope, keep={latest})
                report.outdated_marked = marked
            if window is not None:
                with self._lock:
                    frozen = self._window_facts.get(_reader_key(scope))
                if frozen is not None and frozen[0] == window and self._all_current(frozen[1], scope):
                    return body, frozen[1]
            scored = self.facts.search(query, scope=scope, k=self.config.facts.k) if query and self.config.facts.k else []
        except StoreError as exc:
            self._unsee(fresh, scope)  # read again on a later call, once the store is back
            _degraded(report, scope, f"facts store unavailable; facts skipped for this call: {exc}")
            return body, ()
        lines: list[FactLine] = []
        used = 0
        budget = self._facts_budget()
        for hit in current_once(scored):
            fact = hit.fact
            if _restates(fact.text, standing):
                continue
            try:
                basis = self.facts.changed_basis(fact, scope=scope) if fact.needs_review else []
            except StoreError as exc:
                _degraded(report, scope, f"facts store unavailable; a changed dependency is not named: {exc}")
                basis = []
            text = fact_line(fact, basis)
            tokens = self.counter.count(text) + 2
            if used + tokens > budget:
                break
            used += tokens
            lines.append(
                FactLine(
                    text=text,
                    score=float(hit.score),
                    fact_id=fact.id,
                    key=fact.key,
                    source_ref=fact.source.ref,
                    statement=fact.text,
                )
            )
        if window is not None:
            with self._lock:
                self._window_facts.put(_reader_key(scope), (window, tuple(lines)))
        return body, tuple(lines)

    def _all_current(self, lines: tuple[FactLine, ...], scope: Scope) -> bool:
        """Whether every fact of ``lines`` is still valid (none superseded since it was chosen)."""
        ids = [line.fact_id for line in lines]
        if not ids:
            return True
        valid = {fact.id for fact in self.facts.store.get(ids, reader=scope) if fact.is_valid}
        return all(fact_id in valid for fact_id in ids)

    def _history_budget(self, context_window: int | None, outside: int) -> tuple[HistoryBudget, int]:
        """The limits compression aims for, and the room the history has beside ``outside``
        tokens of header and tool schemas and the facts budget."""
        history = self.config.history
        budgets = self._budgets or self.config.budget.resolve(context_window)
        facts = budgets["facts"] if self.config.facts.enabled and self.config.facts.k else 0
        room = max(0, budgets["total"] - outside - facts)
        budget = HistoryBudget(
            total=min(room, history.max_tokens) if history.max_tokens is not None else room,
            messages=budgets["history"],
            tool_results=budgets["summaries"],
        )
        return budget, room

    def _sent_whole(self, body: list[BaseMessage], outside: int, context_window: int | None) -> bool:
        """With ``history.compress="over_budget"``: whether the conversation, tool outputs
        included, fits the room it has as it is. Then the model sees it as it was — no summary,
        no note — and every call repeats the previous one's prefix."""
        history = self.config.history
        if not history.enabled or history.compress != "over_budget":
            return False
        budget, room = self._history_budget(context_window, outside)
        whole = HistoryBudget(total=room, messages=budget.messages, tool_results=budget.tool_results)
        return whole.fits(body, self.counter)

    def _history_stage(
        self,
        body: list[BaseMessage],
        scope: Scope,
        context_window: int | None,
        report: ContextReport,
        *,
        outside: int,
    ) -> HistoryView:
        """Compress the history so that, with ``outside`` tokens of header and tool schemas and
        the facts budget, it fits every budget: the budget stage then has nothing to drop, and
        what is left out changes only when tier boundaries move (cache-stable)."""
        history = self.config.history
        budget, room = self._history_budget(context_window, outside)
        if history.compress == "over_budget" and budget.total != room:
            # max_tokens is what compression aims for once it starts; until the history outgrows
            # the room it has, it is sent as it is
            whole = HistoryBudget(total=room, messages=budget.messages, tool_results=budget.tool_results)
            if whole.fits(body, self.counter):
                budget = whole
        view = compress_history(
            body,
            config=history,
            counter=self.counter,
            budget=budget,
            summarizer=self.summarizer,
            session=scope.key(),
        )
        report.compressed_messages = view.compressed_count
        report.dropped_exchanges = view.omitted_exchanges
        if self.summarizer is not None:
            report.warnings.extend(self.summarizer.take_warnings(scope.key()))
        return view

    def _schema_tokens(self, tool: Any) -> int:
        """Tokens of one tool's schema as sent, memoised per tool object (meta-tools are built
        once per host and passed on every call)."""
        with self._lock:
            hit = self._meta_schema_tokens.get(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        tokens = count_tool_schemas([convert_to_openai_tool(tool)], self.counter)
        with self._lock:
            self._meta_schema_tokens[id(tool)] = (tool, tokens)  # the tool is kept, so its id stays its own
        return tokens

    def _facts_budget(self) -> int:
        budgets = self._budgets
        return budgets["facts"] if budgets else 800

    def _seen(self, message: BaseMessage, scope: Scope) -> bool:
        key = _seen_key(message, scope)
        with self._lock:
            if key in self._ingested:
                return True
            self._ingested.put(key, True)
        return False

    def _unsee(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """Forget that ``messages`` were read: their facts were not stored (the store failed)."""
        with self._lock:
            for message in messages:
                self._ingested.pop(_seen_key(message, scope), None)

    def _prefix_tokens(self, scope: Scope, messages: list[BaseMessage], tools: Sequence[Any]) -> int:
        """Leading tokens unchanged since this session's previous view (tools, then messages)."""
        tools_sig = hashlib.sha256(repr(sorted(_tool_name(t) for t in tools)).encode()).hexdigest()
        current = [(_message_sig(m), count_message(m, self.counter)) for m in messages]
        with self._lock:
            previous = self._last_view.get(scope.key())
            self._last_view.put(scope.key(), (tools_sig, current))
        if previous is None or previous[0] != tools_sig:
            return 0
        unchanged = 0
        for (sig, tokens), (old_sig, _) in zip(current, previous[1], strict=False):
            if sig != old_sig:
                break
            unchanged += tokens
        return unchanged

    # ------------------------------------------------------------------ capture and expand
    def capture_tool_result(self, tool_message: ToolMessage, scope: Scope | None = None) -> ToolMessage:
        """Store a tool output and return the compact message for the conversation.

        The returned ``ToolMessage`` keeps ``tool_call_id``, ``name`` and ``id``; outputs over the
        pass-through threshold are replaced by a summary and a ref (``additional_kwargs
        ["ctxplugin"]`` holds ``ref``, ``compact`` and token counts). When the store fails the
        original is returned unchanged with a warning in ``additional_kwargs["ctxplugin"]``.

        Raises:
            InvalidInputError: ``tool_message`` is not a ``ToolMessage``.
        """
        compact, _ = self._capture(tool_message, direct_scope(scope, "capture_tool_result"))
        return compact

    async def acapture_tool_result(self, tool_message: ToolMessage, scope: Scope | None = None) -> ToolMessage:
        """Async :meth:`capture_tool_result`."""
        return await asyncio.to_thread(self.capture_tool_result, tool_message, scope)

    def capture_with_report(self, tool_message: ToolMessage, scope: Scope) -> tuple[ToolMessage, CaptureReport]:
        """:meth:`capture_tool_result` plus its :class:`CaptureReport`."""
        return self._capture(tool_message, scope)

    def _capture(self, tool_message: ToolMessage, scope: Scope) -> tuple[ToolMessage, CaptureReport]:
        if not isinstance(tool_message, ToolMessage):
            raise InvalidInputError(
                f"capture_tool_result() takes a ToolMessage, got {type(tool_message).__name__}"
            )
        clock = _Stopwatch()
        report = CaptureReport(session_id=scope.session_id, tool_call_id=tool_message.tool_call_id)
        with step_budget(self.config.stores.timeout), _tracing.child_run(
            "ctxplugin.capture_tool_result",
            inputs={"tool_call_id": tool_message.tool_call_id, "name": tool_message.name or ""},
        ) as run:
            result = tool_message
            if self.config.cas.enabled:
                try:
                    with clock.stage("store"):
                        captured = self._capture_memo(tool_message, scope)
                    report.original_tokens = captured.original_tokens
                    report.compact_tokens = captured.compact_tokens
                    if not captured.passthrough and captured.ref_id:
                        report.ref_id = captured.ref_id
                        report.passthrough = False
                        meta = {
                            "ref": captured.ref_id,
                            "compact": captured.text,
                            "original_tokens": captured.original_tokens,
                            "compact_tokens": captured.compact_tokens,
                        }
                        result = tool_message.model_copy(
                            update={
                                "content": captured.text,
                                "additional_kwargs": {**tool_message.additional_kwargs, META_KEY: meta},
                            }
                        )
                except StoreError as exc:
                    _degraded(report, scope, f"CAS unavailable; tool output passed through: {exc}")
                    result = tool_message.model_copy(
                        update={"additional_kwargs": {**tool_message.additional_kwargs, META_KEY: {"warning": str(exc)}}}
                    )
            if self.config.facts.enabled and self.config.facts.extract and _fact_source(tool_message):
                try:
                    with clock.stage("facts"):
                        if not self._seen(tool_message, scope):
                            # the full output is read, with the ref it is stored under as provenance
                            source = tool_message if report.ref_id is None else tool_message.model_copy(
                                update={"additional_kwargs": {**tool_message.additional_kwargs, META_KEY: {"ref": report.ref_id}}}
                            )
                            facts = self.facts.ingest([source], scope=scope)
                            report.facts_extracted = len(facts)
                except StoreError as exc:
                    self._unsee([tool_message], scope)
                    _degraded(report, scope, f"facts store unavailable; extraction skipped: {exc}")
            report.timings_ms = clock.timings
            run.finish(outputs={"ref": report.ref_id or ""}, metadata=report.as_metadata())
        emit(CAPTURE_EVENT, report.model_dump())
        return result, report

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

        ``fields`` selects JSON paths; ``offset``/``limit`` count items of a JSON array,
        otherwise lines; ``pattern`` keeps matching lines or items (a regex if ``regex``).

        Raises:
            RefNotFoundError: unknown, expired, or not readable from ``scope``.
        """
        return expand(
            self.cas,
            ref_id,
            direct_scope(scope, "expand_ref"),
            fields=list(fields) if fields else None,
            offset=offset,
            limit=limit,
            pattern=pattern,
            regex=regex,
        )

    # ------------------------------------------------------------------ host helpers
    def as_runnable(self) -> Any:
        """A ``Runnable`` that maps a message list to the prepared view (scope from
        ``config["configurable"]["thread_id"]``)."""
        from ctxplugin.langchain import PrepareRunnable

        return PrepareRunnable(self)

    def as_model(self, model: Any, tools: Sequence[Any] = ()) -> Any:
        """A ``Runnable`` that maps a message list to ``model``'s reply on the prepared view:
        answers from the answer cache when it can, binds the tools the plan chose, caches final
        answers (see :class:`ctxplugin.langchain.ContextModel`)."""
        from ctxplugin.langchain import ContextModel

        return ContextModel(self, model, tools)

    def history(self, session_id: str, **scope_fields: str) -> Any:
        """A chat message history for ``RunnableWithMessageHistory`` that keeps the whole
        conversation and returns the prepared view from ``.messages``."""
        from ctxplugin.langchain import ContextChatHistory

        return ContextChatHistory(self, Scope(session_id=session_id, **scope_fields))

    # ------------------------------------------------------------------ answer cache
    def cached_answer(
        self,
        messages: Sequence[BaseMessage],
        prepared: PreparedContext,
        *,
        tools: Sequence[Any] = (),
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
        if self.cache is None:
            return None
        scope = direct_scope(scope, "cached_answer")
        try:
            call = self._cache_call(messages, prepared, tools, scope, model)
            found = self.cache.lookup(call, cas=self.cas, ledger=self._ledger()) if call is not None else None
        except StoreError as exc:
            _degraded(prepared.report, scope, f"answer cache unavailable; the model is called: {exc}")
            return None
        if found is None:
            return None
        prepared.report.cached_answer = found.hit
        emit(CACHE_LOOKUP_EVENT, {"session_id": scope.session_id, "hit": found.hit, "similarity": round(found.similarity, 4), "reason": found.reason})
        return found.message

    def remember_answer(
        self,
        messages: Sequence[BaseMessage],
        prepared: PreparedContext,
        answer: BaseMessage,
        *,
        tools: Sequence[Any] = (),
        scope: Scope | None = None,
        model: Any = None,
    ) -> bool:
        """Cache the model's ``answer`` to the call that :meth:`prepare` made ``prepared`` for
        (same arguments as :meth:`cached_answer`). Answers with tool calls, empty or cut-short
        answers are not cached. Returns whether it was stored; a failing store is a warning."""
        if self.cache is None:
            return False
        scope = direct_scope(scope, "remember_answer")
        try:
            call = self._cache_call(messages, prepared, tools, scope, model)
            return call is not None and self.cache.store_answer(call, answer) is not None
        except StoreError as exc:
            _degraded(prepared.report, scope, f"answer cache unavailable; the answer was not cached: {exc}")
            return False

    async def acached_answer(self, messages: Sequence[BaseMessage], prepared: PreparedContext, **kwargs: Any) -> AIMessage | None:
        """Async :meth:`cached_answer`."""
        if self.cache is None:
            return None
        return await asyncio.to_thread(self.cached_answer, messages, prepared, **kwargs)

    async def aremember_answer(self, messages: Sequence[BaseMessage], prepared: PreparedContext, answer: BaseMessage, **kwargs: Any) -> bool:
        """Async :meth:`remember_answer`."""
        if self.cache is None:
            return False
        return await asyncio.to_thread(self.remember_answer, messages, prepared, answer, **kwargs)

    def _cache_call(self, messages: Sequence[BaseMessage], prepared: PreparedContext, tools: Sequence[Any], scope: Scope, model: Any) -> Any:
        return call_context(
            messages, prepared.report, tools=tools, scope=scope, model=model,
            mode=self.config.cache.scope, registry=self.registry, ledger=self._ledger(),
        )

    def _ledger(self) -> FactsLedger | None:
        return self.facts if self.config.facts.enabled else None

    def tools_for_model(self) -> list[BaseTool]:
        """The meta-tools a host must register with its tool node (``expand_ref``, ``load_tools``)."""
        from ctxplugin.langchain import make_meta_tools

        return make_meta_tools(self)


def _fact_source(message: BaseMessage) -> bool:
    """Whether facts are extracted from ``message``: user turns and real tool outputs, not
    ctxplugin's own meta-tool results and not errors (a failed call states no fact)."""
    if isinstance(message, HumanMessage):
        return True
    return isinstance(message, ToolMessage) and message.name not in META_TOOL_NAMES and message.status != "error"


def _fact_sources(raw: list[BaseMessage], compacted: list[BaseMessage]) -> list[BaseMessage]:
    """The messages facts are read from on a prepare: each as it was received, so a tool output
    is read whole rather than as its summary (whose ``L12:`` line labels and cut lines are not
    statements), with the ref it is stored under as provenance. An output that already carries a
    ref is a summary: its full output was read when it was stored."""
    out: list[BaseMessage] = []
    for original, shown in zip(raw, compacted, strict=True):
        if not _fact_source(original):
            continue
        note = annotation(original)
        if isinstance(original, ToolMessage) and note.get("ref"):
            continue
        ref = annotation(shown).get("ref")
        if shown is not original and isinstance(ref, str):
            original = original.model_copy(
                update={"additional_kwargs": {**original.additional_kwargs, META_KEY: {**note, "ref": ref}}}
            )
        out.append(original)
    return out


_WHITESPACE = re.compile(r"\s+")


def _standing_text(header: Sequence[BaseMessage], body: Sequence[BaseMessage]) -> str:
    """What every call shows whole — the system messages and the task (first human message) —
    lowercased with whitespace collapsed, for :func:`_restates`."""
    task = next((m for m in body if isinstance(m, HumanMessage)), None)
    return _normalized(tuple(content_text(m.content) for m in (*header, *([task] if task is not None else []))))


@lru_cache(maxsize=32)
def _normalized(texts: tuple[str, ...]) -> str:
    # memoised: the same system prompt and task come back on every call of a session
    return _WHITESPACE.sub(" ", " ".join(texts)).lower()


def _restates(fact_text: str, standing: str) -> bool:
    """Whether a fact only repeats a sentence of the standing text (showing it again adds
    nothing). Short texts never count: a bare value may mean something else in the task."""
    text = _WHITESPACE.sub(" ", fact_text).strip().rstrip("….").lower()
    return len(text) >= 24 and text in standing


def _exploratory(sources: list[BaseMessage]) -> list[BaseMessage]:
    """``sources`` with the messages of an exploratory span the user opened marked
    hypothetical (``fact_scope``), so that what they state is never a current fact."""
    spans = exploratory_spans(sources)
    if not spans:
        return sources
    out: list[BaseMessage] = []
    for index, message in enumerate(sources):
        note = annotation(message)
        if spans.get(index) == "hypothetical" and "fact_scope" not in note:
            message = message.model_copy(
                update={"additional_kwargs": {**message.additional_kwargs, META_KEY: {**note, "fact_scope": "hypothetical"}}}
            )
        out.append(message)
    return out


def _reader_key(scope: Scope) -> str:
    """What the facts shown depend on: the scope and the reader's roles (facts restricted to
    a role are shown only to readers that have it)."""
    return scope.key() + ("\x00" + ",".join(scope.roles) if scope.roles else "")
def _calls_tool(messages: Sequence[BaseMessage], name: str) -> bool:
    """Whether an AI message of ``messages`` called the tool ``name``."""
    return any(
        isinstance(m, AIMessage) and any(call["name"] == name for call in m.tool_calls) for m in messages
    )


def _not_shown(lines: tuple[FactLine, ...], raw: Sequence[BaseMessage], view: Sequence[BaseMessage]) -> tuple[FactLine, ...]:
    """The facts the history view does not already show: a fact read from a message the view
    carries unchanged, or whose statement a user message of the view holds word for word, is
    left out. While the whole history fits, the facts block is then empty and the view is the
    conversation as it was, so a provider's prompt cache serves every call but the newest turn."""
    originals = {id(m) for m in raw}
    refs: set[str] = set()
    said: list[str] = []
    for message in view:
        if id(message) not in originals:
            continue
        if message.id:
            refs.add(str(message.id))
        if isinstance(message, ToolMessage):
            refs.add(message.tool_call_id)
        ref = annotation(message).get("ref")
        if isinstance(ref, str):
            refs.add(ref)
        if isinstance(message, HumanMessage):
            said.append(content_text(message.content))
    spoken = _WHITESPACE.sub(" ", " ".join(said)).lower()
    return tuple(
        line
        for line in lines
        if not (line.source_ref is not None and line.source_ref in refs)
        and not (line.statement and _restates(line.statement, spoken))
    )


def _degraded(report: ContextReport | CaptureReport, scope: Scope, text: str) -> None:
    """Record a skipped step: a store failed and the original passed through.

    The one place where a store failure is absorbed: it is written into the report and logged
    at WARNING with the session in ``extra``, so both say what was skipped."""
    report.warnings.append(text)
    logger.warning("ctxplugin: %s (session %s)", text, scope.session_id, extra={"ctxplugin_session": scope.session_id})


def _tool_name(tool: Any) -> str:
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, dict):
        fn = tool.get("function")
        if isinstance(fn, dict) and "name" in fn:
            return str(fn["name"])
        return str(tool.get("name", "?"))
    return str(getattr(tool, "__name__", getattr(tool, "name", "?")))


def _seen_key(message: BaseMessage, scope: Scope) -> str:
    text = content_text(message.content)
    # str hashes are cached on the object: a long tool output resent on every call is not
    # hashed again (the memo lives in this process only, so the salted hash is stable)
    return f"{scope.key()}\x00{message.id or ''}\x00{len(text)}\x00{hash(text)}"


def _message_sig(message: BaseMessage) -> str:
    payload = repr((message.type, message.content, getattr(message, "tool_calls", None), getattr(message, "tool_call_id", None)))
    return hashlib.sha1(payload.encode("utf-8", "surrogatepass")).hexdigest()


__all__ = ["ContextEngine", "CtxpluginError", "PreparedContext"]
_ = AIMessage  # re-exported names used in type positions by adapters
