"""Code the Postgres tests run in other processes (imported by name, so not a test module).

- :func:`hang`: a summarizer for ``ctxplugin-postgres work`` that records its call and then
  blocks, so the test can kill the worker mid-job.
- :func:`scaleout_write` / :func:`scaleout_read`: one of eight processes sharing sessions
  through ``ctxplugin.connect`` (Postgres CAS, Chroma server facts).
"""

from __future__ import annotations

import os
import time
from typing import Any

from langchain_core.messages import ToolMessage

SESSIONS = 3
OUTPUTS_PER_PROCESS = 4


def hang(text: str) -> str:
    """Record the call in ``$CTXPLUGIN_TEST_MARKER``, then block until killed."""
    with open(os.environ["CTXPLUGIN_TEST_MARKER"], "a", encoding="utf-8") as marker:
        marker.write(f"{os.getpid()}\n")
    time.sleep(600)
    return "never returned"


def deployment_env(dsn: str, schema: str, chroma_url: str, unused_path: str, collection: str) -> dict[str, str]:
    """The environment of one deployment's processes: Postgres, a Chroma server, and a facts
    collection of their own."""
    return {
        "CTXPLUGIN_POSTGRES_DSN": dsn,
        "CTXPLUGIN_POSTGRES_SCHEMA": schema,
        "CTXPLUGIN_CHROMA_URL": chroma_url,
        "CTXPLUGIN_FACTS__COLLECTION": collection,
        "CTXPLUGIN_PATH": unused_path,
        "ANONYMIZED_TELEMETRY": "False",
        # several processes start their Chroma clients at once on a shared CI machine: the first
        # connection is slow there, and these tests are about correctness, not outages
        "CTXPLUGIN_STORES__TIMEOUT": "60",
    }


def _engine(env: dict[str, str]) -> Any:
    os.environ.update(env)
    import ctxplugin

    return ctxplugin.connect()


def close(engine: Any) -> None:
    """Release an engine's server connections."""
    engine.cas.close()
    engine.facts.store.close()


def shared_output(i: int) -> str:
    """A tool output every process captures (same content, same sessions)."""
    return "\n".join(f"row {r}: shared dataset item {i}-{r} status=ok" for r in range(80))


def own_output(worker: int, i: int) -> str:
    """A tool output only ``worker`` captures."""
    return "\n".join(f"row {r}: worker {worker} record {i}-{r} value={worker * 1000 + r}" for r in range(80))


def scaleout_write(args: tuple[int, dict[str, str]]) -> list[tuple[str, str, str]]:
    """Capture shared and own outputs into every session and write one fact per session.

    Returns:
        ``(session, ref, content)`` for each captured output.
    """
    from ctxplugin import Scope

    worker, env = args
    engine = _engine(env)
    written: list[tuple[str, str, str]] = []
    try:
        for s in range(SESSIONS):
            scope = Scope(session_id=f"shared-{s}", user_id="team")
            for i in range(OUTPUTS_PER_PROCESS):
                content = shared_output(i) if i % 2 == 0 else own_output(worker, i)
                compact = engine.capture_tool_result(
                    ToolMessage(content=content, tool_call_id=f"w{worker}-s{s}-{i}", name="query"), scope=scope
                )
                meta = compact.additional_kwargs.get("ctxplugin", {})
                if "ref" not in meta:
                    raise AssertionError(f"worker {worker}: output {i} was not stored: {meta}")
                written.append((scope.session_id, str(meta["ref"]), content))
            engine.facts.write(
                f"worker {worker} finished batch {s}", key=f"batch_{s}_worker_{worker}", scope=scope, kind="task"
            )
    finally:
        close(engine)
    return written


def scaleout_read(args: tuple[int, dict[str, str], list[tuple[str, str, str]]]) -> dict[str, Any]:
    """Expand every ref written by every process and list the facts each session holds."""
    from ctxplugin import Scope
    from ctxplugin.facts import FactQuery

    worker, env, written = args
    engine = _engine(env)
    mismatches: list[str] = []
    facts: dict[str, list[str]] = {}
    try:
        for session, ref, content in written:
            scope = Scope(session_id=session, user_id="team")
            if engine.expand_ref(ref, scope=scope) != content:
                mismatches.append(f"{session} {ref}")
        for s in range(SESSIONS):
            scope = Scope(session_id=f"shared-{s}", user_id="team")
            found = engine.facts.store.find(FactQuery(reader=scope, valid=True))
            facts[scope.session_id] = sorted(f.key for f in found if f.key and f.key.startswith("batch_"))
    finally:
        close(engine)
    return {"worker": worker, "mismatches": mismatches, "facts": facts}


def rewrite_key(args: tuple[int, dict[str, str], float, int, bool]) -> int:
    """Write ``rounds`` new values of one key into one shared session, starting at ``start``
    (a wall-clock time every process waits for, so their writes collide). ``locked=False``
    builds the ledger without the write lock (to see the race the lock prevents)."""
    from ctxplugin import Scope
    from ctxplugin.facts import FactsLedger

    worker, env, start, rounds, locked = args
    engine = _engine(env)
    ledger = engine.facts if locked else FactsLedger(engine.facts.store, engine.facts.config)
    scope = Scope(session_id="contended", user_id="team")
    try:
        time.sleep(max(0.0, start - time.time()))
        for i in range(rounds):
            ledger.write(f"the shared counter is {worker}-{i}", key="shared_counter", scope=scope)
    finally:
        close(engine)
    return rounds


RESERVATIONS = "\n".join(
    f"reservation R{i:04d}X: user_id=kim_{i}, origin=JFK, destination=LAX, cabin=economy, status=confirmed"
    for i in range(12)
)
"""A tool output the rule extractor reads several facts from."""


def capture_then_hang(args: tuple[dict[str, str], str, int]) -> None:
    """Capture :data:`RESERVATIONS`, writing ``$marker`` and blocking until killed when about to
    send the fact store its ``writes``-th write, or once the capture is done."""
    env, marker, writes = args
    from ctxplugin import Scope

    engine = _engine(env)
    store = engine.facts.store
    sent = [0]

    def hang() -> None:
        with open(marker, "w", encoding="utf-8") as out:
            out.write(f"{os.getpid()}\n")
        time.sleep(600)

    def counted(method: Any) -> Any:
        def write(*args: Any, **kwargs: Any) -> Any:
            sent[0] += 1
            if sent[0] == writes:
                hang()
            return method(*args, **kwargs)

        return write

    for name in ("add", "update", "write"):
        setattr(store, name, counted(getattr(store, name)))
    engine.capture_tool_result(
        ToolMessage(content=RESERVATIONS, tool_call_id="call-1", name="get_reservations"),
        scope=Scope(session_id="killed", user_id="team"),
    )
    hang()
