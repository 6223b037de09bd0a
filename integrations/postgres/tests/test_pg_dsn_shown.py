"""A DSN libpq cannot parse is refused without showing the password in it."""

from __future__ import annotations

import traceback

import pytest
from ctxplugin_postgres import check_dsn
from ctxplugin_postgres.cli import app
from ctxplugin_postgres.migrations import schema_version
from typer.testing import CliRunner

from ctxplugin.errors import ConfigError, StoreError


@pytest.mark.parametrize(
    "dsn",
    [
        "host=db user=app password=s3 PASSWORDPART dbname=ctx",  # an unquoted space: libpq quotes the word after it
        "postgresql://app:s3%ZZPASSWORDPART@db/ctx",  # a bad escape: libpq quotes the whole token
    ],
)
def test_a_dsn_libpq_cannot_parse_is_refused_without_its_password(dsn: str) -> None:
    with pytest.raises(ConfigError, match="not a Postgres connection string") as raised:
        check_dsn(dsn)
    shown = "".join(traceback.format_exception(raised.value))  # the chain a logged traceback shows
    assert "PASSWORDPART" not in shown


@pytest.mark.parametrize("dsn", ["host=127.0.0.1 password=s3 PASSWORDPART dbname=x", "postgresql://u:s3%ZZPASSWORDPART@127.0.0.1/db"])
def test_the_cli_refuses_such_a_dsn_without_its_password(dsn: str) -> None:
    result = CliRunner().invoke(app, ["status", "--dsn", dsn])
    assert result.exit_code != 0 and "not a Postgres connection string" in result.output
    assert "PASSWORDPART" not in result.output
    with pytest.raises(StoreError) as raised:
        schema_version(dsn)
    assert "PASSWORDPART" not in "".join(traceback.format_exception(raised.value))
