"""Tool outputs into the CAS: tokens saved on the shared trajectories, identifiers kept, and
capture / expand latency for the in-memory and the SQLite store.

Every tool output of the shared trajectories is captured in its own session scope, as
``ContextEngine.capture_tool_result`` does, with the default ``CASConfig`` (pass-through at 250
tokens, 120-token summaries):

- tokens: what the conversation would carry (summary + ref, or the original when it passes
  through) against the original tool outputs, per corpus;
- identifiers kept: for tau-bench, the id-like argument values (reservation ids, flight numbers,
  user ids, payment ids, dates) of later tool calls that occur in a summarized output and are
  still visible in its summary; for the SWE runs, the file paths of the next three commands that
  occur in a summarized output;
- latency: capture and expand of every output, p50 / p90, memory vs SQLite (a fresh file), and
  captures of 10 MB outputs of each shape (log, JSON array, CSV, TSV, pipe table, JSON
  Lines, grep matches, prose, one line); ``--big-only`` times these alone.

Run:
    uv run --all-packages python benchmarks/cas_bench.py [--json out.json] [--big-only]
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ctxplugin.cas import (
    CASStore,
    MemoryCASStore,
    SQLiteCASStore,
    capture,
    expand,
    expand_for_model,
)
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope
from ctxplugin.tokens import get_counter

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories"
ID_LIKE = re.compile(r"^(?=.*\d)[\w-]{3,}$|^[A-Z0-9]{5,8}$")
PATH_LIKE = re.compile(r"^[\w./-]*(/[\w.-]+|\.\w{1,4})$")


@dataclass
class Output:
    session: str
    tool: str
    content: str
    later: set[str]  # identifiers later steps use that occur in this output


@dataclass
class Figures:
    outputs: int = 0
    stored: int = 0
    original_tokens: int = 0
    compact_tokens: int = 0
    stored_original: int = 0
    stored_compact: int = 0
    ids_needed: int = 0
    ids_kept: int = 0
    capture_ms: dict[str, list[float]] = field(default_factory=dict)
    expand_ms: dict[str, list[float]] = field(default_factory=dict)
    expand_model_ms: dict[str, list[float]] = field(default_factory=dict)


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for v in value.values():
            yield from _leaves(v)
    elif isinstance(value, list):
        for v in value:
            yield from _leaves(v)
    elif isinstance(value, str):
        yield value


def tau_outputs() -> list[Output]:
    out = []
    for record in json.loads((DATA / "tau" / "gpt-4o-airline-dev.json").read_text()):
        session = f"tau-{record['task_id']}-{record['trial']}"
        traj = record["traj"]
        for i, m in enumerate(traj):
            if m["role"] != "tool":
                continue
            content = m["content"] or ""
            later = {
                v
                for step in traj[i + 1 :]
                for call in step.get("tool_calls") or []
                for v in _leaves(json.loads(call["function"]["arguments"]))
                if ID_LIKE.match(v) and v in content
            }
            out.append(Output(session, m["name"], content, later))
    return out


def swe_outputs() -> list[Output]:
    out = []
    for path in sorted((DATA / "swe").glob("*.traj.json")):
        messages = json.loads(path.read_text())["messages"]
        for i, m in enumerate(messages):
            if m["role"] != "tool":
                continue
            commands = [
                json.loads(call["function"]["arguments"]).get("command", "")
                for step in messages[i + 1 : i + 7]
                if step["role"] == "assistant"
                for call in step["extra"]["response"]["choices"][0]["message"].get("tool_calls") or []
            ]
            later = {
                t
                for c in commands
                for t in {x.strip(".") for x in re.findall(r"[\w./-]+", c)}
                if len(t) >= 6 and "/" in t.strip("/") and PATH_LIKE.match(t) and t in m["content"]
            }
            out.append(Output(f"swe-{path.name}", "bash", m["content"], later))
    return out


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn()
    return result, (time.perf_counter() - start) * 1000


def run_corpus(outputs: list[Output], stores: dict[str, CASStore], config: CASConfig) -> Figures:
    counter = get_counter()[0]
    figures = Figures()
    for name, store in stores.items():
        figures.capture_ms[name], figures.expand_ms[name], figures.expand_model_ms[name] = [], [], []
        for o in outputs:
            scope = Scope(session_id=o.session)
            captured, ms = timed(lambda: capture(o.content, store=store, scope=scope, config=config, counter=counter, tool_name=o.tool))  # noqa: B023
            figures.capture_ms[name].append(ms)
            if captured.ref_id is None:
                continue
            ref = captured.ref_id
            text, ms = timed(lambda: expand(store, ref, scope))  # noqa: B023
            assert text == o.content, f"round trip failed for {ref}"
            figures.expand_ms[name].append(ms)
            _, ms = timed(lambda: expand_for_model(store, ref, scope, max_tokens=config.expand_max_tokens, counter=counter))  # noqa: B023
            figures.expand_model_ms[name].append(ms)
            if name == "memory":
                figures.stored += 1
                figures.stored_original += captured.original_tokens
                figures.stored_compact += captured.compact_tokens
                figures.ids_needed += len(o.later)
                figures.ids_kept += sum(1 for v in o.later if v in captured.text)
        if name == "memory":
            for o in outputs:
                scope = Scope(session_id=o.session)
                captured = capture(o.content, store=store, scope=scope, config=config, counter=counter, tool_name=o.tool)
                figures.outputs += 1
                figures.original_tokens += captured.original_tokens
                figures.compact_tokens += captured.compact_tokens
    return figures


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


def big_outputs() -> dict[str, str]:
    """About 10 MB of each shape a tool may print."""
    log = "\n".join(
        f"2024-05-01 12:{i // 3600 % 60:02d}:{i % 60:02d} INFO worker-{i % 7} processed item id={i} path=/var/lib/app/data/{i}.bin"
        for i in range(110_000)
    ) + "\nERROR: disk full at /var/lib/app\n"
    rows = json.dumps([{"id": f"item-{i}", "value": i, "tags": ["a", "b"], "text": "lorem ipsum dolor sit amet " * 3} for i in range(70_000)])
    columns = ("id", "user", "status", "amount", "currency", "created_at", "region", "sku", "qty", "score")
    cells = [
        (str(i), f"user{i * 7919 % 5000}", ("open", "closed", "pending")[i % 3], f"{i * 13 % 99991 / 100:.2f}", ("USD", "EUR")[i % 2],
         f"2024-0{i % 9 + 1}-1{i % 9} 10:{i % 60:02d}:00", f"eu-{i % 5}", f"SKU-{i * 31 % 999}", str(i % 9 + 1), f"{i * 17 % 1000 / 1000:.3f}")
        for i in range(120_000)
    ]
    table = {sep: sep.join(columns) + "\n" + "\n".join(sep.join(c) for c in cells) for sep in (",", "\t")}
    pipe = "| " + " | ".join(columns[:4]) + " |\n|---|---|---|---|\n" + "\n".join("| " + " | ".join(c[:4]) + " |" for c in cells * 2)
    prose = ("The quick brown fox jumps over the lazy dog while the report is being written. " * 12 + "\n") * 10_000
    jsonl = "\n".join(json.dumps({"id": i, "name": f"n{i}", "ok": i % 2 == 0, "region": f"eu-{i % 5}"}) for i in range(200_000))
    grep = "\n".join(f"src/pkg/mod{i % 300}.py:{i}:    value = load_item({i}, region='eu-{i % 5}')" for i in range(180_000))
    return {
        "10 MB log": log, "10 MB JSON array": rows, "10 MB CSV": table[","], "10 MB TSV": table["\t"], "10 MB pipe table": pipe,
        "10 MB JSON Lines": jsonl, "10 MB grep": grep, "10 MB text": prose, "10 MB one line": "x" * 10_000_000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--big-only", action="store_true", help="time the 10 MB outputs alone, not the trajectories")
    args = parser.parse_args()
    config = CASConfig()
    counter, _ = get_counter()
    results: dict[str, Any] = {"encoding": counter.name}
    with tempfile.TemporaryDirectory() as tmp:
        corpora = () if args.big_only else (("tau-bench airline", tau_outputs), ("SWE bash", swe_outputs))
        for corpus, loader in corpora:
            outputs = loader()
            stores: dict[str, CASStore] = {"memory": MemoryCASStore(), "sqlite": SQLiteCASStore(Path(tmp) / f"{corpus[:3]}.sqlite3")}
            f = run_corpus(outputs, stores, config)
            for store in stores.values():
                store.close()
            results[corpus] = {
                "outputs": f.outputs,
                "stored": f.stored,
                "original_tokens": f.original_tokens,
                "compact_tokens": f.compact_tokens,
                "saved": 1 - f.compact_tokens / f.original_tokens,
                "stored_original_mean": f.stored_original / max(1, f.stored),
                "stored_compact_mean": f.stored_compact / max(1, f.stored),
                "ids_needed": f.ids_needed,
                "ids_kept": f.ids_kept,
                "latency_ms": {
                    name: {
                        "capture_p50": pct(f.capture_ms[name], 0.5), "capture_p90": pct(f.capture_ms[name], 0.9),
                        "expand_p50": pct(f.expand_ms[name], 0.5), "expand_p90": pct(f.expand_ms[name], 0.9),
                        "expand_model_p50": pct(f.expand_model_ms[name], 0.5), "expand_model_p90": pct(f.expand_model_ms[name], 0.9),
                    }
                    for name in f.capture_ms
                },
            }
        big: dict[str, dict[str, float]] = {}
        for label, text in big_outputs().items():
            big[label] = {}
            for name, store in (("memory", MemoryCASStore()), ("sqlite", SQLiteCASStore(Path(tmp) / "big.sqlite3"))):
                scope = Scope(session_id="big")
                captured, ms = timed(lambda: capture(text, store=store, scope=scope, config=config, counter=counter, tool_name="tool"))  # noqa: B023
                assert captured.ref_id is not None
                ref = captured.ref_id
                _, ems = timed(lambda: expand_for_model(store, ref, scope, max_tokens=config.expand_max_tokens, counter=counter))  # noqa: B023
                big[label][f"{name}_capture_ms"] = ms
                big[label][f"{name}_expand_model_ms"] = ems
                big[label]["compact_tokens"] = captured.compact_tokens
                store.close()
        results["big"] = big
    print(f"encoding: {counter.name}\n")
    if corpora:
        print("| corpus | tool outputs | summarized | tool-output tokens | carried tokens | saved | mean stored output → summary | identifiers kept |")
        print("|---|---|---|---|---|---|---|---|")
        for corpus, _ in corpora:
            r = results[corpus]
            print(
                f"| {corpus} | {r['outputs']:,} | {r['stored']:,} | {r['original_tokens']:,} | {r['compact_tokens']:,} | "
                f"**{100 * r['saved']:.1f}%** | {r['stored_original_mean']:,.0f} → {r['stored_compact_mean']:,.0f} | "
                f"{r['ids_kept']}/{r['ids_needed']} ({100 * r['ids_kept'] / max(1, r['ids_needed']):.1f}%) |"
            )
        print("\n| corpus | store | capture p50 / p90 | expand p50 / p90 | expand_for_model p50 / p90 |")
        print("|---|---|---|---|---|")
        for corpus, _ in corpora:
            for name, lat in results[corpus]["latency_ms"].items():
                print(
                    f"| {corpus} | {name} | {lat['capture_p50']:.2f} / {lat['capture_p90']:.2f} ms | "
                    f"{lat['expand_p50']:.2f} / {lat['expand_p90']:.2f} ms | {lat['expand_model_p50']:.2f} / {lat['expand_model_p90']:.2f} ms |"
                )
    print("\n| output | summary tokens | capture, memory | capture, SQLite | expand_for_model, memory | expand_for_model, SQLite |")
    print("|---|---|---|---|---|---|")
    for label, b in big.items():
        print(
            f"| {label} | {b['compact_tokens']:.0f} | {b['memory_capture_ms']:.0f} ms | {b['sqlite_capture_ms']:.0f} ms | "
            f"{b['memory_expand_model_ms']:.0f} ms | {b['sqlite_expand_model_ms']:.0f} ms |"
        )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
