"""Fixtures of the LangGraph integration tests: a local stand-in for the LangSmith API."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

# --- a local stand-in for the LangSmith API -------------------------------------------


class RunSink:
    """Collects posted and patched runs by id."""

    def __init__(self) -> None:
        self.runs: dict[str, dict[str, Any]] = {}
        self.lock = threading.Lock()

    def merge(self, run_id: str, data: dict[str, Any]) -> None:
        with self.lock:
            current = self.runs.setdefault(run_id, {})
            for key, value in data.items():
                if key == "extra" and isinstance(value, dict) and isinstance(current.get("extra"), dict):
                    current["extra"] = {**current["extra"], **value}
                elif value is not None:
                    current[key] = value

    def by_name(self, name: str) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.runs.values() if r.get("name") == name]


def _decode(body: bytes, encoding: str | None) -> bytes:
    if encoding == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    return body


def make_handler(sink: RunSink) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            return

        def _body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return _decode(self.rfile.read(length), self.headers.get("Content-Encoding"))

        def _ok(self, payload: Any = None) -> None:
            data = json.dumps(payload if payload is not None else {}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:
            self._ok({"version": "0.0.0", "batch_ingest_config": {"use_multipart_endpoint": True}})

        def do_PATCH(self) -> None:
            body = self._body()
            run_id = self.path.rstrip("/").split("/")[-1]
            sink.merge(run_id, json.loads(body or b"{}"))
            self._ok()

        def do_POST(self) -> None:
            body = self._body()
            ctype = self.headers.get("Content-Type", "")
            if ctype.startswith("multipart/"):
                message = BytesParser(policy=HTTP).parsebytes(
                    b"Content-Type: " + ctype.encode() + b"\r\n\r\n" + body
                )
                for part in message.iter_parts():
                    name = part.get_param("name", header="content-disposition") or ""
                    payload = part.get_payload(decode=True) or b""
                    pieces = str(name).split(".")
                    if len(pieces) < 2 or pieces[0] not in ("post", "patch"):
                        continue
                    run_id = pieces[1]
                    try:
                        data = json.loads(payload)
                    except ValueError:
                        continue
                    if len(pieces) == 2:
                        sink.merge(run_id, data)
                    else:
                        sink.merge(run_id, {pieces[2]: data})
            elif self.path.endswith("/runs/batch"):
                data = json.loads(body or b"{}")
                for run in [*data.get("post", []), *data.get("patch", [])]:
                    sink.merge(str(run["id"]), run)
            elif self.path.endswith("/runs"):
                run = json.loads(body or b"{}")
                sink.merge(str(run["id"]), run)
            self._ok()

    return Handler


def start() -> tuple[ThreadingHTTPServer, RunSink]:
    sink = RunSink()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(sink))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, sink


@pytest.fixture
def langsmith_sink() -> Iterator[tuple[str, RunSink]]:
    """URL of a local LangSmith stand-in, and the runs it received."""
    server, runs = start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", runs
    finally:
        server.shutdown()
        server.server_close()
