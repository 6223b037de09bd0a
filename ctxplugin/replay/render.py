"""Human-readable replay results: a rich table for the terminal and a Markdown table for docs."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich import box
from rich.table import Table

from ctxplugin.replay.results import FileResult, ReplayResult, StrategyFigures

HEADERS = (
    "strategy",
    "calls",
    "input tokens",
    "× full",
    "cache-aware cost",
    "× full",
    "peak/call",
    "tool schemas",
    "over budget",
    "recall",
    "action recall",
)
SHORT_HEADERS = ("strategy", "calls", "input", "×full", "cost", "×full", "peak", "schemas", ">budget", "recall", "actions")


def _ratio(value: float, whole: float) -> str:
    return f"{value / whole:.2f}" if whole else "–"


def _cells(name: str, figures: StrategyFigures, full: StrategyFigures, discount: float) -> list[str]:
    recall = figures.recall
    action = figures.action_recall
    return [
        name,
        f"{figures.calls:,}",
        f"{figures.input_tokens:,}",
        _ratio(figures.input_tokens, full.input_tokens),
        f"{figures.cost(discount):,.0f}",
        _ratio(figures.cost(discount), full.cost(discount)),
        f"{figures.peak_tokens:,}",
        f"{figures.tool_schema_tokens:,}",
        f"{figures.over_budget_calls:,}",
        "–" if recall is None else f"{recall:.1%}",
        "–" if action is None else f"{action:.1%}",
    ]


def _blocks(result: ReplayResult) -> list[tuple[str, dict[str, StrategyFigures]]]:
    blocks: list[tuple[str, dict[str, StrategyFigures]]] = []
    replayed = [f for f in result.files if f.conversations]
    for file in replayed:
        blocks.append((_file_label(file), file.totals(result.strategies)))
    if len(replayed) > 1:
        count = sum(len(f.conversations) for f in replayed)
        blocks.append((f"all files ({count} conversations)", result.totals()))
    return blocks


def _file_label(file: FileResult) -> str:
    count = len(file.conversations)
    suffix = f"{count} conversations" if count > 1 else "1 conversation"
    failed = f", {len(file.errors)} skipped" if file.errors else ""
    return f"{Path(file.path).name} ({file.format}, {suffix}{failed})"


def rich_tables(result: ReplayResult) -> list[Table]:
    """The results as rich tables: one per file, then the total.

    Columns: calls replayed; input tokens summed over calls and their ratio to the full
    history; cache-aware cost (token units) and its ratio; the largest call; tool-schema tokens
    summed; calls over the budget; grounding recall; action-value recall (recordings with
    ground-truth actions only).
    """
    tables = []
    for label, figures in _blocks(result):
        table = Table(title=label, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False)
        table.add_column(SHORT_HEADERS[0], style="bold", no_wrap=True)
        for header in SHORT_HEADERS[1:]:
            table.add_column(header, justify="right", no_wrap=True)
        full = figures["full"]
        for name in result.strategies:
            style = "green" if name == "ctxplugin" else None
            table.add_row(*_cells(name, figures[name], full, result.discount), style=style)
        tables.append(table)
    return tables


LEGEND = (
    "input = tokens sent, summed over calls (messages + tool schemas); cost = uncached tokens + "
    "cached prefix tokens x discount; peak = largest call; >budget = calls over the total budget; "
    "recall = identifiers the next action used (seen earlier) still visible; actions = values of "
    "the task's ground-truth tool calls (seen earlier) still visible when the agent issued them"
)


def markdown_table(result: ReplayResult) -> str:
    """The results as a Markdown table (one block per file, then the total)."""
    lines = ["| " + " | ".join(HEADERS) + " |", "|" + "|".join(["---"] + ["---:"] * (len(HEADERS) - 1)) + "|"]
    for label, figures in _blocks(result):
        lines.append(f"| **{_markdown_text(label)}** |" + " |" * (len(HEADERS) - 1))
        full = figures["full"]
        for name in result.strategies:
            cells = _cells(name, figures[name], full, result.discount)
            if name == "ctxplugin":
                cells = [f"**{c}**" for c in cells]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _markdown_text(text: str) -> str:
    """Text as a table cell shows it: a file name's ``|`` would end the cell and its ``*``, ``_``
    or backquote start emphasis or code."""
    return re.sub(r"([\\|*_`\[\]<>])", r"\\\1", text)


def notes(result: ReplayResult) -> list[str]:
    """Lines to print under the table: settings, the provider's own cache figures, timings."""
    settings: dict[str, Any] = result.settings
    out = [
        f"budget {settings['budget_total']:,} tokens (ctxplugin total; trim_messages gets the same total), "
        f"cached tokens priced at {settings['cache_discount']}x, counted with {settings['encoding']}"
    ]
    if "clear_tool_uses" in settings:
        edit = settings["clear_tool_uses"]
        out.append(f"context_editing: ClearToolUsesEdit(trigger={edit['trigger']:,}, keep={edit['keep']})")
    for file in result.files:
        recorded = [u for c in file.conversations for u in c.recorded]
        if recorded:
            prompt = sum(u.prompt_tokens for u in recorded)
            cached = sum(u.cached_tokens for u in recorded)
            full = file.totals(["full"])["full"]
            out.append(
                f"{file.path}: the provider reported {cached / prompt:.1%} of {prompt:,} prompt tokens "
                f"as cache hits; the cost model gives the full history {_share(full)}"
            )
    worst = result.worst("ctxplugin")
    if worst:
        parts = [f"{label} {worst[key][0]:.1%} ({worst[key][1]})" for key, label in (("recall", "recall"), ("action_recall", "action recall")) if key in worst]
        out.append("ctxplugin's lowest conversation: " + "; ".join(parts))
    prepare = result.meta.get("prepare", {})
    if prepare.get("calls"):
        out.append(
            f"prepare(): mean {prepare['mean_ms']:.1f} ms, p95 {prepare['p95_ms']:.1f} ms over "
            f"{prepare['calls']:,} calls (this machine; not part of the reproducible figures)"
        )
    out.extend(f"skipped strategy {s}" for s in settings.get("skipped", []))
    return out


def _share(figures: StrategyFigures) -> str:
    return f"{figures.cached_tokens / figures.input_tokens:.1%}" if figures.input_tokens else "–"


def errors(files: Sequence[FileResult]) -> list[str]:
    """One line per problem, naming the file."""
    return [f"{file.path}: {problem}" for file in files for problem in file.errors]
