"""One switch from embedded to server stores: :func:`connect` reads the configuration."""

from __future__ import annotations

from pathlib import Path

from ctxplugin.config import ContextConfig
from ctxplugin.engine import ContextEngine
from ctxplugin.history import BackgroundSummarizer, SummarizerLike


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
    resolve — raises :class:`ConfigError` with the cause. A server that is only down does not
    stop the engine. One that refuses connections starts with its circuit open and a warning
    logged: calls pass the original through and say so in the report, and a background check
    picks the server up when it answers. One that does not answer within ``stores.timeout``
    (which may only be slow) starts with its circuit closed: the first step that calls it waits
    ``stores.timeout`` and opens it.

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
    return ContextEngine.from_config(config, path=path, summarizer=summarizer)


__all__ = ["connect"]
