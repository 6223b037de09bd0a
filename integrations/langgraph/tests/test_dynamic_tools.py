"""Tools that are not a fixed list: a tool another middleware adds at runtime (LangChain's
documented pattern: ``request.override(tools=...)`` in ``wrap_model_call`` and
``request.override(tool=...)`` in ``wrap_tool_call``), whichever side of ContextMiddleware
that middleware sits; and names no tool has, among hundreds of tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ctxplugin import ContextConfig
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call
from ctxplugin.testing.airline import airline_tools, last_tool_result

TipCalls = list[dict[str, Any]]


def tip_tool(calls: TipCalls) -> BaseTool:
    @tool
    def calculate_tip(bill: float, percent: float) -> str:
        """Calculate the tip for a bill."""
        calls.append({"bill": bill, "percent": percent})
        return f"tip: {bill * percent / 100:.2f}"

    return calculate_tip


class AddsTip(AgentMiddleware):
    """Adds a tool the agent was not built with, and runs it (LangChain's dynamic tools)."""

    def __init__(self, extra: BaseTool) -> None:
        super().__init__()
        self.extra = extra

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        return handler(request.override(tools=[*request.tools, self.extra]))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(request.override(tools=[*request.tools, self.extra]))

    def wrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        if request.tool_call["name"] == self.extra.name:
            return handler(request.override(tool=self.extra))
        return handler(request)

    async def awrap_tool_call(
        self, request: ToolCallRequest, handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]]
    ) -> ToolMessage | Command[Any]:
        if request.tool_call["name"] == self.extra.name:
            return await handler(request.override(tool=self.extra))
        return await handler(request)


def tip_script() -> list[Any]:
    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        answer = last_tool_result(messages)
        assert answer.status != "error", answer.content
        assert answer.content == "tip: 15.00"
        return AIMessage(content="The tip is 15.00.")

    return [AIMessage(content="", tool_calls=[tool_call("calculate_tip", {"bill": 100, "percent": 15})]), second]


@pytest.mark.parametrize("context_first", [True, False], ids=["context-first", "context-last"])
def test_a_tool_another_middleware_adds_at_runtime_runs(context_first: bool) -> None:
    calls: TipCalls = []
    model = ScriptedChatModel(script=tip_script())
    context, adds = ContextMiddleware(memory_engine(ContextConfig())), AddsTip(tip_tool(calls))
    agent = create_agent(model, airline_tools([]), middleware=[context, adds] if context_first else [adds, context],
                         checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "dynamic"}}
    agent.invoke({"messages": [{"role": "user", "content": "What tip on 100 at 15%?"}]}, config)
    assert calls == [{"bill": 100, "percent": 15}]
    assert "calculate_tip" in model.calls[0].tool_names
    assert agent.get_state(config).values["messages"][-1].content == "The tip is 15.00."


async def test_an_async_agent_runs_a_tool_a_later_middleware_adds() -> None:
    calls: TipCalls = []
    model = ScriptedChatModel(script=tip_script())
    agent = create_agent(model, airline_tools([]), checkpointer=InMemorySaver(),
                         middleware=[ContextMiddleware(memory_engine(ContextConfig())), AddsTip(tip_tool(calls))])
    await agent.ainvoke({"messages": [{"role": "user", "content": "Tip?"}]}, {"configurable": {"thread_id": "a"}})
    assert calls == [{"bill": 100, "percent": 15}]


def many_tools(count: int) -> list[BaseTool]:
    return [
        StructuredTool.from_function(lambda query: query, name=f"crm_search_{i:03d}",
                                     description=f"Search CRM partition {i}.")
        for i in range(count)
    ]


def unknown_name_script() -> list[Any]:
    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        answer = last_tool_result(messages)
        assert answer.status == "error"
        assert "no tool named 'crm_search_7'" in str(answer.content)
        assert "Did you mean:" in str(answer.content)
        # close matches, not the host's list of every tool's name
        assert str(answer.content).count("crm_search_") <= 4, answer.content
        return AIMessage(content="Sorry.")

    return [AIMessage(content="", tool_calls=[tool_call("crm_search_7", {"query": "acme"})]), second]


def test_a_name_no_tool_has_among_hundreds_gets_close_matches() -> None:
    model = ScriptedChatModel(script=unknown_name_script())
    agent = create_agent(model, many_tools(300), middleware=[ContextMiddleware(memory_engine(ContextConfig()))],
                         checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "find acme"}]}, {"configurable": {"thread_id": "many"}})
    assert len(model.calls) == 2


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
def test_create_react_agent_answers_a_name_no_tool_has_with_close_matches() -> None:
    from langgraph.prebuilt import create_react_agent

    model = ScriptedChatModel(script=unknown_name_script())
    hooks = ContextHooks(memory_engine(ContextConfig()), many_tools(300))
    agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "find acme"}]}, {"configurable": {"thread_id": "many"}})
    assert len(model.calls) == 2
