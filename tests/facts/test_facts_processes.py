"""Several OS processes on one embedded Chroma directory: one at a time is let in, the others
wait (bounded) and are then refused with an error that names the server mode; no fact is ever
lost silently."""

from __future__ import annotations

import multiprocessing
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxplugin import FactsConfig, Scope
from ctxplugin.facts import ChromaFactStore, FactsLedger

TESTS = Path(__file__).parent
WORKERS = 4


def _workers() -> Any:
    if str(TESTS) not in sys.path:  # spawned children import the worker module by name
        sys.path.insert(0, str(TESTS))
    import chroma_workers  # type: ignore[import-not-found]  # a module beside this file

    return chroma_workers


def _run(path: Path, count: int, wait_s: float, *, together: bool) -> list[tuple[int, str, str, list[tuple[str, str]]]]:
    workers = _workers()
    context = multiprocessing.get_context("spawn")
    results = context.Queue()
    barrier = context.Barrier(count) if together else None
    processes = [
        context.Process(target=workers.write_facts, args=(str(path), w, wait_s, barrier, results)) for w in range(count)
    ]
    for process in processes:
        process.start()
    out = [results.get(timeout=300) for _ in processes]
    for process in processes:
        process.join(timeout=60)
        assert process.exitcode == 0
    return sorted(out)


def _assert_all_findable(path: Path, written: list[tuple[int, str, str, list[tuple[str, str]]]]) -> int:
    workers = _workers()
    store = ChromaFactStore.persistent(path / "chroma", config=FactsConfig())
    ledger = FactsLedger(store)
    found = 0
    try:
        for worker, outcome, _, facts in written:
            if outcome != "ok":
                continue
            scope: Scope = workers.scope_of(worker)
            stored = {f.id for f in store.get([fact_id for fact_id, _ in facts], reader=scope)}
            assert stored == {fact_id for fact_id, _ in facts}
            for i, (fact_id, text) in enumerate(facts):
                current = ledger.current(f"batch_{worker}_{i}", scope=scope)
                assert current is not None and current.id == fact_id
                hits = ledger.search(text, scope=scope, k=3)  # raises on any search error
                assert fact_id in [h.fact.id for h in hits]
                found += 1
    finally:
        store.close()
    return found


@pytest.mark.slow
def test_processes_opening_one_embedded_directory_together_are_refused_but_one(tmp_path: Path) -> None:
    results = _run(tmp_path, WORKERS, wait_s=1.0, together=True)
    opened = [r for r in results if r[1] == "ok"]
    refused = [r for r in results if r[1] == "refused"]
    assert len(opened) == 1 and len(refused) == WORKERS - 1
    for _, _, error, facts in refused:
        assert "CTXPLUGIN_CHROMA_URL" in error and "another process" in error and not facts
    assert _assert_all_findable(tmp_path, results) == len(opened[0][3])


@pytest.mark.slow
def test_processes_taking_turns_on_one_embedded_directory_lose_no_fact(tmp_path: Path) -> None:
    # each waits for the one before it to close (a generous wait: they queue, none is refused)
    results = _run(tmp_path, 2, wait_s=240.0, together=False)
    assert [r[1] for r in results] == ["ok"] * 2
    assert _assert_all_findable(tmp_path, results) == 2 * len(results[0][3])
