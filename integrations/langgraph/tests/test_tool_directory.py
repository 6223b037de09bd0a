"""The tool directory with tools.binding="loaded" in real agents: create_agent with
ContextMiddleware, and create_react_agent with ContextHooks. Only load_tools and the loaded
tools are bound, so the bound list grows; the scripted model asserts what it was sent. The
stubs binding (and auto, the default) is tested in test_tool_stubs.py."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, Scope
from ctxplugin.config import ToolsConfig
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call, tool_directory
from ctxplugin.testing.airline import airline_tools, last_tool_result, system_text
from ctxplugin.tools import LOAD_TOOLS_NAME

Step = Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage]

LOADED = ContextConfig(tools=ToolsConfig(binding="loaded"))


def names(tools: list[dict[str, Any]]) -> set[str]:
    return {t["function"]["name"] for t in tools}


def schema_of(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t["function"]["parameters"] for t in tools if t["function"]["name"] == name)


def run_agent(steps: list[Step | AIMessage], config: ContextConfig = LOADED,
              thread: str = "t") -> tuple[ScriptedChatModel, list[BaseMessage], list[tuple[str, dict[str, Any]]]]:
    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedChatModel(script=list(steps))
    engine = memory_engine(config)
    agent = create_agent(model, airline_tools(ran), system_prompt="You are an airline agent.",
                         middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    run_config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [{"role": "user", "content": "I need help with my booking"}]}, run_config)
    return model, agent.get_state(run_config).values["messages"], ran


def test_model_sees_directory_loads_a_tool_then_calls_it() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert names(tools) == {LOAD_TOOLS_NAME, "expand_ref"}
        header = system_text(messages)
        assert header.startswith("You are an airline agent.")
        assert "- get_user_details: Get the details of a user, including their reservations\n" in header
        assert "- send_certificate: Send a certificate to a user\n" in header
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["get_user_details"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert names(tools) == {LOAD_TOOLS_NAME, "expand_ref", "get_user_details"}
        assert schema_of(tools, "get_user_details")["required"] == ["user_id"]
        assert "get_user_details(user_id: string)" in str(last_tool_result(messages).content)
        return AIMessage(content="", tool_calls=[tool_call("get_user_details", {"user_id": "mia_li_3668"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "Mia Li" in str(last_tool_result(messages).content)
        return AIMessage(content="You have reservation NO6JO3.")

    model, state, ran = run_agent([first, second, third])
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})]
    assert isinstance(state[-1], AIMessage) and state[-1].content == "You have reservation NO6JO3."
    # the header (system prompt + directory) is byte-identical on every call: cacheable
    headers = {system_text(call.messages) for call in model.calls}
    assert len(model.calls) == 3 and len(headers) == 1
    report = state[-1].response_metadata["ctxplugin"]
    assert report["ctxplugin.tools_loaded"] == ["get_user_details"]


def test_direct_call_to_an_unloaded_tool_with_valid_arguments_runs() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "search_direct_flight" not in names(tools)
        args = {"origin": "SFO", "destination": "JFK", "date": "2024-05-20"}
        return AIMessage(content="", tool_calls=[tool_call("search_direct_flight", args)])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "HAT001" in str(last_tool_result(messages).content)
        assert "search_direct_flight" in names(tools)  # used once: now bound
        return AIMessage(content="HAT001 is available.")

    _, _, ran = run_agent([first, second])
    assert ran == [("search_direct_flight", {"origin": "SFO", "destination": "JFK", "date": "2024-05-20"})]


def test_invalid_call_to_an_unloaded_tool_recovers_in_one_round_trip() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "update_reservation_baggages" not in names(tools)
        return AIMessage(content="", tool_calls=[
            tool_call("update_reservation_baggages", {"reservation_id": "NO6JO3", "bags": 2}),
        ])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        answer = last_tool_result(messages)
        assert answer.status == "error"
        assert "total_baggages" in str(answer.content) and "Call update_reservation_baggages again" in str(answer.content)
        assert set(schema_of(tools, "update_reservation_baggages")["required"]) == {
            "reservation_id", "total_baggages", "nonfree_baggages", "payment_id"}
        return AIMessage(content="", tool_calls=[tool_call("update_reservation_baggages", {
            "reservation_id": "NO6JO3", "total_baggages": 2, "nonfree_baggages": 0, "payment_id": "gift_card_1"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert str(last_tool_result(messages).content) == "NO6JO3: 2 bags"
        return AIMessage(content="Two bags added.")

    model, _, ran = run_agent([first, second, third])
    assert ran == [("update_reservation_baggages", {"reservation_id": "NO6JO3", "total_baggages": 2})]
    assert len(model.calls) == 3


def test_pinned_tools_are_bound_on_every_call() -> None:
    def load(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["calculate", "get_user_details"]})])

    config = ContextConfig(tools=ToolsConfig(binding="loaded", pinned=["think", "transfer_to_human_agents"],
                                             max_loaded=1))
    model, _, _ = run_agent([load, AIMessage(content="ok")], config=config)
    bound = [names(call.tools) for call in model.calls]
    assert bound[0] == {"think", "transfer_to_human_agents", LOAD_TOOLS_NAME, "expand_ref"}
    # max_loaded=1 keeps the most recent request; pinned tools do not take its slot
    assert bound[1] == {"think", "transfer_to_human_agents", LOAD_TOOLS_NAME, "expand_ref", "get_user_details"}


def test_unknown_tool_name_gets_close_matches() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call("get_user", {"user_id": "mia_li_3668"})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        answer = last_tool_result(messages)
        assert answer.status == "error"
        assert "no tool named 'get_user'" in str(answer.content)
        assert "Did you mean: get_user_details?" in str(answer.content)
        return AIMessage(content="", tool_calls=[tool_call("get_user_details", {"user_id": "mia_li_3668"})])

    _, _, ran = run_agent([first, second, AIMessage(content="Found you.")])
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})]


def test_below_the_threshold_every_schema_is_sent_as_usual() -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Hello.")])
    engine = memory_engine()
    ran: list[tuple[str, dict[str, Any]]] = []
    agent = create_agent(model, airline_tools(ran)[:3], system_prompt="Be brief.",
                         middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "small"}})
    call = model.calls[0]
    assert names(call.tools) == {"get_user_details", "get_reservation_details", "search_direct_flight", "expand_ref"}
    assert "Tool directory" not in system_text(call.messages)


async def test_async_agent_loads_and_calls() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["cancel_reservation"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "cancel_reservation" in names(tools)
        return AIMessage(content="", tool_calls=[tool_call("cancel_reservation", {"reservation_id": "NO6JO3"})])

    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedChatModel(script=[first, second, AIMessage(content="Cancelled.")])
    agent = create_agent(model, airline_tools(ran), middleware=[ContextMiddleware(memory_engine(LOADED))],
                         checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [{"role": "user", "content": "cancel NO6JO3"}]},
                        {"configurable": {"thread_id": "async"}})
    assert ran == [("cancel_reservation", {"reservation_id": "NO6JO3"})]


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
def test_create_react_agent_binds_directory_then_loaded_schema() -> None:
    from langgraph.prebuilt import create_react_agent

    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert names(tools) == {LOAD_TOOLS_NAME, "expand_ref"}
        assert "- get_reservation_details: Get the details of a reservation" in system_text(messages)
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["get_reservation_details"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert names(tools) == {LOAD_TOOLS_NAME, "expand_ref", "get_reservation_details"}
        return AIMessage(content="", tool_calls=[tool_call("get_reservation_details", {"reservation_id": "NO6JO3"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "get_reservation_details" in names(tools)
        # an invalid direct call to another unloaded tool: answered with its schema, not run
        return AIMessage(content="", tool_calls=[tool_call("send_certificate", {"user_id": "mia_li_3668"})])

    def fourth(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "amount" in str(last_tool_result(messages).content)
        assert "send_certificate" in names(tools)
        return AIMessage(content="", tool_calls=[tool_call("send_certificate", {"user_id": "mia_li_3668", "amount": 50})])

    ran: list[tuple[str, dict[str, Any]]] = []
    model = ScriptedChatModel(script=[first, second, third, fourth, AIMessage(content="Done.")])
    hooks = ContextHooks(memory_engine(LOADED), airline_tools(ran))
    agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "what is on NO6JO3?"}]},
                 {"configurable": {"thread_id": "react"}})
    assert ran == [("get_reservation_details", {"reservation_id": "NO6JO3"}),
                   ("send_certificate", {"user_id": "mia_li_3668", "amount": 50})]


def test_the_agent_s_system_prompt_goes_first_as_given_and_the_directory_after_it() -> None:
    seen: list[list[BaseMessage]] = []

    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen.append(list(messages))
        return AIMessage(content="Hello.")

    run_agent([first])
    sent = seen[0]
    assert isinstance(sent[0], SystemMessage) and sent[0].content == "You are an airline agent."
    assert isinstance(sent[1], SystemMessage) and sent[1].content == tool_directory(sent)
    assert tool_directory(sent).startswith("Tool directory.") and "You are an airline agent." not in tool_directory(sent)


def test_the_request_keeps_the_host_s_system_message_and_starts_its_messages_with_the_directory() -> None:
    middleware = ContextMiddleware(memory_engine(LOADED), scope=Scope(session_id="request"))
    host = SystemMessage(content=[{"type": "text", "text": "You are an airline agent."}, {"type": "text", "text": "Be brief."}])
    seen: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    for _ in range(2):
        middleware.wrap_model_call(ModelRequest(model=ScriptedChatModel(script=[]), messages=[HumanMessage("hi")],
                                                system_message=host, tools=[*airline_tools([]), *middleware.tools]), handler)
    first, second = seen
    assert first.system_message is not None and first.system_message.model_dump() == host.model_dump()
    directory = first.messages[0]
    assert isinstance(directory, SystemMessage) and str(directory.content).startswith("Tool directory.")
    assert first.messages[1:] == [HumanMessage("hi")]
    assert second.system_message is first.system_message and second.messages[0] is directory, "the same objects on every call"


@pytest.mark.filterwarnings("ignore:The 'convert_system_message_to_human' parameter is deprecated:DeprecationWarning")
def test_a_model_that_reads_one_system_message_gets_the_directory_joined_to_the_prompt() -> None:
    pytest.importorskip("langchain_google_genai")
    from langchain_google_genai import ChatGoogleGenerativeAI

    middleware = ContextMiddleware(memory_engine(LOADED), scope=Scope(session_id="gemma"))
    seen: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        seen.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    model = ChatGoogleGenerativeAI(model="gemma-3-27b-it", google_api_key="test-key", convert_system_message_to_human=True)
    middleware.wrap_model_call(ModelRequest(model=model, messages=[HumanMessage("hi")], system_message=SystemMessage("You are an airline agent."),
                                            tools=[*airline_tools([]), *middleware.tools]), handler)
    request = seen[0]
    assert request.system_message is not None
    assert str(request.system_message.content).startswith("You are an airline agent.\n\nTool directory.")
    assert not any(isinstance(m, SystemMessage) for m in request.messages)
