"""The stores an engine runs on, as the configuration names them: embedded (SQLite CAS and
Chroma on disk) or on servers (Postgres, a Chroma server) behind a :class:`~ctxplugin.guard.StoreGuard`.

The core never imports an integration at module level (dependencies point inward); the
Postgres stores are imported here, lazily, only when a DSN is configured.
"""

from __future__ import annotations

import importlib
import os
import socket
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from ctxplugin._chroma import (
    CHECK_HEADERS,
    REFUSED,
    Heartbeat,
    HeartbeatStatusError,
    check_server_url,
    tls_mismatch,
)
from ctxplugin._secret_headers import revealed
from ctxplugin._server_url import shown_url, with_credentials
from ctxplugin._sync_stores import sync_store
from ctxplugin.cache import AnswerCacheStore, ChromaAnswerCacheStore
from ctxplugin.cas import CASStore, SQLiteCASStore
from ctxplugin.cas._bounded import BoundedCASStore
from ctxplugin.config import ContextConfig
from ctxplugin.errors import (
    ConfigError,
    ConfigWarning,
    MissingDependencyError,
    StoreUnavailableError,
)
from ctxplugin.facts import ChromaFactStore, FactsLedger
from ctxplugin.guard import (
    GuardedAnswerCacheStore,
    GuardedCASStore,
    GuardedFactStore,
    GuardedWriteLock,
    StoreGuard,
    run_with_deadline,
)

_LOCK_MARGIN_S = 0.5
"""How much sooner than ``stores.timeout`` a facts write gives up waiting for another writer:
a lock held by a busy writer is contention, not an outage, and must not open the circuit."""


def _postgres_backend() -> Any:
    try:
        return importlib.import_module("ctxplugin_postgres")
    except ImportError as exc:
        raise MissingDependencyError(
            "CTXPLUGIN_POSTGRES_DSN is set but the Postgres stores are not installed: install "
            "ctxplugin-postgres from the ctxplugin repository, which is not on PyPI "
            "(pip install <path to the ctxplugin clone>/integrations/postgres, or its wheel)"
        ) from exc


def given_config(config: object) -> ContextConfig:
    """The configuration a constructor was given: ``config`` itself, or the one the
    ``CTXPLUGIN_*`` environment variables set when it is ``None``.

    Raises:
        ConfigError: ``config`` is something else (settings as a dict: build the config first).
    """
    if config is None:
        return ContextConfig()
    if isinstance(config, ContextConfig):
        return config
    hint = ": build one with ContextConfig(**settings)"
    raise ConfigError(f"config must be a ContextConfig, got {type(config).__name__}{hint}")


@dataclass(frozen=True)
class Stores:
    """What an engine is built on.

    Attributes:
        cas: the tool-output store.
        facts: the facts ledger on its store.
        answers: the answer cache's store (None when the cache is off).
        path: the directory of the stores kept on disk (None when every store is on a server).
        guards: the guards in front of the servers, stopped on :meth:`close`.
    """

    cas: CASStore
    facts: FactsLedger
    answers: AnswerCacheStore | None
    path: Path | None
    guards: tuple[StoreGuard, ...] = ()

    def close(self) -> None:
        """Close every store (connections, Chroma clients and the claim on the embedded
        directory), then stop the guards' background checks and wait for their threads."""
        for store in (self.cas, self.facts.store, self.answers):
            closer = getattr(store, "close", None)
            if callable(closer):
                closer()
        for guard in self.guards:
            guard.stop()


def store_root(path: str | Path) -> Path:
    """The directory of the embedded stores named by ``path``, created if missing.

    Raises:
        ConfigError: ``path`` is empty (which would put the stores in the working directory),
            or it cannot be a directory this process writes (a file is there, no permission, a
            name that is not UTF-8 text).
    """
    if not str(path).strip():
        raise ConfigError("the embedded store path is empty; pass path= (or set CTXPLUGIN_PATH to) a directory")
    # ``~`` is the home directory, as a shell reads it (a quoted CTXPLUGIN_PATH, a path in code),
    # never a directory named "~" in the working one; stores opened later must not follow a chdir
    root = Path(path).expanduser().absolute()
    try:
        str(root).encode("utf-8")  # Chroma and SQLite take UTF-8 paths
    except UnicodeEncodeError as exc:
        raise ConfigError(
            f"the embedded store directory {str(root)!r} cannot be used: its name holds bytes that are not "
            "UTF-8 text, which Chroma cannot open; pass path= (or set CTXPLUGIN_PATH to) a directory with a UTF-8 name"
        ) from exc
    try:
        root.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ConfigError(
            f"the embedded store directory {str(root)!r} cannot be used: {exc}; "
            "pass path= (or set CTXPLUGIN_PATH to) a directory this process may write"
        ) from exc
    if not os.access(root, os.W_OK | os.X_OK):
        raise ConfigError(
            f"the embedded store directory {str(root)!r} is not writable by this process; "
            "pass path= (or set CTXPLUGIN_PATH to) a directory this process may write"
        )
    return root


def embedded_cas(root: Path, timeout: float) -> CASStore:
    """The SQLite CAS under ``root``: SQLite's busy timeout bounds a wait for another writer,
    and a deadline every call (one blocked on a hung disk or mount)."""
    return BoundedCASStore(SQLiteCASStore(root / "cas.sqlite3", busy_timeout_ms=int(timeout * 1000)), timeout=timeout)


def embedded_stores(root: str | Path, config: ContextConfig, *, asked: bool = False) -> Stores:
    """SQLite CAS and Chroma on disk under ``root`` (created if missing); ``asked``: by
    ``ContextEngine.embedded``, which builds them whatever servers ``config`` names.

    Raises:
        ConfigError: ``root`` cannot be used (see :func:`store_root`).

    Warns:
        ConfigWarning: ``asked`` while ``config`` names a Postgres DSN or a Chroma server, which
            only :func:`ctxplugin.connect` uses.
    """
    servers = [
        name
        for name, given in (
            ("a Postgres DSN (CTXPLUGIN_POSTGRES_DSN)", config.postgres_dsn),
            ("a Chroma server (CTXPLUGIN_CHROMA_URL)", config.chroma_url),
        )
        if given
    ]
    if asked and servers:
        warnings.warn(
            f"ContextEngine.embedded() keeps every store on disk under its path; the configuration names {' and '.join(servers)}, "
            "which it does not use: build the engine with ctxplugin.connect() or ContextEngine.from_config() to use "
            f"{'them' if len(servers) > 1 else 'it'}",
            ConfigWarning,
            stacklevel=3,
        )
    root = store_root(root)
    wait = config.stores.timeout
    cas = embedded_cas(root, wait)
    store = ChromaFactStore.persistent(root / "chroma", config=config.facts, wait_s=wait)
    answers = ChromaAnswerCacheStore.persistent(root / "chroma", wait_s=wait) if config.cache.enabled else None
    return Stores(cas=cas, facts=FactsLedger(store, config.facts), answers=answers, path=root)


def open_stores(config: ContextConfig, root: str | Path) -> Stores:
    """The stores ``config`` names: on the servers it sets (``postgres_dsn``, ``chroma_url``),
    the others embedded under ``root``. See :func:`ctxplugin.connect` for what is checked and
    what a server that is down does.

    Raises:
        MissingDependencyError: a DSN is set but ``ctxplugin-postgres`` is not installed.
        ConfigError: a server's configuration cannot work.
        StoreInUseError: the embedded Chroma directory is open in another process.
    """
    if not config.postgres_dsn and not config.chroma_url:
        return embedded_stores(root, config)
    if config.chroma_url:  # before anything is opened
        check_server_url(config.chroma_url, "Chroma server URL (chroma_url, CTXPLUGIN_CHROMA_URL)")
    timeout, retry = config.stores.timeout, config.stores.retry_after
    cas: Any
    lock: Any = None
    guards: list[StoreGuard] = []
    if config.postgres_dsn:
        backend = _postgres_backend()
        dsn = config.postgres_dsn
        down = _check_postgres(backend, dsn, timeout)
        store = backend.PostgresCASStore.from_dsn(dsn, schema=config.postgres_schema, timeout=timeout)
        pool = store.pool
        postgres = StoreGuard("Postgres", timeout=timeout, retry_after=retry, probe=lambda: backend.ping(dsn, timeout, pool))
        guards.append(postgres)
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
        cas = embedded_cas(store_root(root), timeout)
    facts_store: Any
    answers: Any = None
    if config.chroma_url:
        # a user and password in the URL are sent as Authorization: Basic; no message shows them
        url, headers = with_credentials(config.chroma_url, revealed(config.chroma_headers))
        tenant, database = config.chroma_tenant, config.chroma_database
        facts_store = ChromaFactStore.http(
            url, config=config.facts, timeout=timeout, headers=headers, tenant=tenant, database=database
        )
        beat = Heartbeat(url, timeout, headers)
        chroma = StoreGuard("Chroma server", timeout=timeout, retry_after=retry, probe=beat)
        guards.append(chroma)
        down = _check_chroma(url, beat, config)
        if down is not None:
            chroma.trip(f"Chroma server unreachable at connect(): {down}")
        facts_store = GuardedFactStore(facts_store, chroma)
        if config.cache.enabled:
            answers = GuardedAnswerCacheStore(
                ChromaAnswerCacheStore.http(url, timeout=timeout, headers=headers, tenant=tenant, database=database), chroma
            )
    else:
        chroma_path = store_root(root) / "chroma"
        facts_store = ChromaFactStore.persistent(chroma_path, config=config.facts, wait_s=timeout)
        if config.cache.enabled:
            answers = ChromaAnswerCacheStore.persistent(chroma_path, wait_s=timeout)
    return Stores(
        cas=cas,
        facts=FactsLedger(facts_store, config.facts, lock=lock),
        answers=answers,
        path=Path(root) if not config.postgres_dsn or not config.chroma_url else None,  # a store is still on disk
        guards=tuple(guards),
    )


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


def _check_chroma(url: str, beat: Heartbeat, config: ContextConfig) -> str | None:
    """None when the Chroma server answers or is only slow; the cause when it refuses
    connections.

    Raises:
        ConfigError: the URL's host name does not resolve, its scheme does not
            match the server (TLS to a server without it, a certificate refused), what answers
            there has no Chroma heartbeat (HTTP 404), or the server refuses the credentials or
            lacks the tenant or database configured (see :func:`_check_access`).
    """
    parts = urlsplit(url)
    try:
        socket.getaddrinfo(parts.hostname, parts.port or 8000, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        if exc.errno != socket.EAI_AGAIN:  # "try again" is a resolver outage, not a wrong name
            raise ConfigError(f"CTXPLUGIN_CHROMA_URL ({url}) cannot be used: host {parts.hostname!r}: {exc}") from exc
        return f"host {parts.hostname!r} does not resolve right now: {exc}"
    try:
        beat()
    except StoreUnavailableError as exc:
        if exc.__cause__ is not None and tls_mismatch(exc.__cause__):
            raise ConfigError(f"CTXPLUGIN_CHROMA_URL ({url}) cannot be used: {exc}") from exc
        if isinstance(exc, HeartbeatStatusError) and exc.status in REFUSED:
            raise ConfigError(_refused(url, exc.status, config)) from exc
        if isinstance(exc, HeartbeatStatusError) and exc.status == 404:
            raise ConfigError(
                f"CTXPLUGIN_CHROMA_URL ({url}) cannot be used: {exc}: no Chroma server there, "
                "or one without the /api/v2 heartbeat"
            ) from exc
        return None if isinstance(exc.__cause__, TimeoutError) else str(exc)
    return _check_access(url, beat, config)


def _check_access(url: str, beat: Heartbeat, config: ContextConfig) -> str | None:
    """Ask the server who the caller is, then for the tenant and database configured, as
    Chroma's client does when it connects: a server (or a gateway in front of it) may answer
    the heartbeat to anyone. None when all is found, or the server is only slow; the cause
    when it stopped answering.

    Raises:
        ConfigError: the server refuses the credentials (HTTP 401 or 403), or has no such
            tenant or database (HTTP 404).
    """
    from chromadb.config import DEFAULT_TENANT

    tenant, database = config.chroma_tenant, config.chroma_database
    tenant_path = f"/api/v2/tenants/{quote(tenant or DEFAULT_TENANT, safe='')}"
    asks: list[tuple[str, str, str | None]] = [("/api/v2/auth/identity", "", None)]
    if tenant is not None:
        asks.append((tenant_path, f" for tenant {tenant!r}", f"CTXPLUGIN_CHROMA_TENANT ({tenant!r})"))
    if database is not None:
        path = f"{tenant_path}/databases/{quote(database, safe='')}"
        asks.append((path, f" for database {database!r}", f"CTXPLUGIN_CHROMA_DATABASE ({database!r})"))
    for path, what, setting in asks:
        try:
            status = beat.status(path)
        except StoreUnavailableError as exc:
            return None if isinstance(exc.__cause__, TimeoutError) else str(exc)
        if status in REFUSED:
            raise ConfigError(_refused(url, status, config, what))
        if status == 404 and setting is not None:
            raise ConfigError(f"{setting} cannot be used: the Chroma server at {url} answers HTTP 404, not found")
    return None


def _refused(url: str, status: int, config: ContextConfig, what: str = "") -> str:
    """What to check when the server at ``url`` refuses the credentials (header names only:
    their values are secrets, as is the password of the URL)."""
    parts = urlsplit(config.chroma_url or "")
    if parts.username or parts.password:
        url = shown_url(config.chroma_url or url)
        sent = "the user and password of the URL (CTXPLUGIN_CHROMA_URL) are sent as Authorization: Basic"
        sent += f", with the headers {', '.join(sorted(config.chroma_headers))}" if config.chroma_headers else ""
    elif config.chroma_headers:
        sent = f"the headers sent are {', '.join(sorted(config.chroma_headers))}"
    else:
        sent = "none is set; the server wants a token, e.g. CTXPLUGIN_CHROMA_HEADERS='{\"x-chroma-token\": \"...\"}'"
    return f"the Chroma server at {url} refused the credentials (HTTP {status}){what}: {CHECK_HEADERS}; {sent}"


__all__ = ["Stores", "embedded_stores", "open_stores", "store_root", "sync_store"]
