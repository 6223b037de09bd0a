"""Code blocks of the user guide run as written, with the names they take as given defined.

A block is found by the heading it follows; each runs in a fresh namespace holding only what
the page says comes from the reader's own code (an engine, a scope, messages)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from ctxplugin import ContextEngine, Scope

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_block(page: str, heading: str) -> str:
    """The first ```python block after ``heading`` on ``page``, without lines that stand for
    arguments the reader fills in (``(...)``)."""
    text = (DOCS / page).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    found = re.search(r"```python\n(.*?)```", text[start:], re.S)
    assert found, f"no python block after {heading!r} in {page}"
    return "\n".join(line for line in found.group(1).splitlines() if "(...)" not in line)


def run(code: str, **given: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(given)
    exec(compile(code, "<docs>", "exec"), namespace)
    return namespace


def test_facts_state_api_block_runs_and_replaces_by_key() -> None:
    engine, scope = ContextEngine(), Scope(session_id="docs")
    run(python_block("facts.md", "## State API for callers who know their state"), engine=engine, scope=scope)
    assert engine.facts.current("vendor", scope=scope).text == "Vendor is Globex"  # type: ignore[union-attr]
    assert engine.facts.current("status", scope=scope).text == "Status is cancelled"  # type: ignore[union-attr]


def test_facts_ledger_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the block opens ContextEngine.embedded(path=".ctxplugin")
    done = run(python_block("facts.md", "## Using it"), messages=[HumanMessage("My booking is 4WQ150.")])
    try:
        assert done["hits"][0].fact.text == "Data Team reallocated to Project Beta"
    finally:
        done["engine"].close()
