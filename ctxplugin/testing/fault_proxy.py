"""A TCP proxy that can refuse or freeze connections, to test what stores do when a server fails.

Put it between a store and its server (Postgres, ``chroma run``) and point the store at
:attr:`FaultProxy.port`::

    with FaultProxy("127.0.0.1", 5432) as proxy:
        dsn = f"postgresql://postgres@127.0.0.1:{proxy.port}/test"
        proxy.freeze()     # the server stops answering; sockets stay open
        proxy.refuse()     # nothing listens: connecting is refused, open connections are cut
        proxy.heal()       # back to normal; frozen connections carry on where they stopped

Frozen means what a stopped server process (``SIGSTOP``) or a stalled network looks like from the
client: connections are accepted (by the kernel) and bytes are taken, but no answer comes.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from typing import Literal

Mode = Literal["pass", "freeze", "refuse"]

_POLL_S = 0.05
_CHUNK = 65536


class FaultProxy:
    """Forwards TCP connections from a loopback port to ``host:port`` in one of three modes.

    Args:
        host: the server's host.
        port: the server's port.
    """

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.mode: Mode = "pass"
        self._lock = threading.Lock()
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._closed = False
        self._listener: socket.socket | None = None
        self.port = self._listen(0)

    # ------------------------------------------------------------------ modes
    def freeze(self) -> None:
        """Stop moving bytes either way, on open connections and new ones."""
        self.mode = "freeze"

    def refuse(self) -> None:
        """Stop listening (connecting is refused) and cut every open connection."""
        with self._lock:
            self.mode = "refuse"
            listener, self._listener = self._listener, None
            links, self._links = self._links, []
        if listener is not None:
            listener.close()
        for a, b in links:
            _close(a, b)

    def heal(self) -> None:
        """Forward again (listening again on the same port after :meth:`refuse`)."""
        with self._lock:
            relisten = self._listener is None and not self._closed
        if relisten:
            self._listen(self.port)
        self.mode = "pass"

    def close(self) -> None:
        """Stop the proxy and cut every connection."""
        self._closed = True
        self.refuse()

    def __enter__(self) -> FaultProxy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ plumbing
    def _listen(self, port: int) -> int:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", port))
        listener.listen(64)
        with self._lock:
            self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), name="fault-proxy-accept", daemon=True).start()
        return int(listener.getsockname()[1])

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:  # closed by refuse()
                return
            try:
                server = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            server.settimeout(None)
            with self._lock:
                if self._listener is not listener:
                    _close(client, server)
                    return
                self._links.append((client, server))
            threading.Thread(target=self._pump, args=(client, server), name="fault-proxy-pump", daemon=True).start()

    def _pump(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        # a selector, not select.select: a process with many files open (a long test run) gets
        # descriptors past select's limit of 1024, which select refuses
        ready = selectors.DefaultSelector()
        try:
            ready.register(client, selectors.EVENT_READ)
            ready.register(server, selectors.EVENT_READ)
            while True:
                if self.mode == "freeze":
                    threading.Event().wait(_POLL_S)
                    continue
                for key, _ in ready.select(_POLL_S):
                    sock = key.fileobj
                    assert isinstance(sock, socket.socket)
                    data = sock.recv(_CHUNK)
                    if not data:
                        return
                    peers[sock].sendall(data)
        except (OSError, ValueError):  # a side closed, or refuse() cut the link
            return
        finally:
            ready.close()
            with self._lock:
                if (client, server) in self._links:
                    self._links.remove((client, server))
            _close(client, server)


def _close(*socks: socket.socket) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            sock.close()


__all__ = ["FaultProxy", "Mode"]
