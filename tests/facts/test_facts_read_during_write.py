"""A search made while a fact is being replaced, by another thread of the process, never shows
the old fact and the new one as both current.

The store below is the real store with a probe: after each request that writes facts it has
another thread search the ledger, so the search lands exactly between two requests of one
replacement when a replacement takes two (the new fact added, then the old one marked).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.scope import Scope

S = Scope(session_id="s1")


def _probed(base: type[Any]) -> type[Any]:
    """``base`` whose write requests (those it has of ``add``, ``update`` and ``write``) each
    run ``store.probe`` in another thread once sent, and wait for it."""

    def after(name: str) -> Callable[..., None]:
        def sent(self: Any, *args: Any) -> None:
            getattr(base, name)(self, *args)
            if self.probe is not None:
                reader = threading.Thread(target=self.probe)
                reader.start()
                reader.join()

        return sent

    methods: dict[str, Any] = {name: after(name) for name in ("add", "update", "write") if hasattr(base, name)}
    return type(f"Probed{base.__name__}", (base,), {"probe": None, **methods})


@pytest.fixture(params=["memory", "chroma"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "memory":
        yield _probed(MemoryFactStore)()
        return
    with _probed(ChromaFactStore).persistent(tmp_path) as chroma:
        yield chroma


def test_a_search_during_a_replacement_shows_one_current_fact(store: Any) -> None:
    ledger = FactsLedger(store)
    ledger.write("The budget is 100 dollars", key="budget", scope=S)
    seen: list[list[str]] = []

    def probe() -> None:
        hits = ledger.search("what is the budget", scope=S)
        seen.append([hit.fact.text for hit in hits if hit.fact.key == "budget"])

    store.probe = probe
    ledger.write("The budget is 250 dollars", key="budget", scope=S)
    assert seen, "the probe ran"
    assert all(len(texts) == 1 for texts in seen), f"searches during the replacement saw {seen}"
    assert seen[-1] == ["The budget is 250 dollars"]


def test_a_search_during_an_ingest_that_replaces_a_fact_shows_one_current_fact(store: Any) -> None:
    ledger = FactsLedger(store)
    ledger.ingest([HumanMessage("The budget is 100 dollars.", id="m1")], scope=S)
    seen: list[list[str]] = []

    def probe() -> None:
        hits = ledger.search("what is the budget", scope=S)
        seen.append([hit.fact.text for hit in hits if "budget" in hit.fact.text.lower()])

    store.probe = probe
    ledger.ingest([HumanMessage("The budget is 250 dollars now.", id="m2")], scope=S)
    assert seen, "the probe ran"
    assert all(len(texts) == 1 for texts in seen), f"searches during the ingest saw {seen}"
    assert "250" in seen[-1][0]
