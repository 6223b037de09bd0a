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
                    if len(pieces) < 2 or pieces[0] not in ("post", "patch") or not isinstance(payload, bytes):
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


# --- a scripted multi-turn scenario shared by the host tests ------------------------------

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage  # noqa: E402
from langchain_core.tools import BaseTool, tool  # noqa: E402

from ctxplugin import ContextCallbackHandler, ContextEngine, Scope  # noqa: E402
from ctxplugin._messages import annotation  # noqa: E402
from ctxplugin.testing import ScriptedChatModel, tool_call  # noqa: E402


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search direct flights between two airports."""
    return json.dumps([
        {"flight_number": f"HAT{i:03d}", "origin": origin, "destination": destination,
         "departure": f"{6 + i % 14:02d}:{(i * 7) % 60:02d}", "price": 100 + 3 * i, "seats_left": i % 9}
        for i in range(80)
    ])


@tool
def read_log(service: str) -> str:
    """Read the last lines of a service's log."""
    lines = [f"2026-11-22T10:{i // 60:02d}:{i % 60:02d}Z INFO {service} handled request id=req-{i:05d} in {i % 37} ms" for i in range(300)]
    lines[217] = f"2026-11-22T10:03:37Z ERROR {service} TimeoutError: upstream payments-api did not answer in 30s"
    return "\n".join(lines)


@tool
def get_user(user_id: str) -> str:
    """Get a user profile."""
    return json.dumps({"user_id": user_id, "name": "Mia Li", "tier": "gold"})


TOOLS: list[BaseTool] = [search_flights, read_log, get_user]
BIG_TOOLS = {"search_flights", "read_log"}
TURNS = ["flights SFO JFK", "log checkout", "flights JFK SEA"]
"""User turns; each makes the model call one tool, then answer."""


def policy(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
    """The scripted model's behaviour: a tool call for a new user turn, an answer after a result.

    A turn is ``"<command> <args...>"``; words after the arguments (a session tag) are ignored.
    """
    convo = [m for m in messages if not isinstance(m, SystemMessage)]
    last = convo[-1]
    if isinstance(last, ToolMessage):
        return AIMessage(content=f"Read {last.name}.")
    text = last.text if isinstance(last, HumanMessage) else ""
    words = text.split()
    if words[:1] == ["flights"]:
        return AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": words[1], "destination": words[2]})])
    if words[:1] == ["log"]:
        return AIMessage(content="", tool_calls=[tool_call("read_log", {"service": words[1]})])
    if words[:1] == ["user"]:
        return AIMessage(content="", tool_calls=[tool_call("get_user", {"user_id": words[1]})])
    return AIMessage(content="OK.")


def scripted(calls: int = 40) -> ScriptedChatModel:
    """A scripted model following :func:`policy` for ``calls`` calls."""
    return ScriptedChatModel(script=[policy] * calls, default=None)


def original_output(state: list[BaseMessage], result: ToolMessage) -> str:
    """What the tool returned for ``result``, recomputed from the call recorded in the state."""
    for message in state:
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                if call["id"] == result.tool_call_id:
                    by_name = {t.name: t for t in TOOLS}
                    return str(by_name[call["name"]].invoke(call["args"]))
    raise AssertionError(f"no call for {result.tool_call_id}")


def session_calls(model: ScriptedChatModel, tag: str | None) -> list[Any]:
    """The model's recorded calls, or those whose human turns carry ``tag``."""
    if tag is None:
        return model.calls
    return [c for c in model.calls if any(isinstance(m, HumanMessage) and m.text.endswith(tag) for m in c.messages)]


def check_view_and_state(
    model: ScriptedChatModel,
    state: list[BaseMessage],
    engine: ContextEngine,
    scope: Scope,
    handler: ContextCallbackHandler | None = None,
    *,
    tag: str | None = None,
    turns: int = len(TURNS),
    annotated: bool = True,
    skip_calls: int = 0,
    recorded_turns: int | None = None,
) -> None:
    """The model received compact tool outputs within budget; the state kept every original.

    ``annotated``: the state's tool messages carry their ref (hosts that capture at the tool
    node); otherwise refs are taken from what the model saw. ``skip_calls``: leading model
    calls that failed (and were retried) are not part of the conversation. ``recorded_turns``:
    how many of the latest turns this model served (after a restart, fewer than ``turns``).
    """
    humans = [m for m in state if isinstance(m, HumanMessage)]
    assert len(humans) == turns
    results = [m for m in state if isinstance(m, ToolMessage)]
    assert len(results) == turns
    originals = {m.tool_call_id: original_output(state, m) for m in results}
    for m in results:
        assert m.content == originals[m.tool_call_id], "the state must keep the tool's own output"
    calls = session_calls(model, tag)[skip_calls:]
    assert len(calls) == 2 * (turns if recorded_turns is None else recorded_turns)
    seen_refs: dict[str, str] = {}
    for call in calls:
        for m in call.messages:
            if isinstance(m, ToolMessage) and m.name in BIG_TOOLS:
                text = str(m.content)
                assert "ref:" in text, "a big tool output must reach the model as a ref"
                assert len(text) < len(originals[m.tool_call_id]) / 3
                seen_refs[m.tool_call_id] = "ref:" + text.split("ref:", 1)[1].split()[0].rstrip("];,.)'\"")
    big = [m for m in results if m.name in BIG_TOOLS]
    assert big and all(m.tool_call_id in seen_refs for m in big)
    for m in big:
        ref = annotation(m)["ref"] if annotated else seen_refs[m.tool_call_id]
        assert ref == seen_refs[m.tool_call_id]
        assert engine.expand_ref(ref, scope=scope) == originals[m.tool_call_id]
    if handler is not None:
        reports = [r for r in handler.reports if r.session_id == scope.session_id]
        assert len(reports) in (len(calls), len(calls) + skip_calls)
        for report in reports:
            assert report.within_budget and report.budget_total is not None
            assert report.tokens_after <= report.budget_total
        assert reports[-1].tokens_before > reports[-1].tokens_after
        assert reports[-1].refs_used


@pytest.fixture
def handler() -> ContextCallbackHandler:
    return ContextCallbackHandler()


class Scenario:
    """The scenario's parts, for test modules (they cannot import this conftest)."""

    tools = TOOLS
    turns = TURNS
    big_tools = BIG_TOOLS
    scripted = staticmethod(scripted)
    policy = staticmethod(policy)
    check = staticmethod(check_view_and_state)
    session_calls = staticmethod(session_calls)


@pytest.fixture
def scenario() -> type[Scenario]:
    return Scenario
