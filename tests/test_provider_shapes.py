"""Views of conversations in the shapes the providers' own LangChain integrations record, as
their request builders format them offline, checked against the structural rules each API
enforces (and its builder does not): every ``tool_use`` answered in the next user turn, tool
results before any text there, no empty text, at most four cache marks, a server tool's call
with its result; as many function responses as calls for Gemini and Mistral; reasoning items of
OpenAI's Responses API followed by their item and never left behind by the calls they precede;
with extended thinking, a request ending in tool results carries the signed thinking of the
turn that made the calls, unchanged.

Assistant turns are made by the integrations' own response parsers (``langchain-openai``'s for
the Responses API, ``langchain-google-genai``'s for Gemini), or as ``langchain-anthropic`` and
LangChain's standard blocks hold them; conversations are long enough for every tier, notes
and the budget's last resort, in ``mode="whole"`` and ``mode="compact"``.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, note, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine

LOOKUP = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


def rows(turn: int, count: int = 60) -> str:
    return "\n".join(f"row {j}: booking BK-{turn}{j} status confirmed seat {j}C fare {100 + j}.00 EUR" for j in range(count))


# ---------------------------------------------------------------- OpenAI's Responses API


def responses_turn(turn: int, calls: int, words: int, output_version: str) -> list[BaseMessage]:
    """An assistant turn as ``ChatOpenAI(use_responses_api=True, output_version=...)`` records
    it (a reasoning item, a message of ``words`` words, ``calls`` function calls), and its results."""
    from langchain_openai.chat_models.base import _construct_lc_result_from_responses_api
    from openai.types.responses import Response

    output: list[dict[str, Any]] = [
        {"type": "reasoning", "id": f"rs_{turn}", "summary": [{"type": "summary_text", "text": "plan " * 40}], "encrypted_content": "gAAAA" + "x" * 40},
    ]
    if words:
        output.append({"type": "message", "id": f"msg_{turn}", "role": "assistant", "status": "completed",
                       "content": [{"type": "output_text", "text": f"Checking {turn}. " + "more words " * words, "annotations": []}]})
    output += [{"type": "function_call", "id": f"fc_{turn}_{j}", "call_id": f"call_{turn}_{j}", "name": "lookup",
                "arguments": json.dumps({"id": f"BK-{turn}-{j}"}), "status": "completed"} for j in range(calls)]
    usage = {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2, "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
             "output_tokens_details": {"reasoning_tokens": 0}}
    response = Response.model_validate({"id": f"resp_{turn}", "created_at": 0, "model": "gpt-5", "object": "response", "output": output,
                                        "parallel_tool_calls": True, "tool_choice": "auto", "tools": [], "usage": usage})
    message = _construct_lc_result_from_responses_api(response, output_version=output_version).generations[0].message
    results = [ToolMessage(rows(turn) if j % 2 == 0 else "ok", tool_call_id=f"call_{turn}_{j}", name="lookup", id=f"t{turn}_{j}")
               for j in range(calls)]
    return [message, *results]


def responses_payload(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    bound = ChatOpenAI(model="gpt-5", api_key="test-key", use_responses_api=True).bind_tools(tools)
    payload: dict[str, Any] = bound.bound._get_request_payload(messages, **bound.kwargs)  # type: ignore[attr-defined]
    return payload


def reasoning_of(payload: dict[str, Any]) -> dict[str, list[str]]:
    """For each function call of the request, the ids of the reasoning items its response sent
    before it (in the request's order: a reasoning item goes with the items that follow it)."""
    out: dict[str, list[str]] = {}
    reasoning: list[str] = []
    for item in payload["input"]:
        if item.get("type") == "reasoning":
            reasoning.append(item.get("id") or json.dumps(item, sort_keys=True))
        elif item.get("type") == "function_call":
            out[item["call_id"]] = list(reasoning)
        elif item.get("type") != "message" or item.get("role") != "assistant":
            reasoning = []
    return out


@pytest.mark.parametrize("output_version", ["v0", "responses/v1"])
@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_condensed_responses_turn_keeps_its_reasoning_with_its_calls(mode: str, output_version: str) -> None:
    """A reasoning model's tool loop on the Responses API: the older turns are trimmed, and
    each call still goes out after the reasoning item that preceded it, with its own item id."""
    history: list[BaseMessage] = [SystemMessage("You are a travel agent."), HumanMessage("Look up all my bookings.", id="h0")]
    for turn in range(8):
        history += responses_turn(turn, 1 + turn % 3, 300 if turn % 2 else 5, output_version)
    tiers = {"compress": "always", "verbatim_exchanges": 1, "trimmed_exchanges": 6}
    engine = memory_engine(ContextConfig.model_validate({"mode": mode, "history": tiers, "budget": {"total": 20000}}))
    prepared = engine.prepare(history, tools=[LOOKUP, *engine.tools_for_model()], scope=Scope(session_id="responses"))
    original, view = responses_payload(history, [LOOKUP]), responses_payload(prepared.messages, prepared.tools)
    shown = [m for m in prepared.messages if isinstance(m, AIMessage) and m.tool_calls and str(m.tool_calls[0]["id"]).startswith("call_")]
    compressed = [m for m in shown if m.additional_kwargs.get("ctxplugin", {}).get("tier")]
    assert compressed or output_version != "v0", "no turn was compressed: the test shows nothing"
    before = reasoning_of(original)
    for call, reasoning in reasoning_of(view).items():
        if call.startswith("call_"):
            assert reasoning == before[call], f"{call} went out after {reasoning}, not its reasoning {before[call]}"
    ids = {item["call_id"]: item.get("id") for item in view["input"] if item.get("type") == "function_call"}
    assert all(ids[c] == f"fc_{c[5:]}" for c in ids if c.startswith("call_")), f"a call lost its item id: {ids}"



@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_responses_turn_cut_to_fit_the_budget_keeps_its_reasoning_with_its_calls(mode: str) -> None:
    """The budget's last resort cuts the text of the turn whose results end the view: its call
    still goes out after its reasoning item, with its item id."""
    history: list[BaseMessage] = [SystemMessage("You are a travel agent."), HumanMessage("Look up all my bookings.", id="h0")]
    for turn in range(3):
        history += responses_turn(turn, 1, 600, "v0")
    engine = memory_engine(ContextConfig.model_validate({"mode": mode, "budget": {"total": 500}}))
    prepared = engine.prepare(history, tools=[LOOKUP, *engine.tools_for_model()], scope=Scope(session_id="responses-cut"))
    assert any("minimum viable" in w for w in prepared.report.warnings), "the view was not cut: the test shows nothing"
    view = responses_payload(prepared.messages, prepared.tools)
    assert reasoning_of(view)["call_2_0"] == ["rs_2"]
    assert [item.get("id") for item in view["input"] if item.get("call_id") == "call_2_0" and item["type"] == "function_call"] == ["fc_2_0"]


SEARCH = {"type": "function", "function": {"name": "search_flights", "description": "Search flights.",
                                           "parameters": {"type": "object", "properties": {"to": {"type": "string"}}}}}


@pytest.mark.parametrize("shape", ["thinking", "redacted", "converse", "v1"])
@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_thinking_turn_marked_hypothetical_still_starts_with_its_thinking(mode: str, shape: str) -> None:
    """In a brainstorm the user opened, the assistant's turns are marked hypothetical; the turn
    whose results end the request keeps its thinking first (with extended thinking on, Claude
    refuses a request whose last assistant turn starts with anything else)."""
    shapes: dict[str, dict[str, Any]] = {
        "thinking": {"type": "thinking", "thinking": "The user wants to explore options.", "signature": "SIG=="},
        "redacted": {"type": "redacted_thinking", "data": "REDACTED=="},
        "converse": {"type": "reasoning_content", "reasoning_content": {"text": "The user wants to explore options.", "signature": "SIG=="}},
        "v1": {"type": "reasoning", "reasoning": "The user wants to explore options.", "extras": {"signature": "SIG=="}},
    }
    thinking = shapes[shape]
    v1 = {"output_version": "v1", "model_provider": "anthropic"} if shape == "v1" else {}
    call = {"name": "search_flights", "args": {"to": "Lisbon"}, "id": "toolu_1", "type": "tool_call"}
    history: list[BaseMessage] = [
        SystemMessage("You are a travel agent."),
        HumanMessage("Let's brainstorm some trip options, just exploring. What flights go to Lisbon in May?", id="h1"),
        AIMessage([thinking, {"type": "text", "text": "Let me look."},
                   {"type": "tool_use", "id": "toolu_1", "name": "search_flights", "input": {"to": "Lisbon"}}],
                  tool_calls=[call], id="a1", response_metadata=v1),
        ToolMessage("TP1351 LIS 2026-05-04 189 EUR; TP1353 LIS 2026-05-05 212 EUR", tool_call_id="toolu_1", name="search_flights", id="t1"),
    ]
    engine = memory_engine(ContextConfig.model_validate({"mode": mode}))
    prepared = engine.prepare(history, tools=[SEARCH, *engine.tools_for_model()], scope=Scope(session_id="brainstorm"))
    turn = next(m for m in prepared.messages if m.id == "a1")
    assert "[hypothetical: not a current fact]" in str(turn.content), "the turn was not marked: the test shows nothing"
    if shape == "converse":
        messages = build("bedrock-converse", prepared.messages, prepared.tools)["messages"]
        assert "reasoningContent" in messages[-2]["content"][0], "the calls' turn does not start with its reasoning"
    else:
        messages = build("anthropic", prepared.messages, prepared.tools)["messages"]
        first = messages[-2]["content"][0]
        assert first["type"] in ("thinking", "redacted_thinking") and first.get("signature", first.get("data")) in ("SIG==", "REDACTED=="), (
            f"the calls' turn does not start with its thinking: {first}")

# ---------------------------------------------------------------- the builders (offline)


@functools.cache
def _model(name: str) -> Any:
    if name == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
    if name in ("openai-chat", "openai-responses"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model="gpt-5", api_key="test-key", use_responses_api=name == "openai-responses")
    if name == "google-genai":
        from langchain_google_genai import ChatGoogleGenerativeAI

        return ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test-key")
    if name == "bedrock-converse":
        from langchain_aws import ChatBedrockConverse

        return ChatBedrockConverse(model_id="anthropic.claude-sonnet-4-5-v1:0", region_name="us-east-1",
                                   aws_access_key_id="test", aws_secret_access_key="test")
    from langchain_mistralai import ChatMistralAI

    return ChatMistralAI(model="mistral-large-latest", api_key="test-key")


def build(name: str, messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    """The request ``name``'s LangChain integration makes of ``messages`` and ``tools``."""
    model = _model(name)
    bound = model.bind_tools(tools) if tools else None
    target, kwargs = (bound.bound, dict(bound.kwargs)) if bound is not None else (model, {})
    if name == "google-genai":
        request = target._prepare_request(messages, **kwargs)
        return {"contents": [{"role": c.role, "parts": ["function_call" if p.function_call and p.function_call.name else
                                                         "function_response" if p.function_response and p.function_response.name else "other"
                                                         for p in c.parts or []]} for c in request["contents"]]}
    if name == "bedrock-converse":
        from langchain_aws.chat_models.bedrock_converse import _messages_to_bedrock

        converted, _system = _messages_to_bedrock(list(messages), None, model_id=model.model_id, provider=model.provider)
        return {"messages": converted}
    if name == "mistral":
        dicts, _params = target._create_message_dicts(messages, None)
        return {"messages": dicts}
    payload: dict[str, Any] = target._get_request_payload(messages, **kwargs)
    return payload


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _anthropic(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    assert messages[0]["role"] == "user", "the first message must be a user turn"
    uses = [b["id"] for m in messages for b in _blocks(m) if b.get("type") == "tool_use"]
    assert len(uses) == len(set(uses)), "two tool_use blocks share an id"
    assert json.dumps(payload, default=str).count('"cache_control"') <= 4, "more than four cache_control marks"
    for index, message in enumerate(messages):
        last = index == len(messages) - 1
        blocks = _blocks(message)
        assert message["content"] or (last and message["role"] == "assistant"), f"message {index} is empty"
        assert all(b["text"].strip() for b in blocks if b.get("type") == "text"), f"message {index} has an empty text block"
        kinds = [b.get("type") for b in blocks]
        if message["role"] == "user" and "tool_result" in kinds:
            assert kinds[: kinds.count("tool_result")] == ["tool_result"] * kinds.count("tool_result"), (
                f"message {index}: tool_result blocks must come first"
            )
        if message["role"] == "assistant":
            servers = {b["id"] for b in blocks if b.get("type") == "server_tool_use"}
            assert servers <= {b.get("tool_use_id") for b in blocks if str(b.get("type")).endswith("_tool_result")}
            called = {b["id"] for b in blocks if b.get("type") == "tool_use"}
            if called and not last:
                answered = {b["tool_use_id"] for b in _blocks(messages[index + 1]) if b.get("type") == "tool_result"}
                assert messages[index + 1]["role"] == "user" and called <= answered, f"message {index}: tool_use without its result next"
        if message["role"] == "user" and "tool_result" in kinds:
            previous = {b["id"] for b in _blocks(messages[index - 1]) if b.get("type") == "tool_use"} if index else set()
            assert {b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"} <= previous, f"message {index}: a result without its call"


def _openai_chat(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    for index, message in enumerate(messages):
        calls = {c["id"] for c in message.get("tool_calls") or []}
        answered: set[str] = set()
        for later in messages[index + 1:]:
            if later["role"] != "tool":
                break
            answered.add(later["tool_call_id"])
        if message["role"] == "tool":
            continue
        assert calls <= answered or index == len(messages) - 1, f"message {index}: tool_calls not all answered"
        following = messages[index + 1] if index + 1 < len(messages) else None
        assert following is None or following["role"] != "tool" or calls, f"message {index + 1}: a tool message without its call"


def _openai_responses(payload: dict[str, Any]) -> None:
    items = payload["input"]
    ids = [item["id"] for item in items if item.get("id")]
    assert len(ids) == len(set(ids)), "two input items share an id"
    called = [item["call_id"] for item in items if item.get("type") == "function_call"]
    assert len(called) == len(set(called)), "two function calls share a call id"
    for index, item in enumerate(items):
        if item.get("type") == "function_call_output":
            assert item["call_id"] in called[: sum(1 for i in items[:index] if i.get("type") == "function_call")], "an output before its call"
        if item.get("type") == "reasoning":
            following = items[index + 1] if index + 1 < len(items) else {}
            assert following.get("type") in ("reasoning", "function_call") or following.get("role") == "assistant", (
                f"reasoning item {item.get('id')} without the item it precedes"
            )


def _google(payload: dict[str, Any]) -> None:
    contents = payload["contents"]
    assert contents[0]["role"] == "user" and contents[-1]["role"] == "user"
    for previous, content in itertools.pairwise(contents):
        if "function_call" in content["parts"]:
            assert previous["role"] == "user", "a function call must follow a user turn or a function response"
        if "function_response" in content["parts"]:
            assert content["parts"].count("function_response") == previous["parts"].count("function_call"), (
                "as many function responses as the calls of the turn before"
            )


def _bedrock(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    assert messages[0]["role"] == "user"
    for index, message in enumerate(messages):
        assert message["content"], f"message {index} is empty"
        assert all(b["text"].strip() for b in message["content"] if "text" in b), f"message {index} has a blank text"
        if index:
            assert messages[index - 1]["role"] != message["role"], "user and assistant turns must alternate"
        uses = sorted(b["toolUse"]["toolUseId"] for b in message["content"] if "toolUse" in b)
        if uses and index + 1 < len(messages):
            assert uses == sorted(b["toolResult"]["toolUseId"] for b in messages[index + 1]["content"] if "toolResult" in b)


def _mistral(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    assert messages[-1]["role"] in ("user", "tool")
    for index, message in enumerate(messages):
        following = [m["role"] for m in messages[index + 1:]]
        results = len(following) - len(list(itertools.dropwhile(lambda r: r == "tool", following)))
        if message["role"] == "assistant":
            calls = message.get("tool_calls") or []
            assert message.get("content") or calls, f"message {index}: an assistant message with neither content nor calls"
            assert not following or results == len(calls), f"message {index}: {len(calls)} calls, {results} tool messages"
        if message["role"] == "tool" and following:
            assert following[0] in ("tool", "assistant"), f"message {index + 1}: {following[0]} after a tool message"


RULES: dict[str, Callable[[dict[str, Any]], None]] = {
    "anthropic": _anthropic, "openai-chat": _openai_chat, "openai-responses": _openai_responses,
    "google-genai": _google, "bedrock-converse": _bedrock, "mistral": _mistral,
}


def refusal(name: str, messages: list[BaseMessage], tools: list[Any]) -> str | None:
    """Why ``name``'s API would refuse the request made of ``messages`` (None: it takes it)."""
    try:
        RULES[name](build(name, messages, tools))
    except (ValueError, TypeError, KeyError, AssertionError) as exc:
        return f"{type(exc).__name__}: {exc}"
    return None


# ---------------------------------------------------------------- generated conversations

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
SETTINGS = settings(
    max_examples=int(os.environ.get("CTXPLUGIN_TEST_EXAMPLES", "12")),
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
KINDS = ["thinking", "redacted", "claude", "server", "responses-v0", "responses-v1", "gemini", "v1", "empty", "text",
         "answer", "user-again"]


def gemini_turn(turn: int, calls: int, text: bool) -> AIMessage:
    """An assistant turn as ``ChatGoogleGenerativeAI`` records a Gemini 3 answer (a thought, the
    first call signed)."""
    from google.genai import types
    from langchain_google_genai.chat_models import _response_to_result

    parts = [types.Part(text="thinking about the bookings", thought=True)]
    if text:
        parts.append(types.Part(text=f"Checking {turn}. " + "words " * 200))
    parts += [types.Part(function_call=types.FunctionCall(name="lookup", args={"id": f"BK-{turn}-{j}"}, id=f"call_{turn}_{j}"),
                         thought_signature=f"SIG{turn}".encode() if j == 0 else None) for j in range(calls)]
    usage = types.GenerateContentResponseUsageMetadata(prompt_token_count=1, candidates_token_count=1, total_token_count=2)
    response = types.GenerateContentResponse(
        candidates=[types.Candidate(content=types.Content(role="model", parts=parts), finish_reason=types.FinishReason.STOP)], usage_metadata=usage)
    message = _response_to_result(response).generations[0].message
    assert isinstance(message, AIMessage)
    return message


def assistant_turn(kind: str, turn: int, calls: int, words: int) -> AIMessage:
    """An assistant turn of ``kind`` making ``calls`` calls, with about ``words`` words of text."""
    if kind in ("responses-v0", "responses-v1"):
        message = responses_turn(turn, calls, words, kind.removeprefix("responses-"))[0]
        assert isinstance(message, AIMessage)
        return message
    if kind == "gemini":
        return gemini_turn(turn, calls, bool(words))
    text = f"Step {turn}: checking the bookings. " + "detail " * words
    tool_calls = [{"name": "lookup", "args": {"id": f"BK-{turn}-{j}"}, "id": f"call_{turn}_{j}", "type": "tool_call"} for j in range(calls)]
    if kind == "empty":
        return AIMessage("", tool_calls=tool_calls)
    if kind == "text":
        return AIMessage(text, tool_calls=tool_calls)
    if kind == "v1":
        blocks: list[str | dict[str, Any]] = [{"type": "reasoning", "reasoning": "plan " * 30}, {"type": "text", "text": text},
                                              *({"type": "tool_call", "id": c["id"], "name": c["name"], "args": c["args"]} for c in tool_calls)]
        return AIMessage(blocks, tool_calls=tool_calls, response_metadata={"output_version": "v1"})
    first: list[str | dict[str, Any]] = []
    if kind == "thinking":
        first.append({"type": "thinking", "thinking": "I should look them up. " * 5, "signature": f"SIG{turn}=="})
    elif kind == "redacted":
        first.append({"type": "redacted_thinking", "data": f"REDACTED{turn}=="})
    uses = [{"type": "tool_use", "id": c["id"], "name": "lookup", "input": c["args"]} for c in tool_calls]
    return AIMessage([*first, {"type": "text", "text": text}, *uses], tool_calls=tool_calls)


def server_turn(turn: int) -> AIMessage:
    """A Claude answer that searched the web (a server tool) and cites what it found."""
    return AIMessage([
        {"type": "text", "text": "Searching the web."},
        {"type": "server_tool_use", "id": f"srvtoolu_{turn}", "name": "web_search", "input": {"query": f"flight {turn}"}},
        {"type": "web_search_tool_result", "tool_use_id": f"srvtoolu_{turn}",
         "content": [{"type": "web_search_result", "url": f"https://example.com/{turn}", "title": "Flights", "encrypted_content": "ENC"}]},
        {"type": "text", "text": f"Flight {turn} departs at 10:{turn:02d}. " * 30,
         "citations": [{"type": "web_search_result_location", "url": f"https://example.com/{turn}", "title": "Flights",
                        "encrypted_index": "EI", "cited_text": "departs"}]},
    ])


@st.composite
def tool_result(draw: st.DrawFn, turn: int, call_id: str) -> ToolMessage:
    kind = draw(st.sampled_from(["rows", "short", "error", "blocks", "image"]))
    content: str | list[str | dict[str, Any]]
    if kind == "blocks":
        content = [{"type": "text", "text": rows(turn, 30)}]
    elif kind == "image":
        content = [{"type": "text", "text": f"Boarding pass {turn}"}, {"type": "image", "base64": PNG, "mime_type": "image/png"}]
    else:
        content = {"rows": rows(turn, draw(st.integers(5, 80))), "short": "ok", "error": "Error: lookup failed: booking not found"}[kind]
    return ToolMessage(content, tool_call_id=call_id, name="lookup", status="error" if kind == "error" else "success",
                       artifact={"turn": turn} if kind == "rows" else None)


@st.composite
def conversations(draw: st.DrawFn, kinds: list[str]) -> list[BaseMessage]:
    # a brainstorm marks every later message hypothetical (see ctxplugin.facts.outdated)
    opening = draw(st.sampled_from(["Look up all my bookings, please.", "Let's brainstorm: just exploring, look up my bookings."]))
    messages: list[BaseMessage] = [SystemMessage("You are a travel agent."), HumanMessage(opening)]
    for turn in range(draw(st.integers(3, 10))):
        kind = draw(st.sampled_from(kinds))
        if kind == "answer":
            messages += [AIMessage(f"Done with step {turn}. " + "detail " * draw(st.sampled_from([3, 300]))), HumanMessage(f"And step {turn}?")]
        elif kind == "server":
            messages += [server_turn(turn), HumanMessage(f"Thanks; what about step {turn}?")]
        elif kind == "user-again":  # the user wrote again before the results were answered
            messages.append(HumanMessage(f"Never mind, go on with step {turn}."))
        else:
            message = assistant_turn(kind, turn, draw(st.integers(1, 3)), draw(st.sampled_from([0, 5, 300])))
            results = [draw(tool_result(turn, str(call["id"]))) for call in message.tool_calls]
            messages += [message, *draw(st.permutations(results))]
    return [m.model_copy(update={"id": f"m{i}"}) for i, m in enumerate(messages)]


def call_points(messages: list[BaseMessage]) -> list[int]:
    """The lengths at which the agent calls the model: after a user turn, or after the last
    result of an assistant turn's calls."""
    return [end for end in range(2, len(messages) + 1)
            if isinstance(messages[end - 1], HumanMessage)
            or (isinstance(messages[end - 1], ToolMessage) and not (end < len(messages) and isinstance(messages[end], ToolMessage)))]


def caller(messages: list[BaseMessage]) -> AIMessage | None:
    """The assistant turn whose results end ``messages`` (None when a user turn ends it)."""
    if not isinstance(messages[-1], ToolMessage):
        return None
    return next(m for m in reversed(messages) if isinstance(m, AIMessage))


def thinking_of(blocks: list[Any]) -> list[dict[str, Any]]:
    return [{k: v for k, v in b.items() if k != "cache_control"} for b in blocks
            if isinstance(b, dict) and b.get("type") in ("thinking", "redacted_thinking")]


def check_views(messages: list[BaseMessage], mode: str, total: int, providers: list[str]) -> None:
    """Every view of ``messages`` (call by call) is accepted by each of ``providers`` wherever
    the conversation itself is, and a request ending in tool results carries the thinking of
    the turn that made the calls, unchanged."""
    engine = memory_engine(ContextConfig.model_validate({"mode": mode, "budget": {"total": total}}))
    tools = [LOOKUP, *engine.tools_for_model()]
    for end in call_points(messages):
        history = messages[:end]
        view = engine.prepare(history, tools=tools, scope=Scope(session_id="shapes")).messages
        for name in providers:
            refused = refusal(name, view, tools)
            if refused is not None and refusal(name, history, [LOOKUP]) is None:
                note(f"view: {[type(m).__name__ for m in view]}")
                raise AssertionError(f"{name} refuses the view of call {end} ({mode}, total {total}): {refused}")
        if "openai-responses" in providers:  # each call after the reasoning item its response sent before it
            before, after = reasoning_of(build("openai-responses", history, [LOOKUP])), reasoning_of(build("openai-responses", view, tools))
            lost = {c: (after[c], before[c]) for c in after if c in before and after[c] != before[c]}
            assert not lost, f"call {end}: calls sent after other reasoning than their own: {lost}"
        made = caller(history)
        if made is not None and "anthropic" in providers and thinking_of(list(made.content)):
            sent = build("anthropic", view, tools)["messages"]
            assert thinking_of(_blocks(sent[-2])[:1]) and thinking_of(_blocks(sent[-2])) == thinking_of(list(made.content)), (
                f"the request of call {end} does not start the calls' turn with its thinking, unchanged"
            )


CLAUDE_KINDS = ["thinking", "redacted", "claude", "server", "empty", "text", "answer", "user-again"]
OPENAI_KINDS = ["responses-v0", "responses-v1", "v1", "empty", "text", "answer", "user-again"]


@SETTINGS
@given(messages=conversations(CLAUDE_KINDS), mode=st.sampled_from(["whole", "compact"]), total=st.integers(300, 8000))
def test_claude_shaped_views_are_accepted(messages: list[BaseMessage], mode: str, total: int) -> None:
    check_views(messages, mode, total, ["anthropic", "bedrock-converse", "openai-chat", "mistral"])


@SETTINGS
@given(messages=conversations(OPENAI_KINDS), mode=st.sampled_from(["whole", "compact"]), total=st.integers(300, 8000))
def test_openai_shaped_views_are_accepted(messages: list[BaseMessage], mode: str, total: int) -> None:
    check_views(messages, mode, total, ["openai-responses", "openai-chat", "anthropic", "mistral"])


@SETTINGS
@given(messages=conversations(["gemini", "empty", "text", "answer", "user-again"]), mode=st.sampled_from(["whole", "compact"]),
       total=st.integers(300, 8000))
def test_gemini_shaped_views_are_accepted(messages: list[BaseMessage], mode: str, total: int) -> None:
    check_views(messages, mode, total, ["google-genai", "openai-chat"])
