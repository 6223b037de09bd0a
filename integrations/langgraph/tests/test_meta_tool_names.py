"""An agent's own tool named ``expand_ref`` or ``load_tools`` (the names of ctxplugin's
meta-tools) is refused with an error naming it, in every host: ``ContextHooks`` when built,
``ContextMiddleware`` on the first model call, a hand-built ``ToolNode`` when the tool is called.
Before, the model was bound ctxplugin's tool while the user's ran (or the other way round)."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode, create_react_agent

from ctxplugin.errors import InvalidInputError
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call


@tool
def expand_ref(ref_id: str) -> str:
    """Expand a customer's referral code into the referral record."""
    return "REFERRAL " + ref_id


@tool
def load_tools(names: list[str]) -> str:
    """Load crates of tools into the warehouse."""
    return "loaded"


OWN = pytest.mark.parametrize("own", [expand_ref, load_tools], ids=["expand_ref", "load_tools"])


@OWN
def test_hooks_refuse_an_own_tool_named_like_a_meta_tool(own: BaseTool) -> None:
    with pytest.raises(InvalidInputError, match=rf"'{own.name}'.*[Rr]ename"):
        ContextHooks(memory_engine(), [own])


def test_hooks_given_the_meta_tools_bind_each_once() -> None:
    engine = memory_engine()
    hooks = ContextHooks(engine, [*engine.tools_for_model()])
    assert sorted(t.name for t in hooks.tools) == ["expand_ref", "load_tools"]


@OWN
def test_middleware_refuses_an_own_tool_named_like_a_meta_tool(own: BaseTool) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call(own.name, {"names": ["x"], "ref_id": "R1"})])])
    agent: Any = create_agent(model, [own], middleware=[ContextMiddleware(memory_engine())], checkpointer=InMemorySaver())
    with pytest.raises(InvalidInputError, match=rf"'{own.name}'.*[Rr]ename"):
        agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.calls == [], "the model must not be called with the tool it cannot tell apart"


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_a_tool_node_built_by_hand_refuses_an_own_expand_ref() -> None:
    hooks = ContextHooks(memory_engine(), [])
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": "R1"})])])
    node = ToolNode([expand_ref], wrap_tool_call=hooks.wrap_tool_call)
    agent: Any = create_react_agent(hooks.model(model), node, pre_model_hook=hooks.pre_model_hook)
    with pytest.raises(InvalidInputError, match=r"'expand_ref'.*[Rr]ename"):
        agent.invoke({"messages": [HumanMessage(content="hi")]}, {"configurable": {"thread_id": "t"}})
