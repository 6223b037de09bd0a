"""The Chroma clients a fact store opens itself: embedded on disk, or a server's, and closing them."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxplugin._chroma import http_client
from ctxplugin._server_url import client_settings
from ctxplugin.config import FactsConfig
from ctxplugin.facts._chroma_directory import EmbeddedDirectory, claim_embedded
from ctxplugin.facts.embedding import HashingEmbedding, embedding_identity


def _open_persistent(path: str | Path, wait_s: float) -> tuple[Any, Callable[[], None], EmbeddedDirectory]:
    """An embedded client on ``path`` (created if missing), the release of the directory claimed
    for it (see :func:`claim_embedded`) and the directory, which opens it again if removed."""
    directory, release = claim_embedded(path, wait_s)
    try:
        return directory.open(), release, directory
    except BaseException:
        release()
        raise


def _http_connector(
    url: str, headers: dict[str, str] | None, timeout: float, tenant: str | None = None, database: str | None = None
) -> Callable[[], Any]:
    """A function connecting to the Chroma server at ``url`` (see :func:`http_client`); a
    ``ConfigError`` at once when ``url`` is not ``http(s)://host[:port]``, a header cannot be sent or
    ``timeout`` is no positive finite number, or the URL's user and password come with an
    ``Authorization`` header too (see :func:`~ctxplugin._server_url.client_settings`)."""
    url, headers = client_settings(url, headers, timeout)
    # imported here, not on first use: importing chromadb takes seconds on a busy machine,
    # which the first call's deadline is not meant to cover
    import chromadb  # noqa: F401

    def connect() -> Any:
        return http_client(url, timeout, headers, tenant, database)

    return connect


def legacy_embedding(client: Any, config: FactsConfig, base: str) -> tuple[HashingEmbedding, str] | None:
    """``embedding="auto"``: the hashing embedding and its collection base name when ``client``
    holds this deployment's facts written with it (its collection exists, none for ``base``)."""
    legacy = HashingEmbedding(config.embedding_dims)
    legacy_base = f"{config.collection}_{embedding_identity(legacy)}"
    names = {str(getattr(c, "name", c)) for c in client.list_collections()}

    def held(name_base: str) -> bool:
        return any(name == name_base or name.startswith(name_base + "_t") for name in names)

    return (legacy, legacy_base) if held(legacy_base) and not held(base) else None


def _close_http_session(client: Any) -> None:
    """Close the HTTP connection pools of a server client and of its internal admin client.

    Each Chroma ``HttpClient`` has its own pools (nothing is shared between clients) and
    ``close()`` leaves them open, so their sockets would linger until the process exits.
    """
    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if session is not None and callable(getattr(session, "close", None)):
            session.close()
