"""Time to capture line-shaped tool outputs and to read them for facts: ``grep -n`` matches, an
``ls -la``, a CSV, a ``key: value`` dump, log and status lines (60 lines each, 1–5 KB), and the
recorded swe and tau tool outputs of 20 lines or more that are not JSON.

Every capture is of a distinct output in its own session (in-memory engine, defaults). Prints the
p50 of ``capture_tool_result``, of its facts step (the report's ``timings_ms["facts"]``), and of
the rule extractor alone on the same messages; the results are in docs/benchmarks.md.

    uv run --all-packages python benchmarks/capture_lines.py [--rounds 30]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import RuleExtractor
from ctxplugin.replay.loaders import load_file

_HERE = Path(__file__).resolve().parents[1]
DATA = Path(
    os.environ.get("CTXPLUGIN_DATA")
    or next((p for p in (_HERE.parent / "shared" / "data", _HERE.parent.parent / "shared" / "data") if p.is_dir()), _HERE.parent / "shared" / "data")
)
WORDS = ("alpha", "budget", "deadline", "status", "owner", "region", "total", "count", "value", "limit", "price", "seats")


def generated(i: int) -> dict[str, str]:
    """Line-shaped outputs, distinct for each ``i``."""
    w = [WORDS[(i + n * 5) % len(WORDS)] for n in range(60)]
    rows = range(60)
    return {
        "grep -n": "\n".join(f"src/pkg/mod{n % 9}.py:{n * 37 % 900 + i}:    {w[n]} = load_{w[n - 1]}({n})" for n in rows),
        "ls -la": "total 240\n" + "\n".join(f"-rw-r--r--  1 root root {n * 7919 % 99999:>6} Nov {n % 28 + 1:>2} 10:{n % 50 + 10} f{i}_{n}.txt" for n in rows),
        "csv": "id,name,status,amount\n" + "\n".join(f"{n + i * 100},item {w[n]},{'open' if n % 3 else 'closed'},{n * 13 % 999}.{n % 90 + 10}" for n in rows),
        "key: value": "\n".join(f"{w[n]}_{n}: {w[n - 2]} {(n + i) * 11 % 500} ms" for n in rows),
        "log": "\n".join(f"2024-05-{n % 28 + 1:02d} 10:{n % 60:02d}:{i % 60:02d} INFO {w[n]} moved to region-{n % 5} in {n * 3} ms" for n in rows),
        "status": "\n".join(f"{n + 1}. Step {n + 1} of run {i}: the {w[n]} is {w[n - 3]}" for n in rows),
    }


def recorded() -> list[str]:
    """The recorded tool outputs of 20 lines or more that are not JSON."""
    found: list[str] = []
    for path in sorted((DATA / "trajectories").rglob("*.json")):
        for conversation in load_file(path).conversations:
            found.extend(
                m.content for m in conversation.messages
                if isinstance(m, ToolMessage) and isinstance(m.content, str) and m.content.count("\n") >= 20
                and m.content.strip()[:1] not in "[{"
            )
    return found


def timed(engine: ContextEngine, texts: list[tuple[str, str]]) -> dict[str, float]:
    """p50 milliseconds of capture, of its facts step and of the rules alone."""
    rules = RuleExtractor()
    capture: list[float] = []
    facts: list[float] = []
    alone: list[float] = []
    for index, (session, text) in enumerate(texts):
        message = ToolMessage(content=text, tool_call_id=f"call_{index}", name="bash")
        started = time.perf_counter()
        _, report = engine.capture_with_report(message, Scope(session_id=session))
        capture.append((time.perf_counter() - started) * 1000)
        facts.append(report.timings_ms.get("facts", 0.0))
        started = time.perf_counter()
        rules(message)
        alone.append((time.perf_counter() - started) * 1000)
    return {"capture_p50_ms": statistics.median(capture), "facts_p50_ms": statistics.median(facts), "rules_p50_ms": statistics.median(alone)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="distinct outputs of each generated kind")
    args = parser.parse_args()
    engine = ContextEngine(config=ContextConfig())
    engine.capture_tool_result(ToolMessage(content=generated(0)["csv"], tool_call_id="warm", name="bash"), Scope(session_id="warm"))
    results: dict[str, object] = {}
    for kind in generated(0):
        results[kind] = timed(engine, [(f"{kind}-{i}", generated(i + 1)[kind]) for i in range(args.rounds)])
    results["all generated"] = timed(engine, [(f"g-{i}-{k}", t) for i in range(args.rounds) for k, t in generated(i + 1000).items()])
    real = recorded()
    if real:
        results[f"recorded ({len(real)})"] = timed(engine, [(f"r-{i}", f"run {i}\n{t}") for i, t in enumerate(real)])
    print(json.dumps({k: {n: round(v, 2) for n, v in r.items()} if isinstance(r, dict) else r for k, r in results.items()}, indent=1))


if __name__ == "__main__":
    main()
