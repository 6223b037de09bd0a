"""A tool polled again with the same arguments: what its later output says replaces what the
earlier one said, even when the output has no id field to key its record by."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import FactQuery
from ctxplugin.testing import memory_engine

S = Scope(session_id="poll")
PROCESSING: dict[str, Any] = {"status": "processing", "carrier": None, "eta": "2026-12-04"}
SHIPPED: dict[str, Any] = {"status": "shipped", "carrier": "UPS", "eta": "2026-12-02"}


def chroma_engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(path=tmp_path / "store", config=ContextConfig(mode="compact"))


def compact_memory(tmp_path: Path) -> ContextEngine:
    engine: ContextEngine = memory_engine(ContextConfig(mode="compact"))
    return engine


ENGINES: list[Callable[[Path], ContextEngine]] = [compact_memory, chroma_engine]


def lookup(n: int, output: dict[str, Any], order: str = "7731") -> list[BaseMessage]:
    return [
        AIMessage("", tool_calls=[{"name": "get_order_status", "args": {"order": order}, "id": f"c{n}"}], id=f"a{n}"),
        ToolMessage(json.dumps(output), tool_call_id=f"c{n}", name="get_order_status", id=f"t{n}"),
        AIMessage(f"Status: {output['status']}.", id=f"r{n}"),
    ]


def polled(*outputs: dict[str, Any], orders: tuple[str, ...] = ()) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are a support agent.")]
    for n, output in enumerate(outputs, start=1):
        messages += [HumanMessage("Where is my order 7731? Check again.", id=f"u{n}"), *lookup(n, output, *orders[n - 1 : n])]
    return [*messages, HumanMessage("What is the eta?", id="last")]


def current(engine: ContextEngine) -> list[str]:
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=S, valid=True)) if f.from_tool)


def shown(engine: ContextEngine, messages: list[BaseMessage]) -> dict[str | None, str]:
    return {m.id: str(m.content) for m in engine.prepare(messages, scope=S).messages}


@pytest.mark.parametrize("make", ENGINES)
def test_a_later_poll_replaces_what_the_earlier_output_said(make: Callable[[Path], ContextEngine], tmp_path: Path) -> None:
    engine = make(tmp_path)
    view = shown(engine, polled(PROCESSING, SHIPPED))
    assert current(engine) == ["order_status: status=shipped, carrier=UPS, eta=2026-12-02"]
    assert view["t1"].startswith("[outdated: this is now: see the tool result t2]")
    assert not view["t2"].startswith("[outdated")


@pytest.mark.parametrize("make", ENGINES)
def test_another_order_replaces_nothing(make: Callable[[Path], ContextEngine], tmp_path: Path) -> None:
    engine = make(tmp_path)
    view = shown(engine, polled(PROCESSING, SHIPPED, orders=("7731", "8842")))
    assert len(current(engine)) == 2
    assert not any(text.startswith("[outdated") for text in view.values())


def test_the_same_output_again_changes_nothing(tmp_path: Path) -> None:
    engine = compact_memory(tmp_path)
    view = shown(engine, polled(PROCESSING, PROCESSING))
    assert current(engine) == ["order_status: status=processing, carrier=None, eta=2026-12-04"]
    assert not any(text.startswith("[outdated") for text in view.values())
    assert not engine.facts.superseded(scope=S)


def test_a_status_that_goes_back_is_current_again(tmp_path: Path) -> None:
    engine = compact_memory(tmp_path)
    view = shown(engine, polled(PROCESSING, SHIPPED, PROCESSING))
    assert current(engine) == ["order_status: status=processing, carrier=None, eta=2026-12-04"]
    assert view["t2"].startswith("[outdated: this is now: see the tool result t3]")
    assert not view["t3"].startswith("[outdated")


@pytest.mark.parametrize("make", ENGINES)
def test_one_call_per_turn_with_captured_outputs(make: Callable[[Path], ContextEngine], tmp_path: Path) -> None:
    """Each output captured as it arrives (read before the call that pairs it), one prepare per turn."""
    engine = make(tmp_path)
    history: list[BaseMessage] = [SystemMessage("You are a support agent.")]
    for n, output in enumerate((PROCESSING, SHIPPED), start=1):
        ask, result, answer = lookup(n, output)
        history += [HumanMessage("Where is my order 7731?", id=f"u{n}"), ask]
        assert isinstance(result, ToolMessage)
        history += [engine.capture_tool_result(result, S), answer]
        engine.prepare([*history, HumanMessage("And now?", id=f"q{n}")], scope=S)
    assert current(engine) == ["order_status: status=shipped, carrier=UPS, eta=2026-12-02"]


def test_a_list_of_records_without_ids_is_replaced_as_a_whole(tmp_path: Path) -> None:
    engine = compact_memory(tmp_path)
    before = [{"leg": "A", "gate": "B12"}, {"leg": "B", "gate": "C3"}]
    after = [{"leg": "A", "gate": "B12"}, {"leg": "B", "gate": "D7"}]
    messages: list[BaseMessage] = [HumanMessage("Gates of my trip?", id="u1")]
    for n, output in enumerate((before, after), start=1):
        messages += [
            AIMessage("", tool_calls=[{"name": "list_gates", "args": {"trip": "T9"}, "id": f"c{n}"}], id=f"a{n}"),
            ToolMessage(json.dumps(output), tool_call_id=f"c{n}", name="list_gates", id=f"t{n}"),
            AIMessage("Listed.", id=f"r{n}"),
        ]
    engine.prepare([*messages, HumanMessage("Which gate for leg B?", id="u2")], scope=S)
    texts = current(engine)
    assert any("gate=D7" in t for t in texts) and not any("gate=C3" in t for t in texts)
    assert any("gate=B12" in t for t in texts), "a record the later output states again stays current"


def test_a_command_run_again_replaces_nothing_said_in_plain_text(tmp_path: Path) -> None:
    """Statements read from plain text are no records: a lint run again after an edit leaves
    what the earlier run said as it was (marking it would rewrite the cached history)."""
    engine = compact_memory(tmp_path)
    messages: list[BaseMessage] = [HumanMessage("Lint the file.", id="u1")]
    runs = ("L: 1 | P: 8 | L060 | Use 'COALESCE' instead of 'IFNULL' or 'NVL'.", "L: 1 | P: 8 | L060 | Use 'COALESCE' instead of 'IFNULL'.")
    for n, line in enumerate(runs, start=1):
        messages += [
            AIMessage("", tool_calls=[{"name": "bash", "args": {"command": "make lint"}, "id": f"c{n}"}], id=f"a{n}"),
            ToolMessage(line, tool_call_id=f"c{n}", name="bash", id=f"t{n}"),
            AIMessage("Ran it.", id=f"r{n}"),
        ]
    engine.prepare([*messages, HumanMessage("Is it green?", id="u2")], scope=S)
    assert len(current(engine)) == 2
    assert not engine.facts.superseded(scope=S)


def test_a_conversation_read_afresh_pairs_nothing_again(tmp_path: Path) -> None:
    """The history sent again from its start with a message edited (the stage reads it afresh):
    the calls paired before are not paired again, a later one taken for an earlier one."""
    engine = compact_memory(tmp_path)
    messages = polled(PROCESSING, SHIPPED, PROCESSING)
    engine.prepare(messages, scope=S)
    edited = [m.model_copy(update={"content": "You are a helpful support agent."}) if m.type == "system" else m for m in messages]
    engine.prepare(edited, scope=S)
    engine.prepare(polled(PROCESSING, SHIPPED, PROCESSING, SHIPPED), scope=S)
    assert current(engine) == ["order_status: status=shipped, carrier=UPS, eta=2026-12-02"]
    assert [f.source.call_id for f in engine.facts.store.find(FactQuery(reader=S, valid=True))] == ["c4"]


def test_sessions_polling_at_once_each_keep_their_latest_status(tmp_path: Path) -> None:
    engine = compact_memory(tmp_path)
    start = threading.Barrier(6)

    def session(n: int) -> list[str]:
        scope = Scope(session_id=f"poll-{n}")
        first, second = (PROCESSING, SHIPPED) if n % 2 else (SHIPPED, PROCESSING)
        start.wait()
        engine.prepare(polled(first, second), scope=scope)
        return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=scope, valid=True)) if f.from_tool)

    with ThreadPoolExecutor(6) as pool:
        found = list(pool.map(session, range(6)))
    shipped, processing = ["order_status: status=shipped, carrier=UPS, eta=2026-12-02"], ["order_status: status=processing, carrier=None, eta=2026-12-04"]
    assert found == [processing, shipped] * 3


@pytest.mark.parametrize("captured", [False, True], ids=["read in prepare", "captured"])
def test_a_call_id_used_again_for_another_call_replaces_nothing_of_it(captured: bool, tmp_path: Path) -> None:
    """A host may give a later call the id of an earlier one (the recorded airline runs do):
    what the later call's output said is not taken for the earlier call's, so the same order
    polled again replaces only that order's status."""
    engine = compact_memory(tmp_path)
    delayed: dict[str, Any] = {"status": "delayed", "carrier": "DHL", "eta": "2026-12-09"}
    calls = [("c1", "7731", PROCESSING), ("c1", "8842", delayed), ("c2", "7731", SHIPPED)]
    history: list[BaseMessage] = [SystemMessage("You are a support agent.")]
    for n, (call_id, order, output) in enumerate(calls, start=1):
        history += [
            HumanMessage(f"Where is my order {order}?", id=f"u{n}"),
            AIMessage("", tool_calls=[{"name": "get_order_status", "args": {"order": order}, "id": call_id}], id=f"a{n}"),
        ]
        result = ToolMessage(json.dumps(output), tool_call_id=call_id, name="get_order_status", id=f"t{n}")
        history += [engine.capture_tool_result(result, S) if captured else result, AIMessage("Checked.", id=f"r{n}")]
        engine.prepare([*history, HumanMessage("And now?", id=f"q{n}")], scope=S)
    assert current(engine) == [
        "order_status: status=delayed, carrier=DHL, eta=2026-12-09",
        "order_status: status=shipped, carrier=UPS, eta=2026-12-02",
    ]
