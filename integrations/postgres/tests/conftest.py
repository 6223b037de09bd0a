"""Fixtures of the Postgres integration tests: the real server on 127.0.0.1:5432 and real
``chroma run`` servers.

Every test gets its own Postgres schema (``ctxplugin_t<session>_<n>``), dropped afterwards;
the session drops whatever its prefix left behind, so parallel runs never collide.
"""

from __future__ import annotations

import itertools
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import make_pool
from psycopg import sql
from psycopg_pool import ConnectionPool

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


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ChromaServer:
    """A ``chroma run`` process on a free loopback port."""

    path: Path
    port: int
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 120.0) -> None:
        binary = Path(sys.executable).parent / "chroma"
        if not binary.exists():
            found = shutil.which("chroma")
            if found is None:
                pytest.skip("the `chroma` command is not installed in this environment")
            binary = Path(found)
        log = open(self.path.parent / f"chroma-{self.port}.log", "ab")  # noqa: SIM115 - lives as long as the server
        env = {**os.environ, "ANONYMIZED_TELEMETRY": "False"}
        self.process = subprocess.Popen(
            [str(binary), "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"chroma run exited with {self.process.returncode}; see {self.path.parent}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=1) as response:
                    if response.status == 200:
                        return
            except OSError:
                time.sleep(0.1)
        self.stop()
        pytest.fail(f"chroma run did not answer on {self.url} within {timeout:g}s")

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ChromaServer]:
    """One Chroma server for the test session."""
    root = tmp_path_factory.mktemp("chroma-server")
    server = ChromaServer(path=root / "data", port=free_port())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def own_chroma_server(tmp_path: Path) -> Iterator[ChromaServer]:
    """A Chroma server for one test (which may stop it)."""
    server = ChromaServer(path=tmp_path / "chroma-data", port=free_port())
    server.start()
    yield server
    server.stop()
