"""Scope ids Postgres text cannot hold (NUL, lone surrogates) are stored all the same: their
outputs get refs and expand back, ids differing only in such characters stay apart, and the
rows of ordinary ids are written exactly as before."""

from __future__ import annotations

import psycopg
import pytest
from ctxplugin_postgres import PostgresCASStore
from langchain_core.messages import ToolMessage
from psycopg import sql

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import RefNotFoundError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.testing.cas_contract import make_item

pytestmark = pytest.mark.postgres

OUTPUT = "user_id: u1\n" + "".join(f"row {i}: status ok, amount {i * 7}\n" for i in range(300))


def _engine(cas: PostgresCASStore) -> ContextEngine:
    config = ContextConfig()
    return ContextEngine(config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))


@pytest.mark.parametrize("odd", ["\x00", "\ud800", "\udcff"])
@pytest.mark.parametrize("field", ["session_id", "user_id", "workspace_id", "tenant_id"])
def test_a_capture_with_an_odd_id_gets_a_ref_and_expands(pg_dsn: str, pg_schema: str, odd: str, field: str) -> None:
    scope = Scope(**{"session_id": "s", field: f"a{odd}b"})
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        engine = _engine(cas)
        compact, report = engine.capture_with_report(ToolMessage(content=OUTPUT, tool_call_id="c1", name="dump"), scope)
        assert report.ref_id is not None and not report.warnings and compact.content != OUTPUT
        assert engine.expand_ref(report.ref_id, scope) == OUTPUT


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("a\x00b", "ab"),
        ("a\x00b", "a%00b"),  # an ordinary id spelling the odd one's column value
        ("a\ud800b", "a%ED%A0%80b"),
        ("a\ud800b", "a\udcffb"),
        ("a\x00b", "a\x00\x00b"),
    ],
)
@pytest.mark.parametrize("field", ["session_id", "user_id", "tenant_id"])
def test_ids_differing_only_in_odd_characters_stay_apart(
    pg_dsn: str, pg_schema: str, one: str, other: str, field: str
) -> None:
    first, second = Scope(**{"session_id": "s", field: one}), Scope(**{"session_id": "s", field: other})
    item = make_item("an output only its own session may read")
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        assert cas.put(item, first) is True
        assert cas.get(item.ref_id, first).content == item.content
        assert cas.exists(item.ref_id, first) and not cas.exists(item.ref_id, second)
        with pytest.raises(RefNotFoundError):
            cas.get(item.ref_id, second)
        assert cas.put(item, second) is True  # a grant of its own, not the other's
        assert cas.revoke(item.ref_id, second) is True
        assert cas.get(item.ref_id, first).content == item.content


def test_shared_grants_of_an_odd_owner_are_read_by_its_group(pg_dsn: str, pg_schema: str) -> None:
    owner = Scope(session_id="s1\x00", user_id="u\ud800", tenant_id="t\x00")
    item = make_item("shared with every session of the user")
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        cas.put(item, owner, visibility="user")
        assert cas.get(item.ref_id, Scope(session_id="s2", user_id="u\ud800", tenant_id="t\x00")).content == item.content
        for stranger in (Scope(session_id="s2", user_id="u\udcff", tenant_id="t\x00"), Scope(session_id="s2", user_id="u\ud800", tenant_id="t")):
            with pytest.raises(RefNotFoundError):
                cas.get(item.ref_id, stranger)


def test_ordinary_ids_are_stored_as_before(pg_dsn: str, pg_schema: str) -> None:
    scope = Scope(session_id="a%2Fb/ns %00", user_id="ünï,cødé %7C!", workspace_id="w", tenant_id="acme")
    item = make_item("an ordinary output")
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        cas.put(item, scope)
    with psycopg.connect(pg_dsn) as conn:
        rows = conn.execute(
            sql.SQL("SELECT owner_key, tenant_id, workspace_id, user_id, session_id FROM {}.ctxplugin_cas_grants").format(
                sql.Identifier(pg_schema)
            )
        ).fetchall()
    assert rows == [(scope.key(), "acme", "w", "ünï,cødé %7C!", "a%2Fb/ns %00")]
