"""One switch from embedded to server stores: :func:`connect` reads the configuration.

The core never imports an integration at module level (dependencies point inward); the
Postgres stores are imported here, lazily, only when a DSN is configured.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from ctxplugin.config import ContextConfig
from ctxplugin.engine import ContextEngine
from ctxplugin.errors import MissingDependencyError
from ctxplugin.history import BackgroundSummarizer, SummarizerLike


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

    Server stores connect on first use, so an engine can be built while a server is down;
    calls made then pass the original through and say so in the report.

    Args:
        config: configuration; read from ``CTXPLUGIN_*`` environment variables when omitted.
        path: directory of the embedded stores (default ``config.path``); unused by server
            stores.
        summarizer: optional gist writer, as for :class:`ContextEngine`.

    Raises:
        MissingDependencyError: a DSN is set but ``ctxplugin-postgres`` is not installed.
        ConfigError: the Chroma URL or the Postgres schema name is malformed.

    Example:
        >>> import ctxplugin
        >>> engine = ctxplugin.connect()  # doctest: +SKIP
    """
    from ctxplugin.cache import ChromaAnswerCacheStore
    from ctxplugin.cas import SQLiteCASStore
    from ctxplugin.facts import ChromaFactStore, FactsLedger, WriteLock

    config = config or ContextConfig()
    root = Path(path if path is not None else config.path)
    if not config.postgres_dsn and not config.chroma_url:
        return ContextEngine.embedded(root, config, summarizer=summarizer)
    lock: WriteLock | None = None
    if config.postgres_dsn:
        backend = _postgres_backend()
        cas = backend.PostgresCASStore.from_dsn(config.postgres_dsn, schema=config.postgres_schema)
        # every process of the deployment supersedes facts under the same advisory locks
        lock = backend.PostgresWriteLock(cas.pool, namespace=config.postgres_schema)
    else:
        root.mkdir(parents=True, exist_ok=True)
        cas = SQLiteCASStore(root / "cas.sqlite3")
    answers: ChromaAnswerCacheStore | None = None
    if config.chroma_url:
        store = ChromaFactStore.http(config.chroma_url, config=config.facts)
        if config.cache.enabled:
            answers = ChromaAnswerCacheStore.http(config.chroma_url)
    else:
        root.mkdir(parents=True, exist_ok=True)
        store = ChromaFactStore.persistent(root / "chroma", config=config.facts)
        if config.cache.enabled:
            answers = ChromaAnswerCacheStore.persistent(root / "chroma")
    engine = ContextEngine(
        config=config, cas=cas, facts=FactsLedger(store, config.facts, lock=lock), summarizer=summarizer, answer_cache=answers
    )
    if not config.postgres_dsn or not config.chroma_url:
        engine.path = root  # a store is still on disk here
    return engine


__all__ = ["connect"]
