"""Worker processes of ``test_facts_processes.py`` (a module of its own: spawned children import
it by name)."""

from __future__ import annotations

import hashlib
from typing import Any

FACTS_PER_WORKER = 10


def scope_of(worker: int) -> Any:
    from ctxplugin import Scope

    return Scope(session_id=f"worker-{worker}", user_id="ops")


def write_facts(path: str, worker: int, wait_s: float, barrier: Any, results: Any) -> None:
    """Open the embedded engine at ``path``, wait for the other workers, write facts; report
    ``(worker, outcome, error, [(fact id, text)])``."""
    from ctxplugin import ContextConfig, ContextEngine
    from ctxplugin.errors import StoreInUseError

    try:
        engine = ContextEngine.embedded(path, ContextConfig(stores={"timeout": wait_s}))
    except StoreInUseError as exc:
        if barrier is not None:
            barrier.wait()
        results.put((worker, "refused", str(exc), []))
        return
    if barrier is not None:
        barrier.wait()
    written = []
    scope = scope_of(worker)
    for i in range(FACTS_PER_WORKER):
        digest = hashlib.sha256(f"{worker}/{i}".encode()).hexdigest()
        text = f"Release code {digest[:8]} {digest[8:16]} {digest[16:24]} belongs to worker {worker}"
        fact = engine.facts.write(text, key=f"batch_{worker}_{i}", scope=scope)
        written.append((fact.id, text))
    engine.cas.close()
    engine.facts.store.close()  # type: ignore[attr-defined]
    results.put((worker, "ok", "", written))
