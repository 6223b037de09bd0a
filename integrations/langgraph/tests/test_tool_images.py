"""Images in tool results for a model whose API refuses them there (OpenAI Chat Completions):
``ContextMiddleware`` replaces them in the view it sends with a line naming each one and its
ref; the tool result stays a tool result and the agent's state keeps the images. The request
each model would send is built offline with the provider's own LangChain builder, from the
request the middleware hands on (the tools bound as ``create_agent`` binds them)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents.middleware import ModelRequest, ModelResponse
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import Scope
from ctxplugin.testing import memory_engine

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
IMAGE = {"type": "image", "base64": PNG, "mime_type": "image/png"}
SCREENSHOT = {"type": "function", "function": {"name": "screenshot", "description": "Screenshot a page.",
                                                "parameters": {"type": "object", "properties": {"page": {"type": "string"}}}}}
SCOPE = Scope(session_id="shots")


def openai(**kwargs: Any) -> BaseChatModel:
    from langchain_openai import ChatOpenAI

    return ChatOpenAI(model="gpt-4o", api_key="test-key", **kwargs)


def anthropic() -> BaseChatModel:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")


def azure() -> BaseChatModel:
    from langchain_openai import AzureChatOpenAI

    return AzureChatOpenAI(azure_deployment="gpt-4o", api_version="2024-10-21", api_key="test-key",
                           azure_endpoint="https://example.openai.azure.com")


# name -> (model, extra call settings, extra tools, whether the API takes images in tool results)
MODELS: dict[str, tuple[Any, dict[str, Any], list[dict[str, Any]], bool]] = {
    "chat completions": (lambda: openai(), {}, [], False),
    "azure chat completions": (azure, {}, [], False),
    "use_responses_api": (lambda: openai(use_responses_api=True), {}, [], True),
    "output_version responses/v1": (lambda: openai(output_version="responses/v1"), {}, [], True),
    "a responses-only parameter": (lambda: openai(reasoning={"effort": "low"}), {}, [], True),
    "a responses-only call setting": (lambda: openai(), {"reasoning": {"effort": "low"}}, [], True),
    "a built-in tool": (lambda: openai(), {}, [{"type": "web_search_preview"}], True),
    "anthropic": (anthropic, {}, [], True),
}


def history(engine: Any) -> list[BaseMessage]:
    """A screenshot's output as the state keeps it, then the model's expand_ref read of it."""
    shot = ToolMessage(content=[{"type": "text", "text": "Checkout page, total 41.90 EUR"}, IMAGE],
                       tool_call_id="c1", name="screenshot")
    compact = engine.capture_tool_result(shot, scope=SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    expand_ref = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
    read = expand_ref.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "c2"},
                             config={"configurable": {"thread_id": SCOPE.session_id}})
    return [
        HumanMessage("What is the total on the checkout page?"),
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {"page": "checkout"}, "id": "c1"}]),
        compact,
        AIMessage("", tool_calls=[{"name": "expand_ref", "args": {"ref_id": ref}, "id": "c2"}]),
        read,
    ]


def payload_of(request: ModelRequest) -> dict[str, Any]:
    """What the model sends for ``request``: tools bound as create_agent binds them."""
    bound = request.model.bind_tools(request.tools, **request.model_settings)
    head = [request.system_message] if request.system_message is not None else []
    payload: dict[str, Any] = bound.bound._get_request_payload([*head, *request.messages], **bound.kwargs)  # type: ignore[attr-defined]
    return payload


async def _sent(middleware: ContextMiddleware, model: Any, state: list[BaseMessage], settings: Any, extra_tools: Any, call: str) -> list[ModelRequest]:
    """The requests ``middleware`` hands the model for one call of ``state`` (``call``: "sync" or "async")."""
    request = ModelRequest(model=model, messages=list(state), tools=[SCREENSHOT, *extra_tools, *middleware.tools],  # type: ignore[arg-type]
                           model_settings=dict(settings))
    sent: list[ModelRequest] = []

    def handler(request: ModelRequest) -> ModelResponse:
        sent.append(request)
        return ModelResponse(result=[AIMessage("The total is 41.90 EUR.")])

    async def ahandler(request: ModelRequest) -> ModelResponse:
        return handler(request)

    if call == "sync":
        middleware.wrap_model_call(request, handler)
    else:
        await middleware.awrap_model_call(request, ahandler)
    return sent


@pytest.mark.parametrize("name", list(MODELS))
@pytest.mark.parametrize("call", ["sync", "async"])
async def test_images_of_tool_results_go_out_only_where_the_api_takes_them(name: str, call: str) -> None:
    make, settings, extra_tools, takes_images = MODELS[name]
    engine = memory_engine()
    middleware = ContextMiddleware(engine, scope=SCOPE)
    state = history(engine)
    ref = state[2].additional_kwargs["ctxplugin"]["ref"]
    sent = await _sent(middleware, make(), state, settings, extra_tools, call)

    payload = json.dumps(payload_of(sent[0]), default=str)
    results = [m for m in sent[0].messages if isinstance(m, ToolMessage)]
    read = results[-1]
    assert read.tool_call_id == "c2", "the expand_ref read stays a tool result"
    assert not any(isinstance(m, HumanMessage) and "41.90" in str(m.content) for m in sent[0].messages)
    if takes_images:
        shown = sum(isinstance(m.content, list) and IMAGE in m.content for m in results)
        assert shown >= 1 and payload.count(PNG) == shown, "every image of a tool result in view goes out as an image"
        assert "cannot take images in tool results" not in payload
    else:
        assert PNG not in payload and "image_url" not in payload, "an image in a tool message is refused by the API"
        assert "41.90 EUR" in str(read.content) and "cannot take images in tool results" in str(read.content) and ref in str(read.content)
    # the agent's state keeps the images
    assert IMAGE in state[2].content and IMAGE in state[4].content


# ---------------------------------------------------------------- hosts that call the model themselves


def recording_openai(bodies: list[dict[str, Any]], **kwargs: Any) -> BaseChatModel:
    """A ChatOpenAI whose HTTP requests are answered locally (no network): each request body
    the OpenAI client sends is kept in ``bodies``."""
    import httpx
    from langchain_openai import ChatOpenAI

    def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "gpt-4o",
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "The total is 41.90 EUR."}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        })

    return ChatOpenAI(model="gpt-4o", api_key="test-key", max_retries=0,
                      http_client=httpx.Client(transport=httpx.MockTransport(answer)), **kwargs)


def tool_messages_sent(body: dict[str, Any]) -> list[Any]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("host", ["as_model", "model_node", "react agent model"])
def test_hosts_that_call_the_model_send_chat_completions_no_image_in_a_tool_message(host: str) -> None:
    from ctxplugin_langgraph import ContextHooks
    from langchain_core.tools import tool

    @tool
    def screenshot(page: str) -> str:
        """Screenshot a page."""
        return page

    engine, bodies = memory_engine(), list[dict[str, Any]]()
    llm = recording_openai(bodies)
    state = history(engine)
    ref = state[2].additional_kwargs["ctxplugin"]["ref"]
    config: Any = {"configurable": {"thread_id": SCOPE.session_id}}
    if host == "as_model":
        engine.as_model(llm, tools=[screenshot, *engine.tools_for_model()]).invoke(state, config)
    else:
        hooks = ContextHooks(engine, [screenshot])
        if host == "model_node":
            hooks.model_node(llm).invoke({"messages": state}, config)
        else:  # create_react_agent: the model callable gets the view pre_model_hook made
            view = hooks.pre_model_hook.invoke({"messages": state}, config)["llm_input_messages"]
            hooks.model(llm)({"messages": view}, None).invoke(view, config)
    tool_contents = tool_messages_sent(bodies[-1])
    assert tool_contents, "the expand_ref read went out as a tool message"
    sent = json.dumps(bodies[-1])
    assert PNG not in sent and "image_url" not in sent
    assert "cannot take images in tool results" in json.dumps(tool_contents) and ref in json.dumps(tool_contents)
    assert IMAGE in state[4].content


def test_a_model_on_the_responses_api_is_sent_the_images() -> None:
    from ctxplugin._tool_images import guard_tool_images, takes_tool_images, without_tool_images

    engine = memory_engine()
    view = history(engine)
    responses = openai(use_responses_api=True)
    assert takes_tool_images(responses) and not takes_tool_images(openai())
    assert guard_tool_images(responses, responses) is responses
    assert not takes_tool_images(openai().bind(temperature=0), [SCREENSHOT])
    assert takes_tool_images(openai().bind(reasoning={"effort": "low"}))
    stripped = without_tool_images(view)
    assert all(s is v for s, v in zip(stripped, view, strict=True) if not isinstance(v, ToolMessage))
    assert IMAGE not in stripped[4].content and IMAGE in view[4].content


# ---------------------------------------------------------------- other media: files, audio

PDF = "JVBERi0xLjQKJcfsj6IKNSAwIG9iago8PC9MZW5ndGggNiAwIFI+PgpzdHJlYW0K"
WAV = "UklGRiQAAABXQVZFZm10IBAAAAABAAEAQB8AAEAfAAABAAgAZGF0YQAAAAA="
MEDIA = {
    "pdf": {"type": "file", "base64": PDF, "mime_type": "application/pdf", "filename": "invoice.pdf"},
    "audio": {"type": "audio", "base64": WAV, "mime_type": "audio/wav"},
}


@pytest.mark.parametrize(("name", "kind"), [("chat completions", "pdf"), ("chat completions", "audio"), ("azure chat completions", "pdf"),
                                            ("use_responses_api", "pdf"), ("anthropic", "pdf")])
def test_files_and_audio_of_tool_results_go_out_only_where_the_api_takes_them(name: str, kind: str) -> None:
    make, settings, extra_tools, takes_media = MODELS[name]
    engine = memory_engine()
    middleware = ContextMiddleware(engine, scope=SCOPE)
    block = MEDIA[kind]
    fetched = ToolMessage(content=[{"type": "text", "text": "Invoice INV-2291, total 41.90 EUR"}, block],
                          tool_call_id="c1", name="screenshot")
    compact = engine.capture_tool_result(fetched, scope=SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    state: list[BaseMessage] = [
        HumanMessage("What is the total of the invoice?"),
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {"page": "invoice"}, "id": "c1"}]),
        compact,
    ]
    sent = asyncio.run(_sent(middleware, make(), state, settings, extra_tools, "sync"))
    payload = payload_of(sent[0])
    data = block["base64"]
    result = next(m for m in sent[0].messages if isinstance(m, ToolMessage) and m.tool_call_id == "c1")
    if takes_media:
        assert data in json.dumps(payload, default=str), "the API takes it in a tool result: it goes out as it was"
    else:
        tool_parts = [m["content"] for m in payload["messages"] if m["role"] == "tool"]
        assert data not in json.dumps(payload), "Chat Completions takes only text in a tool message"
        assert all(isinstance(c, str) or all(p.get("type") == "text" for p in c) for c in tool_parts)
        assert "41.90 EUR" in str(result.content) and "not shown" in str(result.content) and ref in str(result.content)
    assert block in state[2].content, "the agent's state keeps the block"
