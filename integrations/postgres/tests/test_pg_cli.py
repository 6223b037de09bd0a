"""The ``ctxplugin-postgres`` command: migrate, status, purge, work."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from ctxplugin_postgres import LATEST, SummaryJobQueue, schema_version
from ctxplugin_postgres.cli import app
from typer.testing import CliRunner

pytestmark = pytest.mark.postgres

runner = CliRunner()


def test_migrate_applies_each_version_once(pg_dsn: str, pg_schema: str) -> None:
    partial = runner.invoke(app, ["migrate", "--dsn", pg_dsn, "--schema", pg_schema, "--target", "1"])
    assert partial.exit_code == 0, partial.output
    assert "applied 1:" in partial.output and schema_version(pg_dsn, schema=pg_schema) == 1

    status = runner.invoke(app, ["status", "--dsn", pg_dsn, "--schema", pg_schema])
    assert status.exit_code == 0 and f"version 1 of {LATEST}" in status.output and "pending [2, 3, 4]" in status.output

    rest = runner.invoke(app, ["migrate"], env={"CTXPLUGIN_POSTGRES_DSN": pg_dsn, "CTXPLUGIN_POSTGRES_SCHEMA": pg_schema})
    assert rest.exit_code == 0, rest.output
    assert [line.split(":")[0] for line in rest.output.splitlines() if line.startswith("applied")] == ["applied 2", "applied 3", "applied 4"]
    again = runner.invoke(app, ["migrate", "--dsn", pg_dsn, "--schema", pg_schema])
    assert again.exit_code == 0 and "applied" not in again.output and f"at version {LATEST}" in again.output


def test_status_and_purge_on_a_current_schema(pg_dsn: str, pg_schema: str) -> None:
    assert runner.invoke(app, ["migrate", "--dsn", pg_dsn, "--schema", pg_schema]).exit_code == 0
    status = runner.invoke(app, ["status", "--dsn", pg_dsn, "--schema", pg_schema])
    assert status.exit_code == 0, status.output
    assert "cas grants" in status.output and "jobs queued" in status.output
    purge = runner.invoke(app, ["purge", "--dsn", pg_dsn, "--schema", pg_schema])
    assert purge.exit_code == 0 and "purged 0 expired grants" in purge.output


def test_work_serves_the_queue_until_idle(pg_dsn: str, pg_schema: str) -> None:
    with SummaryJobQueue.from_dsn(pg_dsn, schema=pg_schema) as queue:
        queue.enqueue("first text to shout")
        queue.enqueue("second  text\nto shout")
        result = runner.invoke(
            app,
            ["work", "--dsn", pg_dsn, "--schema", pg_schema, "--summarizer", "builtins:str.upper", "--exit-when-idle", "--poll", "0.1"],
        )
        assert result.exit_code == 0, result.output
        assert "served 2 jobs" in result.output
        assert queue.summary("second  text\nto shout") == "SECOND TEXT TO SHOUT"


def test_work_finds_a_summarizer_in_the_directory_it_is_run_from(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    # As the docs run it: the installed command, from the project that holds myapp/models.py.
    (tmp_path / "myapp").mkdir()
    (tmp_path / "myapp" / "__init__.py").write_text("")
    (tmp_path / "myapp" / "models.py").write_text("def summary_model(text: str) -> str:\n    return 'gist: ' + text[:5]\n")
    command = Path(sys.executable).parent / "ctxplugin-postgres"
    with SummaryJobQueue.from_dsn(pg_dsn, schema=pg_schema) as queue:
        queue.enqueue("a text to summarize")
        result = subprocess.run(
            [str(command), "work", "--dsn", pg_dsn, "--schema", pg_schema, "--summarizer", "myapp.models:summary_model",
             "--exit-when-idle", "--poll", "0.1"],
            cwd=tmp_path, capture_output=True, text=True, timeout=120,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert queue.summary("a text to summarize") == "gist: a tex"


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["migrate", "--schema", "Bad-Name"], "lower-case"),
        (["migrate", "--target", "99"], "--target"),
        (["work", "--summarizer", "no_colon_here"], "package.module:name"),
        (["work", "--summarizer", "ctxplugin_postgres:nothing_here"], "cannot load"),
    ],
)
def test_usage_errors_exit_2(pg_dsn: str, arguments: list[str], message: str) -> None:
    result = runner.invoke(app, [*arguments, "--dsn", pg_dsn])
    assert result.exit_code == 2
    assert message in result.output


def test_unreachable_database_exits_1() -> None:
    result = runner.invoke(app, ["status", "--dsn", "postgresql://postgres@127.0.0.1:1/none"])
    assert result.exit_code == 1 and "Postgres" in result.output


def test_purge_names_a_refused_connection_at_once(caplog: pytest.LogCaptureFixture) -> None:
    # As `status` and `migrate` do: the cause at once, not a pool's wait and its retries.
    started = time.monotonic()
    result = runner.invoke(app, ["purge", "--dsn", "postgresql://postgres@127.0.0.1:1/none"])
    assert result.exit_code == 1
    assert "Connection refused" in result.output and "retry when the server is reachable" in result.output
    assert time.monotonic() - started < 3
    assert not [r for r in caplog.records if r.name.startswith("psycopg.pool")]
