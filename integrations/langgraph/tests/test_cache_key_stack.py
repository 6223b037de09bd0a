"""The answer cache inside stacks of other ``create_agent`` middleware: an answer is served only
for the request the model would really get (its system prompt, model and call settings)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    ModelRequest,
    ModelResponse,
    ToolRetryMiddleware,
    dynamic_prompt,
)
from langchain_core.messages import AIMessage, SystemMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.cache import CACHE_META_KEY
from ctxplugin.config import CacheConfig
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

QUESTION = "What is your return window?"


@dataclass
class Ctx:
    language: str = "English"
    creative: bool = False


def engine_on() -> ContextEngine:
    engine: ContextEngine = memory_engine(ContextConfig(cache=CacheConfig(enabled=True)))
    return engine


def agent_with(model: Any, *middleware: Any) -> Any:
    stack: list[Any] = list(middleware)
    return create_agent(model, [], system_prompt="You are a shop assistant.", context_schema=Ctx, middleware=stack,
                        checkpointer=InMemorySaver())


def ask(agent: Any, thread: str, context: Ctx) -> AIMessage:
    config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [("user", QUESTION)]}, config, context=context)
    last = agent.get_state(config).values["messages"][-1]
    assert isinstance(last, AIMessage)
    return last


def system_of(model: ScriptedChatModel, call: int) -> str:
    head = model.calls[call].messages[0]
    assert isinstance(head, SystemMessage)
    return str(head.content)


@dynamic_prompt
def by_language(request: ModelRequest) -> str:
    context = request.runtime.context
    return f"You are a shop assistant. Answer in {context.language if context else 'English'}."


class CreativeMode(AgentMiddleware):
    """Sets the sampling temperature from the run's context."""

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        context = request.runtime.context
        return handler(request.override(model_settings={**request.model_settings, "temperature": 1.0 if context and context.creative else 0.0}))


def test_a_dynamic_prompt_before_the_middleware_still_serves_a_repeat() -> None:
    model = ScriptedChatModel(script=[AIMessage("30 days."), AIMessage("30 jours.")], default=None)
    agent = agent_with(model, by_language, ContextMiddleware(engine_on()))
    assert ask(agent, "t", Ctx("English")).content == "30 days."
    assert ask(agent, "t", Ctx("French")).content == "30 jours."
    again = ask(agent, "t", Ctx("French"))
    assert again.response_metadata[CACHE_META_KEY]["hit"] is True and again.content == "30 jours."
    assert len(model.calls) == 2


def test_call_settings_are_part_of_the_key() -> None:
    model = ScriptedChatModel(script=[AIMessage("30 days."), AIMessage("Thirty sunny days!")], default=None)
    agent = agent_with(model, CreativeMode(), ContextMiddleware(engine_on()))
    assert ask(agent, "t", Ctx(creative=False)).content == "30 days."
    creative = ask(agent, "t", Ctx(creative=True))
    assert CACHE_META_KEY not in creative.response_metadata and creative.content == "Thirty sunny days!"
    assert ask(agent, "t", Ctx(creative=True)).response_metadata[CACHE_META_KEY]["hit"] is True


def test_model_parameters_are_part_of_the_key() -> None:
    engine = engine_on()
    cold = ScriptedChatModel(script=[AIMessage("30 days.")], default=None, model_name="m")
    warm = ScriptedChatModel(script=[AIMessage("Thirty sunny days!")], default=None, model_name="m")
    for model, temperature in ((cold, 0.0), (warm, 1.0)):
        agent = agent_with(model.bind(temperature=temperature), ContextMiddleware(engine))
        assert ask(agent, "t", Ctx()).content == ("30 days." if model is cold else "Thirty sunny days!")
    assert len(warm.calls) == 1


def test_an_answer_given_after_a_failed_tool_call_is_not_cached() -> None:
    calls: list[str] = []

    @tool
    def order_status(order_id: str) -> str:
        """Look an order up."""
        calls.append(order_id)
        if len(calls) == 1:
            raise ConnectionError("order service unavailable")
        return "delivered"

    lookup = AIMessage(content="", tool_calls=[tool_call("order_status", {"order_id": "W1"})])
    model = ScriptedChatModel(script=[lookup, AIMessage("I could not reach the order service."),
                                      lookup, AIMessage("Order W1 was delivered.")], default=None)
    agent: Any = create_agent(model, [order_status], system_prompt="You are a shop assistant.",
                         middleware=[ToolRetryMiddleware(max_retries=0), ContextMiddleware(engine_on())],
                         checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t"}}
    for expected in ("I could not reach the order service.", "Order W1 was delivered."):
        agent.invoke({"messages": [("user", "What is the status of order W1?")]}, config)
        last = agent.get_state(config).values["messages"][-1]
        assert last.content == expected and CACHE_META_KEY not in last.response_metadata
