"""Throughput of capture and prepare with 8 concurrent workers: embedded stores versus servers.

Workload: tau-bench airline conversations (``../shared/data``) replayed call by call, each
conversation its own session, the 14 real tool schemas bound on every call. Every worker owns
an equal share of the conversations and runs two phases, separated by a barrier:

1. capture: every tool output of its conversations through ``capture_tool_result`` (CAS write
   or pass-through, plus fact extraction);
2. prepare: ``prepare`` before every assistant call, on the history the agent held then (tool
   outputs as the capture phase returned them).

Throughput is operations per second of wall time over all workers; latency is per operation.
Deployments measured, with default ``ContextConfig`` (facts on):

- ``embedded, 8 threads``: one engine on SQLite + embedded Chroma shared by 8 threads (the
  embedded stores are single-process);
- ``server, 8 threads``: the same on Postgres + a Chroma server, from one process;
- ``server, 8 processes``: 8 processes, each with its own engine from ``ctxplugin.connect``
  (the scale-out deployment).

The Chroma server is a ``chroma run`` started here (from this interpreter's bin) unless
``--chroma-url`` is given; Postgres is ``--dsn`` (default ``CTXPLUGIN_TEST_POSTGRES_DSN`` or
``postgresql://postgres@127.0.0.1:5432/test``), in a fresh schema dropped afterwards.

Run:
    uv run --all-packages python benchmarks/throughput_bench.py [--conversations 48] [--no-facts] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
TOOLS = DATA / "tools" / "tau-airline-tools.json"
WORKERS = 8


@dataclass
class WorkerResult:
    capture_ms: list[float] = field(default_factory=list)
    prepare_ms: list[float] = field(default_factory=list)
    phases: dict[str, tuple[float, float]] = field(default_factory=dict)  # name -> (start, end), epoch s
    stored: int = 0
    warnings: int = 0


def _conversations(indexes: list[int]) -> list[Any]:
    from ctxplugin.replay.loaders import load_file

    loaded = load_file(TAU, "tau").conversations
    return [loaded[i] for i in indexes]


def _replay(engine: Any, indexes: list[int], barrier: Any) -> WorkerResult:
    """One worker: load its conversations, then the capture phase and the prepare phase."""
    from langchain_core.messages import AIMessage, ToolMessage

    from ctxplugin import Scope

    tools = json.loads(TOOLS.read_text())
    conversations = _conversations(indexes)
    result = WorkerResult()
    held: list[tuple[Scope, list[Any]]] = []
    # warm up outside the timed phases: connections, schema check, collections, tokenizer
    warm = Scope(session_id=f"warm-{uuid.uuid4().hex[:6]}")
    for message in conversations[0].messages:
        if isinstance(message, ToolMessage):
            engine.capture_tool_result(message, scope=warm)
    engine.prepare(list(conversations[0].messages[:2]), tools=tools, scope=warm)
    barrier.wait()
    start = time.time()
    for conversation in conversations:
        scope = Scope(session_id=f"{conversation.id}-{uuid.uuid4().hex[:6]}")
        messages = []
        for message in conversation.messages:
            if isinstance(message, ToolMessage):
                t0 = time.perf_counter()
                compact = engine.capture_tool_result(message, scope=scope)
                result.capture_ms.append((time.perf_counter() - t0) * 1000)
                meta = compact.additional_kwargs.get("ctxplugin", {})
                result.stored += "ref" in meta
                result.warnings += "warning" in meta
                message = compact
            messages.append(message)
        held.append((scope, messages))
    result.phases["capture"] = (start, time.time())
    barrier.wait()
    start = time.time()
    for scope, messages in held:
        for i, message in enumerate(messages):
            if i == 0 or not isinstance(message, AIMessage):
                continue
            t0 = time.perf_counter()
            prepared = engine.prepare(messages[:i], tools=tools, scope=scope)
            result.prepare_ms.append((time.perf_counter() - t0) * 1000)
            result.warnings += len([w for w in prepared.report.warnings if "unavailable" in w])
    result.phases["prepare"] = (start, time.time())
    return result


def _process_worker(env: dict[str, str], indexes: list[int], barrier: Any, results: Any) -> None:
    os.environ.update(env)
    import ctxplugin

    engine = ctxplugin.connect()
    try:
        results.put(_replay(engine, indexes, barrier))
    finally:
        engine.cas.close()


def _shares(count: int) -> list[list[int]]:
    return [list(range(w, count, WORKERS)) for w in range(WORKERS)]


def run_threads(engine: Any, count: int) -> list[WorkerResult]:
    barrier = threading.Barrier(WORKERS)
    results: list[WorkerResult] = []
    lock = threading.Lock()

    def work(indexes: list[int]) -> None:
        outcome = _replay(engine, indexes, barrier)
        with lock:
            results.append(outcome)

    threads = [threading.Thread(target=work, args=(share,)) for share in _shares(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def run_processes(env: dict[str, str], count: int) -> list[WorkerResult]:
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(WORKERS)
    queue = context.Queue()
    processes = [context.Process(target=_process_worker, args=(env, share, barrier, queue)) for share in _shares(count)]
    for p in processes:
        p.start()
    results = [queue.get() for _ in processes]
    for p in processes:
        p.join()
    return results


def summarize(name: str, results: list[WorkerResult]) -> dict[str, Any]:
    row: dict[str, Any] = {"deployment": name}
    for phase, key in (("capture", "capture_ms"), ("prepare", "prepare_ms")):
        samples = sorted(ms for r in results for ms in getattr(r, key))
        wall = max(r.phases[phase][1] for r in results) - min(r.phases[phase][0] for r in results)
        row[phase] = {
            "ops": len(samples),
            "wall_s": round(wall, 2),
            "per_s": round(len(samples) / wall, 1) if wall else 0.0,
            "p50_ms": round(statistics.median(samples), 1),
            "p95_ms": round(samples[int(0.95 * (len(samples) - 1))], 1),
        }
    row["stored"] = sum(r.stored for r in results)
    row["warnings"] = sum(r.warnings for r in results)
    return row


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_chroma(root: Path) -> tuple[subprocess.Popen[bytes], str]:
    port = _free_port()
    binary = Path(sys.executable).parent / "chroma"
    log = open(root / "chroma.log", "wb")  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(
        [str(binary), "run", "--path", str(root / "chroma"), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ANONYMIZED_TELEMETRY": "False"},
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(f"{url}/api/v2/heartbeat", timeout=1):
                return process, url
        except OSError:
            time.sleep(0.2)
    process.kill()
    raise SystemExit(f"chroma run did not start; see {root / 'chroma.log'}")


def _print(rows: list[dict[str, Any]]) -> None:
    print("| deployment | capture/s | capture p50 / p95 ms | prepare/s | prepare p50 / p95 ms | outputs stored | store warnings |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        c, p = row["capture"], row["prepare"]
        print(
            f"| {row['deployment']} | {c['per_s']} | {c['p50_ms']} / {c['p95_ms']} | {p['per_s']} | "
            f"{p['p50_ms']} / {p['p95_ms']} | {row['stored']} of {c['ops']} | {row['warnings']} |"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--conversations", type=int, default=48, help="tau-bench conversations to replay (of 100)")
    parser.add_argument("--dsn", default=os.environ.get("CTXPLUGIN_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"))
    parser.add_argument("--chroma-url", help="an existing Chroma server (default: start one)")
    parser.add_argument("--no-facts", action="store_true", help="facts off: measure the CAS and the rest alone")
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if args.no_facts:
        os.environ["CTXPLUGIN_FACTS__ENABLED"] = "false"  # read by every ContextConfig, here and in workers
    if not TAU.exists():
        print(f"data not found: {TAU} (the shared data directory sits beside the repository)", file=sys.stderr)
        return 1
    import psycopg

    import ctxplugin
    from ctxplugin import ContextConfig

    count = max(WORKERS, min(args.conversations, 100))
    schema = f"ctxplugin_bench_{uuid.uuid4().hex[:8]}"
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        server, url = (None, args.chroma_url) if args.chroma_url else start_chroma(root)
        try:
            embedded = ctxplugin.connect(ContextConfig(path=str(root / "embedded")))
            rows.append(summarize(f"embedded, {WORKERS} threads", run_threads(embedded, count)))
            embedded.cas.close()
            env = {
                "CTXPLUGIN_POSTGRES_DSN": args.dsn, "CTXPLUGIN_POSTGRES_SCHEMA": schema, "CTXPLUGIN_CHROMA_URL": url,
                "CTXPLUGIN_FACTS__COLLECTION": f"bench_threads_{uuid.uuid4().hex[:8]}", "ANONYMIZED_TELEMETRY": "False",
            }
            os.environ.update(env)
            shared = ctxplugin.connect(ContextConfig())
            rows.append(summarize(f"server, {WORKERS} threads", run_threads(shared, count)))
            shared.cas.close()
            env["CTXPLUGIN_FACTS__COLLECTION"] = f"bench_procs_{uuid.uuid4().hex[:8]}"
            rows.append(summarize(f"server, {WORKERS} processes", run_processes(env, count)))
        finally:
            if server is not None:
                server.terminate()
                server.wait(timeout=30)
            with psycopg.connect(args.dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    facts = "off" if args.no_facts else "on"
    print(f"{count} conversations, {WORKERS} workers, facts {facts}; {platform.platform()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    _print(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
