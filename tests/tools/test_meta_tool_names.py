"""An agent's own tool named like one of ctxplugin's meta-tools (``expand_ref``, ``load_tools``)
is refused with an error naming it, rather than being bound, run or hidden as ctxplugin's."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, tool

from ctxplugin import Scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="s")


@tool
def expand_ref(ref_id: str) -> str:
    """Expand a customer's referral code into the referral record."""
    return "REFERRAL " + ref_id


@tool
def load_tools(names: list[str]) -> str:
    """Load crates of tools into the warehouse."""
    return "loaded"


def conversation() -> list[BaseMessage]:
    return [
        HumanMessage(content="who referred me?"),
        AIMessage(content="", tool_calls=[{"name": "expand_ref", "args": {"ref_id": "R1"}, "id": "c1"}]),
        ToolMessage(content="line\n" * 3000, tool_call_id="c1", name="expand_ref"),
    ]


def as_dict(name: str) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "description": "mine", "parameters": {"type": "object", "properties": {}}}}


@pytest.mark.parametrize("own", [expand_ref, load_tools, as_dict("expand_ref"), as_dict("load_tools")],
                         ids=["expand_ref", "load_tools", "dict-expand_ref", "dict-load_tools"])
@pytest.mark.parametrize("with_meta", [False, True], ids=["alone", "beside-meta-tools"])
def test_prepare_refuses_an_own_tool_named_like_a_meta_tool(own: Any, with_meta: bool) -> None:
    engine = memory_engine()
    tools = [own, *engine.tools_for_model()] if with_meta else [own]
    name = own.name if isinstance(own, BaseTool) else own["function"]["name"]
    with pytest.raises(InvalidInputError, match=rf"'{name}'.*ctxplugin.*[Rr]ename"):
        engine.prepare(conversation(), tools=tools, scope=SCOPE)
    with pytest.raises(InvalidInputError, match=rf"'{name}'"):
        engine.bound_tools(conversation(), tools)


def test_the_meta_tools_themselves_are_accepted() -> None:
    engine = memory_engine()
    meta = engine.tools_for_model()
    prepared = engine.prepare(conversation(), tools=meta, scope=SCOPE)
    assert {getattr(t, "name", None) for t in prepared.tools} <= {"expand_ref", "load_tools"}
    bound = engine.bound_tools(conversation(), [*meta, *[as_dict(f"t{i}") for i in range(30)]])
    assert sorted((t for t in bound if isinstance(t, BaseTool)), key=id) == sorted(meta, key=id)  # the directory is on: the host's meta-tools are bound


@pytest.mark.parametrize("name", ["known_facts", "context_notes"])
def test_an_own_tool_named_like_a_lookup_of_the_view_is_refused(name: str) -> None:
    """The facts block and context notes are shown as calls of ``known_facts`` and
    ``context_notes``, tools the model is never given: an agent tool of that name would make
    ctxplugin's block read as the result of a call of the agent's tool the model never made."""
    engine = memory_engine()
    with pytest.raises(InvalidInputError, match=rf"'{name}'.*ctxplugin.*[Rr]ename"):
        engine.prepare(conversation(), tools=[as_dict(name)], scope=SCOPE)
    with pytest.raises(InvalidInputError, match=rf"'{name}'"):
        engine.bound_tools(conversation(), [as_dict(name)])
