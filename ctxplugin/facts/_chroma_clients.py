"""The Chroma clients a fact store opens itself: embedded on disk, or a server's, and closing them."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxplugin import _chroma
from ctxplugin._chroma import check_server_url, claim_directory, http_client, locked_owner_file
from ctxplugin._sqlite_wal import file_identity
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
    # absolute: Chroma shares one client per path string in a process, so a relative path
    # opened again from another working directory would reach the first directory's store
    root = Path(path).resolve()
    root.mkdir(parents=True, exist_ok=True)
    release = claim_directory(root, wait_s)
    try:
        with _translated("open the embedded Chroma store"):
            client = chromadb_client(root)
    except BaseException:
        release()
        raise
    return client, release


def _database_file(root: Path) -> tuple[int, int] | None:
    return file_identity(root / "chroma.sqlite3")


class EmbeddedDirectory:
    """The directory of an embedded store, to open it again at its path when it was removed or
    replaced under the running process (a cleanup of the data directory, a restore): the client
    left on the removed files would fail every call until the process restarts."""

    def __init__(self, client: Any, root: Path, wait_s: float) -> None:
        self.root, self.wait_s = root, wait_s
        self._files = _database_file(root)
        self._identifier = getattr(client, "_identifier", None)
        self._lock = threading.Lock()

    def reopened(self, client: Any, forget: Callable[[], None]) -> Any | None:
        """A new client on the directory when ``client``'s files are no longer at its path, else
        None; ``forget`` drops what the store kept open of the old one (its collections).

        Chroma shares one client "system" per directory in a process: one another store still
        uses (the answer cache on the same directory) cannot be replaced under it, so ``client``
        is then kept, failing as before.

        Raises:
            StoreInUseError: another process claimed the directory made anew first.
        """
        if _database_file(self.root) == self._files:
            return None
        from chromadb.api.shared_system_client import SharedSystemClient

        with self._lock:
            if _database_file(self.root) == self._files:
                return None
            # this client and its admin client hold two references to the system
            if SharedSystemClient._identifier_to_refcount.get(str(self._identifier), 0) > 2:
                return None
            self.root.mkdir(parents=True, exist_ok=True)
            _renew_claim(self.root, self.wait_s)
            client.close()  # its last user: the system on the removed files stops
            with _translated("open the embedded Chroma store again"):
                fresh = chromadb_client(self.root)
            self._files, self._identifier = _database_file(self.root), getattr(fresh, "_identifier", None)
            bump(writes_counter(self.root), revised=True)  # what was read from the old files is stale
            forget()
            return fresh


def _renew_claim(root: Path, wait_s: float) -> None:
    """Claim ``root`` again when its claim file was removed (with the directory): a lock on the
    removed file keeps no other process out of the directory made anew at the path."""
    try:
        import fcntl  # noqa: F401  (where it is missing, nothing is claimed)
    except ImportError:  # pragma: no cover - Windows
        return
    key = os.path.realpath(root)
    with _chroma._claims_lock:
        claim = _chroma._claims.get(key)
        if claim is None or os.fstat(claim[0]).st_nlink > 0:
            return
        fd = locked_owner_file(key, wait_s)
        os.close(claim[0])
        claim[0] = fd


def chromadb_client(root: Path) -> Any:
    """An embedded Chroma client on ``root``."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))


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
