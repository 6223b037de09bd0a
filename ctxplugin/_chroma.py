"""Chroma and transport errors as ctxplugin's store errors, for every Chroma-backed store."""

from __future__ import annotations

import gc
import http.client
import os
import sqlite3
import ssl
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ctxplugin._deadline import run_with_deadline
from ctxplugin._server_url import check_server_url as check_server_url
from ctxplugin.errors import ConfigError, StoreError, StoreInUseError, StoreUnavailableError

_BUGS = (NotImplementedError, RecursionError)
"""RuntimeErrors that say code is wrong, not that a store failed: :func:`translated` lets them
propagate."""
REOPENED = [0]  # embedded directories opened again, their clients closed under any call then running


@contextmanager
def translated(
    action: str,
    refine: Callable[[Exception], BaseException | None] | None = None,
    forget: Callable[[], None] | None = None,
) -> Iterator[None]:
    """Raise Chroma errors as ``StoreError`` and an unreachable server as
    ``StoreUnavailableError`` (``action`` completes "could not ..."). ``refine`` may name a
    better error for anything else; of what it leaves (None), the failures of embedded Chroma's
    storage (``RuntimeError``, ``OSError``, ``sqlite3.Error``) are ``StoreError`` too, and any
    other error (a ``NotImplementedError`` or ``RecursionError`` among them) is raised as it is,
    unless an embedded directory was opened again meanwhile (its clients closed under the call).

    ``forget`` drops the collections a store keeps open; it is called when Chroma no longer
    knows one (a server that came back without its data, a collection deleted by hand), so
    that the store's next call opens, and so creates, it again instead of failing for ever."""
    import chromadb.errors as chroma_errors

    reopened = REOPENED[0]
    try:
        yield
    except (StoreError, ConfigError):
        raise
    except chroma_errors.NotFoundError as exc:
        if forget is None:
            raise StoreError(f"Chroma could not {action}: {exc}") from exc
        forget()
        again = "the collection is opened again on the next call"
        raise StoreError(f"Chroma could not {action}: {exc} ({again})") from exc
    except chroma_errors.ChromaError as exc:
        refused = f" (HTTP {exc.code()}: refused the credentials, {CHECK_HEADERS})" if exc.code() in REFUSED else ""
        raise StoreError(f"Chroma could not {action}: {exc}{refused}") from exc
    except (ConnectionError, TimeoutError) as exc:
        raise StoreUnavailableError(f"Chroma server unreachable, could not {action}: {exc}") from exc
    except Exception as exc:
        status = _http_status(exc)
        if status in REFUSED:
            raise StoreError(f"the Chroma server refused the credentials (HTTP {status}), could not {action}: {CHECK_HEADERS}") from exc
        if status is not None:
            failed = StoreUnavailableError if status >= 500 else StoreError
            raise failed(f"Chroma server answered HTTP {status}, could not {action}: {exc}") from exc
        if _is_transport_error(exc) or (isinstance(exc, ValueError) and "connect" in str(exc).lower()):
            raise StoreUnavailableError(f"Chroma server unreachable, could not {action}: {exc}") from exc
        better = refine(exc) if refine is not None else None
        if better is not None:
            raise better from exc
        if isinstance(exc, (RuntimeError, OSError, sqlite3.Error)) and not isinstance(exc, _BUGS):
            # embedded Chroma's own storage failing: its HNSW index (hnswlib raises RuntimeError),
            # its SQLite file, its index files on disk; a bug (KeyError...) still propagates
            raise StoreError(f"Chroma could not {action}: {exc}") from exc
        if REOPENED[0] != reopened:  # the embedded client was closed under this call
            raise StoreError(f"Chroma could not {action}: its directory was opened again meanwhile ({exc!r})") from exc
        raise


REFUSED = (401, 403)
"""The HTTP statuses of a server, or of a gateway in front of it, that refuses the credentials."""

CHECK_HEADERS = "check chroma_headers (CTXPLUGIN_CHROMA_HEADERS), the headers sent on every request"


def _http_status(exc: BaseException) -> int | None:
    """The HTTP status of an error answer that chromadb's client raised as a bare ``Exception``
    of its body: one that holds no Chroma error, as a gateway in front of the server answers."""
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx ships with chromadb
        return None
    cause = exc.__context__
    return cause.response.status_code if type(exc) is Exception and isinstance(cause, httpx.HTTPStatusError) else None


def _is_transport_error(exc: BaseException) -> bool:
    try:
        import httpx
    except ImportError:  # pragma: no cover - httpx ships with chromadb
        return False
    return isinstance(exc, httpx.TransportError)


def set_http_timeout(client: Any, seconds: float) -> Any:
    """Bound every HTTP request of a Chroma server client (Chroma's own default is no timeout,
    so a frozen server would hold a request for ever). Returns ``client``."""
    import httpx

    for owner in (client, getattr(client, "_admin_client", None)):
        session = getattr(getattr(owner, "_server", None), "_session", None)
        if isinstance(session, httpx.Client):
            session.timeout = httpx.Timeout(seconds)
    return client


def tls_mismatch(exc: BaseException) -> bool:
    """Whether ``exc`` (the cause of a failed heartbeat) says the URL's scheme cannot work: a
    server that does not speak TLS on an ``https`` URL, or a certificate the client refuses.
    Neither passes as the server recovers, unlike a refused or dropped connection."""
    if isinstance(exc, ssl.SSLCertVerificationError):
        return True
    return isinstance(exc, ssl.SSLError) and exc.reason == "WRONG_VERSION_NUMBER"


def http_client(
    url: str,
    timeout: float,
    headers: dict[str, str] | None = None,
    tenant: str | None = None,
    database: str | None = None,
) -> Any:
    """A Chroma ``HttpClient`` on the server at ``url`` (sending ``headers`` on every request,
    on ``tenant`` and ``database`` when given, else Chroma's defaults), every request bounded
    by ``timeout`` seconds, its making included: chromadb's client asks the server who the
    caller is as it is built, with no timeout, so a server that takes connections and never
    answers would hold the caller (and the store's lock) for ever. The server's heartbeat is
    asked first, bounded; the client is then built within the same bound.

    Raises:
        ConnectionError: the server does not answer within ``timeout`` (the stores' translation
            of Chroma errors reports it as unreachable).
    """
    import chromadb
    from chromadb.config import Settings

    parts = urlsplit(url)
    tls = parts.scheme == "https"
    host, port = parts.hostname or "127.0.0.1", parts.port or (443 if tls else 8000)

    chosen = {k: v for k, v in (("tenant", tenant), ("database", database)) if v is not None}  # else Chroma's

    def build() -> Any:
        settings = Settings(anonymized_telemetry=False)
        # a copy: chromadb adds its Content-Type and User-Agent to the dict it is given, which
        # would change the caller's own (one it may send to other services too)
        sent = dict(headers) if headers else None
        client = chromadb.HttpClient(host=host, port=port, ssl=tls, headers=sent, settings=settings, **chosen)
        return set_http_timeout(client, timeout)

    try:
        Heartbeat(url, timeout, headers)()
        return run_with_deadline(build, timeout, "Chroma server connect")
    except StoreUnavailableError as exc:
        raise ConnectionError(str(exc)) from exc


class HeartbeatStatusError(StoreUnavailableError):
    """The server at a Chroma URL answered its heartbeat with an error status (``status``)."""

    def __init__(self, status: int) -> None:
        refused = f": it refused the credentials, {CHECK_HEADERS}" if status in REFUSED else ""
        super().__init__(f"Chroma server answers its heartbeat with HTTP {status}{refused}")
        self.status = status


class Heartbeat:
    """Asks the Chroma server at ``url`` for its heartbeat, on a new connection each time (no
    socket is kept between checks); the TLS context of an ``https`` URL is built once.

    Calling it raises :class:`StoreUnavailableError` on no answer within ``timeout`` seconds,
    a refused connection or an error status.
    """

    def __init__(self, url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        parts = urlsplit(url)
        self.url = url
        self.host = parts.hostname or "127.0.0.1"
        self.tls = parts.scheme == "https"
        self.port = parts.port or (443 if self.tls else 8000)
        self.timeout = timeout
        self.headers = headers or {}
        self._context: ssl.SSLContext | None = None

    def __call__(self) -> None:
        status = self.status("/api/v2/heartbeat")
        if status != 200:
            raise HeartbeatStatusError(status)

    def status(self, path: str) -> int:
        """The HTTP status the server answers a GET of ``path`` with, the headers sent.

        Raises:
            StoreUnavailableError: no answer within ``timeout`` seconds, or a refused connection.
        """
        connection: http.client.HTTPConnection
        if self.tls:
            if self._context is None:
                self._context = ssl.create_default_context()
            connection = http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout, context=self._context)
        else:
            connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            connection.request("GET", path, headers=self.headers)
            return connection.getresponse().status
        except (OSError, http.client.HTTPException) as exc:
            raise StoreUnavailableError(f"Chroma server does not answer: {type(exc).__name__}: {exc}") from exc
        finally:
            connection.close()


# --- one process per embedded directory ---------------------------------------------------

OWNER_FILE = ".ctxplugin-owner.lock"
_claims: dict[str, list[Any]] = {}
_claims_lock = threading.Lock()


def claim_directory(path: Path, wait_s: float) -> Callable[[], None]:
    """Mark the embedded Chroma directory ``path`` as used by this process; returns the release.

    Embedded Chroma keeps its index in the memory of the process that opened it, so several
    processes on one directory see each other's writes late or not at all (searches fail with
    "Error finding id" and facts go missing). A POSIX lock on a file in the directory, held
    while a store is open, lets one process in at a time; any number of stores and threads of
    that process share the claim. A process that ends releases it, whatever the cause. Another
    process waits up to ``wait_s`` seconds (one that is closing), then gets
    :class:`StoreInUseError`. Where ``fcntl`` does not exist (Windows) nothing is checked.

    Raises:
        StoreInUseError: another process holds the directory.
    """
    try:
        import fcntl  # noqa: F401  (where it is missing, nothing is claimed)
    except ImportError:  # pragma: no cover - Windows
        return lambda: None
    key = os.path.realpath(path)
    with _claims_lock:
        claim = _claims.get(key)
        if claim is not None:
            claim[1] += 1
            return _releaser(key)
        _claims[key] = [locked_owner_file(key, wait_s), 1]
    return _releaser(key)


def same_process(opened_in: int | None) -> None:
    """Refuse an embedded Chroma store opened in process ``opened_in`` when called from another:
    a process forked from it (a ``multiprocessing`` "fork" worker, a gunicorn ``--preload``
    worker). The parent's client would hang there, and a client of the child's own would be a
    second process on the directory.

    Raises:
        StoreInUseError: this process is not the one that opened the store.
    """
    if opened_in is not None and opened_in != os.getpid():
        raise StoreInUseError(
            f"this embedded Chroma store was opened in process {opened_in}, before a fork; process "
            f"{os.getpid()} cannot use it. Open the engine in each process after the fork (gunicorn: "
            "without --preload, or in a post_fork hook) on a directory of its own, or run a Chroma "
            "server (`chroma run --path ...`) and set CTXPLUGIN_CHROMA_URL (see docs/scale-out.md)"
        )


def reconnect_in_forked_children(store: Any) -> None:
    """Have ``store`` (a store on a Chroma server's client it made itself) connect again in a
    process forked from this one, on first use there.

    A forked child inherits the parent's HTTP connections: both processes would send requests
    on one socket and read each other's answers. The store must have ``_lock``, ``_client``
    (None makes it connect on next use) and ``_forget()`` (drops its open collections).
    """
    _servers.add(store)


_servers: weakref.WeakSet[Any] = weakref.WeakSet()

_from_parent: list[Any] = []
"""What a forked process inherited of Chroma and let go: kept for the life of the process and
never destroyed there. An embedded client's native parts may hold locks that a thread of the
parent held at the fork; destroying them in the child (when their last reference goes, or by
the garbage collector) would wait on those locks for ever, holding the interpreter's lock."""


def keep_from_parent(value: Any) -> None:
    """Keep ``value`` (a client, or what holds one, inherited from the parent) alive in this
    forked process instead of letting it be destroyed here (see :data:`_from_parent`)."""
    _from_parent.append(value)


def _before_fork() -> None:
    # garbage of the parent that holds an embedded client is collected here, in the process
    # whose threads it belongs to: collected in the child, it could wait for ever (see above)
    if "chromadb" in sys.modules:
        gc.collect()


def _after_fork_in_child() -> None:
    global _claims_lock
    # the parent's claims are not this process's (a POSIX lock is not inherited): the child
    # claims a directory again, and is refused while the parent holds it
    _claims_lock = threading.Lock()  # it may have been held by another thread at the fork
    for fd, _count in _claims.values():
        os.close(fd)  # this process holds no lock on it: the parent's lock stays
    _claims.clear()
    # Chroma keeps one client "system" per server or directory for the process; the parent's
    # are unusable here (their sockets and threads are the parent's), so clients made from now
    # on start their own
    shared = sys.modules.get("chromadb.api.shared_system_client")
    if shared is not None:
        keep_from_parent((shared.SharedSystemClient._identifier_to_system, shared.SharedSystemClient._identifier_to_refcount))
        shared.SharedSystemClient.clear_system_cache()
    for store in list(_servers):
        store._lock = threading.Lock()
        keep_from_parent(store._client)
        store._client = None
        store._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_child=_after_fork_in_child)


def locked_owner_file(key: str, wait_s: float) -> int:
    """A descriptor of the claim file in the directory ``key``, locked for this process."""
    import fcntl

    fd = os.open(os.path.join(key, OWNER_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + wait_s
    while True:
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= deadline:
                holder = _holder(fd)
                os.close(fd)
                raise StoreInUseError(
                    f"the embedded Chroma directory {key} is open in another process{holder}; "
                    "embedded Chroma serves one process at a time. For several processes run a "
                    "Chroma server (`chroma run --path ...`) and set CTXPLUGIN_CHROMA_URL "
                    "(see docs/scale-out.md)"
                ) from None
            time.sleep(0.05)
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def _releaser(key: str) -> Callable[[], None]:
    released = False

    def release() -> None:
        nonlocal released
        with _claims_lock:
            if released:
                return
            released = True
            claim = _claims.get(key)
            if claim is None:
                return
            claim[1] -= 1
            if claim[1] == 0:
                del _claims[key]
                os.close(claim[0])  # closing the descriptor drops the lock

    return release


def _holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except (OSError, UnicodeDecodeError):
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""
