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

import json
from typing import Any

import pytest
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
            reasoning.append(item["id"])
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
