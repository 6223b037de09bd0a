"""Token sums carried from call to call (``ctxplugin._running``) equal a recount of every message."""

from __future__ import annotations

import random

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._running import Tally
from ctxplugin.tokens import count_message, get_counter

COUNTER = get_counter("cl100k_base")[0]


def message(rng: random.Random) -> BaseMessage:
    text = " ".join(rng.choice(["order", "W1234", "shipped", "2024-05-02", "ünï"]) for _ in range(rng.randint(0, 12)))
    kind = rng.randrange(3)
    if kind == 0:
        return HumanMessage(text)
    if kind == 1:
        return AIMessage(text, tool_calls=[{"name": "lookup", "args": {"q": text}, "id": "c1"}] if rng.random() < 0.5 else [])
    return ToolMessage(text, tool_call_id="c1")


@pytest.mark.parametrize("seed", range(8))
def test_sums_follow_messages_appended_replaced_edited_and_dropped(seed: int) -> None:
    rng = random.Random(seed)
    tally = Tally()
    messages: list[BaseMessage] = []
    for _ in range(80):
        messages.extend(message(rng) for _ in range(rng.randint(0, 3)))
        change = rng.randrange(6)
        if change == 0 and messages:
            messages[rng.randrange(len(messages))] = message(rng)
        elif change == 1 and messages:
            messages[rng.randrange(len(messages))].content = message(rng).content
        elif change == 2 and messages:
            del messages[rng.randrange(len(messages))]
        tally.update(messages, COUNTER)
        assert tally.total == sum(count_message(m, COUNTER) for m in messages)
        assert tally.tool_total == sum(count_message(m, COUNTER) for m in messages if isinstance(m, ToolMessage))
