"""Claude with extended thinking takes a request that ends with a tool result only when the
assistant turn that made the call starts with its signed thinking. A view ends with one of
ctxplugin's lookups in one case (a thread's first call whose facts block holds lines read from
tool outputs): for such a model the lookup waits for the next call, in the middleware, the
hooks and ``engine.as_model``. So does the stand-in call ``orphan_tool_results="pair"`` puts
before a result that came after the user wrote again, when that result ends the conversation."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from pytest_mock import MockerFixture

from ctxplugin import Scope
from ctxplugin._layout import is_synthetic
from ctxplugin._thinking import thinks, without_trailing_lookups
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="thinking")
THINKING = {"type": "enabled", "budget_tokens": 2048}
LOOKUP = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


def claude(**kwargs: Any) -> BaseChatModel:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key", **kwargs)


def converse(**kwargs: Any) -> BaseChatModel:
    from langchain_aws import ChatBedrockConverse

    return ChatBedrockConverse(model_id="anthropic.claude-sonnet-4-5-v1:0", region_name="us-east-1", **kwargs)


def test_thinking_models_are_told_apart() -> None:
    from langchain_openai import ChatOpenAI

    assert thinks(claude(thinking=THINKING))
    assert not thinks(claude()) and not thinks(claude(thinking={"type": "disabled"}))
    assert thinks(claude().bind(thinking=THINKING)), "bound arguments count"
    assert thinks(claude(), {"thinking": THINKING}), "so do a call's settings"
    assert not thinks(claude(thinking=THINKING), {"thinking": {"type": "disabled"}})
    assert thinks(converse(additional_model_request_fields={"thinking": THINKING}))
    assert not thinks(converse())
    assert not thinks(ChatOpenAI(model="o3", api_key="test-key", reasoning={"effort": "low"}))


def engine_with_tool_facts() -> Any:
    """An engine whose session holds a fact read from a tool output by an earlier thread."""
    engine = memory_engine()
    engine.prepare(
        [
            HumanMessage("Look up booking BK-77."),
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": "BK-77"}, "id": "c1"}]),
            ToolMessage("Booking BK-77 ships to 12 Rue de la Paix, Paris.", tool_call_id="c1", name="lookup"),
            AIMessage("It ships to Paris."),
            HumanMessage("Thanks."),
        ],
        scope=SCOPE,
    )
    return engine


FIRST = [SystemMessage("You help with bookings."), HumanMessage("Where does booking BK-77 ship to?")]


def test_the_view_of_such_a_call_ends_with_the_lookup() -> None:
    view = engine_with_tool_facts().prepare(FIRST, tools=[LOOKUP], scope=SCOPE).messages
    assert is_synthetic(view[-1]) and "Rue de la Paix" in str(view[-1].content)
    kept = without_trailing_lookups(view)
    assert kept[-1] is view[-3] and kept[-1].content == FIRST[-1].content
    assert without_trailing_lookups(kept) == kept


def final_assistant_starts_with_thinking_or_is_not_a_call(payload: dict[str, Any]) -> bool:
    """Anthropic's rule with thinking on: a request ending with a tool result needs the assistant
    turn before it to start with a thinking block."""
    messages = payload["messages"]
    last = messages[-1]
    content = last["content"] if isinstance(last["content"], list) else []
    if last["role"] != "user" or not any(block.get("type") == "tool_result" for block in content):
        return True
    assistant = next(m for m in reversed(messages) if m["role"] == "assistant")
    blocks = assistant["content"] if isinstance(assistant["content"], list) else []
    return bool(blocks) and blocks[0].get("type") in ("thinking", "redacted_thinking")


@pytest.mark.parametrize("thinking", [True, False])
def test_the_middleware_leaves_the_trailing_lookup_out_for_a_thinking_model(thinking: bool) -> None:
    engine = engine_with_tool_facts()
    middleware = ContextMiddleware(engine, scope=SCOPE)
    model = claude(thinking=THINKING) if thinking else claude()
    request = ModelRequest(model=model, system_message=FIRST[0], messages=[FIRST[1]],  # type: ignore[arg-type, list-item]
                           tools=[LOOKUP, *middleware.tools])
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("It ships to Paris.")])

    middleware.wrap_model_call(request, handler)
    messages = sent[0].messages
    bound = sent[0].model.bind_tools(sent[0].tools)
    payload = bound.bound._get_request_payload([sent[0].system_message, *messages], **bound.kwargs)  # type: ignore[attr-defined]
    if thinking:
        assert messages[-1].content == FIRST[1].content and not any(is_synthetic(m) for m in messages)
        assert final_assistant_starts_with_thinking_or_is_not_a_call(payload)
    else:  # any other model gets the lookup, which it takes
        assert is_synthetic(messages[-1])
        assert not final_assistant_starts_with_thinking_or_is_not_a_call(payload)


def answer(mocker: MockerFixture, model: BaseChatModel) -> list[list[BaseMessage]]:
    """Answer every call of ``model`` locally; what each call was sent."""
    calls: list[list[BaseMessage]] = []

    def generate(self: Any, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        calls.append(list(messages))
        return ChatResult(generations=[ChatGeneration(message=AIMessage("It ships to Paris."))])

    mocker.patch.object(type(model), "_generate", generate)
    return calls


def test_as_model_and_the_hooks_leave_it_out_for_a_thinking_model(mocker: MockerFixture) -> None:
    engine = engine_with_tool_facts()
    model = claude(thinking=THINKING)
    calls = answer(mocker, model)
    engine.as_model(model).invoke(FIRST, config={"configurable": {"thread_id": SCOPE.session_id}})
    hooks = ContextHooks(engine, [], scope=SCOPE)
    view = engine.prepare(FIRST, tools=[LOOKUP], scope=SCOPE).messages
    assert is_synthetic(view[-1])
    hooks.bind(model, view).invoke(view)
    assert len(calls) == 2
    for sent in calls:
        assert sent[-1].content == FIRST[1].content and not is_synthetic(sent[-1])


def late_result_thread() -> list[BaseMessage]:
    """The user wrote again before the tool finished; its result came after that message."""
    think = {"type": "thinking", "thinking": "I should look the booking up.", "signature": "SIG=="}
    call = {"name": "lookup", "args": {"id": "BK-77"}, "id": "toolu_1", "type": "tool_call"}
    return [
        SystemMessage("You are a travel agent."),
        HumanMessage("Look up booking BK-77.", id="h1"),
        AIMessage([think, {"type": "tool_use", "id": "toolu_1", "name": "lookup", "input": {"id": "BK-77"}}], tool_calls=[call], id="a1"),
        HumanMessage("Any news?", id="h2"),
        ToolMessage("Booking BK-77 ships to 12 Rue de la Paix, Paris.", tool_call_id="toolu_1", name="lookup", id="t1"),
    ]


@pytest.mark.parametrize("make", [claude, converse], ids=["ChatAnthropic", "ChatBedrockConverse"])
def test_a_stand_in_call_for_a_late_result_at_the_end_waits_for_the_next_call(make: Any) -> None:
    from ctxplugin import ContextConfig

    if make is claude:
        model = claude(thinking=THINKING)
    else:
        model = converse(additional_model_request_fields={"thinking": THINKING}, aws_access_key_id="test", aws_secret_access_key="test")
    engine = memory_engine(ContextConfig(orphan_tool_results="pair"))
    middleware = ContextMiddleware(engine, scope=SCOPE)
    thread = late_result_thread()
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("It ships to Paris.")])

    middleware.wrap_model_call(ModelRequest(model=model, system_message=thread[0], messages=thread[1:],  # type: ignore[arg-type]
                                            tools=[LOOKUP, *middleware.tools]), handler)
    view = sent[0].messages
    # Claude with thinking refuses a request whose last assistant turn (here the stand-in call,
    # which has no thinking) does not start with its thinking block
    last_ai = next(m for m in reversed(view) if isinstance(m, AIMessage))
    opens = last_ai.content[0] if isinstance(last_ai.content, list) and last_ai.content else None
    assert not isinstance(view[-1], ToolMessage) or (isinstance(opens, dict) and opens.get("type") == "thinking"), (
        "the request ends with a result whose call's turn has no thinking")
    assert isinstance(view[-1], HumanMessage) and view[-1].content == "Any news?"
    # on the next call the stand-in and the late result are in view, before the answer
    thread += [AIMessage("It ships to Paris.", id="a2"), HumanMessage("Thanks!", id="h3")]
    middleware.wrap_model_call(ModelRequest(model=model, system_message=thread[0], messages=thread[1:],  # type: ignore[arg-type]
                                            tools=[LOOKUP, *middleware.tools]), handler)
    assert any(isinstance(m, ToolMessage) and "Rue de la Paix" in str(m.content) for m in sent[1].messages)
    # a model without thinking is sent the late result at once
    plain = ContextMiddleware(memory_engine(ContextConfig(orphan_tool_results="pair")), scope=SCOPE)
    plain.wrap_model_call(ModelRequest(model=claude(), system_message=thread[0], messages=thread[1:5],  # type: ignore[arg-type]
                                       tools=[LOOKUP, *plain.tools]), handler)
    assert isinstance(sent[2].messages[-1], ToolMessage) and "Rue de la Paix" in str(sent[2].messages[-1].content)
