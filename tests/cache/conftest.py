"""Fixtures of the answer-cache tests: a real ``chroma run`` server on a free loopback port."""

from __future__ import annotations

import http.client
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _answers(port: int) -> bool:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
    try:
        connection.request("GET", "/api/v2/heartbeat")
        return connection.getresponse().status == 200
    except (OSError, http.client.HTTPException):
        return False
    finally:
        connection.close()


@pytest.fixture(scope="module")
def chroma_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of a ``chroma run`` server started for this module (its output is discarded)."""
    executable = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    if not Path(executable).exists():
        pytest.skip("the `chroma` command is not installed (pip install chromadb puts it on PATH)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    path = tmp_path_factory.mktemp("cache-chroma") / "data"
    process = subprocess.Popen(
        [executable, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while not _answers(port):
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"chroma run did not start on port {port} (exit code {process.poll()})")
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}"
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=15)
