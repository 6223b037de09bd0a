"""A tool output captured by one worker while the facts store was out, whose conversation's next
call another worker serves: its facts are read there, from the output the conversation keeps.

Two engines on one real Chroma server and one SQLite CAS stand for two worker processes; the
outage is a facts write of the first worker that raises
:class:`~ctxplugin.errors.StoreUnavailableError`, as a Chroma server that refuses connections
makes it raise."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator, Sequence
from contextlib import ExitStack
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.config import FactsConfig
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import ChromaFactStore, Fact, FactsLedger

S = Scope(session_id="s1", user_id="u1")

pytestmark = pytest.mark.chroma_server


@pytest.fixture
def workers(tmp_path: Path, chroma_url: str) -> Iterator[tuple[ContextEngine, ContextEngine]]:
    config = ContextConfig(mode="whole", facts=FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}"))
    with ExitStack() as stack:
        engines = []
        for _ in range(2):
            store = stack.enter_context(ChromaFactStore.http(chroma_url, config=config.facts))
            cas = SQLiteCASStore(tmp_path / "cas.db")
            stack.callback(cas.close)
            engines.append(ContextEngine(config=config, cas=cas, facts=FactsLedger(store, config.facts)))
        yield engines[0], engines[1]


def take_down(engine: ContextEngine, mocker: MockerFixture) -> None:
    """The facts store of ``engine`` refuses every write from now on."""

    def refused(*_: Sequence[Fact]) -> None:
        raise StoreUnavailableError("Chroma server: connection refused")

    for name in ("add", "update", "write"):
        mocker.patch.object(engine.facts.store, name, side_effect=refused)


def reservation(call_id: str) -> ToolMessage:
    events = [{"event_id": f"E{i}", "note": f"step {i} of the rebooking"} for i in range(80)]
    payload = {"reservation_id": "OBUT9V", "origin": "IAH", "destination": "DEN", "cabin": "economy", "events": events}
    return ToolMessage(json.dumps(payload), tool_call_id=call_id, name="get_reservation_details", id=f"t-{call_id}")


def conversation(output: ToolMessage) -> list[BaseMessage]:
    call = AIMessage("", id="a0", tool_calls=[
        {"name": "get_reservation_details", "args": {"reservation_id": "OBUT9V"}, "id": output.tool_call_id}
    ])
    return [HumanMessage("Change reservation OBUT9V please", id="h0"), call, output,
            AIMessage("Found it.", id="a1"), HumanMessage("What cabin is OBUT9V in?", id="h1")]


def kept_whole(original: ToolMessage, captured: ToolMessage) -> ToolMessage:
    """What a state that keeps originals holds: the output, with the capture's annotation."""
    return original.model_copy(update={"additional_kwargs": captured.additional_kwargs})


def captured_while_out(engine: ContextEngine, mocker: MockerFixture) -> tuple[ToolMessage, ToolMessage]:
    """A reservation output and what ``engine`` made of it while its facts store was out."""
    take_down(engine, mocker)
    output = reservation("c1")
    return output, engine.capture_tool_result(output, scope=S)


def test_another_worker_reads_an_output_captured_while_the_store_was_out(
    workers: tuple[ContextEngine, ContextEngine], mocker: MockerFixture
) -> None:
    first, second = workers
    output, captured = captured_while_out(first, mocker)
    assert captured.additional_kwargs["ctxplugin"]["ref"]  # stored: only the facts store is out
    report = second.prepare(conversation(kept_whole(output, captured)), scope=S).report
    assert not report.warnings
    fact = second.facts.current("reservation:OBUT9V", scope=S)
    assert fact is not None and "cabin=economy" in fact.text
    assert fact.source.ref == captured.additional_kwargs["ctxplugin"]["ref"]


def test_an_output_read_at_capture_is_not_read_again_by_another_worker(
    workers: tuple[ContextEngine, ContextEngine]
) -> None:
    first, second = workers
    output = reservation("c1")
    captured = first.capture_tool_result(output, scope=S)
    assert "unread" not in json.dumps(captured.additional_kwargs)
    before = first.facts.history("reservation:OBUT9V", scope=S)
    second.prepare(conversation(kept_whole(output, captured)), scope=S)
    assert [f.id for f in second.facts.history("reservation:OBUT9V", scope=S)] == [f.id for f in before]


def test_the_worker_that_kept_the_output_does_not_read_it_twice(
    workers: tuple[ContextEngine, ContextEngine], mocker: MockerFixture
) -> None:
    first, second = workers
    output, captured = captured_while_out(first, mocker)
    mocker.stopall()  # the store is back
    messages = conversation(kept_whole(output, captured))
    second.prepare(messages, scope=S)
    first.prepare(messages, scope=S)
    assert len(first.facts.history("reservation:OBUT9V", scope=S)) == 1


def test_a_state_that_keeps_only_the_compact_form_reads_no_facts_from_it(
    workers: tuple[ContextEngine, ContextEngine], mocker: MockerFixture
) -> None:
    first, second = workers
    take_down(first, mocker)
    captured = first.capture_tool_result(reservation("c1"), scope=S)
    second.prepare(conversation(captured), scope=S)
    assert second.facts.current("reservation:OBUT9V", scope=S) is None


def test_the_worker_that_captured_it_reads_it_once_when_the_state_gave_it_an_id(
    workers: tuple[ContextEngine, ContextEngine], mocker: MockerFixture
) -> None:
    first, _ = workers
    take_down(first, mocker)
    output = reservation("c1").model_copy(update={"id": None})  # a tool node's result has none
    captured = first.capture_tool_result(output, scope=S)
    mocker.stopall()
    kept = kept_whole(output, captured).model_copy(update={"id": "given-by-the-state"})
    first.prepare(conversation(kept), scope=S)
    assert len(first.facts.history("reservation:OBUT9V", scope=S)) == 1
    stored = first.facts.search("reservation OBUT9V IAH DEN", scope=S, k=50)
    texts = [hit.fact.text for hit in stored]
    assert len(texts) == len(set(texts))
