"""A worker killed (SIGKILL) while it writes the facts of a tool output: the worker that takes
the conversation over ends with every fact of that output, as if nobody had been killed."""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server, pytest.mark.slow]

TESTS = Path(__file__).resolve().parent


def test_a_worker_killed_while_writing_facts_leaves_none_of_the_output_unread(
    pg_dsn: str, pg_schema: str, chroma_server: Any, tmp_path: Path
) -> None:
    if str(TESTS) not in sys.path:  # spawned children import the worker module by name
        sys.path.insert(0, str(TESTS))
    import pg_workers  # type: ignore[import-not-found]  # a module beside this file, found at run time

    import ctxplugin

    env = pg_workers.deployment_env(pg_dsn, pg_schema, chroma_server.url, str(tmp_path / "unused"), f"kill{uuid.uuid4().hex[:12]}")
    marker = tmp_path / "hanging"
    process = multiprocessing.get_context("spawn").Process(target=pg_workers.capture_then_hang, args=((env, str(marker), 3),))
    process.start()
    deadline = time.monotonic() + 120
    while not marker.exists() and process.is_alive() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "the worker neither wrote facts nor finished"
    os.kill(int(marker.read_text().split()[0]), 9)  # SIGKILL: no cleanup of any kind
    process.join(30)

    scope = Scope(session_id="killed", user_id="team")
    output = ToolMessage(content=pg_workers.RESERVATIONS, tool_call_id="call-1", name="get_reservations")
    expected = sorted(f.text for f in FactsLedger(MemoryFactStore()).ingest([output], scope=scope))
    config = ContextConfig(
        postgres_dsn=pg_dsn, postgres_schema=pg_schema, chroma_url=chroma_server.url,
        facts={"collection": env["CTXPLUGIN_FACTS__COLLECTION"]},
    )
    engine = ctxplugin.connect(config)
    try:  # the next worker is given the same output: the killed one captured it (a retried tool call)
        engine.capture_tool_result(output, scope=scope)
        stored = sorted(f.text for f in engine.facts.store.find(FactQuery(reader=scope, valid=True)))
    finally:
        pg_workers.close(engine)
    assert len(expected) > 3
    assert stored == expected
