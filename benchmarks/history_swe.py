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

It also prints a bound that no strategy can beat, computed with hindsight: each call gets only
the system prompt, the task, the ``expand_ref`` schema, the newest exchange (as ctxplugin shows
it) and, as a bare list, exactly the identifiers that the next action used and that none of
these shows — no facts block, nothing else of the older history. The gap between that bound
and the 85% target is all the room left for everything a real strategy must show without
knowing the next action.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import ContextConfig
from ctxplugin.replay import ReplaySettings, StrategyFigures, replay
from ctxplugin.replay.loaders import discover, load_file
from ctxplugin.replay.metrics import (
    Meter,
    action_identifiers,
    message_identifiers,
    occurs,
    tools_tokens,
)
from ctxplugin.replay.peers import Ctxplugin
from ctxplugin.replay.render import markdown_table
from ctxplugin.replay.runner import memory_engine_factory
from ctxplugin.scope import Scope

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


def hindsight_bound(files: list[Path], config: ContextConfig) -> dict[str, float]:
    """Tokens of the hindsight view (see the module docstring) against the full history, and
    how many of the identifiers the next actions used only older history holds."""
    full = bound = calls = eligible = older = pool_tokens = 0
    paths, _ = discover(files)
    for path in paths:
        for conversation in load_file(path).conversations:
            engine = memory_engine_factory(config)
            meter = Meter(engine.counter)
            peer = Ctxplugin(engine, [], Scope(session_id=conversation.id))
            schemas = tools_tokens([convert_to_openai_tool(t) for t in engine.tools_for_model()], engine.counter)
            pool: dict[str, int] = {}  # every identifier older history holds, with its tokens
            pooled = 2  # messages (after the system prompt and the task) already in the pool
            for index in conversation.call_indexes():
                history = conversation.messages[:index]
                action = conversation.messages[index]
                if not isinstance(action, AIMessage):
                    continue
                start = max((i for i, m in enumerate(history) if isinstance(m, AIMessage)), default=len(history))
                for message in history[pooled:start]:
                    found = message_identifiers(message)
                    pool.update((i, engine.counter.count(i) + 1) for i in found if i not in pool)
                pooled = max(pooled, start)
                pool_tokens += sum(pool.values())
                view = peer.view(history).messages
                task = next(m for m in history if isinstance(m, HumanMessage))
                newest = max((i for i, m in enumerate(view) if isinstance(m, AIMessage)), default=len(view))
                kept: list[BaseMessage] = [m for m in view if isinstance(m, SystemMessage) and m in history]
                kept += [task, *view[newest:]] if task not in view[newest:] else list(view[newest:])
                shown = meter.text(kept)
                used = [i for i in action_identifiers(action) if occurs(i, meter.text(history[1:]))]
                needed = [i for i in used if not occurs(i, shown)]
                full += meter.count(history)
                bound += meter.count(kept) + schemas + sum(engine.counter.count(i) + 1 for i in needed)
                calls += 1
                eligible += len(used)
                older += len(needed)
    return {
        "reduction": 1 - bound / full,
        "calls": calls,
        "full": full,
        "bound": bound,
        "older_share": older / eligible,
        "pool_per_call": pool_tokens / calls,
    }


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
    print(check("input tokens, fewer than the full history", tokens >= TARGETS["tokens"], f"{tokens:.2%} (target 85%)"))
    print(check("cache-aware cost, lower than the full history", cost >= TARGETS["cost"], f"{cost:.2%} (target 60%)"))
    print(check("identifiers still visible", recall >= TARGETS["recall"], f"{recall:.2%} (target 95%)"))
    low = lowest[1].recall or 0.0
    print(check("lowest trajectory", low >= TARGETS["recall_min"], f"{low:.1%} {lowest[0]} (target 90%)"))
    print(check("peak tokens per call", ours.peak_tokens <= TARGETS["peak"], f"{ours.peak_tokens} (target 8000)"))
    hint = hindsight_bound(files, config)
    room = (1 - TARGETS["tokens"]) * hint["full"] - hint["bound"]
    share = hint["older_share"]
    print(
        f"\nbound with hindsight (system prompt, task, expand_ref, newest exchange and exactly the identifiers the"
        f" next action needs): {hint['reduction']:.1%} fewer tokens than the full history; at 85% fewer,"
        f" {room / hint['calls']:,.0f} tokens a call are left for everything else (facts block, older history)."
        f" {share:.1%} of the identifiers the next actions used are held only by older history, so 95% recall"
        f" needs {max(0.0, 1 - 0.05 / share):.1%} of those shown; listing every identifier older history holds"
        f" takes {hint['pool_per_call']:,.0f} tokens a call."
    )
    print(f"\nconfig: {json.dumps(json.loads(config.model_dump_json(include={'budget', 'history', 'facts', 'cas'})))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
