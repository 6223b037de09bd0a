"""The ``ctxplugin-postgres`` command: ``migrate``, ``status``, ``purge`` and ``work``.

The DSN and schema come from ``--dsn``/``--schema`` or from ``CTXPLUGIN_POSTGRES_DSN`` /
``CTXPLUGIN_POSTGRES_SCHEMA`` (the variables :class:`ctxplugin.ContextConfig` reads).

Exit codes: 0 done; 1 the database refused or failed; 2 a usage error (bad option, schema
name or summarizer path).
"""

from __future__ import annotations

import importlib
import logging
import os
import signal
import sys
import threading
from types import FrameType
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console
from rich.table import Table

from ctxplugin.errors import ConfigError, CtxpluginError
from ctxplugin_postgres._db import DEFAULT_SCHEMA, check_schema, make_pool
from ctxplugin_postgres.cas import PostgresCASStore
from ctxplugin_postgres.jobs import SummaryJobQueue
from ctxplugin_postgres.migrations import LATEST, MIGRATIONS, migrate, schema_version
from ctxplugin_postgres.worker import SummaryWorker

app = typer.Typer(
    name="ctxplugin-postgres",
    help="Postgres stores of ctxplugin: migrations, status, TTL sweeping, summary workers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

Dsn = Annotated[str, typer.Option("--dsn", envvar="CTXPLUGIN_POSTGRES_DSN", help="Postgres DSN", show_default=False)]
Schema = Annotated[
    str, typer.Option("--schema", envvar="CTXPLUGIN_POSTGRES_SCHEMA", help="schema holding the ctxplugin tables")
]


def _fail(message: str, code: int = 1) -> NoReturn:
    Console(stderr=True, highlight=False).print(f"[red]error:[/red] {message}", soft_wrap=True)
    raise typer.Exit(code)


def _schema(schema: str) -> str:
    try:
        return check_schema(schema)
    except ConfigError as exc:
        _fail(str(exc), 2)


@app.command("migrate")
def migrate_command(
    dsn: Dsn,
    schema: Schema = DEFAULT_SCHEMA,
    target: Annotated[int | None, typer.Option(help="stop after this version")] = None,
) -> None:
    """Apply pending migrations (safe to run from several processes at once)."""
    schema = _schema(schema)
    if target is not None and not 1 <= target <= LATEST:
        _fail(f"--target must be between 1 and {LATEST}, got {target}", 2)
    try:
        applied = migrate(dsn, schema=schema, target=target)
        version = schema_version(dsn, schema=schema)
    except CtxpluginError as exc:
        _fail(str(exc))
    names = {m.version: m.name for m in MIGRATIONS}
    console = Console(highlight=False)
    for number in applied:
        console.print(f"applied {number}: {names[number]}")
    console.print(f"schema {schema!r} is at version {version} (latest {LATEST})")


@app.command("status")
def status_command(dsn: Dsn, schema: Schema = DEFAULT_SCHEMA) -> None:
    """Schema version, pending migrations, CAS counts and summary jobs per state."""
    schema = _schema(schema)
    console = Console(highlight=False)
    try:
        version = schema_version(dsn, schema=schema)
    except CtxpluginError as exc:
        _fail(str(exc))
    pending = [m.version for m in MIGRATIONS if m.version > version]
    console.print(f"schema {schema!r}: version {version} of {LATEST}" + (f"; pending {pending}" if pending else ""))
    if pending:
        console.print(f"run `ctxplugin-postgres migrate --schema {schema}` to apply them")
        return
    pool = make_pool(dsn, max_size=1, name="ctxplugin-status")
    try:
        cas = PostgresCASStore(pool, schema=schema, auto_migrate=False)
        queue = SummaryJobQueue(pool, schema=schema, auto_migrate=False)
        stats = cas.stats()
        counts = queue.counts()
    except CtxpluginError as exc:
        _fail(str(exc))
    finally:
        pool.close()
    table = Table("what", "count")
    for name, value in stats.items():
        table.add_row(f"cas {name}", str(value))
    for state, value in counts.items():
        table.add_row(f"jobs {state}", str(value))
    console.print(table)


@app.command("purge")
def purge_command(dsn: Dsn, schema: Schema = DEFAULT_SCHEMA) -> None:
    """Delete expired CAS grants and the contents no grant points to (TTL sweeping)."""
    schema = _schema(schema)
    try:  # a server that refuses is named at once, as by `status`, before a pool waits for it
        schema_version(dsn, schema=schema)
    except CtxpluginError as exc:
        _fail(str(exc))
    store = PostgresCASStore.from_dsn(dsn, schema=schema, auto_migrate=False)
    try:
        removed = store.purge_expired()
    except CtxpluginError as exc:
        _fail(str(exc))
    finally:
        store.close()
    Console(highlight=False).print(f"purged {removed} expired grants")


def load_object(path: str) -> Any:
    """The object named by ``package.module:attribute``.

    A module in the current directory is found, as ``python -m`` finds it: an installed
    command's ``sys.path`` starts with its own ``bin`` directory, not the one it is run from.

    Raises:
        ConfigError: the path is malformed or names nothing importable.
    """
    module_name, _, attribute = path.partition(":")
    if not module_name or not attribute:
        raise ConfigError(f"expected package.module:name, got {path!r}")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        target: Any = importlib.import_module(module_name)
        for part in attribute.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load {path!r}: {exc}") from exc
    return target


@app.command("work")
def work_command(
    dsn: Dsn,
    summarizer: Annotated[
        str, typer.Option(help="package.module:name of a chat model, Runnable or function str -> str", show_default=False)
    ],
    schema: Schema = DEFAULT_SCHEMA,
    lease: Annotated[float, typer.Option(help="seconds a claim holds without a heartbeat")] = 60.0,
    poll: Annotated[float, typer.Option(help="seconds between looks at an empty queue")] = 1.0,
    max_jobs: Annotated[int | None, typer.Option(help="exit after this many jobs")] = None,
    exit_when_idle: Annotated[bool, typer.Option(help="exit when no job is due")] = False,
    worker_id: Annotated[str | None, typer.Option(help="how this worker signs its claims")] = None,
) -> None:
    """Serve the summary queue until interrupted (SIGINT/SIGTERM finish the current job)."""
    schema = _schema(schema)
    if not lease > 0 or not poll > 0:
        _fail("--lease and --poll must be positive", 2)
    try:
        function = load_object(summarizer)
    except ConfigError as exc:
        _fail(str(exc), 2)
    queue = SummaryJobQueue.from_dsn(dsn, schema=schema)
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        worker = SummaryWorker(queue, function, worker_id=worker_id, lease_seconds=lease, poll_seconds=poll)
        served = worker.run(stop=stop, max_jobs=max_jobs, exit_when_idle=exit_when_idle)
    except CtxpluginError as exc:
        _fail(str(exc))
    finally:
        queue.close()
    Console(highlight=False).print(f"served {served} jobs")


def main() -> None:
    """Entry point of the ``ctxplugin-postgres`` script (logs worker events to stderr)."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    app()


__all__ = ["app", "load_object", "main"]
