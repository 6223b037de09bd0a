"""tools.binding="stubs" in real agents (and auto, the default, which picks stubs for these ten
tools): create_agent with ContextMiddleware, and create_react_agent with ContextHooks. The
scripted model asserts what it was bound with: the same stubs on every call, while the header
says what each tool does, load_tools answers with the parameters and real tools run."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig
from ctxplugin.config import ToolsConfig
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call
from ctxplugin.testing.airline import Ran, airline_tools, last_tool_result, system_text
from ctxplugin.tools import DIRECTORY_TITLE, LOAD_TOOLS_NAME, STUBS_TITLE

Step = Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage]

STUBS = ContextConfig(tools=ToolsConfig(binding="stubs"))
OPEN_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": True}
META = {LOAD_TOOLS_NAME, "expand_ref"}


TOOL_NAMES = {t.name for t in airline_tools([])}


def by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in tools}


def schema_lines(text: str) -> dict[str, dict[str, Any]]:
    """The JSON schemas in a load_tools answer, by tool name."""
    out = {}
    for line in text.splitlines():
        if line.startswith("- {"):
            schema = json.loads(line[2:])
            out[schema["name"]] = schema
    return out


def assert_stubs(tools: list[dict[str, Any]], pinned: frozenset[str] = frozenset()) -> None:
    """Every agent tool is bound; pinned ones with their schema, the rest as stubs (a name and
    open arguments, nothing else)."""
    bound = by_name(tools)
    assert set(bound) == TOOL_NAMES | META
    for name in TOOL_NAMES - pinned:
        assert bound[name] == {"name": name, "parameters": OPEN_PARAMETERS}, name
    for name in pinned:
        assert bound[name]["parameters"]["properties"], name


def assert_one_tool_list(model: ScriptedChatModel) -> None:
    """The tools sent were the same list, in the same order, on every call."""
    assert len(model.calls) > 1
    for call in model.calls[1:]:
        assert call.tools == model.calls[0].tools


def run_agent(steps: list[Step | AIMessage], config: ContextConfig = STUBS,
              thread: str = "t") -> tuple[ScriptedChatModel, list[BaseMessage], Ran]:
    ran: Ran = []
    model = ScriptedChatModel(script=list(steps))
    agent = create_agent(model, airline_tools(ran), system_prompt="You are an airline agent.",
                         middleware=[ContextMiddleware(memory_engine(config))], checkpointer=InMemorySaver())
    run_config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [{"role": "user", "content": "I need help with my booking"}]}, run_config)
    return model, agent.get_state(run_config).values["messages"], ran


def test_model_sees_stubs_loads_parameters_then_the_real_tool_runs() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        header = system_text(messages)
        assert header.startswith("You are an airline agent.") and STUBS_TITLE in header
        assert DIRECTORY_TITLE not in header
        assert "\n- get_user_details: Get the details of a user, including their reservations\n" in header
        assert by_name(tools)[LOAD_TOOLS_NAME]["description"].startswith("Read the parameters")
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["get_user_details"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)  # loading bound nothing new
        answer = last_tool_result(messages)
        schema = schema_lines(str(answer.content))["get_user_details"]
        assert schema["parameters"]["required"] == ["user_id"]
        assert set(schema["parameters"]["properties"]) == {"user_id"}
        return AIMessage(content="", tool_calls=[tool_call("get_user_details", {"user_id": "mia_li_3668"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "Mia Li" in str(last_tool_result(messages).content)
        return AIMessage(content="You have reservation NO6JO3.")

    model, state, ran = run_agent([first, second, third])
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})]
    assert isinstance(state[-1], AIMessage) and state[-1].content == "You have reservation NO6JO3."
    assert_one_tool_list(model)
    assert len({system_text(call.messages) for call in model.calls}) == 1
    reports = [m.response_metadata["ctxplugin"] for m in state if isinstance(m, AIMessage)]
    assert reports[-1]["ctxplugin.tools_loaded"] == ["get_user_details"]
    # the list did not change after the load: the prefix the provider cached is kept
    assert all(r["ctxplugin.unchanged_prefix_tokens"] > 0 for r in reports[1:])


def test_a_call_with_wrong_arguments_gets_the_schema_and_does_not_run() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        return AIMessage(content="", tool_calls=[
            tool_call("update_reservation_baggages", {"reservation_id": "NO6JO3", "bags": 2}),
        ])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        answer = last_tool_result(messages)
        text = str(answer.content)
        assert answer.status == "error"
        assert "Call update_reservation_baggages again" in text and "bound from your next step on" not in text
        schema = json.loads(text.split("The schema of update_reservation_baggages:\n", 1)[1].splitlines()[0])
        assert set(schema["parameters"]["required"]) == {
            "reservation_id", "total_baggages", "nonfree_baggages", "payment_id"}
        assert by_name(tools)["update_reservation_baggages"]["parameters"] == OPEN_PARAMETERS  # still a stub
        return AIMessage(content="", tool_calls=[tool_call("update_reservation_baggages", {
            "reservation_id": "NO6JO3", "total_baggages": 2, "nonfree_baggages": 0, "payment_id": "gift_card_1"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert str(last_tool_result(messages).content) == "NO6JO3: 2 bags"
        return AIMessage(content="Two bags added.")

    model, _, ran = run_agent([first, second, third])
    assert ran == [("update_reservation_baggages", {"reservation_id": "NO6JO3", "total_baggages": 2})]
    assert_one_tool_list(model)


def test_load_tools_with_a_wrong_name_gets_close_matches() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[
            tool_call(LOAD_TOOLS_NAME, {"names": ["search_direct_flights", "cancel_reservation"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        text = str(last_tool_result(messages).content)
        assert "- search_direct_flights: no such tool; did you mean search_direct_flight" in text
        assert set(schema_lines(text)) == {"cancel_reservation"}
        return AIMessage(content="", tool_calls=[tool_call("search_direct_flight", {
            "origin": "SFO", "destination": "JFK", "date": "2024-05-20"})])

    model, _, ran = run_agent([first, second, AIMessage(content="HAT001 is available.")])
    assert ran == [("search_direct_flight", {"origin": "SFO", "destination": "JFK", "date": "2024-05-20"})]
    assert_one_tool_list(model)


def test_pinned_tools_keep_their_schema_and_the_rest_stay_stubs() -> None:
    def load(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["calculate", "get_user_details"]})])

    config = ContextConfig(tools=ToolsConfig(binding="stubs", pinned=["think", "transfer_to_human_agents"]))
    model, _, _ = run_agent([load, AIMessage(content="ok")], config=config)
    assert_one_tool_list(model)
    tools = model.calls[0].tools
    assert_stubs(tools, pinned=frozenset({"think", "transfer_to_human_agents"}))
    assert by_name(tools)["think"]["parameters"]["required"] == ["thought"]
    assert [t["function"]["name"] for t in tools][:3] == ["think", "transfer_to_human_agents", LOAD_TOOLS_NAME]


def test_below_the_threshold_stubs_change_nothing() -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Hello.")])
    ran: Ran = []
    agent = create_agent(model, airline_tools(ran)[:3], system_prompt="Be brief.",
                         middleware=[ContextMiddleware(memory_engine(STUBS))], checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "hi"}]}, {"configurable": {"thread_id": "small"}})
    bound = by_name(model.calls[0].tools)
    assert set(bound) == {"get_user_details", "get_reservation_details", "search_direct_flight", "expand_ref"}
    assert bound["search_direct_flight"]["parameters"]["required"] == ["origin", "destination", "date"]
    assert system_text(model.calls[0].messages) == "Be brief."


async def test_async_agent_loads_and_calls() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["cancel_reservation"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "reservation_id" in schema_lines(str(last_tool_result(messages).content))["cancel_reservation"]["parameters"]["properties"]
        return AIMessage(content="", tool_calls=[tool_call("cancel_reservation", {"reservation_id": "NO6JO3"})])

    ran: Ran = []
    model = ScriptedChatModel(script=[first, second, AIMessage(content="Cancelled.")])
    agent = create_agent(model, airline_tools(ran), middleware=[ContextMiddleware(memory_engine(STUBS))],
                         checkpointer=InMemorySaver())
    await agent.ainvoke({"messages": [{"role": "user", "content": "cancel NO6JO3"}]},
                        {"configurable": {"thread_id": "async"}})
    assert ran == [("cancel_reservation", {"reservation_id": "NO6JO3"})]
    assert_one_tool_list(model)


def test_by_default_the_ten_tools_are_bound_as_stubs() -> None:
    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        assert STUBS_TITLE in system_text(messages)
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["get_user_details"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)  # the load bound nothing new
        assert "user_id" in schema_lines(str(last_tool_result(messages).content))["get_user_details"]["parameters"]["required"]
        return AIMessage(content="", tool_calls=[tool_call("get_user_details", {"user_id": "mia_li_3668"})])

    model, _, ran = run_agent([first, second, AIMessage(content="Found you.")], config=ContextConfig())
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})]
    assert_one_tool_list(model)


@pytest.mark.filterwarnings("ignore:create_react_agent has been moved:DeprecationWarning")
def test_create_react_agent_binds_the_same_stubs_on_every_call() -> None:
    from langgraph.prebuilt import create_react_agent

    def first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        assert STUBS_TITLE in system_text(messages)
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["get_reservation_details"]})])

    def second(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert_stubs(tools)
        assert "reservation_id" in schema_lines(str(last_tool_result(messages).content))["get_reservation_details"][
            "parameters"]["properties"]
        return AIMessage(content="", tool_calls=[tool_call("get_reservation_details", {"reservation_id": "NO6JO3"})])

    def third(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert "JFK" in str(last_tool_result(messages).content)
        # an invalid direct call: answered with its schema, not run
        return AIMessage(content="", tool_calls=[tool_call("send_certificate", {"user_id": "mia_li_3668"})])

    def fourth(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        text = str(last_tool_result(messages).content)
        assert "amount" in text and "bound from your next step on" not in text
        assert by_name(tools)["send_certificate"]["parameters"] == OPEN_PARAMETERS
        return AIMessage(content="", tool_calls=[tool_call("send_certificate", {"user_id": "mia_li_3668", "amount": 50})])

    ran: Ran = []
    model = ScriptedChatModel(script=[first, second, third, fourth, AIMessage(content="Done.")])
    hooks = ContextHooks(memory_engine(STUBS), airline_tools(ran))
    agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               checkpointer=InMemorySaver())
    agent.invoke({"messages": [{"role": "user", "content": "what is on NO6JO3?"}]},
                 {"configurable": {"thread_id": "react"}})
    assert ran == [("get_reservation_details", {"reservation_id": "NO6JO3"}),
                   ("send_certificate", {"user_id": "mia_li_3668", "amount": 50})]
    assert len(model.calls) == 5
    assert_one_tool_list(model)
