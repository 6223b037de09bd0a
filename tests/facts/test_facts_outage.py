"""Facts read from tool outputs captured while the facts store was out: read once it is back.

The stores are the embedded ones (SQLite CAS, Chroma on disk); the outage is injected as a
facts write that raises :class:`~ctxplugin.errors.StoreUnavailableError`, as a Chroma server
that refuses connections makes it raise."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import Fact
from ctxplugin.stages._unread import UnreadOutputs

S = Scope(session_id="s1", user_id="u1")


class Outage:
    """The facts store's writes fail while ``down``."""

    def __init__(self, engine: ContextEngine, mocker: MockerFixture) -> None:
        self.down = False
        store = engine.facts.store
        real = store.add

        def add(facts: Sequence[Fact]) -> None:
            if self.down:
                raise StoreUnavailableError("Chroma server: connection refused")
            real(facts)

        mocker.patch.object(store, "add", side_effect=add)


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    with ContextEngine.embedded(tmp_path / "stores", ContextConfig(mode="whole")) as eng:
        yield eng


def reservation(call_id: str, cabin: str) -> ToolMessage:
    events = [{"event_id": f"E{i}", "note": f"step {i} of the rebooking"} for i in range(80)]
    payload = {"reservation_id": "OBUT9V", "origin": "IAH", "destination": "DEN", "cabin": cabin, "events": events}
    return ToolMessage(json.dumps(payload), tool_call_id=call_id, name="get_reservation_details")


def call(call_id: str) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "get_reservation_details", "args": {"reservation_id": "OBUT9V"}, "id": call_id}])


def test_an_output_captured_while_the_facts_store_is_out_is_read_once_it_is_back(
    engine: ContextEngine, mocker: MockerFixture
) -> None:
    outage = Outage(engine, mocker)
    outage.down = True
    compact = engine.capture_tool_result(reservation("c1", "economy"), scope=S)
    assert compact.additional_kwargs["ctxplugin"]["ref"]  # stored: only the facts store is out
    assert engine.facts.current("reservation:OBUT9V", scope=S) is None
    outage.down = False
    messages: list[BaseMessage] = [HumanMessage("Change reservation OBUT9V please", id="h0"), call("c1"), compact,
                                   AIMessage("Found it.", id="a0"), HumanMessage("What cabin is OBUT9V in?", id="h1")]
    report = engine.prepare(messages, scope=S).report
    assert not report.warnings
    fact = engine.facts.current("reservation:OBUT9V", scope=S)
    assert fact is not None and "cabin=economy" in fact.text
    assert fact.source.ref == compact.additional_kwargs["ctxplugin"]["ref"]


def test_a_later_read_of_the_same_record_stays_the_current_one(engine: ContextEngine, mocker: MockerFixture) -> None:
    outage = Outage(engine, mocker)
    outage.down = True
    first = engine.capture_tool_result(reservation("c1", "economy"), scope=S)
    outage.down = False
    second = engine.capture_tool_result(reservation("c2", "business"), scope=S)
    messages: list[BaseMessage] = [HumanMessage("Check reservation OBUT9V", id="h0"), call("c1"), first,
                                   call("c2"), second, HumanMessage("What cabin is OBUT9V in?", id="h1")]
    engine.prepare(messages, scope=S)
    fact = engine.facts.current("reservation:OBUT9V", scope=S)
    assert fact is not None and "cabin=business" in fact.text


def test_an_output_still_unread_while_the_store_stays_out_is_read_on_a_later_call(
    engine: ContextEngine, mocker: MockerFixture
) -> None:
    outage = Outage(engine, mocker)
    outage.down = True
    compact = engine.capture_tool_result(reservation("c1", "economy"), scope=S)
    messages: list[BaseMessage] = [HumanMessage("Check reservation OBUT9V", id="h0"), call("c1"), compact,
                                   HumanMessage("What cabin is OBUT9V in?", id="h1")]
    report = engine.prepare(messages, scope=S).report
    assert any("facts store unavailable" in w for w in report.warnings)
    outage.down = False
    engine.prepare([*messages, AIMessage("Economy.", id="a1"), HumanMessage("Thanks", id="h2")], scope=S)
    fact = engine.facts.current("reservation:OBUT9V", scope=S)
    assert fact is not None and "cabin=economy" in fact.text


def test_the_outputs_kept_for_a_later_reading_are_bounded_and_what_goes_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    kept = UnreadOutputs(outputs=3, chars=10_000)
    a, b = Scope(session_id="a"), Scope(session_id="b")
    outputs = [ToolMessage("x" * 3000, tool_call_id=f"c{i}", name="t") for i in range(5)]
    kept.keep(outputs[0], a)
    kept.keep(outputs[1], b)
    kept.keep(outputs[2], a)
    kept.keep(outputs[3], a)  # four kept: the oldest goes, session a's first
    assert kept.kept(a) == [outputs[2], outputs[3]] and kept.kept(b) == [outputs[1]]
    kept.settled([outputs[2]], a)
    kept.keep(ToolMessage("y" * 9000, tool_call_id="big", name="t"), a)  # over the characters: the oldest go
    assert kept.kept(b) == [] and [m.content[:1] for m in kept.kept(a)] == ["y"]
    lost = [r.getMessage() for r in caplog.records if "not recorded" in r.getMessage()]
    assert [("session a" in m, "session b" in m) for m in lost] == [(True, False), (False, True), (True, False)]
