"""The Chroma clients a fact store opens itself: embedded on disk, or a server's, and closing them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxplugin._chroma import check_server_url, claim_directory, http_client
from ctxplugin.config import FactsConfig
from ctxplugin.facts._chroma_embedding import _translated
from ctxplugin.facts.embedding import HashingEmbedding, embedding_identity

_WRITES: dict[str, list[int]] = {}
_WRITES_LOCK = threading.Lock()


def writes_counter(path: str | Path) -> list[int]:
    """The counts of this process's writes to the embedded directory ``path``, and of those that
    revise what is in force (``[writes, revisions]``, shared by every store on the directory,
    bumped by :func:`bump`). The directory is claimed for one process: no write is missing."""
    with _WRITES_LOCK:
        return _WRITES.setdefault(os.path.realpath(path), [0, 0])


def bump(counter: list[int], *, revised: bool) -> None:
    """Count one more write in ``counter`` (and one more revision when ``revised``)."""
    with _WRITES_LOCK:
        counter[0] += 1
        if revised:
            counter[1] += 1


def _open_persistent(path: str | Path, wait_s: float) -> tuple[Any, Callable[[], None]]:
    """An embedded client on ``path`` (created if missing), and the release of the directory
    claimed for it (see :func:`ctxplugin._chroma.claim_directory`)."""
    import chromadb
    from chromadb.config import Settings

    # absolute: Chroma shares one client per path string in a process, so a relative path
    # opened again from another working directory would reach the first directory's store
    root = Path(path).resolve()
    root.mkdir(parents=True, exist_ok=True)
    release = claim_directory(root, wait_s)
    try:
        with _translated("open the embedded Chroma store"):
            client = chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))
    except BaseException:
        release()
        raise
    return client, release


def _http_connector(
    url: str, headers: dict[str, str] | None, timeout: float, tenant: str | None = None, database: str | None = None
) -> Callable[[], Any]:
    """A function connecting to the Chroma server at ``url`` (see :func:`http_client`); a
    ``ConfigError`` at once when ``url`` is not ``http(s)://host[:port]``."""
    check_server_url(url)
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
