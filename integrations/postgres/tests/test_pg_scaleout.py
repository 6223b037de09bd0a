"""Eight processes of one deployment share sessions through Postgres and a Chroma server:
nothing they write is lost or duplicated, and each reads what the others wrote."""

from __future__ import annotations

import multiprocessing
import sys
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

pytestmark = [pytest.mark.postgres, pytest.mark.chroma_server, pytest.mark.slow]

TESTS = Path(__file__).resolve().parent
PROCESSES = 8


def test_eight_processes_share_sessions_without_loss_or_duplicates(
    pg_dsn: str, pg_schema: str, chroma_server: Any, tmp_path: Path
) -> None:
    if str(TESTS) not in sys.path:  # spawned children import the worker module by name
        sys.path.insert(0, str(TESTS))
    import pg_workers  # type: ignore[import-not-found]  # a module beside this file, found at run time

    env = pg_workers.deployment_env(
        pg_dsn, pg_schema, chroma_server.url, str(tmp_path / "unused"), f"scale{uuid.uuid4().hex[:12]}"
    )
    # facts are written explicitly; extraction from every output would only add Chroma traffic
    env["CTXPLUGIN_FACTS__EXTRACT"] = "false"
    context = multiprocessing.get_context("spawn")
    with context.Pool(PROCESSES) as pool:
        written_by = pool.map(pg_workers.scaleout_write, [(w, env) for w in range(PROCESSES)])
        everything = [entry for batch in written_by for entry in batch]
        reads = pool.map(pg_workers.scaleout_read, [(w, env, everything) for w in range(PROCESSES)])

    sessions = pg_workers.SESSIONS
    per_process = pg_workers.OUTPUTS_PER_PROCESS
    assert len(everything) == PROCESSES * sessions * per_process
    # every process read every output back exactly, from every session
    assert [r["mismatches"] for r in reads] == [[]] * PROCESSES
    # shared outputs were stored once per session, own outputs once per process and session
    shared = per_process // 2
    own = per_process - shared
    distinct = {(session, ref) for session, ref, _ in everything}
    assert len(distinct) == sessions * (shared + own * PROCESSES)
    with psycopg.connect(pg_dsn) as conn:
        grants = conn.execute(f"SELECT session_id, ref_id FROM {pg_schema}.ctxplugin_cas_grants").fetchall()
        contents = conn.execute(f"SELECT count(*) FROM {pg_schema}.ctxplugin_cas_content").fetchone()
    assert sorted(grants) == sorted(distinct)
    assert contents is not None and contents[0] == shared + own * PROCESSES
    # every process sees each session's facts from all eight writers, once each
    expected_facts = {
        f"shared-{s}": sorted(f"batch_{s}_worker_{w}" for w in range(PROCESSES)) for s in range(sessions)
    }
    assert [r["facts"] for r in reads] == [expected_facts] * PROCESSES
