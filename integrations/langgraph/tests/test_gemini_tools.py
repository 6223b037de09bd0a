"""Gemini is bound every tool with its own schema, in every host.

A stub leaves a tool's arguments open; Google's request builders turn such an object into a
function declaration without parameters, and Gemini then calls the tool with none. Each host
below is checked on the request ``langchain-google-genai`` itself builds, offline: the
agent's tools reach Gemini with their parameters, and the view names no directory to load
schemas from."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from ctxplugin import Scope
from ctxplugin.testing import memory_engine
from ctxplugin.testing.airline import airline_tools
from ctxplugin.tools import LOAD_TOOLS_NAME, STUBS_TITLE, takes_stubs

pytest.importorskip("langchain_google_genai")


def gemini() -> Any:
    from langchain_google_genai import ChatGoogleGenerativeAI

    return ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test-key")


def declared(model: Any, tools: list[Any], messages: list[BaseMessage]) -> dict[str, Any]:
    """The function declarations Gemini would be sent for ``tools``: name -> parameters."""
    bound: Any = model.bind_tools(tools)
    request = bound.bound._prepare_request(messages, **bound.kwargs)
    config_tools = request["config"].tools if isinstance(request, dict) else request.tools
    out: dict[str, Any] = {}
    for group in config_tools:
        for function in group.function_declarations or []:
            out[function.name] = function.parameters
    return out


def properties(parameters: Any) -> set[str]:
    return set((parameters.properties or {}) if parameters is not None else {})


def test_gemini_models_are_told_apart_from_others() -> None:
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    assert not takes_stubs(gemini())
    assert not takes_stubs(gemini().bind(temperature=0))
    assert takes_stubs(ChatOpenAI(model="gpt-4o", api_key="test-key"))
    assert takes_stubs(ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key"))


def test_create_agent_binds_gemini_every_tool_with_its_parameters() -> None:
    middleware = ContextMiddleware(memory_engine())
    request = ModelRequest(
        model=gemini(),
        messages=[HumanMessage("What is my reservation? My user id is mia_li_3668.")],
        system_message=SystemMessage("You are an airline agent."),
        tools=[*airline_tools([]), *middleware.tools],
    )
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("Which reservation?")])

    middleware.wrap_model_call(request, handler)
    functions = declared(sent[0].model, list(sent[0].tools), [*sent[0].messages])
    assert properties(functions["get_user_details"]) == {"user_id"}
    assert properties(functions["get_reservation_details"]) == {"reservation_id"}
    assert LOAD_TOOLS_NAME not in functions
    assert STUBS_TITLE not in str(sent[0].system_message.content if sent[0].system_message else "")


def test_create_agent_still_binds_stubs_for_a_model_that_takes_them() -> None:
    from langchain_anthropic import ChatAnthropic

    middleware = ContextMiddleware(memory_engine())
    request = ModelRequest(
        model=ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key"),
        messages=[HumanMessage("What is my reservation?")],
        tools=[*airline_tools([]), *middleware.tools],
    )
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("Which reservation?")])

    middleware.wrap_model_call(request, handler)
    names = {t["function"]["name"] if isinstance(t, dict) else t.name for t in sent[0].tools}
    assert LOAD_TOOLS_NAME in names


def test_create_react_agent_hooks_bind_gemini_every_tool_with_its_parameters() -> None:
    hooks = ContextHooks(memory_engine(), airline_tools([]), prompt="You are an airline agent.", scope=Scope(session_id="t1"))
    select = hooks.model(gemini())
    view = list(hooks.prepare({"messages": [HumanMessage("What is my reservation?")]}).messages)
    assert STUBS_TITLE not in str(view[0].content)
    bound: Any = select({"messages": view}, None)
    request = bound.bound._prepare_request(view, **bound.kwargs)
    config_tools = request["config"].tools if isinstance(request, dict) else request.tools
    functions = {f.name: f.parameters for g in config_tools for f in g.function_declarations or []}
    assert properties(functions["get_user_details"]) == {"user_id"}
    assert LOAD_TOOLS_NAME not in functions


def test_an_lcel_context_model_binds_gemini_every_tool_with_its_parameters(mocker: Any) -> None:
    from langchain_google_genai import ChatGoogleGenerativeAI

    engine = memory_engine()
    seen: list[dict[str, Any]] = []

    def answer(self: Any, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        request = self._prepare_request(messages, **{k: v for k, v in kwargs.items() if k != "run_manager"})
        config_tools = request["config"].tools if isinstance(request, dict) else request.tools
        seen.append({f.name: f.parameters for g in config_tools or [] for f in g.function_declarations or []})
        return ChatResult(generations=[ChatGeneration(message=AIMessage("Which reservation?"))])

    mocker.patch.object(ChatGoogleGenerativeAI, "_generate", answer)
    model = engine.as_model(gemini(), tools=airline_tools([]))
    model.invoke([HumanMessage("What is my reservation?")], {"configurable": {"thread_id": "t1"}})
    assert properties(seen[0]["get_user_details"]) == {"user_id"}
    assert LOAD_TOOLS_NAME not in seen[0]
