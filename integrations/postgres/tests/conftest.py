"""Fixtures of the Postgres integration tests: the real server on 127.0.0.1:5432 and real
``chroma run`` servers.

Every test gets its own Postgres schema (``ctxplugin_t<session>_<n>``), dropped afterwards;
the session drops whatever its prefix left behind, so parallel runs never collide.
"""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import make_pool
from psycopg import sql
from psycopg_pool import ConnectionPool

from ctxplugin.testing.chroma_server import ChromaServer
from ctxplugin.testing.fault_proxy import FaultProxy

DEFAULT_DSN = "postgresql://postgres@127.0.0.1:5432/test"
_SESSION_PREFIX = f"ctxplugin_t{uuid.uuid4().hex[:8]}"
_counter = itertools.count(1)


def postgres_test_dsn() -> str:
    """The DSN of the test database."""
    return os.environ.get("CTXPLUGIN_TEST_POSTGRES_DSN", DEFAULT_DSN)


def _drop(dsn: str, schemas: list[str]) -> None:
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        for name in schemas:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """The test DSN; skips when Postgres is not reachable."""
    dsn = postgres_test_dsn()
    try:
        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("SELECT 1")
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres not reachable at {dsn} (set CTXPLUGIN_TEST_POSTGRES_DSN): {exc}")
    yield dsn
    with psycopg.connect(dsn, autocommit=True, connect_timeout=5) as conn:
        rows = conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (_SESSION_PREFIX + "%",)
        ).fetchall()
    _drop(dsn, [r[0] for r in rows])


@pytest.fixture
def pg_schema(pg_dsn: str) -> Iterator[str]:
    """A schema name unique to this test (created by the first migration), dropped after it."""
    name = f"{_SESSION_PREFIX}_{next(_counter)}"
    yield name
    _drop(pg_dsn, [name])


@pytest.fixture
def pg_pool(pg_dsn: str) -> Iterator[ConnectionPool]:
    """A pool on the test database, closed after the test."""
    pool = make_pool(pg_dsn, max_size=8, timeout=10.0, name="ctxplugin-test")
    yield pool
    pool.close()


# --- Chroma servers ---------------------------------------------------------------------


@pytest.fixture(scope="session")
def chroma_server(
    tmp_path_factory: pytest.TempPathFactory, launch_chroma: Callable[[Path], ChromaServer]
) -> Iterator[ChromaServer]:
    """One Chroma server for the test session."""
    server = launch_chroma(tmp_path_factory.mktemp("chroma-server") / "data")
    yield server
    server.stop()


@pytest.fixture
def own_chroma_server(tmp_path: Path, launch_chroma: Callable[[Path], ChromaServer]) -> Iterator[ChromaServer]:
    """A Chroma server for one test (which may stop it)."""
    server = launch_chroma(tmp_path / "chroma-data")
    yield server
    server.stop()


class PostgresProxy(FaultProxy):
    """A :class:`FaultProxy` in front of the test server, with the DSN that goes through it."""

    def via(self, dsn: str) -> str:
        """``dsn`` with its host and port this proxy's."""
        info = psycopg.conninfo.conninfo_to_dict(dsn)
        info.update(host="127.0.0.1", port=str(self.port))
        return psycopg.conninfo.make_conninfo(**{k: str(v) for k, v in info.items()})


@pytest.fixture
def proxy(pg_dsn: str) -> Iterator[PostgresProxy]:
    """A fault proxy in front of the test server (``proxy.via(dsn)`` connects through it)."""
    info = psycopg.conninfo.conninfo_to_dict(pg_dsn)
    proxy = PostgresProxy(str(info.get("host") or "127.0.0.1"), int(str(info.get("port") or 5432)))
    with proxy:
        yield proxy
