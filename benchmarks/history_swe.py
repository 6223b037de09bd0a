"""History compression on the long SWE trajectories, against the issue's targets.

Replays every trajectory call by call with ``ctxplugin.replay`` (its loaders, cost model and
grounding recall; see docs/cli.md) for the full history, ``trim_messages`` and ctxplugin with
the configuration in ``benchmarks/history_swe.json`` (all capabilities on), then checks the
targets: at least 85% fewer input tokens and 60% lower cache-aware cost than the full history,
at least 95% of the identifiers the next action used still visible (no trajectory below 90%),
and at most 8,000 tokens per call.

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/history_swe.py
    uv run --all-packages python benchmarks/history_swe.py --set facts.enabled=false

``--set key=value`` overrides one setting of the configuration (dotted path, JSON value).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ctxplugin import ContextConfig
from ctxplugin.replay import ReplaySettings, StrategyFigures, replay
from ctxplugin.replay.render import markdown_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data" / "trajectories" / "swe"
CONFIG = Path(__file__).with_suffix(".json")
DISCOUNT = 0.1

TARGETS = {"tokens": 0.85, "cost": 0.60, "recall": 0.95, "recall_min": 0.90, "peak": 8000}


def load_config(path: Path, overrides: list[str]) -> ContextConfig:
    data: dict[str, Any] = json.loads(path.read_text())
    for item in overrides:
        key, _, raw = item.partition("=")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        node = data
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return ContextConfig(**data)


def check(name: str, ok: bool, detail: str) -> str:
    return f"{'met ' if ok else 'MISS'}  {name:44} {detail}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="History compression against the SWE targets")
    parser.add_argument("files", nargs="*", type=Path, help=f"trajectories (default: {DATA})")
    parser.add_argument("--config", type=Path, default=CONFIG, help="ContextConfig JSON")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override a setting")
    args = parser.parse_args(argv)
    files = args.files or [DATA]
    if not all(Path(f).exists() for f in files):
        print(f"trajectories not found: {files}", file=sys.stderr)
        return 1
    config = load_config(args.config, args.set)
    settings = ReplaySettings(config=config, cache_discount=DISCOUNT, strategies=("full", "trim_messages", "ctxplugin"))
    result = replay(files, settings)
    print(markdown_table(result))
    totals = result.totals()
    full, ours = totals["full"], totals["ctxplugin"]
    per_run: list[tuple[str, StrategyFigures]] = [
        (conversation.id, conversation.figures["ctxplugin"]) for _, conversation in result.conversations()
    ]
    tokens = 1 - ours.input_tokens / full.input_tokens
    cost = 1 - ours.cost(DISCOUNT) / full.cost(DISCOUNT)
    recall = ours.recall or 0.0
    lowest = min(per_run, key=lambda item: item[1].recall or 0.0)
    print()
    print(check("input tokens, fewer than the full history", tokens >= TARGETS["tokens"], f"{tokens:.1%} (target 85%)"))
    print(check("cache-aware cost, lower than the full history", cost >= TARGETS["cost"], f"{cost:.1%} (target 60%)"))
    print(check("identifiers still visible", recall >= TARGETS["recall"], f"{recall:.1%} (target 95%)"))
    low = lowest[1].recall or 0.0
    print(check("lowest trajectory", low >= TARGETS["recall_min"], f"{low:.1%} {lowest[0]} (target 90%)"))
    print(check("peak tokens per call", ours.peak_tokens <= TARGETS["peak"], f"{ours.peak_tokens} (target 8000)"))
    print(f"\nconfig: {json.dumps(json.loads(config.model_dump_json(include={'budget', 'history', 'facts', 'cas'})))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
