"""A Chroma server behind authentication: the headers, tenant and database of ``connect()``,
through a real HTTP gateway in front of a real ``chroma run`` server.

The gateway answers 401 unless a request carries the expected token header, and forwards the
others to the server, as a reverse proxy in front of ``chroma run`` (or Chroma's hosted service)
does.
"""

from __future__ import annotations

import base64
import http.client
import http.server
import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import chromadb
import chromadb.errors
import pytest
from chromadb.config import Settings
from langchain_core.messages import HumanMessage
from pytest_mock import MockerFixture

import ctxplugin
from ctxplugin import ConfigError, ContextConfig, StoreError, StoreUnavailableError
from ctxplugin.cache import ChromaAnswerCacheStore
from ctxplugin.facts import ChromaFactStore, FactQuery
from ctxplugin.guard import unwrap
from ctxplugin.scope import Scope
from ctxplugin.testing.chroma_server import ChromaServer

S = Scope(session_id="s1", user_id="u1", tenant_id="acme")
SECRET = "tok-7f3a9c1e-very-secret"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "content-length", "proxy-connection"}


class _Gateway(http.server.ThreadingHTTPServer):
    def __init__(self, upstream: str, header: str, value: str, open_heartbeat: bool) -> None:
        super().__init__(("127.0.0.1", 0), _Forward)
        parts = urlsplit(upstream)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 8000)
        self.header, self.value, self.open_heartbeat = header, value, open_heartbeat
        self.forwarded: list[tuple[str, str]] = []
        self.refused = 0
        self.failing: int | None = None  # answer every request with this status (the server behind is down)


class _Forward(http.server.BaseHTTPRequestHandler):
    server: _Gateway

    def _forward(self) -> None:
        gate = self.server
        allowed = self.headers.get(gate.header) == gate.value
        if gate.failing is not None or (not allowed and not (gate.open_heartbeat and self.path == "/api/v2/heartbeat")):
            gate.refused += gate.failing is None
            body = b"Unauthorized" if gate.failing is None else b"Bad Gateway"
            self.send_response(gate.failing or 401)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            return
        length = int(self.headers.get("Content-Length") or 0)
        request_body = self.rfile.read(length) if length else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
        connection = http.client.HTTPConnection(*gate.upstream, timeout=30)
        try:
            connection.request(self.command, self.path, body=request_body, headers=headers)
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        gate.forwarded.append((self.command, self.path))
        self.send_response(response.status)
        for key, value in response.getheaders():
            if key.lower() not in _HOP_BY_HOP:
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def gateway(upstream: str, header: str = "x-chroma-token", value: str = SECRET, *, open_heartbeat: bool = False) -> Iterator[_Gateway]:
    """A gateway on a free loopback port in front of ``upstream``; ``open_heartbeat`` lets the
    heartbeat through without the token (Chroma's own token check does so)."""
    server = _Gateway(upstream, header, value, open_heartbeat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def url_of(gate: _Gateway) -> str:
    return f"http://127.0.0.1:{gate.server_address[1]}"


def config(url: str, path: Path, **values: Any) -> ContextConfig:
    return ContextConfig(
        chroma_url=url, path=str(path), facts={"collection": f"t{uuid.uuid4().hex[:12]}"}, stores={"timeout": 10.0}, **values
    )


@pytest.mark.chroma_server
@pytest.mark.parametrize(
    ("header", "value"),
    [("x-chroma-token", SECRET), ("Authorization", f"Bearer {SECRET}")],
    ids=["x-chroma-token", "bearer"],
)
def test_facts_are_written_and_read_back_through_a_gateway_that_wants_a_token(
    chroma_server: ChromaServer, tmp_path: Path, header: str, value: str
) -> None:
    with gateway(chroma_server.url, header, value) as gate:
        with ctxplugin.connect(config(url_of(gate), tmp_path, chroma_headers={header: value})) as engine:
            engine.facts.write("The vendor is Acme", key="vendor", scope=S)
            current = engine.facts.current("vendor", scope=S)
        assert current is not None and current.text == "The vendor is Acme"
        assert gate.refused == 0
        assert any(method == "POST" and "/collections/" in path for method, path in gate.forwarded), gate.forwarded


@pytest.mark.chroma_server
def test_the_headers_given_to_a_store_are_not_changed(chroma_server: ChromaServer) -> None:
    # chromadb adds its Content-Type and User-Agent to the dict it is handed: the caller's own
    # dict (one it may send to other services too) came back with them
    with gateway(chroma_server.url) as gate:
        headers = {"x-chroma-token": SECRET}
        facts = ChromaFactStore.http(url_of(gate), headers=headers)
        cache = ChromaAnswerCacheStore.http(url_of(gate), headers=headers)
        try:
            assert facts.find(FactQuery(reader=S)) == []
            assert cache.count() == 0
        finally:
            facts.close()
            cache.close()
        assert gate.refused == 0
    assert headers == {"x-chroma-token": SECRET}


@pytest.mark.chroma_server
def test_the_answer_cache_sends_the_headers_too(chroma_server: ChromaServer, tmp_path: Path) -> None:
    with gateway(chroma_server.url) as gate:
        settings = config(url_of(gate), tmp_path, chroma_headers={"x-chroma-token": SECRET}, cache={"enabled": True})
        with ctxplugin.connect(settings) as engine:
            assert engine.cache is not None
            assert unwrap(engine.cache.store).count() == 0  # connects and opens its collection
        assert gate.refused == 0
        assert any(method == "POST" and path.endswith("/collections") for method, path in gate.forwarded), gate.forwarded


@pytest.mark.chroma_server
@pytest.mark.parametrize("open_heartbeat", [False, True], ids=["heartbeat-refused", "heartbeat-open"])
@pytest.mark.parametrize("headers", [{}, {"x-chroma-token": "wrong-token"}, {"x-other": SECRET}], ids=["none", "wrong", "other-header"])
def test_refused_credentials_fail_at_connect_naming_the_setting(
    chroma_server: ChromaServer, tmp_path: Path, headers: dict[str, str], open_heartbeat: bool
) -> None:
    with gateway(chroma_server.url, open_heartbeat=open_heartbeat) as gate, pytest.raises(ConfigError, match="refused the credentials") as raised:
        ctxplugin.connect(config(url_of(gate), tmp_path, chroma_headers=headers))
    message = str(raised.value)
    assert "HTTP 401" in message and "CTXPLUGIN_CHROMA_HEADERS" in message and url_of(gate) in message
    assert "wrong-token" not in message and SECRET not in message
    assert gate.forwarded == [("GET", "/api/v2/heartbeat")] if open_heartbeat else gate.forwarded == []


@pytest.mark.chroma_server
@pytest.mark.parametrize("open_heartbeat", [False, True], ids=["heartbeat-refused", "heartbeat-open"])
def test_credentials_refused_after_connect_skip_the_facts_with_a_warning_saying_so(
    chroma_server: ChromaServer, tmp_path: Path, open_heartbeat: bool
) -> None:
    """A gateway's 401 is a plain-text answer, which chromadb raises as a bare ``Exception``:
    it is a ``StoreError`` naming the setting, and ``prepare`` passes the messages through."""
    settings = {"chroma_headers": {"x-chroma-token": SECRET}}
    with gateway(chroma_server.url, open_heartbeat=open_heartbeat) as gate, ctxplugin.connect(config(url_of(gate), tmp_path, **settings)) as engine:
        engine.facts.write("The vendor is Acme", key="vendor", scope=S)
        gate.value = "rotated"
        prepared = engine.prepare([HumanMessage("Who is the vendor?", id="h1")], scope=S)
        with pytest.raises(StoreError, match="refused the credentials") as raised:
            engine.facts.write("The vendor is Globex", key="vendor", scope=S)
    assert [m.content for m in prepared.messages] == ["Who is the vendor?"]
    assert any("refused the credentials (HTTP 401)" in w and "CTXPLUGIN_CHROMA_HEADERS" in w for w in prepared.report.warnings), prepared.report.warnings
    assert SECRET not in str(raised.value) and not any(SECRET in w for w in prepared.report.warnings)


@pytest.mark.chroma_server
def test_a_gateway_whose_server_is_down_is_an_outage(chroma_server: ChromaServer, tmp_path: Path) -> None:
    """A gateway's 502 is a plain-text answer too: the store is unavailable (the circuit opens)."""
    settings = {"chroma_headers": {"x-chroma-token": SECRET}}
    with gateway(chroma_server.url) as gate, ctxplugin.connect(config(url_of(gate), tmp_path, **settings)) as engine:
        engine.facts.write("The vendor is Acme", key="vendor", scope=S)
        gate.failing = 502
        prepared = engine.prepare([HumanMessage("Who is the vendor?", id="h1")], scope=S)
        with pytest.raises(StoreUnavailableError):
            engine.facts.write("The vendor is Globex", key="vendor", scope=S)
    assert [m.content for m in prepared.messages] == ["Who is the vendor?"]
    assert any("HTTP 502" in w for w in prepared.report.warnings), prepared.report.warnings


def test_chroma_refusing_the_credentials_itself_names_the_setting(tmp_path: Path, mocker: MockerFixture) -> None:
    """Chroma's own token check answers a Chroma error (not plain text); ``chroma run`` here has
    none, so the error is raised in its place."""
    with ChromaFactStore.persistent(tmp_path) as store:
        collection = store.raw_collection("acme")
        mocker.patch.object(type(collection), "query", side_effect=chromadb.errors.AuthorizationError("Unauthorized"))
        with pytest.raises(StoreError, match=r"HTTP 401: refused the credentials, check chroma_headers \(CTXPLUGIN_CHROMA_HEADERS\)"):
            store.search("x", FactQuery(reader=S), n=3)


@pytest.mark.chroma_server
def test_headers_come_from_the_environment_as_json(
    chroma_server: ChromaServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS", f'{{"x-chroma-token": "{SECRET}"}}')
    with gateway(chroma_server.url) as gate:
        monkeypatch.setenv("CTXPLUGIN_CHROMA_URL", url_of(gate))
        with ctxplugin.connect(ContextConfig(path=str(tmp_path), facts={"collection": f"t{uuid.uuid4().hex[:12]}"})) as engine:
            engine.facts.write("The door code is 4417", key="door", scope=S)
            current = engine.facts.current("door", scope=S)
        assert current is not None and current.text == "The door code is 4417"
        assert gate.refused == 0


def test_header_values_never_show_in_the_configuration(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS", f'{{"Authorization": "Bearer {SECRET}"}}')
    read = ContextConfig()
    assert read.chroma_headers["Authorization"].get_secret_value() == f"Bearer {SECRET}"
    given = ContextConfig(chroma_headers={"x-chroma-token": SECRET})
    for shown in (repr(read), str(read), read.model_dump_json(), repr(given), str(given), given.model_dump_json()):
        assert SECRET not in shown
    assert "x-chroma-token" in repr(given), "the header's name is no secret"


@pytest.mark.parametrize(
    ("headers", "problem"),
    [
        ({"x-chroma-token": f"{SECRET}\r\nX-Injected: 1"}, "printable ASCII"),
        ({"x-chroma-token": f"{SECRET}\u00e9"}, "printable ASCII"),
        ({"x chroma token": SECRET}, "not a valid HTTP header name"),
        ({"x-chroma-token": 7}, "string"),
    ],
    ids=["line-break", "non-ascii", "bad-name", "not-text"],
)
def test_a_header_that_cannot_be_sent_is_refused_without_its_value(headers: dict[str, object], problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as raised:
        ContextConfig(chroma_headers=headers)
    assert "chroma_headers" in str(raised.value)
    assert SECRET not in str(raised.value) and "7" not in str(raised.value).replace("chroma_headers", "")
    # a store built by hand: the same refusal when built, not urllib's or httpx's error (or a
    # heartbeat answered 400, taken for a server that is down) on its first call
    builds: list[Callable[..., object]] = [ChromaFactStore.http, ChromaAnswerCacheStore.http]
    for build in builds:
        with pytest.raises(ConfigError, match=problem.replace("string", "printable ASCII")) as raised:
            build("http://127.0.0.1:9", headers=headers)
        assert SECRET not in str(raised.value)


@pytest.mark.parametrize(
    "data",
    [
        {"chroma_headers": {"x-chroma-token": "tk-93\r\n"}},
        {"budget": {"total": -1}, "chroma_headers": {"x-chroma-token": "tk-93"}},
    ],
    ids=["bad-header", "other-setting"],
)
def test_a_configuration_validated_from_data_refuses_without_the_header_values(data: dict[str, Any]) -> None:
    # model_validate runs __init__ inside pydantic, which adds (the ends of) the input it was
    # given to the error: a short token whole, a long one's last characters
    for given in (data, json.dumps(data)):
        with pytest.raises(ValueError, match="invalid ctxplugin setting") as raised:
            ContextConfig.model_validate_json(given) if isinstance(given, str) else ContextConfig.model_validate(given)
        assert "tk-93" not in str(raised.value) and "tk-93" not in repr(raised.value)


@pytest.mark.parametrize(
    "text", [f'{{"x-chroma-token": {SECRET}}}', f'{{"x-chroma-token": "{SECRET}\\r\\n"}}', f'["{SECRET}"]'], ids=["not-json", "line-break", "list"]
)
def test_a_header_variable_that_cannot_be_read_is_refused_without_its_value(monkeypatch: pytest.MonkeyPatch, text: str) -> None:
    monkeypatch.setenv("CTXPLUGIN_CHROMA_HEADERS", text)
    with pytest.raises(ConfigError, match="CTXPLUGIN_CHROMA_HEADERS") as raised:
        ContextConfig()
    assert SECRET not in str(raised.value)


def _admin(url: str) -> Any:
    parts = urlsplit(url)
    settings = Settings(
        chroma_api_impl="chromadb.api.fastapi.FastAPI",
        chroma_server_host=parts.hostname,
        chroma_server_http_port=parts.port,
        anonymized_telemetry=False,
    )
    return chromadb.AdminClient(settings)


@pytest.mark.chroma_server
def test_facts_go_to_the_tenant_and_database_configured(chroma_server: ChromaServer, tmp_path: Path) -> None:
    tenant, database = f"team{uuid.uuid4().hex[:8]}", "facts_db"
    admin = _admin(chroma_server.url)
    admin.create_tenant(tenant)
    admin.create_database(database, tenant=tenant)
    with gateway(chroma_server.url) as gate:
        settings = config(url_of(gate), tmp_path, chroma_headers={"x-chroma-token": SECRET}, chroma_tenant=tenant, chroma_database=database)
        with ctxplugin.connect(settings) as engine:
            engine.facts.write("The vendor is Acme", key="vendor", scope=S)
            current = engine.facts.current("vendor", scope=S)
    assert current is not None and current.text == "The vendor is Acme"
    parts = urlsplit(chroma_server.url)
    there = chromadb.HttpClient(host=parts.hostname or "", port=parts.port or 0, tenant=tenant, database=database, settings=Settings(anonymized_telemetry=False))
    default = chromadb.HttpClient(host=parts.hostname or "", port=parts.port or 0, settings=Settings(anonymized_telemetry=False))
    prefix = settings.facts.collection
    assert [c.name for c in there.list_collections() if c.name.startswith(prefix)], "no facts collection in the database configured"
    assert not [c.name for c in default.list_collections() if c.name.startswith(prefix)], "facts went to the default database"


@pytest.mark.chroma_server
@pytest.mark.parametrize(
    ("values", "variable"),
    [({"chroma_tenant": "no_such_tenant"}, "CTXPLUGIN_CHROMA_TENANT"), ({"chroma_database": "no_such_db"}, "CTXPLUGIN_CHROMA_DATABASE")],
    ids=["tenant", "database"],
)
def test_a_tenant_or_database_the_server_does_not_have_fails_at_connect(
    chroma_server: ChromaServer, tmp_path: Path, values: dict[str, str], variable: str
) -> None:
    with gateway(chroma_server.url) as gate, pytest.raises(ConfigError, match=f"{variable}.*not found") as raised:
        ctxplugin.connect(config(url_of(gate), tmp_path, chroma_headers={"x-chroma-token": SECRET}, **values))
    assert SECRET not in str(raised.value)


# ---------------------------------------------------------------- a user and password in the URL

PASSWORD = "pw/7f3a@very-secret"
BASIC = "Basic " + base64.b64encode(f"al:{PASSWORD}".encode()).decode()


def with_user(url: str, password: str = PASSWORD) -> str:
    """``url`` with the user ``al`` and ``password`` in it, percent-escaped as a URL holds them."""
    return url.replace("://", f"://al:{quote(password, safe='')}@", 1)


@pytest.mark.chroma_server
def test_a_user_and_password_in_the_url_are_sent_as_basic_auth(chroma_server: ChromaServer, tmp_path: Path) -> None:
    # they were dropped: the server was asked with no credentials at all
    with gateway(chroma_server.url, "Authorization", BASIC) as gate:
        url = with_user(url_of(gate))
        with ctxplugin.connect(config(url, tmp_path, chroma_headers={"x-other": "kept"}, cache={"enabled": True})) as engine:
            engine.facts.write("The vendor is Acme", key="vendor", scope=S)
            current = engine.facts.current("vendor", scope=S)
            assert engine.cache is not None and unwrap(engine.cache.store).count() == 0
        assert current is not None and current.text == "The vendor is Acme"
        headers = {"x-chroma-token": SECRET}
        facts, cache = ChromaFactStore.http(url, headers=headers), ChromaAnswerCacheStore.http(url, headers=headers)
        try:
            assert facts.find(FactQuery(reader=S)) == [] and cache.count() == 0
        finally:
            facts.close()
            cache.close()
        assert gate.refused == 0
        assert headers == {"x-chroma-token": SECRET}, "the caller's headers are not changed"


@pytest.mark.chroma_server
def test_a_password_the_server_refuses_is_never_shown(chroma_server: ChromaServer, tmp_path: Path) -> None:
    with gateway(chroma_server.url, "Authorization", BASIC) as gate, pytest.raises(ConfigError, match="refused the credentials") as raised:
        ctxplugin.connect(config(with_user(url_of(gate), "wrong-password"), tmp_path))
    message = str(raised.value)
    assert "wrong-password" not in message and "al:***@" in message and "Authorization: Basic" in message


@pytest.mark.parametrize("header", ["Authorization", "authorization"])
def test_a_url_with_credentials_and_an_authorization_header_too_is_refused(header: str, tmp_path: Path) -> None:
    url = with_user("http://127.0.0.1:8000")
    with pytest.raises(ConfigError, match="keep one of them") as raised:
        ctxplugin.connect(config(url, tmp_path, chroma_headers={header: f"Bearer {SECRET}"}))
    with pytest.raises(ConfigError, match="keep one of them") as by_hand:
        ChromaFactStore.http(url, headers={header: f"Bearer {SECRET}"})
    with pytest.raises(ConfigError, match="keep one of them"):
        ChromaAnswerCacheStore.http(url, headers={header: f"Bearer {SECRET}"})
    for message in (str(raised.value), str(by_hand.value)):
        assert quote(PASSWORD, safe="") not in message and SECRET not in message and "al:***@127.0.0.1:8000" in message


def test_the_password_in_the_url_never_shows_in_the_configuration_or_its_errors() -> None:
    given = ContextConfig(chroma_url=with_user("http://127.0.0.1:8000"))
    escaped = quote(PASSWORD, safe="")
    for shown in (repr(given), str(given)):
        assert escaped not in shown and "al:***@127.0.0.1:8000" in shown
    for url in (with_user("http://127.0.0.1:99999"), with_user("http://127.0.0.1:8000/prefix"), "http://al:pa/ss@127.0.0.1:8000"):
        with pytest.raises(ConfigError, match="must look like") as raised:
            ChromaFactStore.http(url)
        assert escaped not in str(raised.value) and "pa/ss" not in str(raised.value) and "al:***@" in str(raised.value)
