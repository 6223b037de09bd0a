"""``ContextMiddleware`` with LangChain's ``ProviderToolSearchMiddleware``, which defers tools
behind the provider's own tool search (``extras["defer_loading"]``, plus Anthropic's or OpenAI's
search tool). The provider then loads a deferred tool's schema when the model needs it: ctxplugin
does not stub, list or leave out those tools, and the request carries the same tools as without
ctxplugin (with ``expand_ref`` when the view shows refs). Every request is built offline by
langchain-anthropic's own request builder."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import ProviderToolSearchMiddleware
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig
from ctxplugin.testing import memory_engine, tool_call


def account_tool(i: int) -> BaseTool:
    def run(account_id: str) -> str:
        return f"tool_{i:02d} ran for {account_id}"

    return StructuredTool.from_function(run, name=f"tool_{i:02d}", description=f"Operation number {i} on an account.")


def claude(payloads: list[dict[str, Any]]) -> Any:
    """A ``ChatAnthropic`` answered locally: it calls ``tool_07`` for the user's turn, then answers."""
    from langchain_anthropic import ChatAnthropic

    class Local(ChatAnthropic):
        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            payloads.append(self._get_request_payload(messages, stop=stop, **kw))
            last = messages[-1]
            reply = AIMessage(content="", tool_calls=[tool_call("tool_07", {"account_id": "acc-1"})]) if last.type == "human" else AIMessage(content="Done.")
            return ChatResult(generations=[ChatGeneration(message=reply)])

    return Local(model="claude-sonnet-4-5", api_key="test-key")


def sent_tools(payload: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {t["name"]: t for t in payload.get("tools", [])}


def run(count: int, context: ContextMiddleware | None) -> tuple[list[dict[str, Any]], list[BaseMessage]]:
    payloads: list[dict[str, Any]] = []
    tools = [account_tool(i) for i in range(count)]
    search = ProviderToolSearchMiddleware(searchable_tools=[t.name for t in tools[5:]])
    agent: Any = create_agent(claude(payloads), tools, checkpointer=InMemorySaver(),
                              middleware=[search] if context is None else [search, context])
    out = agent.invoke({"messages": [("user", "run tool 7 for acc-1")]}, {"configurable": {"thread_id": "search"}})
    return payloads, out["messages"]


@pytest.mark.parametrize("count", [10, 60])
@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_listed_before_it_the_provider_searches_the_deferred_tools(count: int, mode: str) -> None:
    without, _ = run(count, None)
    payloads, state = run(count, ContextMiddleware(memory_engine(ContextConfig(mode=mode))))
    assert [type(m).__name__ for m in state] == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]
    assert isinstance(state[2], ToolMessage) and state[2].content == "tool_07 ran for acc-1"
    assert len(payloads) == len(without) == 2
    for sent, plain in zip(payloads, without, strict=True):
        tools, expected = sent_tools(sent), sent_tools(plain)
        assert set(tools) - {"expand_ref"} == set(expected), "the tools are those the agent binds without ctxplugin"
        for name, tool in expected.items():
            assert tools[name] == tool, f"{name} is sent as without ctxplugin"
        assert sum(bool(t.get("defer_loading")) for t in tools.values()) == count - 5


def test_listed_after_it_the_middleware_refuses_the_prepared_tools() -> None:
    # what the docs tell: it must be handed the agent's own tools, before ctxplugin binds stubs
    tools = [account_tool(i) for i in range(10)]
    search = ProviderToolSearchMiddleware(searchable_tools=[t.name for t in tools[5:]])
    agent: Any = create_agent(claude([]), tools, checkpointer=InMemorySaver(),
                              middleware=[ContextMiddleware(memory_engine()), search])
    with pytest.raises(ValueError, match="not bound to the model"):
        agent.invoke({"messages": [("user", "run tool 7 for acc-1")]}, {"configurable": {"thread_id": "after"}})
