"""An embedded Chroma directory as every store of this process on it sees it: its clients, opened
again at its path when the directory was removed or replaced under the running process."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxplugin import _chroma
from ctxplugin._chroma import claim_directory, locked_owner_file
from ctxplugin._sqlite_wal import file_identity
from ctxplugin.errors import ConfigError
from ctxplugin.facts._chroma_embedding import _translated

_OPEN: dict[str, EmbeddedDirectory] = {}
_OPEN_LOCK = threading.Lock()
_WRITES: dict[str, list[int]] = {}
_WRITES_LOCK = threading.Lock()


def writes_counter(path: str | Path) -> list[int]:
    """The counts of this process's writes to the embedded directory ``path``, and of those that
    revise what is in force (``[writes, revisions]``, shared by every store on the directory,
    bumped by :func:`bump`). The directory is claimed for one process: no write is missing."""
    with _WRITES_LOCK:
        return _WRITES.setdefault(os.path.realpath(path), [0, 0])


def bump(counter: list[int] | None, *, revised: bool) -> None:
    """Count one more write in ``counter`` (and one more revision when ``revised``); None counts nothing."""
    if counter is None:
        return
    with _WRITES_LOCK:
        counter[0] += 1
        if revised:
            counter[1] += 1


def chromadb_client(root: Path) -> Any:
    """An embedded Chroma client on ``root``."""
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(root), settings=Settings(anonymized_telemetry=False))


def claim_embedded(path: str | Path, wait_s: float) -> tuple[EmbeddedDirectory, Callable[[], None]]:
    """The embedded directory ``path`` (created if missing) for one more store of this process,
    claimed for the process (see :func:`ctxplugin._chroma.claim_directory`), and its release,
    which the store calls when it closes, after :meth:`EmbeddedDirectory.close` of its client.

    Raises:
        StoreInUseError: another process has the directory open.
        ConfigError: ``path`` is empty (Chroma would fill the working directory) or cannot be
            a directory (a file is there, a NUL in it...).
    """
    if not str(path).strip():
        raise ConfigError("the embedded Chroma path is empty; pass a directory (it is created if missing)")
    # absolute: Chroma shares one client per path string in a process, so a relative path
    # opened again from another working directory would reach the first directory's store
    try:
        root = Path(path).resolve()
        root.mkdir(parents=True, exist_ok=True)
    except (OSError, ValueError) as exc:  # ValueError: a NUL in the path
        raise ConfigError(f"the embedded Chroma directory {str(path)!r} cannot be used: {exc}") from exc
    release = claim_directory(root, wait_s)
    with _OPEN_LOCK:
        directory = _OPEN.get(str(root))
        if directory is None:
            directory = _OPEN[str(root)] = EmbeddedDirectory(root, wait_s)
        directory._users += 1

    left = False

    def released() -> None:
        nonlocal left
        with _OPEN_LOCK:
            if left:
                return
            left = True
            directory._users -= 1
            if directory._users <= 0 and _OPEN.get(str(root)) is directory:
                del _OPEN[str(root)]
        release()

    return directory, released


def _database_file(root: Path) -> tuple[int, int] | None:
    return file_identity(root / "chroma.sqlite3")


class EmbeddedDirectory:
    """The directory of the embedded stores of this process on one path (the facts and the answer
    cache share one), to open it again at its path when it was removed or replaced under the
    running process (a cleanup of the data directory, a restore): a client left on the removed
    files would fail every call until the process restarts.

    Chroma shares one client "system" per directory in a process, which stops only when every
    client on it is closed: so the first store to see the directory replaced closes the clients
    of every store here, and each of the others opens a client of its own on its next call.
    """

    def __init__(self, root: Path, wait_s: float) -> None:
        self.root, self.wait_s = root, wait_s
        self._files: tuple[int, int] | None = None
        self._clients: list[Any] = []  # the clients handed out and not closed yet
        # a client closed as the directory was opened again, and the one opened in its place: a
        # second thread of the store, holding the closed one, is given the same (no client left open)
        self._renewed: list[tuple[Any, Any]] = []
        self._users = 0
        self._lock = threading.Lock()

    def open(self) -> Any:
        """A new client on the directory, for one store."""
        with self._lock, _translated("open the embedded Chroma store"):
            return self._open()

    def _open(self) -> Any:
        client = chromadb_client(self.root)
        self._clients.append(client)
        if self._files is None:
            self._files = _database_file(self.root)
        return client

    def reopened(self, client: Any, forget: Callable[[], None]) -> Any | None:
        """A new client on the directory when ``client``'s files are no longer at its path (or
        another store here found them gone and closed ``client``), else None; ``forget`` drops
        what the store kept open of the old one (its collections).

        A client on the directory that no store here opened (one passed to ``from_client``)
        keeps the old system running: ``client`` is then kept, failing as before.

        Raises:
            StoreInUseError: another process claimed the directory made anew first.
        """
        if _database_file(self.root) == self._files and any(c is client for c in self._clients):
            return None
        from chromadb.api.shared_system_client import SharedSystemClient

        with self._lock:
            if _database_file(self.root) != self._files:
                # each client and its admin client hold a reference to the system
                if SharedSystemClient._identifier_to_refcount.get(str(self.root), 0) > 2 * len(self._clients):
                    return None
                self.root.mkdir(parents=True, exist_ok=True)
                _renew_claim(self.root, self.wait_s)
                _chroma.REOPENED[0] += 1  # a call of another store on these clients fails as a StoreError
                for old in self._clients:  # the last users: the system on the removed files stops
                    old.close()
                self._clients, self._files, self._renewed = [], None, []
                bump(writes_counter(self.root), revised=True)  # what was read from the old files is stale
            elif any(c is client for c in self._clients):
                return None  # another store opened the directory again meanwhile
            elif (renewed := next((new for old, new in self._renewed if old is client), None)) is not None:
                return renewed  # another thread of the store opened it again meanwhile
            with _translated("open the embedded Chroma store again"):
                fresh = self._open()
            self._renewed.append((client, fresh))
        forget()
        return fresh

    def close(self, client: Any) -> None:
        """A store closes: ``client`` is closed unless another store here closed it already
        (see :meth:`reopened`): closing it twice would release the new system's references."""
        with self._lock:
            if any(c is client for c in self._clients):
                self._clients = [c for c in self._clients if c is not client]
                self._renewed = [(old, new) for old, new in self._renewed if new is not client]
                client.close()


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
