"""One switch from embedded to server stores: :func:`connect` reads the configuration.

The core never imports an integration at module level (dependencies point inward); the
Postgres stores are imported here, lazily, only when a DSN is configured.
"""

from __future__ import annotations

import importlib
import socket
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ctxplugin._chroma import Heartbeat
from ctxplugin.config import ContextConfig
from ctxplugin.engine import ContextEngine
from ctxplugin.errors import ConfigError, MissingDependencyError, StoreUnavailableError
from ctxplugin.guard import (
    GuardedAnswerCacheStore,
    GuardedCASStore,
    GuardedFactStore,
    GuardedWriteLock,
    StoreGuard,
    run_with_deadline,
)
from ctxplugin.history import BackgroundSummarizer, SummarizerLike

_LOCK_MARGIN_S = 0.5
"""How much sooner than ``stores.timeout`` a facts write gives up waiting for another writer:
a lock held by a busy writer is contention, not an outage, and must not open the circuit."""


def _postgres_backend() -> Any:
    try:
        return importlib.import_module("ctxplugin_postgres")
    except ImportError as exc:
        raise MissingDependencyError(
            "CTXPLUGIN_POSTGRES_DSN is set but the Postgres stores are not installed: "
            "pip install ctxplugin-postgres"
        ) from exc


def connect(
    config: ContextConfig | None = None,
    *,
    path: str | Path | None = None,
    summarizer: SummarizerLike | BackgroundSummarizer | None = None,
) -> ContextEngine:
    """An engine on the stores the configuration names: the deployment switch.

    With neither ``config.postgres_dsn`` nor ``config.chroma_url`` set this is
    :meth:`ContextEngine.embedded` (SQLite CAS and Chroma on disk under ``path``). Each one
    set moves its store to the server: the CAS to Postgres (``CTXPLUGIN_POSTGRES_DSN``, tables
    in ``CTXPLUGIN_POSTGRES_SCHEMA``, migrated on first use; the facts ledger then also takes
    its write locks there, so supersession is serialised across processes), the facts (and the answer cache,
    when enabled) to a Chroma server (``CTXPLUGIN_CHROMA_URL``). The agent's code does not
    change; only the environment does.

    Each server is checked once here. A configuration that cannot work — a malformed DSN, an
    unknown host, a missing database or role, refused credentials, a Chroma host that does not
    resolve — raises :class:`ConfigError` with the cause. A server that is only down (refuses
    connections, does not answer within ``stores.timeout``) does not stop the engine: it starts
    with that server's circuit open and a warning logged, calls pass the original through and
    say so in the report, and a background check picks the server up when it answers.

    Every call to a server store is bounded by ``config.stores.timeout`` (see
    :mod:`ctxplugin.guard` and ``docs/reliability.md``).

    Args:
        config: configuration; read from ``CTXPLUGIN_*`` environment variables when omitted.
        path: directory of the embedded stores (default ``config.path``); unused by server
            stores.
        summarizer: optional gist writer, as for :class:`ContextEngine`.

    Raises:
        MissingDependencyError: a DSN is set but ``ctxplugin-postgres`` is not installed.
        ConfigError: the Chroma URL or the Postgres schema name is malformed, or a server's
            configuration cannot work (the message names the cause; chained to the driver's
            error).
        StoreInUseError: the embedded Chroma directory is open in another process.

    Example:
        >>> import ctxplugin
        >>> engine = ctxplugin.connect()  # doctest: +SKIP
    """
    from ctxplugin.cache import ChromaAnswerCacheStore
    from ctxplugin.cas import SQLiteCASStore
    from ctxplugin.facts import ChromaFactStore, FactsLedger

    config = config or ContextConfig()
    root = Path(path if path is not None else config.path)
    if not config.postgres_dsn and not config.chroma_url:
        return ContextEngine.embedded(root, config, summarizer=summarizer)
    timeout, retry = config.stores.timeout, config.stores.retry_after
    cas: Any
    lock: Any = None
    if config.postgres_dsn:
        backend = _postgres_backend()
        dsn = config.postgres_dsn
        down = _check_postgres(backend, dsn, timeout)
        store = backend.PostgresCASStore.from_dsn(dsn, schema=config.postgres_schema, timeout=timeout)
        pool = store.pool
        postgres = StoreGuard("Postgres", timeout=timeout, retry_after=retry, probe=lambda: backend.ping(dsn, timeout, pool))
        if down is not None:
            postgres.trip(f"Postgres unreachable at connect(): {down}")
        cas = GuardedCASStore(store, postgres)
        # every process of the deployment supersedes facts under the same advisory locks
        lock = GuardedWriteLock(
            backend.PostgresWriteLock(
                store.pool, namespace=config.postgres_schema, wait_s=max(0.1, timeout - _LOCK_MARGIN_S)
            ),
            postgres,
        )
    else:
        root.mkdir(parents=True, exist_ok=True)
        cas = SQLiteCASStore(root / "cas.sqlite3", busy_timeout_ms=int(timeout * 1000))
    facts_store: Any
    answers: Any = None
    if config.chroma_url:
        url = config.chroma_url
        facts_store = ChromaFactStore.http(url, config=config.facts, timeout=timeout)
        beat = Heartbeat(url, timeout)
        chroma = StoreGuard("Chroma server", timeout=timeout, retry_after=retry, probe=beat)
        down = _check_chroma(url, beat)
        if down is not None:
            chroma.trip(f"Chroma server unreachable at connect(): {down}")
        facts_store = GuardedFactStore(facts_store, chroma)
        if config.cache.enabled:
            answers = GuardedAnswerCacheStore(ChromaAnswerCacheStore.http(url, timeout=timeout), chroma)
    else:
        root.mkdir(parents=True, exist_ok=True)
        facts_store = ChromaFactStore.persistent(root / "chroma", config=config.facts, wait_s=timeout)
        if config.cache.enabled:
            answers = ChromaAnswerCacheStore.persistent(root / "chroma", wait_s=timeout)
    engine = ContextEngine(
        config=config,
        cas=cas,
        facts=FactsLedger(facts_store, config.facts, lock=lock),
        summarizer=summarizer,
        answer_cache=answers,
    )
    if not config.postgres_dsn or not config.chroma_url:
        engine.path = root  # a store is still on disk here
    return engine


def _check_postgres(backend: Any, dsn: str, timeout: float) -> str | None:
    """None when Postgres answers or is only slow; the cause when it refuses connections.

    A check that runs out of time says nothing certain (a loaded machine is slow too), so it
    does not open the circuit: the first call that times out does.

    Raises:
        ConfigError: the DSN cannot work (see ``ctxplugin_postgres.check_server``).
    """
    try:
        cause: str | None = run_with_deadline(lambda: backend.check_server(dsn, timeout), timeout, "Postgres check")
    except StoreUnavailableError:
        return None
    return None if cause is None or "timeout expired" in cause else cause


def _check_chroma(url: str, beat: Heartbeat) -> str | None:
    """None when the Chroma server answers or is only slow; the cause when it refuses
    connections.

    Raises:
        ConfigError: the URL is malformed or its host name does not resolve.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"Chroma server URL must look like http://host:port, got {url!r}")
    try:
        socket.getaddrinfo(parts.hostname, parts.port or 8000, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_AGAIN:  # "try again" is a resolver outage, not a wrong name
            raise ConfigError(f"CTXPLUGIN_CHROMA_URL ({url}) cannot be used: host {parts.hostname!r}: {exc}") from exc
        return f"host {parts.hostname!r} does not resolve right now: {exc}"
    try:
        beat()
    except StoreUnavailableError as exc:
        return None if isinstance(exc.__cause__, TimeoutError) else str(exc)
    return None


__all__ = ["connect"]
