"""Replay recorded conversations call by call through every strategy.

A *call* is each assistant message of a recording: the messages before it are the history the
model saw, and the message itself is the action it then took (used for grounding recall). Each
conversation gets a fresh engine and session, so results do not depend on file order.
"""

from __future__ import annotations

import json
import platform
import statistics
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from ctxplugin.config import ContextConfig
from ctxplugin.engine import ContextEngine
from ctxplugin.errors import CtxpluginError, InvalidInputError
from ctxplugin.replay._marked_cache import MarkedCache
from ctxplugin.replay._tools_file import load_tools_file as load_tools_file
from ctxplugin.replay.loaders import Conversation, Format, LoadedFile, discover, load_file
from ctxplugin.replay.metrics import (
    Meter,
    PrefixTracker,
    action_identifiers,
    calls_after,
    occurs,
    pair_expected_actions,
    tools_signature,
    tools_tokens,
)
from ctxplugin.replay.peers import (
    STRATEGIES,
    ClearToolUsesSettings,
    ContextEditing,
    Ctxplugin,
    FullHistory,
    Strategy,
    StrategyName,
    TrimMessages,
    View,
    context_editing_available,
)
from ctxplugin.replay.results import (
    ConversationResult,
    FileResult,
    ReplayResult,
    StrategyFigures,
    warning_template,
)
from ctxplugin.scope import Scope
from ctxplugin.tokens import get_counter

EngineFactory = Callable[[ContextConfig], ContextEngine]


def memory_engine_factory(config: ContextConfig) -> ContextEngine:
    """A fresh engine on in-memory stores, nothing written to disk, with a logical clock for the
    facts ledger (a recording carries no times of its own), so that two replays give the same
    figures however fast the machine runs them."""
    from ctxplugin.testing import logical_clock, memory_engine

    engine: ContextEngine = memory_engine(config, clock=logical_clock())
    return engine


@dataclass(frozen=True)
class ReplaySettings:
    """What a replay compares and how.

    Attributes:
        config: ctxplugin's configuration (its total budget is also ``trim_messages``' budget).
        tools: the recorded agent's tool schemas (OpenAI format), sent by every strategy
            (when empty, the tools a recording holds are sent, as Anthropic requests carry them).
        cache_discount: price of a cached prompt token relative to an uncached one.
        clear_tool_uses: overrides of the ``context_editing`` peer's defaults.
        strategies: which strategies to run (``full`` always runs: it is the baseline).
    """

    config: ContextConfig = field(default_factory=ContextConfig)
    tools: tuple[dict[str, Any], ...] = ()
    cache_discount: float = 0.1
    clear_tool_uses: ClearToolUsesSettings = field(default_factory=ClearToolUsesSettings)
    strategies: tuple[StrategyName, ...] = STRATEGIES

    def __post_init__(self) -> None:
        if not 0 <= self.cache_discount <= 1:
            raise InvalidInputError(f"cache discount must be between 0 and 1, got {self.cache_discount}")
        unknown = [s for s in self.strategies if s not in STRATEGIES]
        if unknown:
            raise InvalidInputError(f"unknown strategies {unknown}; choose from {list(STRATEGIES)}")

    @property
    def budget_total(self) -> int:
        """ctxplugin's total budget in tokens."""
        return self.config.budget.resolve(model=self.config.model)["total"]

    def active_strategies(self) -> list[StrategyName]:
        """Strategies to run, in the canonical order, ``full`` first; ``context_editing`` only
        when ``langchain`` is installed (see :meth:`skipped`)."""
        wanted = set(self.strategies) | {"full"}
        if "context_editing" in wanted and not context_editing_available():
            wanted.discard("context_editing")
        return [s for s in STRATEGIES if s in wanted]

    def skipped(self) -> list[str]:
        """Requested strategies that cannot run here, with the reason."""
        if "context_editing" in self.strategies and not context_editing_available():
            return ["context_editing: LangChain is not installed (pip install langchain)"]
        return []

    def describe(self, strategies: Sequence[StrategyName], counter_name: str) -> dict[str, Any]:
        """The settings block of the JSON output."""
        out: dict[str, Any] = {
            "budget_total": self.budget_total,
            "cache_discount": self.cache_discount,
            "encoding": counter_name,
            "tool_schemas": len(self.tools),
            "config": json.loads(self.config.model_dump_json(exclude={"path", "chroma_url", "chroma_headers", "chroma_tenant", "chroma_database", "postgres_dsn"})),
        }
        if "context_editing" in strategies:
            out["clear_tool_uses"] = self.clear_tool_uses.resolved()
        if self.skipped():
            out["skipped"] = self.skipped()
        return out


def build_strategies(
    settings: ReplaySettings,
    engine: ContextEngine,
    meter: Meter,
    scope: Scope,
    recorded_tools: Sequence[dict[str, Any]] = (),
) -> list[Strategy]:
    """The strategies of one conversation, in output order: each sends ``settings.tools``, else
    the tools the recording holds."""
    tools = list(settings.tools or recorded_tools)
    built: list[Strategy] = []
    for name in settings.active_strategies():
        if name == "full":
            built.append(FullHistory(tools))
        elif name == "trim_messages":
            built.append(TrimMessages(tools, settings.budget_total, meter))
        elif name == "context_editing":
            built.append(ContextEditing(tools, settings.clear_tool_uses))
        else:
            built.append(Ctxplugin(engine, tools, scope))
    return built


def replay_conversation(
    conversation: Conversation,
    settings: ReplaySettings,
    *,
    engine: ContextEngine | None = None,
    on_call: Callable[[], None] | None = None,
) -> ConversationResult:
    """Replay one conversation through every strategy.

    Raises:
        CtxpluginError: a strategy rejected the conversation (the message says why).
    """
    engine = engine or memory_engine_factory(settings.config)
    meter = Meter(engine.counter)
    strategies = build_strategies(settings, engine, meter, Scope(session_id=conversation.id), conversation.tools)
    budget = settings.budget_total
    figures: dict[str, StrategyFigures] = {s.name: StrategyFigures() for s in strategies}
    per_call: dict[str, list[tuple[int, int]]] = {s.name: [] for s in strategies}
    trackers = {s.name: (PrefixTracker(), MarkedCache(s.name == "ctxplugin" and settings.config.prompt_cache_marks)) for s in strategies}
    tool_cost: dict[str, int] = {}
    result = ConversationResult(
        id=conversation.id,
        messages=len(conversation.messages),
        figures=figures,
        per_call=per_call,
        recorded=list(conversation.usage),
    )
    messages = conversation.messages
    expected = pair_expected_actions(messages, conversation.actions)
    for index, action, earlier_text in calls_after(messages, conversation.call_indexes(), meter):
        history = messages[:index]
        eligible = sorted(i for i in action_identifiers(action) if occurs(i, earlier_text))
        expected_eligible = sorted(i for i in expected.get(index, ()) if occurs(i, earlier_text))
        for strategy in strategies:
            started = time.perf_counter()
            view = strategy.view(history)
            if view.report is not None:
                result.prepare_ms.append((time.perf_counter() - started) * 1000)
                result.engine_warnings.update(warning_template(w) for w in dict.fromkeys(view.report.warnings))
            _account(
                strategy.name, view, meter, trackers[strategy.name], tool_cost, (eligible, expected_eligible), budget, result
            )
        if on_call is not None:
            on_call()
    return result


def _account(
    name: str,
    view: View,
    meter: Meter,
    tracker: tuple[PrefixTracker, MarkedCache],
    tool_cost: dict[str, int],
    eligible: tuple[Sequence[str], Sequence[str]],
    budget: int,
    result: ConversationResult,
) -> None:
    """Fold one call of one strategy in; ``eligible`` holds the grounding identifiers and the
    expected actions' values that this call's view may show."""
    grounding, expected = eligible
    sig = tools_signature(view.tools)
    if sig not in tool_cost:
        tool_cost[sig] = tools_tokens(view.tools, meter.counter)
    tools = tool_cost[sig]
    total = meter.count(view.messages) + tools
    cached = tracker[0].cached(sig, tools, view.messages, meter)
    marked = tracker[1].call(sig, tools, len(view.tools), view.messages, meter)
    visible = action_visible = 0
    if grounding or expected:
        text = meter.text(view.messages)
        visible = sum(1 for identifier in grounding if occurs(identifier, text))
        action_visible = sum(1 for identifier in expected if occurs(identifier, text))
    result.figures[name].add_call(
        input_tokens=total,
        cached=cached,
        tools=tools,
        eligible=len(grounding),
        visible=visible,
        budget=budget,
        action_eligible=len(expected),
        action_visible=action_visible,
        marked=marked,
    )
    result.per_call[name].append((total, cached))


def replay_file(
    loaded: LoadedFile,
    settings: ReplaySettings,
    *,
    engine_factory: EngineFactory = memory_engine_factory,
    on_call: Callable[[], None] | None = None,
) -> FileResult:
    """Replay every conversation of a loaded file; a failing conversation is recorded, not raised."""
    out = FileResult(path=loaded.path, format=loaded.format, errors=list(loaded.errors))
    for conversation in loaded.conversations:
        try:
            out.conversations.append(
                replay_conversation(conversation, settings, engine=engine_factory(settings.config), on_call=on_call)
            )
        except (CtxpluginError, ValueError) as exc:
            out.errors.append(f"conversation {conversation.id}: {exc}")
    return out


def replay(
    paths: Iterable[str | Path],
    settings: ReplaySettings,
    *,
    format: Format | Literal["auto"] = "auto",
    engine_factory: EngineFactory = memory_engine_factory,
    on_loaded: Callable[[int], None] | None = None,
    on_call: Callable[[], None] | None = None,
) -> ReplayResult:
    """Replay files and directories; every problem is recorded against its file.

    Args:
        paths: files, or directories searched for ``*.json``/``*.jsonl``/``*.ndjson``.
        settings: what to compare.
        format: input format, or ``"auto"`` to detect it per file.
        engine_factory: builds the engine of each conversation.
        on_loaded: told the number of calls to replay once every file is read (for progress).
        on_call: told after each replayed call.
    """
    started = time.perf_counter()
    files, missing = discover(paths)
    results: dict[str, FileResult] = {path: FileResult(path=path, format=None, errors=[problem]) for path, problem in missing}
    loaded: list[LoadedFile] = []
    for path in files:
        try:
            loaded.append(load_file(path, format))
        except InvalidInputError as exc:
            results[path] = FileResult(path=path, format=None, errors=[str(exc).removeprefix(f"{path}: ")])
    if on_loaded is not None:
        on_loaded(sum(len(c.call_indexes()) for f in loaded for c in f.conversations))
    for item in loaded:
        results[item.path] = replay_file(item, settings, engine_factory=engine_factory, on_call=on_call)
    strategies = settings.active_strategies()
    order = [p for p, _ in missing] + files
    counter, _ = get_counter(settings.config.encoding, settings.config.model)
    replayed = ReplayResult(
        files=[results[p] for p in order if p in results],
        strategies=list(strategies),
        settings=settings.describe(strategies, counter.name),
    )
    replayed.meta = _meta(replayed, time.perf_counter() - started)
    return replayed


def _meta(result: ReplayResult, elapsed: float) -> dict[str, Any]:
    from ctxplugin import __version__

    timings = sorted(ms for _, conv in result.conversations() for ms in conv.prepare_ms)
    prepare: dict[str, Any] = {"calls": len(timings)}
    if timings:
        prepare |= {
            "mean_ms": round(statistics.fmean(timings), 3),
            "p50_ms": round(timings[len(timings) // 2], 3),
            "p95_ms": round(timings[min(len(timings) - 1, int(len(timings) * 0.95))], 3),
            "max_ms": round(timings[-1], 3),
        }
    return {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "ctxplugin_version": __version__,
        "python": platform.python_version(),
        "elapsed_s": round(elapsed, 3),
        "prepare": prepare,
    }
