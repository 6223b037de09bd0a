"""A DSN's own server options (``options=-c ...``, or ``PGOPTIONS``) reach the server beside the
statement timeout the stores add, which bounds every statement whatever they say."""

from __future__ import annotations

import psycopg
import pytest
from ctxplugin_postgres import PostgresCASStore, check_server

from ctxplugin.errors import ConfigError

pytestmark = pytest.mark.postgres


def _settings(store: PostgresCASStore, *names: str) -> list[str]:
    with store.pool.connection() as conn:
        return [str(conn.execute(f"SHOW {name}").fetchone()[0]) for name in names]  # type: ignore[index]


def test_the_options_of_the_dsn_are_kept(pg_dsn: str, pg_schema: str) -> None:
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, options="-c lock_timeout=1234 -c statement_timeout=60000")
    store = PostgresCASStore.from_dsn(dsn, schema=pg_schema, timeout=2.0)
    try:
        assert _settings(store, "lock_timeout", "statement_timeout") == ["1234ms", "2s"]
    finally:
        store.close()


def test_options_from_pgoptions_are_kept(pg_dsn: str, pg_schema: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PGOPTIONS", "-c lock_timeout=4321")
    store = PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema, timeout=2.0)
    try:
        assert _settings(store, "lock_timeout", "statement_timeout") == ["4321ms", "2s"]
    finally:
        store.close()


def test_the_server_check_connects_with_the_options_of_the_dsn(pg_dsn: str) -> None:
    # an option the server rejects is seen by the check as the stores would see it
    dsn = psycopg.conninfo.make_conninfo(pg_dsn, options="-c ctxplugin_no_such_setting=1")
    try:
        cause = check_server(dsn, 2.0)
    except ConfigError as exc:
        cause = str(exc)
    assert cause is not None and "ctxplugin_no_such_setting" in cause
