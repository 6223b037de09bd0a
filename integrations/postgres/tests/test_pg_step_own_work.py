"""A step whose own work between two store calls takes longer than ``stores.timeout``: the real
Postgres on 127.0.0.1:5432 holds the CAS and the facts write lock.

Reading facts from a long conversation (a fact extractor of the user's, a backlog of outputs
kept whole during an outage) ran after the step's first CAS put. The step's store time was
counted from that put, so the facts write lock was "skipped: this step's store time is used up"
on every such step, the server fine: the facts of those messages were never recorded.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path

import pytest
from ctxplugin_postgres import migrate
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

import ctxplugin
from ctxplugin import ContextConfig, Scope
from ctxplugin.facts.extract import FactDraft, as_extractor

pytestmark = pytest.mark.postgres

TIMEOUT = 1.0
SCOPE = Scope(session_id="own-work", user_id="ops")


def _slow_extractor(message: BaseMessage) -> Sequence[FactDraft]:
    time.sleep(TIMEOUT * 0.6)  # a model-backed extractor: the step's own work, no store waited for
    if not isinstance(message, HumanMessage):
        return []
    return [FactDraft(text=str(message.content), key=f"owner of {message.id}")]


def _output(n: int) -> str:
    return "\n".join(f"worker-{n} request {n * 100 + r} took {r * 7}ms on shard {r % 4} status=ok" for r in range(120))


def test_facts_are_recorded_when_reading_them_takes_longer_than_the_store_timeout(pg_dsn: str, pg_schema: str, tmp_path: Path) -> None:
    migrate(pg_dsn, schema=pg_schema)
    config = ContextConfig(postgres_dsn=pg_dsn, postgres_schema=pg_schema, path=str(tmp_path),
                           stores={"timeout": TIMEOUT, "retry_after": 0.2})
    with ctxplugin.connect(config) as engine:
        engine.facts.extractor = as_extractor(_slow_extractor)
        messages: list[BaseMessage] = [HumanMessage("Who owns the deploy?", id="h")]
        warnings: list[str] = []
        for n in range(4):  # the view grows until its outputs are stored in the CAS, then read for facts
            messages += [
                AIMessage("", id=f"a{n}", tool_calls=[{"id": f"c{n}", "name": "logs", "args": {}}]),
                ToolMessage(_output(n), tool_call_id=f"c{n}", name="logs", id=f"t{n}"),
                HumanMessage(f"The owner of step {n} is team-{n}.", id=f"h{n}"),
            ]
            warnings += engine.prepare(messages, scope=SCOPE).report.warnings
        assert not [w for w in warnings if "used up" in w]
        for n in range(4):
            fact = engine.facts.current(f"owner of h{n}", scope=SCOPE)
            assert fact is not None and fact.text == f"The owner of step {n} is team-{n}."
