"""What ctxplugin did for one prepared call, and totals over a run."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from ctxplugin.config import SECTIONS


class SectionReport(BaseModel):
    """Tokens of one section of the view."""

    before: int = 0
    after: int = 0
    budget: int | None = None


class FactUse(BaseModel):
    """A fact placed in the view."""

    id: str
    key: str | None = None
    score: float


class ContextReport(BaseModel):
    """Per-call account of the prepared view.

    ``tokens_before`` is what the full history (with every tool schema) would have cost;
    ``tokens_after`` what the prepared view costs. Both include tool schemas.

    ``refs_created``, ``refs_used`` and ``refs_expanded`` are the refs this call stored, the
    view shows, and the model read with ``expand_ref`` since its previous call: each ref once,
    in the order first met (the same output shown twice is one ref used).

    ``values_*`` say what the view kept of the exact values the user and the assistant wrote
    (:mod:`ctxplugin.fidelity`): how many there are, how many the view shows, how many are one
    ``expand_ref`` away, and which left the view (``values_left``, of which the user wrote
    ``values_left_from_user``).
    """

    session_id: str
    tokens_before: int = 0
    tokens_after: int = 0
    budget_total: int | None = None
    within_budget: bool = True
    sections: dict[str, SectionReport] = Field(
        default_factory=lambda: {name: SectionReport() for name in (*SECTIONS, "tools")}
    )
    messages_before: int = 0
    messages_after: int = 0
    refs_created: list[str] = Field(default_factory=list)
    refs_used: list[str] = Field(default_factory=list)
    refs_expanded: list[str] = Field(default_factory=list)
    facts: list[FactUse] = Field(default_factory=list)
    facts_extracted: int = 0
    outdated_marked: int = 0
    tools_directory: bool = False
    tools_bound: list[str] = Field(default_factory=list)
    tools_loaded: list[str] = Field(default_factory=list)
    compressed_messages: int = 0
    dropped_exchanges: int = 0
    unchanged_prefix_tokens: int = 0
    values_used: int = 0
    values_shown: int = 0
    values_behind_refs: int = 0
    values_left: list[str] = Field(default_factory=list)
    values_left_from_user: list[str] = Field(default_factory=list)
    cached_answer: bool = False
    timings_ms: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    encoding: str = ""

    @property
    def saved_tokens(self) -> int:
        """Tokens not sent thanks to ctxplugin."""
        return max(0, self.tokens_before - self.tokens_after)

    @property
    def reduction(self) -> float:
        """Share of tokens saved (0..1)."""
        return self.saved_tokens / self.tokens_before if self.tokens_before else 0.0

    def as_metadata(self) -> dict[str, Any]:
        """Flat, JSON-friendly summary for trace metadata and ``response_metadata``."""
        return {
            "ctxplugin.session_id": self.session_id,
            "ctxplugin.tokens_before": self.tokens_before,
            "ctxplugin.tokens_after": self.tokens_after,
            "ctxplugin.reduction": round(self.reduction, 4),
            "ctxplugin.within_budget": self.within_budget,
            "ctxplugin.sections": {k: v.model_dump() for k, v in self.sections.items()},
            "ctxplugin.refs_created": len(self.refs_created),
            "ctxplugin.refs_used": len(self.refs_used),
            "ctxplugin.refs_expanded": self.refs_expanded,
            "ctxplugin.fact_ids": [f.id for f in self.facts],
            "ctxplugin.tools_bound": self.tools_bound,
            "ctxplugin.tools_loaded": self.tools_loaded,
            "ctxplugin.unchanged_prefix_tokens": self.unchanged_prefix_tokens,
            "ctxplugin.values_used": self.values_used,
            "ctxplugin.values_shown": self.values_shown,
            "ctxplugin.values_behind_refs": self.values_behind_refs,
            "ctxplugin.values_left": len(self.values_left),
            "ctxplugin.values_left_from_user": len(self.values_left_from_user),
            "ctxplugin.cached_answer": self.cached_answer,
            "ctxplugin.timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "ctxplugin.warnings": self.warnings,
        }


class CaptureReport(BaseModel):
    """What ``capture_tool_result`` did with one tool output."""

    session_id: str
    tool_call_id: str
    ref_id: str | None = None
    passthrough: bool = True
    original_tokens: int = 0
    compact_tokens: int = 0
    facts_extracted: int = 0
    timings_ms: dict[str, float] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)

    def as_metadata(self) -> dict[str, Any]:
        """Flat, JSON-friendly summary for trace metadata, with the same ``ctxplugin.*`` keys
        as :meth:`ContextReport.as_metadata`."""
        return {
            "ctxplugin.session_id": self.session_id,
            "ctxplugin.tool_call_id": self.tool_call_id,
            "ctxplugin.ref_id": self.ref_id,
            "ctxplugin.passthrough": self.passthrough,
            "ctxplugin.original_tokens": self.original_tokens,
            "ctxplugin.compact_tokens": self.compact_tokens,
            "ctxplugin.facts_extracted": self.facts_extracted,
            "ctxplugin.timings_ms": {k: round(v, 3) for k, v in self.timings_ms.items()},
            "ctxplugin.warnings": self.warnings,
        }


class RunSummary(BaseModel):
    """Totals over many prepared calls (what a callback handler accumulates)."""

    calls: int = 0
    tokens_before: int = 0
    tokens_after: int = 0
    captures: int = 0
    refs_created: int = 0
    cache_hits: int = 0
    cache_lookups: int = 0
    warnings: int = 0

    def add(self, report: ContextReport) -> None:
        """Fold one call's report into the totals."""
        self.calls += 1
        self.tokens_before += report.tokens_before
        self.tokens_after += report.tokens_after
        self.refs_created += len(report.refs_created)
        self.warnings += len(report.warnings)
        if report.cached_answer:
            self.cache_hits += 1

    @property
    def saved_tokens(self) -> int:
        """Tokens saved to date."""
        return max(0, self.tokens_before - self.tokens_after)

    @property
    def reduction(self) -> float:
        """Share saved to date."""
        return self.saved_tokens / self.tokens_before if self.tokens_before else 0.0

    @property
    def cache_hit_rate(self) -> float:
        """Share of answer-cache lookups served from the cache (0 when there were none)."""
        return self.cache_hits / self.cache_lookups if self.cache_lookups else 0.0
