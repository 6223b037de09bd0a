"""Prompt-cache marks where ctxplugin binds and calls a Claude model itself (``ContextHooks``'
``model`` / ``model_node``, LCEL's ``engine.as_model``, ``with_cache_marks`` after
``engine.as_runnable()``), and on Bedrock Converse in every host.

Each request is the one the provider's own LangChain package sends: langchain-anthropic's
payload and langchain-aws's ``converse`` keywords, captured offline where each would go out
(the hosted API is the only thing replaced).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from unittest.mock import MagicMock

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import BaseTool, StructuredTool
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.langchain import with_cache_marks
from ctxplugin.replay.loaders import load_file
from ctxplugin.testing import memory_engine, tool_call

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_aws")

CONFIG: Any = {"configurable": {"thread_id": "marks"}}
SONNET_ON_BEDROCK = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
MARKED = ContextConfig(budget={"total": 3000})
UNMARKED = ContextConfig(budget={"total": 3000}, prompt_cache_marks=False)


def bash_tool() -> BaseTool:
    def run(command: str) -> str:
        return ""

    return StructuredTool.from_function(run, name="bash", description="Run a bash command in the repository.")


def long_session(exchanges: int = 40) -> list[BaseMessage]:
    """A coding session long enough for the budget to condense it into context notes."""
    messages: list[BaseMessage] = [HumanMessage("Fix the failing test in src/app.py. " * 20)]
    for i in range(exchanges):
        messages.append(AIMessage("", tool_calls=[tool_call("bash", {"command": f"grep -n item_{i} src/app.py"}, f"c{i}")]))
        messages.append(ToolMessage(f"src/app.py:{100 + i}: item_{i} = compute({i})\n" * 30, tool_call_id=f"c{i}"))
    return messages


# ---------------------------------------------------------------- the providers, offline


def recording_claude(mocker: MockerFixture, payloads: list[dict[str, Any]], **kwargs: Any) -> Any:
    """A ChatAnthropic whose API call is answered locally; each payload it sends is kept."""
    from anthropic.types import Message, TextBlock, Usage
    from langchain_anthropic import ChatAnthropic

    llm = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key", max_retries=0, **kwargs)

    def create(self: Any, payload: dict[str, Any]) -> Any:
        payloads.append(json.loads(json.dumps(payload)))
        raw = MagicMock()  # the raw HTTP response, parsed into the message
        raw.parse.return_value = Message(id="m1", type="message", role="assistant", model="claude-sonnet-4-5", stop_reason="end_turn",
                       content=[TextBlock(type="text", text="Fixed.")], usage=Usage(input_tokens=1, output_tokens=1))
        return raw

    async def acreate(self: Any, payload: dict[str, Any]) -> Any:
        return create(self, payload)

    mocker.patch.object(ChatAnthropic, "_create", autospec=True, side_effect=create)
    mocker.patch.object(ChatAnthropic, "_acreate", autospec=True, side_effect=acreate)
    return llm


def recording_bedrock(
    model_id: str = SONNET_ON_BEDROCK, sent: list[dict[str, Any]] | None = None, **kwargs: Any
) -> tuple[Any, list[dict[str, Any]]]:
    """A ChatBedrockConverse whose boto client is answered locally; each ``converse`` call's
    keywords are kept (in ``sent`` when given)."""
    from langchain_aws import ChatBedrockConverse

    sent = [] if sent is None else sent

    def converse(**request: Any) -> dict[str, Any]:
        sent.append(json.loads(json.dumps(request)))
        return {"output": {"message": {"role": "assistant", "content": [{"text": "Fixed."}]}}, "stopReason": "end_turn",
                "usage": {"inputTokens": 1, "outputTokens": 1, "totalTokens": 2}, "metrics": {"latencyMs": 1}}

    client = MagicMock()
    client.converse.side_effect = converse
    return ChatBedrockConverse(model=model_id, region_name="us-east-1", client=client, **kwargs), sent  # type: ignore[call-arg]


def anthropic_marks(payload: dict[str, Any]) -> list[str]:
    """Where a payload is marked: ``tool``, ``system``, ``<role> <index>`` per block, ``end``."""
    found = ["tool" for t in payload.get("tools") or [] if "cache_control" in t]
    system = payload.get("system")
    found += ["system" for b in system if "cache_control" in b] if isinstance(system, list) else []
    for index, message in enumerate(payload["messages"]):
        if isinstance(message["content"], list):
            found += [f"{message['role']} {index}" for b in message["content"] if "cache_control" in b]
    return found + (["end"] if payload.get("cache_control") else [])


def bedrock_points(request: dict[str, Any]) -> list[str]:
    found = ["tool" for t in (request.get("toolConfig") or {}).get("tools", []) if "cachePoint" in t]
    found += ["system" for b in request.get("system") or [] if "cachePoint" in b]
    for index, message in enumerate(request["messages"]):
        found += [f"{message['role']} {index}" for b in message["content"] if "cachePoint" in b]
    return found


def _plain(value: Any) -> Any:
    """A request without its marks, a string content as its one text block."""
    if isinstance(value, dict):
        if value.get("type") == "tool_result" and isinstance(value.get("content"), str):
            value = {**value, "content": [{"type": "text", "text": value["content"]}]}
        return {k: _plain(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_plain(v) for v in value if not (isinstance(v, dict) and "cachePoint" in v)]
    return value


def same_text(marked: dict[str, Any], unmarked: dict[str, Any]) -> bool:
    def shape(request: dict[str, Any]) -> Any:
        plain = _plain(request)
        system = plain.get("system")
        if isinstance(system, str):
            plain["system"] = [{"type": "text", "text": system}]
        for message in plain.get("messages", []):
            if isinstance(message.get("content"), str):
                message["content"] = [{"type": "text", "text": message["content"]}]
        return plain

    return bool(shape(marked) == shape(unmarked))


# ---------------------------------------------------------------- hosts that call the model themselves


def call(host: str, engine: ContextEngine, llm: Any, messages: Sequence[BaseMessage]) -> None:
    """One model call through ``host`` on ``messages``."""
    system = "You fix bugs in this repository."
    if host == "as_model":
        engine.as_model(llm, tools=[bash_tool(), *engine.tools_for_model()]).invoke([SystemMessage(system), *messages], CONFIG)
    elif host == "as_runnable | with_cache_marks":
        prompt = ChatPromptTemplate.from_messages([("system", system), MessagesPlaceholder("history")])
        tools = [bash_tool(), *engine.tools_for_model()]
        bound = llm.bind_tools(tools)
        step = with_cache_marks(bound, tools) if engine.config.prompt_cache_marks else bound  # the user's choice here
        (prompt | engine.as_runnable() | step).invoke({"history": list(messages)}, CONFIG)
    else:
        hooks = ContextHooks(engine, [bash_tool()], prompt=system)
        if host == "model_node":
            hooks.model_node(llm).invoke({"messages": list(messages)}, CONFIG)
        else:  # create_react_agent: the model callable gets the view pre_model_hook made
            view = hooks.pre_model_hook.invoke({"messages": list(messages)}, CONFIG)["llm_input_messages"]
            hooks.model(llm)({"messages": view}, None).invoke(view, CONFIG)


HOSTS = ["as_model", "model_node", "react agent model", "as_runnable | with_cache_marks"]


@pytest.mark.parametrize("host", HOSTS)
def test_a_claude_request_is_marked_at_the_header_the_last_note_the_task_and_the_end(host: str, mocker: MockerFixture) -> None:
    payloads: list[dict[str, Any]] = []
    llm = recording_claude(mocker, payloads)
    call(host, memory_engine(MARKED), llm, long_session())
    call(host, memory_engine(UNMARKED), llm, long_session())
    marked, unmarked = payloads
    notes = [i for i, m in enumerate(marked["messages"]) if isinstance(m["content"], list)
             and any(b.get("type") == "tool_use" and b["name"] == "context_notes" for b in m["content"])]
    assert notes, "the session should be condensed into notes"
    # nothing marks this request after ctxplugin, so the task takes the fourth mark
    assert anthropic_marks(marked) == ["system", "user 0", f"user {notes[-1] + 1}", "end"]
    assert marked["cache_control"] == {"type": "ephemeral"}
    assert "cache_control" not in json.dumps(unmarked), "prompt_cache_marks=False sends no mark"
    assert same_text(marked, unmarked)


@pytest.mark.parametrize("host", ["as_model", "model_node"])
def test_marks_the_host_asked_for_count_against_the_four(host: str, mocker: MockerFixture) -> None:
    payloads: list[dict[str, Any]] = []
    llm = recording_claude(mocker, payloads, model_kwargs={"cache_control": {"type": "ephemeral", "ttl": "1h"}})
    call(host, memory_engine(MARKED), llm, long_session())
    marks = anthropic_marks(payloads[0])
    assert len(marks) == 4 and marks[-1] == "end"
    controls = [b["cache_control"] for m in payloads[0]["messages"] if isinstance(m["content"], list) for b in m["content"] if "cache_control" in b]
    assert controls and all(c == {"type": "ephemeral", "ttl": "1h"} for c in controls), "every mark lives as long as the host asked"


@pytest.mark.parametrize("host", ["as_model", "model_node", "react agent model"])
@pytest.mark.parametrize("marks", [MARKED, UNMARKED])
def test_settings_bound_to_the_model_reach_the_request_when_tools_are_bound(
    host: str, marks: ContextConfig, mocker: MockerFixture
) -> None:
    # LangChain's bind_tools on a binding binds the chat model under it, dropping what was bound
    payloads: list[dict[str, Any]] = []
    llm = recording_claude(mocker, payloads).bind(max_tokens=77, stop=["END"], cache_control={"type": "ephemeral", "ttl": "1h"})
    call(host, memory_engine(marks), llm, long_session())
    sent = payloads[0]
    assert sent["max_tokens"] == 77 and sent["stop_sequences"] == ["END"]
    assert sent["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert [t["name"] for t in sent["tools"]][:1] == ["bash"], "the tools the plan chose are still bound"


async def _each_entry_point(step: Any, view: list[BaseMessage]) -> None:
    """One request through every way a runnable can be called."""
    step.invoke(view)
    await step.ainvoke(view)
    step.batch([view, view])
    await step.abatch([view])
    list(step.batch_as_completed([view]))
    [item async for item in step.abatch_as_completed([view])]
    list(step.stream(view))
    [chunk async for chunk in step.astream(view)]
    [event async for event in step.astream_events(view, version="v2")]
    list(step.transform(iter([view])))

    async def chunks() -> Any:
        yield view

    [chunk async for chunk in step.atransform(chunks())]


async def test_every_way_of_calling_the_marked_model_marks_each_request(mocker: MockerFixture) -> None:
    payloads: list[dict[str, Any]] = []
    llm = recording_claude(mocker, payloads, disable_streaming=True)  # a stream is answered as one reply
    tools = [bash_tool()]
    view = [SystemMessage("You fix bugs in this repository."), HumanMessage("Fix the failing test in src/app.py.")]
    await _each_entry_point(with_cache_marks(llm.bind_tools(tools), tools), view)
    assert len(payloads) == 12
    assert [anthropic_marks(p) for p in payloads] == [["system", "end"]] * 12


@pytest.mark.parametrize("host", HOSTS)
def test_a_claude_on_bedrock_request_has_cache_points_at_the_same_ends(host: str) -> None:
    llm, sent = recording_bedrock()
    call(host, memory_engine(MARKED), llm, long_session())
    call(host, memory_engine(UNMARKED), llm, long_session())
    marked, unmarked = sent
    last = len(marked["messages"]) - 1
    points = bedrock_points(marked)
    assert len(points) == 4 and points[:2] == ["system", "user 0"] and points[-1] == f"user {last}", points
    assert "cachePoint" not in json.dumps(unmarked), "prompt_cache_marks=False sends no cache point"
    assert same_text(marked, unmarked)


def test_a_bedrock_model_without_prompt_caching_is_sent_no_cache_point() -> None:
    llm, sent = recording_bedrock("anthropic.claude-3-5-sonnet-20240620-v1:0")
    call("as_model", memory_engine(MARKED), llm, long_session())
    assert "cachePoint" not in json.dumps(sent[0])


def test_cache_points_the_host_put_in_the_system_prompt_count_against_the_four() -> None:
    llm, sent = recording_bedrock(system=["You are careful.", *[{"cachePoint": {"type": "default"}}] * 2])
    call("as_model", memory_engine(MARKED), llm, long_session())
    points = bedrock_points(sent[0])
    assert len(points) == 4 and points[-1] == f"user {len(sent[0]['messages']) - 1}", "the request's end goes first"


# ---------------------------------------------------------------- create_agent on Bedrock Converse


def bedrock_caching(**settings: Any) -> Any:
    from langchain_aws.middleware.prompt_caching import BedrockPromptCachingMiddleware

    return BedrockPromptCachingMiddleware(**settings)


ORDERS: dict[str, Callable[[ContextMiddleware], list[Any]]] = {
    "ContextMiddleware alone": lambda c: [c],
    "BedrockPromptCachingMiddleware first": lambda c: [bedrock_caching(), c],
    "BedrockPromptCachingMiddleware after": lambda c: [c, bedrock_caching()],
}


def drive(build: Callable[[ContextMiddleware], list[Any]], config: ContextConfig, messages: Sequence[BaseMessage]) -> list[dict[str, Any]]:
    """The ``converse`` request of a call through the middleware chain ``build`` makes."""
    llm, sent = recording_bedrock()
    middleware = ContextMiddleware(memory_engine(config), scope=Scope(session_id="run"))
    tools = [bash_tool(), *middleware.tools]

    def model(request: ModelRequest) -> ModelResponse:
        head = [request.system_message] if request.system_message is not None else []
        reply = request.model.bind_tools(list(request.tools), **request.model_settings).invoke([*head, *request.messages])
        return ModelResponse(result=[reply])

    handler: Callable[[ModelRequest], Any] = model
    for layer in reversed(build(middleware)):
        handler = (lambda m, h: lambda r: m.wrap_model_call(r, h))(layer, handler)
    handler(ModelRequest(model=llm, messages=list(messages), system_message=SystemMessage("You fix bugs."), tools=tools))  # type: ignore[arg-type]
    return sent


@pytest.mark.parametrize("order", list(ORDERS))
def test_create_agent_on_bedrock_stays_within_four_cache_points_in_every_order(order: str) -> None:
    marked = drive(ORDERS[order], MARKED, long_session())[0]
    plain = drive(ORDERS[order], UNMARKED, long_session())[0]
    points = bedrock_points(marked)
    assert len(points) <= 4, points
    # ctxplugin's at the task and the last note, langchain-aws's at the header and the end
    assert points[:2] == ["system", "user 0"] and points[-1] == f"user {len(marked['messages']) - 1}", points
    assert "user 0" not in bedrock_points(plain)
    assert same_text(marked, plain)
    alone = drive(ORDERS["ContextMiddleware alone"], UNMARKED, long_session())[0]
    assert "cachePoint" not in json.dumps(alone), "prompt_cache_marks=False sends no cache point"


def test_consecutive_user_messages_are_joined_without_a_cache_point_between() -> None:
    # langchain-aws joins them with a newline: a cache point between them would change the text
    messages: list[BaseMessage] = [HumanMessage("Fix the failing test. " * 200), HumanMessage("It is in src/app.py."), AIMessage("Looking."), HumanMessage("Go on.")]
    marked = drive(ORDERS["ContextMiddleware alone"], ContextConfig(mode="whole"), messages)[0]
    plain = drive(ORDERS["ContextMiddleware alone"], ContextConfig(mode="whole", prompt_cache_marks=False), messages)[0]
    assert same_text(marked, plain)
    assert "user 0" not in bedrock_points(marked), [(m["role"], [list(b) for b in m["content"]]) for m in marked["messages"]]


def test_a_host_that_places_its_own_cache_points_is_left_as_it_is() -> None:
    own = HumanMessage(content=[{"type": "text", "text": "Read this long document. " * 300}, {"cachePoint": {"type": "default"}}])
    sent = drive(ORDERS["ContextMiddleware alone"], ContextConfig(), [own, AIMessage("ok"), HumanMessage("Summarise it.")])[0]
    assert bedrock_points(sent) == ["user 0"]


# ---------------------------------------------------------------- every call of a recorded run

DATA = Path(os.environ.get("CTXPLUGIN_SHARED_DATA") or Path(__file__).resolve().parents[3] / ".." / "shared" / "data")
RUN = DATA / "trajectories" / "swe" / "marshmallow-code__marshmallow-1359.traj.json"
needs_run = pytest.mark.skipif(not RUN.exists(), reason=f"the recorded run is not at {RUN} (../shared/data)")


def recorded() -> tuple[list[BaseMessage], list[int]]:
    conversation = load_file(RUN).conversations[0]
    return list(conversation.messages), conversation.call_indexes()


def valid_anthropic(payload: dict[str, Any]) -> None:
    assert len(anthropic_marks(payload)) <= 4
    for message in payload["messages"]:
        for block in message["content"] if isinstance(message["content"], list) else []:
            if "cache_control" in block:
                assert message["role"] != "assistant" and block.get("type") not in ("thinking", "redacted_thinking")
                assert block.get("type") != "text" or block.get("text"), "a mark on an empty text block"


@needs_run
@pytest.mark.parametrize("provider", ["anthropic", "bedrock"])
def test_every_call_of_a_recorded_run_through_the_model_node_is_valid(provider: str, mocker: MockerFixture) -> None:
    messages, calls = recorded()
    payloads: list[dict[str, Any]] = []
    claude = recording_claude(mocker, payloads) if provider == "anthropic" else None
    for on in (True, False):
        llm = claude if claude is not None else recording_bedrock(sent=payloads)[0]
        node = ContextHooks(memory_engine(ContextConfig(mode="whole", prompt_cache_marks=on)), [bash_tool()]).model_node(llm)
        for index in calls:
            node.invoke({"messages": messages[:index]}, CONFIG)
    assert len(payloads) == 2 * len(calls)
    for marked, plain in zip(payloads[: len(calls)], payloads[len(calls):], strict=True):
        if provider == "anthropic":
            valid_anthropic(marked)
        else:
            assert len(bedrock_points(marked)) <= 4
        assert same_text(marked, plain)


@needs_run
@pytest.mark.parametrize("order", list(ORDERS))
def test_every_call_of_a_recorded_run_through_create_agent_on_bedrock_is_valid(order: str) -> None:
    messages, calls = recorded()
    for index in calls[::3]:
        history = messages[1:index]
        marked = drive(ORDERS[order], ContextConfig(mode="whole"), history)[0]
        plain = drive(ORDERS[order], ContextConfig(mode="whole", prompt_cache_marks=False), history)[0]
        assert len(bedrock_points(marked)) <= 4
        assert same_text(marked, plain)
