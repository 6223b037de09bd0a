"""A host that keeps only its latest turns (``trim_messages`` before the engine, a chain that
keeps the last N turns, a summary in place of the dropped head) sends a history whose front
moves on every step. That is no rewind: the previous call's later messages are all still there,
in order. What the dropped tool outputs and user messages stated stays current and is shown,
whether the messages carry ids or not."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Literal

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin.facts.model import FactQuery
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

S = Scope(session_id="s1", user_id="u1")
TURNS = 5
KEPT = 2  # turns the host keeps

Ids = Literal["none", "replies", "users"]


@tool
def get_reservation_details(reservation_id: str) -> str:
    """The details of a reservation."""
    return reservation_id


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContextEngine]:
    if request.param == "memory":
        with memory_engine() as eng:
            yield eng
    else:
        with ContextEngine.embedded(tmp_path / "stores") as eng:
            yield eng


def reservation(i: int) -> str:
    return f"RES{i:03d}X"


def turn(i: int, ids: Ids) -> tuple[HumanMessage, AIMessage, ToolMessage, AIMessage]:
    """One turn: the user asks for a reservation and states a seat, the agent looks it up and
    answers. ``ids``: which messages carry one ("replies": the agent's, as a chat model gives
    them; "users": the user's)."""
    payload = {"reservation_id": reservation(i), "origin": "IAH", "destination": "DEN", "gate": f"B{20 + i}"}
    call = {"name": "get_reservation_details", "args": {"reservation_id": reservation(i)}, "id": f"c{i}"}
    return (
        HumanMessage(f"My seat on {reservation(i)} is {i + 1}A. Look it up please.", id=f"h{i}" if ids == "users" else None),
        AIMessage("", tool_calls=[call], id=f"a{i}" if ids == "replies" else None),
        ToolMessage(json.dumps(payload), tool_call_id=f"c{i}", name="get_reservation_details"),
        AIMessage(f"{reservation(i)} leaves from gate B{20 + i}.", id=f"r{i}" if ids == "replies" else None),
    )


def converse(engine: ContextEngine, *, ids: Ids, captured: bool, summary: bool) -> list[list[BaseMessage]]:
    """``TURNS`` turns, each model call sent with the latest ``KEPT`` turns only (and, with
    ``summary``, a summary rewritten on every step in place of the turns dropped)."""
    turns: list[list[BaseMessage]] = []
    for i in range(TURNS):
        ask, call, output, answer = turn(i, ids)
        turns.append([ask, call])
        engine.prepare(window(turns, summary=summary), [get_reservation_details], scope=S)
        turns[-1].append(engine.capture_tool_result(output, scope=S) if captured else output)
        engine.prepare(window(turns, summary=summary), [get_reservation_details], scope=S)
        turns[-1].append(answer)
    return turns


def window(turns: list[list[BaseMessage]], *, summary: bool) -> list[BaseMessage]:
    kept = [m for t in turns[-KEPT:] for m in t]
    dropped = len(turns) - KEPT
    head: list[BaseMessage] = [SystemMessage("You help travellers with their reservations.")]
    if summary and dropped > 0:
        head.append(
            HumanMessage(
                f"Here is a summary of the conversation to date: {dropped} reservations looked up.",
                additional_kwargs={"lc_source": "summarization"},
            )
        )
    return [*head, *kept]


def current(engine: ContextEngine) -> list[str]:
    return [f.text for f in engine.facts.store.find(FactQuery(reader=S, valid=True))]


def shown(prepared: PreparedContext) -> str:
    return "\n".join(content_text(m.content) for m in prepared.messages)


@pytest.mark.parametrize("summary", [False, True], ids=["trimmed", "summarized"])
@pytest.mark.parametrize("captured", [False, True], ids=["read", "captured"])
@pytest.mark.parametrize("ids", ["none", "replies", "users"])
def test_a_window_sliding_past_tool_outputs_keeps_their_facts(
    engine: ContextEngine, ids: Ids, captured: bool, summary: bool
) -> None:
    turns = converse(engine, ids=ids, captured=captured, summary=summary)
    facts = current(engine)
    for i in range(TURNS):  # the first turns left the window steps ago
        assert any(reservation(i) in f and f"B{20 + i}" in f for f in facts), (i, facts)
        assert any(f"is {i + 1}A" in f for f in facts), (i, facts)
    question = HumanMessage("Which gate does RES000X leave from?")
    turns.append([question])
    prepared = engine.prepare(window(turns, summary=summary), [get_reservation_details], scope=S)
    assert "B20" in shown(prepared), "the fact of an output the window dropped is shown"
    assert not prepared.report.warnings


@pytest.mark.parametrize("ids", ["none", "users"])
def test_a_window_sliding_past_a_changed_value_keeps_the_newer_one(engine: ContextEngine, ids: Ids) -> None:
    """The same reservation read on every turn: the window drops the older outputs, and the
    value of the latest one stays the current one (the older ones are not current again)."""
    turns: list[list[BaseMessage]] = []
    for i in range(TURNS):
        ask, call, _, answer = turn(i, ids)
        payload = {"reservation_id": "OBUT9V", "origin": "IAH", "destination": "DEN", "cabin": f"fare{i}"}
        output = ToolMessage(json.dumps(payload), tool_call_id=f"c{i}", name="get_reservation_details")
        turns.append([ask, call, output, answer])
        engine.prepare(window(turns, summary=False), [get_reservation_details], scope=S)
    fact = engine.facts.current("reservation:OBUT9V", scope=S)
    assert fact is not None and f"fare{TURNS - 1}" in fact.text


@pytest.mark.parametrize("ids", ["none", "users"])
def test_a_process_new_to_the_conversation_keeps_what_the_window_dropped(tmp_path: Path, ids: Ids) -> None:
    """After a restart the first call reads a window that no longer holds the first turns: what
    they stated is not taken for a branch left behind."""
    with ContextEngine.embedded(tmp_path / "stores") as first:
        turns = converse(first, ids=ids, captured=False, summary=False)
    turns.append([HumanMessage("Which gate does RES000X leave from?")])
    with ContextEngine.embedded(tmp_path / "stores") as again:
        prepared = again.prepare(window(turns, summary=False), [get_reservation_details], scope=S)
        facts = current(again)
    assert all(any(f"is {i + 1}A" in f for f in facts) for i in range(TURNS)), facts
    assert all(any(f"B{20 + i}" in f for f in facts) for i in range(TURNS)), facts
    assert "B20" in shown(prepared)
