"""Hostile tool outputs through an engine on the Postgres CAS: stored and expanded exactly."""

from __future__ import annotations

import psycopg
import pytest
from ctxplugin_postgres import PostgresCASStore
from langchain_core.messages import ToolMessage
from psycopg import sql

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas.capture import SUMMARY_BOUND
from ctxplugin.errors import StoreError
from ctxplugin.facts import FactsLedger, MemoryFactStore

pytestmark = pytest.mark.postgres

SCOPE = Scope(session_id="b|c", user_id="a")
OUTPUTS = {
    "lone surrogates": "user_id: u\udcff1\n" + "row \udcff undecodable\n" * 400,
    "NUL bytes": "a\x00b\x00" * 3000,
    "binary-ish bytes": bytes(range(256)).decode("utf-8", "surrogateescape") * 40,
    "nested lists 1200 deep": "[" * 1200 + "]" * 1200,
    "integer of 5,000 digits": '{"n": ' + "7" * 5000 + ', "rows": [' + ",".join(map(str, range(800))) + "]}",
    "ten megabytes": "".join(f"{i:08d} line of a very large output \udcff\n" for i in range(260_000)),
}


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_hostile_outputs_round_trip_through_postgres(pg_dsn: str, pg_schema: str, name: str) -> None:
    config = ContextConfig()
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        engine = ContextEngine(config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))
        compact, report = engine.capture_with_report(ToolMessage(content=OUTPUTS[name], tool_call_id="c1", name="dump"), SCOPE)
        assert report.ref_id is not None and not report.warnings
        assert engine.expand_ref(report.ref_id, SCOPE) == OUTPUTS[name]
        assert engine.counter.count(str(compact.content)) <= SUMMARY_BOUND * config.cas.summary_tokens + 40


@pytest.mark.parametrize("session", ["s\udcff", "s\x00"])
def test_scope_ids_postgres_text_cannot_hold_are_stored_too(pg_dsn: str, pg_schema: str, session: str) -> None:
    config = ContextConfig()
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        engine = ContextEngine(config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))
        output = OUTPUTS["lone surrogates"]
        compact, report = engine.capture_with_report(ToolMessage(content=output, tool_call_id="c1", name="dump"), Scope(session_id=session))
        assert report.ref_id is not None and not report.warnings and compact.content != output
        assert engine.expand_ref(report.ref_id, Scope(session_id=session)) == output


def test_a_stored_output_whose_bytes_were_damaged_is_a_store_error_the_model_is_told_of(pg_dsn: str, pg_schema: str) -> None:
    config = ContextConfig()
    with PostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
        engine = ContextEngine(config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))
        compact = engine.capture_tool_result(ToolMessage(content=OUTPUTS["lone surrogates"], tool_call_id="c1", name="dump"), SCOPE)
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        with psycopg.connect(pg_dsn, autocommit=True) as conn:  # no longer UTF-8: a damaged value
            conn.execute(sql.SQL("UPDATE {}.ctxplugin_cas_content SET content = %s").format(sql.Identifier(pg_schema)), (b"order \xff\x80",))
        with pytest.raises(StoreError, match="damaged") as info:
            engine.expand_ref(ref, SCOPE)
        assert isinstance(info.value.__cause__, UnicodeDecodeError)
        tool = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
        answer = tool.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"},
                             config={"configurable": {"thread_id": SCOPE.session_id, "user_id": SCOPE.user_id}})
        assert isinstance(answer, ToolMessage)
        assert str(answer.content).startswith("expand_ref: ") and "damaged" in str(answer.content)
        assert "will not help" in str(answer.content) and "try again later" not in str(answer.content)
