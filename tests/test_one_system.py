"""A model that reads its system prompt from one leading system message only
(``ChatGoogleGenerativeAI(convert_system_message_to_human=True)``) is sent the header joined into
one: the host's system prompt, then the tool directory."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._one_system import guard_one_system, one_system, one_system_only
from ctxplugin.testing import memory_engine, tool_directory

pytest.importorskip("langchain_google_genai")
# langchain-google-genai deprecates the setting; hosts of models without system instructions still use it
pytestmark = pytest.mark.filterwarnings("ignore:The 'convert_system_message_to_human' parameter is deprecated:DeprecationWarning")

LOOKUP = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                           "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}


def gemini(**kwargs: Any) -> Any:
    from langchain_google_genai import ChatGoogleGenerativeAI

    return ChatGoogleGenerativeAI(model="gemma-3-27b-it", google_api_key="test-key", **kwargs)


def view() -> list[BaseMessage]:
    engine = memory_engine(ContextConfig.model_validate({"tools": {"directory": "always"}}))
    messages = [SystemMessage("You are a travel agent."), HumanMessage("Find booking BK-1.")]
    prepared = engine.prepare(messages, tools=[LOOKUP, *engine.tools_for_model()], scope=Scope(session_id="g"))
    assert [type(m) for m in prepared.messages[:2]] == [SystemMessage, SystemMessage]
    out: list[BaseMessage] = prepared.messages
    return out


def request(model: Any, messages: list[BaseMessage]) -> tuple[Any, list[Any]]:
    built = model._prepare_request(messages)
    if isinstance(built, dict):  # langchain-google-genai 4
        return built["config"].system_instruction, built["contents"]
    return built.system_instruction, built.contents


def test_only_gemini_converting_the_system_message_reads_one() -> None:
    from langchain_openai import ChatOpenAI

    assert one_system_only(gemini(convert_system_message_to_human=True))
    assert one_system_only(gemini(convert_system_message_to_human=True).bind(temperature=0))
    assert not one_system_only(gemini())
    assert not one_system_only(ChatOpenAI(model="gpt-4o", api_key="test-key"))


def test_the_header_goes_into_the_first_user_turn_host_prompt_first() -> None:
    messages = view()
    model = gemini(convert_system_message_to_human=True)
    system, _ = request(model, messages)
    assert system is not None, "two system messages: the integration keeps a system instruction, which such a model refuses"
    system, contents = request(model, one_system(messages))
    assert system is None
    texts = [p.text for p in contents[0].parts]
    assert texts[0].startswith("You are a travel agent.\n\n" + tool_directory(messages)) and texts[-1] == "Find booking BK-1."


def test_joining_keeps_blocks_and_order() -> None:
    blocks = SystemMessage(content=[{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}}])
    joined = one_system([blocks, SystemMessage("Tool directory."), HumanMessage("hi")])
    assert joined[0].content == [{"type": "text", "text": "Rules.", "cache_control": {"type": "ephemeral"}},
                                 {"type": "text", "text": "Tool directory."}]
    single = [SystemMessage("Rules."), HumanMessage("hi")]
    assert one_system(single) == single


def test_the_guard_joins_what_it_sends_and_leaves_other_models_alone() -> None:
    from langchain_core.runnables import RunnableLambda

    seen: list[Any] = []

    def record(value: Any) -> AIMessage:
        seen.append(value)
        return AIMessage("ok")

    sink: RunnableLambda[Any, AIMessage] = RunnableLambda(record)
    guard_one_system(sink, gemini(convert_system_message_to_human=True)).invoke(view())
    assert [type(m) for m in seen[0][:2]] == [SystemMessage, HumanMessage]
    assert str(seen[0][0].content).startswith("You are a travel agent.\n\nTool directory.")
    assert guard_one_system(sink, gemini()) is sink
