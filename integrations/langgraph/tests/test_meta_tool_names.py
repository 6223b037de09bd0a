"""An agent's own tool named ``expand_ref`` or ``load_tools`` (the names of ctxplugin's
meta-tools) is refused with an error naming it, in every host: ``ContextHooks`` when built,
``ContextMiddleware`` on the first model call, a hand-built ``ToolNode`` when the tool is called;
and one a middleware inside ``ContextMiddleware`` adds at runtime, as it adds it. Before, the
model was bound ctxplugin's tool while the user's ran (or the other way round)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_anthropic.chat_models import convert_to_anthropic_tool
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import ToolNode, create_react_agent
from langgraph.types import Command

from ctxplugin import ContextEngine
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


# A middleware inside ContextMiddleware can add a tool at runtime (LangChain's dynamic tools:
# ``request.override(tools=...)`` in ``wrap_model_call``, ``request.override(tool=...)`` in
# ``wrap_tool_call``), after ctxplugin checked the agent's tools. One named like a meta-tool was
# shown to the model beside ctxplugin's (a request with two tools of one name, which providers
# refuse) and ran for the model's calls of ctxplugin's, its output taken for a meta-tool's and
# never stored.

Ran = list[str]


def own_tool(name: str, ran: Ran) -> BaseTool:
    def run(ref_id: str = "", names: list[str] | None = None) -> str:
        ran.append(name)
        return "REFERRAL " + ref_id

    return StructuredTool.from_function(run, name=name, description="Expand a customer's referral code.")


class AddsOwn(AgentMiddleware):
    """Runs a tool of its own for calls of its name; ``show``: adds it to the model's tools too."""

    def __init__(self, own: BaseTool, *, show: bool = True) -> None:
        super().__init__()
        self.own, self.show = own, show

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request.override(tools=[*request.tools, self.own]) if self.show else request)

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(request.override(tools=[*request.tools, self.own]) if self.show else request)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        return handler(request.override(tool=self.own) if request.tool_call["name"] == self.own.name else request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        return await handler(request.override(tool=self.own) if request.tool_call["name"] == self.own.name else request)


@tool
def get_user(user_id: str) -> str:
    """Look a user up."""
    return f"user {user_id}"


def agent_with(engine: ContextEngine, inside: AgentMiddleware, model: ScriptedChatModel) -> Any:
    return create_agent(model, [get_user], middleware=[ContextMiddleware(engine), inside], checkpointer=InMemorySaver())


NAMES = pytest.mark.parametrize("name", ["expand_ref", "load_tools"])


@NAMES
def test_a_tool_a_middleware_inside_adds_under_a_meta_name_is_refused_before_the_model_sees_it(
    name: str, tmp_path: Path
) -> None:
    ran: Ran = []
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call(name, {"ref_id": "R1"})])])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, AddsOwn(own_tool(name, ran)), model)
        with pytest.raises(InvalidInputError, match=rf"'{name}'.*[Rr]ename"):
            agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.calls == [], "the model must not be shown a tool named like ctxplugin's"
    assert ran == []


async def test_an_async_agent_refuses_a_tool_a_middleware_inside_adds_as_expand_ref(tmp_path: Path) -> None:
    ran: Ran = []
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": "R1"})])])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, AddsOwn(own_tool("expand_ref", ran)), model)
        with pytest.raises(InvalidInputError, match=r"'expand_ref'.*[Rr]ename"):
            await agent.ainvoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.calls == []
    assert ran == []


class RunsOwnForExpandRef(AddsOwn):
    """Runs a tool of its own for the model's calls of ctxplugin's ``expand_ref``, without
    showing the model that tool."""

    def __init__(self, own: BaseTool) -> None:
        super().__init__(own, show=False)

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        return handler(request.override(tool=self.own) if request.tool_call["name"] == "expand_ref" else request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        return await handler(request.override(tool=self.own) if request.tool_call["name"] == "expand_ref" else request)


@pytest.mark.parametrize("name", ["expand_ref", "referral_lookup"])
@pytest.mark.parametrize("run", ["sync", "async"])
async def test_a_middleware_inside_running_its_own_tool_for_calls_of_expand_ref_is_refused(
    name: str, run: str, tmp_path: Path
) -> None:
    ran: Ran = []
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": "R1"})])])
    inputs: Any = {"messages": [("user", "hi")]}
    config: Any = {"configurable": {"thread_id": "t"}}
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, RunsOwnForExpandRef(own_tool(name, ran)), model)
        with pytest.raises(InvalidInputError, match=rf"'{name}'.*(Rename your tool|a name of its own)"):
            if run == "sync":
                agent.invoke(inputs, config)
            else:
                await agent.ainvoke(inputs, config)
    assert ran == [], "the tool must not run in place of ctxplugin's"


class AnswersExpandRef(AgentMiddleware):
    """Answers the model's calls of ``expand_ref`` itself, with no tool (as ``LLMToolEmulator()``
    without ``tools=`` does)."""

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        if request.tool_call["name"] != "expand_ref":
            return handler(request)
        return ToolMessage(content="made up", tool_call_id=request.tool_call["id"] or "", name="expand_ref")


def test_a_middleware_inside_answering_expand_ref_without_a_tool_is_not_refused(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": "R1"})]),
                                      AIMessage(content="done")])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, AnswersExpandRef(), model)
        out = agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert [m.content for m in out["messages"] if isinstance(m, ToolMessage)] == ["made up"]
    assert out["messages"][-1].content == "done"


class MarksLastTool(AgentMiddleware):
    """Sends the last tool as Anthropic's dict with a prompt-cache mark, as a caching middleware
    may (the tools are a stable prefix); ctxplugin's tools come last."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        *rest, last = request.tools
        marked = {**convert_to_anthropic_tool(last), "cache_control": {"type": "ephemeral"}}
        return handler(request.override(tools=[*rest, marked]))


def test_a_middleware_inside_sending_ctxplugins_tool_as_a_dict_is_not_refused(tmp_path: Path) -> None:
    """ctxplugin's own ``expand_ref`` sent as a dict (a cache mark on it) was refused as an
    agent's tool named like it: no agent with such a middleware inside ran."""
    model = ScriptedChatModel(script=[AIMessage(content="done")])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, MarksLastTool(), model)
        out = agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "done"
    assert model.calls[0].tool_names == ["get_user", "expand_ref"], model.calls[0].tool_names


class SendsOwnAsLast(AgentMiddleware):
    """Sends a dict of its own in place of the last tool (ctxplugin's ``expand_ref``)."""

    def __init__(self, own: dict[str, Any]) -> None:
        super().__init__()
        self.own = own

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request.override(tools=[*request.tools[:-1], self.own]))


def test_a_dict_named_like_a_meta_tool_with_a_schema_of_its_own_is_refused(tmp_path: Path) -> None:
    own = {"name": "expand_ref", "description": "Expand a customer's referral code.", "input_schema": {"type": "object", "properties": {"code": {"type": "string"}}}}
    model = ScriptedChatModel(script=[AIMessage(content="done")])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, SendsOwnAsLast(own), model)
        with pytest.raises(InvalidInputError, match=r"'expand_ref'.*[Rr]ename"):
            agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.calls == []


class MarksACopy(AgentMiddleware):
    """Sends the last tool (ctxplugin's ``expand_ref``) twice: as it is, and as a marked dict."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        marked = {**convert_to_anthropic_tool(request.tools[-1]), "cache_control": {"type": "ephemeral"}}
        return handler(request.override(tools=[*request.tools, marked]))


def test_ctxplugins_tool_sent_twice_by_a_middleware_inside_is_refused(tmp_path: Path) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="done")])
    with ContextEngine.embedded(path=tmp_path / "ctx") as engine:
        agent = agent_with(engine, MarksACopy(), model)
        with pytest.raises(InvalidInputError, match=r"two tools named 'expand_ref'"):
            agent.invoke({"messages": [("user", "hi")]}, {"configurable": {"thread_id": "t"}})
    assert model.calls == []
