"""A real Chroma server for tests: ``chroma run`` on a free loopback port.

    server = start_chroma(tmp_path / "chroma")      # waits for its heartbeat
    store = ChromaFactStore.http(server.url, config=FactsConfig())
    server.stop()
"""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ctxplugin.errors import MissingDependencyError


def chroma_executable() -> str | None:
    """The ``chroma`` command: on PATH, or beside this interpreter (a venv's bin)."""
    found = shutil.which("chroma")
    if found:
        return found
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else None


def free_port() -> int:
    """A loopback port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ChromaServer:
    """A running ``chroma run`` process; :meth:`stop` ends it."""

    url: str
    process: subprocess.Popen[bytes]
    log: IO[bytes]

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=15)
        self.log.close()


def heartbeat(port: int) -> bool:
    """Whether a Chroma server answers on ``port`` (the connection is always closed)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/api/v2/heartbeat")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


def start_chroma(path: Path, timeout: float = 60.0) -> ChromaServer:
    """Start ``chroma run`` on a free port and wait until it answers its heartbeat."""
    executable = chroma_executable()
    if executable is None:
        raise MissingDependencyError("the `chroma` command is not installed (pip install chromadb puts it on PATH)")
    port = free_port()
    path.parent.mkdir(parents=True, exist_ok=True)
    log = open(path.parent / f"chroma-{port}.log", "wb")  # noqa: SIM115 - lives as long as the server
    process = subprocess.Popen(
        [executable, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            log.close()
            raise RuntimeError(f"chroma run exited with {process.returncode}; see {log.name}")
        if heartbeat(port):
            return ChromaServer(url=url, process=process, log=log)
        time.sleep(0.2)
    process.kill()
    process.wait(timeout=15)
    log.close()
    raise RuntimeError(f"chroma run did not answer on {url} within {timeout:.0f}s; see {log.name}")


__all__ = ["ChromaServer", "chroma_executable", "free_port", "heartbeat", "start_chroma"]
