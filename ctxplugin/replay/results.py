"""Replay results and their JSON form.

The JSON is stable run to run: keys are sorted, lists keep file, conversation and strategy
order, figures are integers or rounded ratios, and everything that varies (time of day,
``prepare`` timings, versions) sits in the separate ``meta`` block.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxplugin.replay._marked_cache import READ_PRICE, WRITE_PRICE
from ctxplugin.replay.loaders import RecordedUsage

SCHEMA_VERSION = 1


@dataclass
class StrategyFigures:
    """Totals of one strategy over some calls."""

    calls: int = 0
    input_tokens: int = 0
    cached_tokens: int = 0
    peak_tokens: int = 0
    tool_schema_tokens: int = 0
    over_budget_calls: int = 0
    recall_eligible: int = 0
    recall_visible: int = 0
    action_eligible: int = 0
    action_visible: int = 0
    marked_read: int = 0
    marked_written: int = 0

    def add_call(
        self,
        *,
        input_tokens: int,
        cached: int,
        tools: int,
        eligible: int,
        visible: int,
        budget: int,
        action_eligible: int = 0,
        action_visible: int = 0,
        marked: tuple[int, int] = (0, 0),
    ) -> None:
        """Fold one call in (``action_*``: expected action values, see ``replay.metrics``;
        ``marked``: tokens read from and written to a cache that serves marked prefixes only,
        see ``replay._marked_cache``)."""
        self.calls += 1
        self.input_tokens += input_tokens
        self.cached_tokens += cached
        self.peak_tokens = max(self.peak_tokens, input_tokens)
        self.tool_schema_tokens += tools
        self.over_budget_calls += int(input_tokens > budget)
        self.recall_eligible += eligible
        self.recall_visible += visible
        self.action_eligible += action_eligible
        self.action_visible += action_visible
        self.marked_read += marked[0]
        self.marked_written += marked[1]

    def merge(self, other: StrategyFigures) -> None:
        """Fold another total in (peak is the larger of the two)."""
        self.calls += other.calls
        self.input_tokens += other.input_tokens
        self.cached_tokens += other.cached_tokens
        self.peak_tokens = max(self.peak_tokens, other.peak_tokens)
        self.tool_schema_tokens += other.tool_schema_tokens
        self.over_budget_calls += other.over_budget_calls
        self.recall_eligible += other.recall_eligible
        self.recall_visible += other.recall_visible
        self.action_eligible += other.action_eligible
        self.action_visible += other.action_visible
        self.marked_read += other.marked_read
        self.marked_written += other.marked_written

    def cost(self, discount: float) -> float:
        """Cache-aware cost in token units: uncached tokens plus cached ones at ``discount``."""
        return (self.input_tokens - self.cached_tokens) + discount * self.cached_tokens

    def marked_cost(self) -> float:
        """Cost in token units on Anthropic's prompt cache, which serves marked prefixes only:
        reads at 0.1x, writes at 1.25x, the rest in full (``replay._marked_cache``)."""
        rest = self.input_tokens - self.marked_read - self.marked_written
        return rest + READ_PRICE * self.marked_read + WRITE_PRICE * self.marked_written

    @property
    def recall(self) -> float | None:
        """Visible share of eligible identifiers (None when no call had any)."""
        return self.recall_visible / self.recall_eligible if self.recall_eligible else None

    @property
    def action_recall(self) -> float | None:
        """Visible share of the expected actions' eligible values (None without any)."""
        return self.action_visible / self.action_eligible if self.action_eligible else None

    def as_dict(self, discount: float, full: StrategyFigures | None) -> dict[str, Any]:
        """JSON form, with ratios against the full history when given."""
        out: dict[str, Any] = {
            "calls": self.calls,
            "input_tokens": self.input_tokens,
            "cached_tokens": self.cached_tokens,
            "cost": round(self.cost(discount), 1),
            "peak_tokens": self.peak_tokens,
            "tool_schema_tokens": self.tool_schema_tokens,
            "over_budget_calls": self.over_budget_calls,
            "recall": _round(self.recall),
            "recall_eligible": self.recall_eligible,
            "recall_visible": self.recall_visible,
        }
        if self.action_eligible:
            out["action_recall"] = _round(self.action_recall)
            out["action_eligible"] = self.action_eligible
            out["action_visible"] = self.action_visible
        out["anthropic"] = {
            "read_tokens": self.marked_read,
            "written_tokens": self.marked_written,
            "cost": round(self.marked_cost(), 1),
        }
        if full is not None:
            out["anthropic"]["cost_vs_full"] = _ratio(self.marked_cost(), full.marked_cost())
            out["vs_full"] = {
                "input_tokens": _ratio(self.input_tokens, full.input_tokens),
                "cost": _ratio(self.cost(discount), full.cost(discount)),
                "peak_tokens": _ratio(self.peak_tokens, full.peak_tokens),
            }
        return out


def _round(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits)


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


@dataclass
class ConversationResult:
    """Figures of one replayed conversation."""

    id: str
    messages: int
    figures: dict[str, StrategyFigures]
    per_call: dict[str, list[tuple[int, int]]]
    """Per strategy, ``(input_tokens, cached_tokens)`` of every call."""
    recorded: list[RecordedUsage] = field(default_factory=list)
    engine_warnings: Counter[str] = field(default_factory=Counter)
    prepare_ms: list[float] = field(default_factory=list)

    @property
    def calls(self) -> int:
        """Calls replayed."""
        return max((f.calls for f in self.figures.values()), default=0)


@dataclass
class FileResult:
    """One input file: its conversations and the problems met."""

    path: str
    format: str | None
    conversations: list[ConversationResult] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def status(self) -> str:
        """``ok``, ``partial`` (some conversations failed) or ``failed``."""
        if not self.conversations:
            return "failed"
        return "partial" if self.errors else "ok"

    def totals(self, strategies: Sequence[str]) -> dict[str, StrategyFigures]:
        """Per-strategy totals over the file's conversations."""
        return _sum(strategies, (c.figures for c in self.conversations))


def _sum(strategies: Sequence[str], parts: Iterable[dict[str, StrategyFigures]]) -> dict[str, StrategyFigures]:
    totals = {name: StrategyFigures() for name in strategies}
    for figures in parts:
        for name in strategies:
            if name in figures:
                totals[name].merge(figures[name])
    return totals


_NUMBER = re.compile(r"(?<![\w.-])\d(?:[\d,.]*\d)?(?![\w-])")
"""A number standing alone ("12", "1,024", "0.5"), not digits within a name ("o200k_base")."""


def warning_template(text: str) -> str:
    """A warning with its numbers replaced, so that similar warnings count together (the digits
    of a name, an encoding's or a ref's, are kept)."""
    return _NUMBER.sub("N", text)


@dataclass
class ReplayResult:
    """A whole replay run."""

    files: list[FileResult]
    strategies: list[str]
    settings: dict[str, Any]
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def discount(self) -> float:
        return float(self.settings["cache_discount"])

    def totals(self) -> dict[str, StrategyFigures]:
        """Per-strategy totals over every replayed conversation."""
        return _sum(self.strategies, (c.figures for f in self.files for c in f.conversations))

    def worst(self, name: str) -> dict[str, tuple[float, str]]:
        """The lowest per-conversation recall of strategy ``name``: ``{"recall": (value, id)}``,
        and ``"action_recall"`` likewise when any conversation had expected actions."""
        out: dict[str, tuple[float, str]] = {}
        for _, conv in self.conversations():
            figures = conv.figures.get(name)
            if figures is None:
                continue
            for key, value in (("recall", figures.recall), ("action_recall", figures.action_recall)):
                if value is not None and (key not in out or value < out[key][0]):
                    out[key] = (value, conv.id)
        return out

    def conversations(self) -> list[tuple[FileResult, ConversationResult]]:
        """Every replayed conversation with its file, in order."""
        return [(f, c) for f in self.files for c in f.conversations]

    def _figures(self, figures: dict[str, StrategyFigures]) -> dict[str, Any]:
        full = figures.get("full")
        return {name: figures[name].as_dict(self.discount, full) for name in self.strategies if name in figures}

    def to_json(self) -> dict[str, Any]:
        """The JSON document (see the module docstring for what is stable)."""
        files = []
        for file in self.files:
            conversations = []
            for conv in file.conversations:
                entry: dict[str, Any] = {
                    "id": conv.id,
                    "messages": conv.messages,
                    "calls": conv.calls,
                    "strategies": self._figures(conv.figures),
                    "per_call": {
                        name: {
                            "input_tokens": [c[0] for c in calls],
                            "cached_tokens": [c[1] for c in calls],
                        }
                        for name, calls in conv.per_call.items()
                    },
                    "engine_warnings": dict(sorted(conv.engine_warnings.items())),
                }
                if conv.recorded:
                    entry["recorded"] = recorded_dict(conv.recorded)
                conversations.append(entry)
            recorded = [u for c in file.conversations for u in c.recorded]
            file_entry: dict[str, Any] = {
                "path": file.path,
                "format": file.format,
                "status": file.status,
                "errors": list(file.errors),
                "conversations": conversations,
                "totals": self._figures(file.totals(self.strategies)),
            }
            if recorded:
                file_entry["recorded"] = recorded_dict(recorded)
            files.append(file_entry)
        return {
            "schema_version": SCHEMA_VERSION,
            "settings": self.settings,
            "strategies": list(self.strategies),
            "files": files,
            "totals": self._figures(self.totals()),
            "worst": {
                name: {key: {"value": _round(v), "conversation": cid} for key, (v, cid) in self.worst(name).items()}
                for name in self.strategies
            },
            "meta": self.meta,
        }


def recorded_dict(usage: Sequence[RecordedUsage]) -> dict[str, Any]:
    """The provider's own figures, summed: prompt tokens, cache hits and the hit share."""
    prompt = sum(u.prompt_tokens for u in usage)
    cached = sum(u.cached_tokens for u in usage)
    return {
        "calls": len(usage),
        "prompt_tokens": prompt,
        "cached_tokens": cached,
        "cached_share": _ratio(cached, prompt),
    }
