"""A screenshot tool's output read back with ``expand_ref`` in each host: the model gets the
image again as an image block of the tool result, never its base64 as text."""

from __future__ import annotations

import re
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel, conversation_messages, memory_engine, tool_call
from ctxplugin.tokens import content_text

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==" * 300
IMAGE = {"type": "image", "base64": B64, "mime_type": "image/png"}


@tool
def screenshot(page: str) -> list[dict[str, Any]]:
    """Take a screenshot of a page."""
    return [{"type": "text", "text": f"Screenshot of {page}: total 41.90 EUR"}, IMAGE]


def expand_the_screenshot(messages: list[BaseMessage], tools: list[Any]) -> AIMessage:
    found = re.search(r"ref:screenshot:[0-9a-f]{16}", " ".join(content_text(m.content) for m in messages))
    assert found is not None, "the view shows the screenshot's ref"
    return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": found.group(0)})])


def scripted() -> ScriptedChatModel:
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("screenshot", {"page": "checkout"})]),
        expand_the_screenshot,
        AIMessage(content="The total is 41.90 EUR."),
    ])


def check(model: ScriptedChatModel, state: list[BaseMessage]) -> None:
    kept = next(m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref")
    assert isinstance(kept.content, list) and IMAGE in kept.content
    seen = next(m for m in conversation_messages(model.calls[-1].messages)
                if isinstance(m, ToolMessage) and m.name == "expand_ref")
    assert isinstance(seen.content, list) and IMAGE in seen.content
    assert "41.90 EUR" in content_text(seen.content)
    for call in model.calls:
        assert not any("iVBOR" in content_text(m.content) for m in call.messages), "base64 sent as text"


def create_agent_with(engine: ContextEngine, model: ScriptedChatModel) -> Any:
    return create_agent(model, [screenshot], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(engine)])


def test_create_agent_middleware() -> None:
    engine, model = memory_engine(), scripted()
    agent = create_agent_with(engine, model)
    config: Any = {"configurable": {"thread_id": "shots"}}
    agent.invoke({"messages": [("user", "what is the total on the checkout page?")]}, config)
    check(model, agent.get_state(config).values["messages"])


async def test_create_agent_middleware_async() -> None:
    engine, model = memory_engine(), scripted()
    agent = create_agent_with(engine, model)
    config: Any = {"configurable": {"thread_id": "shots-async"}}
    await agent.ainvoke({"messages": [("user", "what is the total on the checkout page?")]}, config)
    check(model, (await agent.aget_state(config)).values["messages"])


def test_create_react_agent_hooks() -> None:
    engine, model = memory_engine(), scripted()
    hooks = ContextHooks(engine, [screenshot])
    agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "shots-react"}}
    agent.invoke({"messages": [("user", "what is the total on the checkout page?")]}, config)
    check(model, agent.get_state(config).values["messages"])
