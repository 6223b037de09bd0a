"""The extremes a real thread reaches, with the default configuration (``ContextConfig()``).

1. **cold start**: an agent whose threads already hold thousands of messages adds ctxplugin.
   The swe recordings (or the tau airline conversations) are chained until the thread holds
   ``--messages`` messages, each copy's texts and call ids made distinct (``[copy i]``), tool
   outputs raw (nothing was captured: ctxplugin was not there). Times the first ``prepare``
   (and the resident memory it adds), the same call again, and with ``--stores embedded`` the
   call of a new engine on the same directory (a process restart).
2. **huge inputs**: one tool output of about 10 MB as text lines, as a JSON array of records and
   as one line without newlines; 3 MB of random bytes decoded as latin-1; JSON nested 1,000
   deep; 900,000 characters of control characters, NUL and lone surrogates; then a 1 MB user
   message, 200 parallel tool calls with their results, and 500 tools bound. Each output is
   captured, prepared captured and raw, and must expand back to the original exactly.

Run:
    uv run --all-packages python benchmarks/scale_bench.py [--messages 2000 10000] [--stores embedded] [--skip huge]
"""

from __future__ import annotations

import argparse
import json
import random
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from latency import BASH_TOOL, TAU_TOOLS, chained_session, chat_thread, rss_mb

from ctxplugin import ContextEngine, Scope
from ctxplugin._messages import META_KEY


def distinct(messages: list[BaseMessage], copy: int) -> list[BaseMessage]:
    """``messages`` with every text, call id and string argument marked ``[copy i]``."""
    if not copy:
        return messages
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, SystemMessage) or not isinstance(message.content, str):
            out.append(message)
            continue
        update: dict[str, Any] = {"content": f"{message.content} [copy {copy}]"}
        if isinstance(message, AIMessage) and message.tool_calls:
            update["tool_calls"] = [
                {**call, "id": f"{call['id']}-{copy}",
                 "args": {k: f"{v} # copy {copy}" if isinstance(v, str) else v for k, v in call["args"].items()}}
                for call in message.tool_calls
            ]
        if isinstance(message, ToolMessage):
            update["tool_call_id"] = f"{message.tool_call_id}-{copy}"
        out.append(message.model_copy(update=update))
    return out


def long_thread(kind: str, count: int) -> list[BaseMessage]:
    """About ``count`` messages of chained recordings, ending before an assistant message."""
    base = chained_session(8) if kind == "swe" else chat_thread(100)
    out: list[BaseMessage] = []
    copy = 0
    while len(out) < count:
        part = distinct(base, copy)
        out.extend(m for m in part if not (out and isinstance(m, SystemMessage)))
        copy += 1
    out = out[:count]
    while isinstance(out[-1], AIMessage):
        out.pop()
    return out


def cold_start(kind: str, count: int, stores: str) -> dict[str, float]:
    messages = long_thread(kind, count)
    tools: list[Any] = [BASH_TOOL] if kind == "swe" else json.loads(TAU_TOOLS.read_text())
    root = Path(tempfile.mkdtemp(prefix="ctxplugin-scale-"))
    engine = ContextEngine.embedded(root) if stores == "embedded" else ContextEngine()
    scope = Scope(session_id="thread")
    before = rss_mb()
    started = time.perf_counter()
    first = engine.prepare(messages, tools=tools, scope=scope)
    out = {"messages": len(messages), "first_s": time.perf_counter() - started, "rss_mb": rss_mb() - before}
    started = time.perf_counter()
    engine.prepare(messages, tools=tools, scope=scope)
    out["again_s"] = time.perf_counter() - started
    out.update({f"{k}_s": v / 1000 for k, v in first.report.timings_ms.items() if k != "total"})
    if stores == "embedded":
        engine.close()
        restarted = ContextEngine.embedded(root)
        started = time.perf_counter()
        restarted.prepare(messages, tools=tools, scope=scope)
        out["restart_s"] = time.perf_counter() - started
        restarted.close()
    return out


def _nested(depth: int) -> str:
    return '{"a":' * depth + "1" + "}" * depth


def huge_outputs() -> dict[str, str]:
    rng = random.Random(1)
    lines = "\n".join(f"line {i}: value={rng.randint(0, 10**9)} path=/srv/app/file_{i}.py status=ok" for i in range(150_000))
    records = [{"id": i, "name": f"user_{i}", "email": f"u{i}@example.com", "score": rng.random()} for i in range(120_000)]
    controls = [*range(32), 0x7F, 0xD800, 0xDFFF, 0xFFFE]
    return {
        "text, 10 MB": lines[:10_000_000],
        "JSON records, 11.7 MB": json.dumps(records),
        "one line, 10 MB": ("x" * 97 + "yz ") * 100_000,
        "random bytes as latin-1, 3 MB": bytes(rng.getrandbits(8) for _ in range(3_000_000)).decode("latin-1"),
        "JSON nested 1,000 deep": _nested(1000),
        "control characters, NUL, lone surrogates": "".join(chr(rng.choice(controls)) + "ab" for _ in range(300_000)),
    }


def timed(run: Callable[[], Any]) -> tuple[Any, float]:
    started = time.perf_counter()
    value = run()
    return value, time.perf_counter() - started


def huge_inputs() -> list[str]:
    rows: list[str] = []
    call = AIMessage("", tool_calls=[{"id": "c1", "name": "run", "args": {}}])
    for name, output in huge_outputs().items():
        engine, scope = ContextEngine(), Scope(session_id="huge")
        raw = ToolMessage(output, tool_call_id="c1", name="run")
        compact, capture_s = timed(lambda: engine.capture_tool_result(raw, scope))  # noqa: B023
        head = [SystemMessage("sys"), HumanMessage("run it"), call]
        _, prepare_s = timed(lambda: engine.prepare([*head, compact], scope=scope))  # noqa: B023
        _, raw_s = timed(lambda: ContextEngine().prepare([*head, raw], scope=Scope(session_id="raw")))  # noqa: B023
        ref = compact.additional_kwargs[META_KEY]["ref"]
        exact = engine.expand_ref(ref, scope=scope) == output
        rows.append(f"| {name} | {capture_s:.2f} | {prepare_s:.2f} | {raw_s:.2f} | {'yes' if exact else 'NO'} |")
    rng = random.Random(2)
    words = " ".join(rng.choice(["order", f"ORD-{rng.randint(1000, 99999)}", "the", "ship", f"user_{rng.randint(1, 999)}"]) for _ in range(170_000))
    _, message_s = timed(lambda: ContextEngine().prepare([SystemMessage("sys"), HumanMessage(words)], scope=Scope(session_id="m")))
    rows.append(f"| user message, 1 MB | | {message_s:.2f} | | |")
    engine, scope = ContextEngine(), Scope(session_id="parallel")
    calls = AIMessage("", tool_calls=[{"id": f"call_{i}", "name": "lookup", "args": {"q": f"item {i}"}} for i in range(200)])
    results = [
        ToolMessage("\n".join(f"item {i} row {j}: sku SKU-{i}-{j} price {rng.randint(1, 999)}" for j in range(60)),
                    tool_call_id=f"call_{i}", name="lookup")
        for i in range(200)
    ]
    compact_results, capture_s = timed(lambda: [engine.capture_tool_result(r, scope) for r in results])
    head = [SystemMessage("sys"), HumanMessage("look up 200 items"), calls]
    _, prepare_s = timed(lambda: engine.prepare([*head, *compact_results], scope=scope))
    _, raw_s = timed(lambda: ContextEngine().prepare([*head, *results], scope=Scope(session_id="raw")))
    rows.append(f"| 200 parallel tool calls and results | {capture_s:.2f} (all 200) | {prepare_s:.2f} | {raw_s:.2f} | |")
    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": f"Does thing {i} with the catalogue",
                                          "parameters": {"type": "object", "properties": {f"arg{j}": {"type": "string"} for j in range(8)}}}}
        for i in range(500)
    ]
    _, tools_s = timed(lambda: ContextEngine().prepare([SystemMessage("sys"), HumanMessage("use tool_321")], tools=tools, scope=Scope(session_id="t")))
    rows.append(f"| 500 tools bound | | {tools_s:.2f} | | |")
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--messages", type=int, nargs="+", default=[2000, 5000, 10000])
    parser.add_argument("--kinds", nargs="+", default=["swe", "tau"], choices=["swe", "tau"])
    parser.add_argument("--stores", choices=["memory", "embedded"], default="memory")
    parser.add_argument("--skip", action="append", default=[], choices=["cold", "huge"])
    args = parser.parse_args(argv)
    if "cold" not in args.skip:
        for kind in args.kinds:
            for count in args.messages:
                figures = cold_start(kind, count, args.stores)
                print(kind, args.stores, " ".join(f"{k}={v:.2f}" if isinstance(v, float) else f"{k}={v}" for k, v in figures.items()), flush=True)
    if "huge" not in args.skip:
        print("| input | capture s | prepare s (captured) | prepare s (raw) | expands exactly |")
        print("|---|---:|---:|---:|---|")
        for row in huge_inputs():
            print(row, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
