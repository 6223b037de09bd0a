"""What ``ContextMiddleware`` sends a Claude model with extended thinking is accepted, over
generated conversations in the shapes Claude answers in.

Turns open with signed ``thinking`` or ``redacted_thinking`` (or none), make one to three
parallel calls whose results come back in any order as separate tool messages (long rows, an
error, a list of blocks, an image), search the web with a server tool and cite what it found,
or answer and let the user speak again, sometimes before the results were answered. Each call's
request is the one the integration's own builder makes offline from what the middleware hands
the model (its view, cache marks and call settings): langchain-anthropic's for ``ChatAnthropic``,
langchain-aws's (with the cache points it adds) for ``ChatBedrockConverse``, in
``mode="whole"`` and ``mode="compact"``. Each request carries at most four cache marks, answers
every ``tool_use`` in the next user turn, and, when it ends with tool results, starts the turn
that made those calls with that turn's thinking, unchanged.
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine

pytest.importorskip("langchain_anthropic")
pytest.importorskip("langchain_aws")

THINKING = {"type": "enabled", "budget_tokens": 2048}
LOOKUP = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXPLUGIN_TEST_EXAMPLES", "10")),
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def rows(turn: int, count: int) -> str:
    return "\n".join(f"row {j}: booking BK-{turn}{j} status confirmed seat {j}C fare {100 + j}.00 EUR" for j in range(count))


@st.composite
def result(draw: st.DrawFn, turn: int, call_id: str) -> ToolMessage:
    kind = draw(st.sampled_from(["rows", "short", "error", "blocks", "image"]))
    content: str | list[str | dict[str, Any]]
    if kind == "blocks":
        content = [{"type": "text", "text": rows(turn, 30)}]
    elif kind == "image":
        content = [{"type": "text", "text": f"Boarding pass {turn}"}, {"type": "image", "base64": PNG, "mime_type": "image/png"}]
    else:
        content = {"rows": rows(turn, draw(st.integers(5, 80))), "short": "ok", "error": "Error: booking not found"}[kind]
    return ToolMessage(content, tool_call_id=call_id, name="lookup", status="error" if kind == "error" else "success")


@st.composite
def conversations(draw: st.DrawFn, kinds: tuple[str, ...] = ("thinking", "thinking", "redacted", "plain", "server", "answer", "user-again")) -> list[BaseMessage]:
    # a brainstorm marks every later message hypothetical (see ctxplugin.facts.outdated)
    opening = draw(st.sampled_from(["Look up all my bookings, please.", "Let's brainstorm: just exploring, look up my bookings."]))
    messages: list[BaseMessage] = [SystemMessage("You are a travel agent."), HumanMessage(opening)]
    for turn in range(draw(st.integers(3, 9))):
        kind = draw(st.sampled_from(kinds))
        if kind == "answer":
            messages += [AIMessage(f"Done with step {turn}. " + "detail " * draw(st.sampled_from([3, 300]))), HumanMessage(f"And step {turn}?")]
        elif kind == "user-again":
            messages.append(HumanMessage(f"Never mind, go on with step {turn}."))
        elif kind == "server":
            messages += [AIMessage([
                {"type": "server_tool_use", "id": f"srvtoolu_{turn}", "name": "web_search", "input": {"query": f"flight {turn}"}},
                {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{turn}",
                 "content": [{"type": "web_search_result", "url": f"https://example.com/{turn}", "title": "Flights", "encrypted_content": "ENC"}]},
                {"type": "text", "text": f"Flight {turn} departs at 10:{turn:02d}. " * 30,
                 "citations": [{"type": "web_search_result_location", "url": f"https://example.com/{turn}", "title": "Flights",
                                "encrypted_index": "EI", "cited_text": "departs"}]},
            ]), HumanMessage(f"Thanks; what about step {turn}?")]
        else:
            calls = [{"name": "lookup", "args": {"id": f"BK-{turn}-{j}"}, "id": f"toolu_{turn}_{j}", "type": "tool_call"}
                     for j in range(draw(st.integers(1, 3)))]
            first: list[str | dict[str, Any]] = []
            if kind == "thinking":
                first.append({"type": "thinking", "thinking": "I should look them up. " * 5, "signature": f"SIG{turn}=="})
            elif kind == "redacted":
                first.append({"type": "redacted_thinking", "data": f"REDACTED{turn}=="})
            text = f"Step {turn}: checking. " + "detail " * draw(st.sampled_from([0, 300]))
            uses = [{"type": "tool_use", "id": c["id"], "name": "lookup", "input": c["args"]} for c in calls]
            results = [draw(result(turn, str(c["id"]))) for c in calls]
            messages += [AIMessage([*first, {"type": "text", "text": text}, *uses], tool_calls=calls), *draw(st.permutations(results))]
    return [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(messages)]


def sent(middleware: ContextMiddleware, model: Any, history: list[BaseMessage]) -> ModelRequest:
    request = ModelRequest(model=model, system_message=history[0], messages=history[1:],  # type: ignore[arg-type]
                           tools=[LOOKUP, *middleware.tools])
    out: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        out.append(request)
        return ModelResponse(result=[AIMessage("ok")])

    middleware.wrap_model_call(request, handler)
    return out[0]


def anthropic_request(request: ModelRequest) -> list[dict[str, Any]]:
    bound = request.model.bind_tools(request.tools)
    messages = [*([request.system_message] if request.system_message else []), *request.messages]
    payload = bound.bound._get_request_payload(messages, **bound.kwargs, **request.model_settings)  # type: ignore[attr-defined]
    assert json.dumps(payload, default=str).count('"cache_control"') <= 4, "more than four cache marks"
    return [{"role": m["role"], "content": m["content"] if isinstance(m["content"], list) else [{"type": "text", "text": m["content"]}]}
            for m in payload["messages"]]


def converse_request(request: ModelRequest) -> list[dict[str, Any]]:
    from langchain_aws.chat_models.bedrock_converse import (
        _messages_to_bedrock,
        _snake_to_camel_keys,
    )

    model: Any = request.model
    bound: Any = model.bind_tools(request.tools)
    messages: list[BaseMessage] = [*([request.system_message] if request.system_message else []), *request.messages]
    converted, system = _messages_to_bedrock(messages, None, model_id=model.model_id, provider=model.provider)
    settings = dict(request.model_settings)
    cache_control = settings.pop("cache_control", None)
    params = bound.bound._converse_params(
        **_snake_to_camel_keys({**bound.kwargs, **settings}, excluded_keys={"inputSchema", "properties", "thinking"}))
    bound.bound._apply_cache_points(cache_control, system, converted, params)
    points = json.dumps([system, converted, params.get("toolConfig")], default=str).count('"cachePoint"')
    assert points <= 4, f"{points} cache points"
    # the Converse blocks in Anthropic's terms, for the checks below
    kinds = {"toolUse": "tool_use", "toolResult": "tool_result", "reasoningContent": "thinking", "text": "text"}
    out = []
    for message in converted:
        blocks = []
        for block in message["content"]:
            kind = next((kinds[k] for k in block if k in kinds), "other")
            inner = block.get("toolUse") or block.get("toolResult") or {}
            blocks.append({"type": kind, "id": inner.get("toolUseId"), "tool_use_id": inner.get("toolUseId"),
                           "thinking": json.dumps(block.get("reasoningContent"), sort_keys=True)})
        out.append({"role": message["role"], "content": blocks})
    return out


def check(messages: list[dict[str, Any]], history: list[BaseMessage], thinking: list[str]) -> None:
    for index, message in enumerate(messages):
        called = {b["id"] for b in message["content"] if b.get("type") == "tool_use"}
        if message["role"] == "assistant" and called and index + 1 < len(messages):
            answered = {b["tool_use_id"] for b in messages[index + 1]["content"] if b.get("type") == "tool_result"}
            assert called <= answered, f"message {index}: a tool_use without its result in the next user turn"
    ends_with_results = any(b.get("type") == "tool_result" for b in messages[-1]["content"])
    if ends_with_results and thinking:
        turn = messages[-2]["content"]
        assert turn[0]["type"] in ("thinking", "redacted_thinking"), "the calls' turn does not start with its thinking"
        assert [b for b in turn if b["type"] in ("thinking", "redacted_thinking")] == [
            b for b in turn[: len(thinking)]], "thinking is not the turn's opening"


def thinking_blocks(history: list[BaseMessage]) -> list[dict[str, Any]]:
    """The thinking of the assistant turn whose results end ``history`` ([] when none does)."""
    if not isinstance(history[-1], ToolMessage):
        return []
    made = next(m for m in reversed(history) if isinstance(m, AIMessage))
    return [b for b in made.content if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")]


def call_points(messages: list[BaseMessage]) -> list[int]:
    return [end for end in range(2, len(messages) + 1)
            if isinstance(messages[end - 1], HumanMessage)
            or (isinstance(messages[end - 1], ToolMessage) and not (end < len(messages) and isinstance(messages[end], ToolMessage)))]


@SETTINGS
@given(messages=conversations(), mode=st.sampled_from(["whole", "compact"]), total=st.integers(300, 8000))
def test_claude_with_thinking_takes_every_request_the_middleware_sends(messages: list[BaseMessage], mode: str, total: int) -> None:
    from langchain_anthropic import ChatAnthropic

    engine = memory_engine(ContextConfig.model_validate({"mode": mode, "budget": {"total": total}}))
    middleware = ContextMiddleware(engine, scope=Scope(session_id="claude-requests"))
    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key", thinking=THINKING)
    for end in call_points(messages):
        history = messages[:end]
        request = anthropic_request(sent(middleware, model, history))
        thinking = thinking_blocks(history)
        check(request, history, [b["type"] for b in thinking])
        if thinking:
            shown = [{k: v for k, v in b.items() if k != "cache_control"} for b in request[-2]["content"][: len(thinking)]]
            assert shown == thinking, f"call {end}: the thinking of the calls' turn was changed"


# Bedrock's Converse API has no server tools or redacted thinking in these shapes
@SETTINGS
@given(messages=conversations(("thinking", "thinking", "plain", "answer", "user-again")), mode=st.sampled_from(["whole", "compact"]),
       total=st.integers(300, 8000))
def test_claude_on_bedrock_with_thinking_takes_every_request_the_middleware_sends(
    messages: list[BaseMessage], mode: str, total: int
) -> None:
    from langchain_aws import ChatBedrockConverse

    engine = memory_engine(ContextConfig.model_validate({"mode": mode, "budget": {"total": total}}))
    middleware = ContextMiddleware(engine, scope=Scope(session_id="converse-requests"))
    model = ChatBedrockConverse(model_id="anthropic.claude-sonnet-4-5-v1:0", region_name="us-east-1",
                                aws_access_key_id="test", aws_secret_access_key="test",
                                additional_model_request_fields={"thinking": THINKING})
    for end in call_points(messages):
        history = messages[:end]
        request = converse_request(sent(middleware, model, history))
        check(request, history, [b["type"] for b in thinking_blocks(history)])
