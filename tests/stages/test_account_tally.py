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


def _unchanged(before: list[BaseMessage], after: list[BaseMessage], counter: object) -> int:
    """Leading tokens of ``after`` that ``before`` sent the same (type, content, tool calls)."""
    total = 0
    for old, new in zip(before, after, strict=False):
        same = type(old) is type(new) and old.content == new.content and getattr(old, "tool_calls", None) == getattr(new, "tool_calls", None)
        if not same:
            break
        total += count_message(new, counter)  # type: ignore[arg-type]
    return total


@pytest.mark.parametrize("seed", range(6))
def test_the_unchanged_prefix_follows_views_that_grow_and_messages_edited_in_place(seed: int) -> None:
    from ctxplugin import ContextConfig, Scope
    from ctxplugin.testing import memory_engine

    rng = random.Random(seed)
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id=f"prefix-{seed}")
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test in tests/test_io.py")]
    shown: list[BaseMessage] | None = None
    for step in range(24):
        messages.append(AIMessage(content=f"step {step}", tool_calls=[{"name": "bash", "args": {"command": f"ls /src/{step}"}, "id": f"c{step}"}]))
        messages.append(ToolMessage(content=f"file_{step}.py\n" * rng.randrange(1, 20), tool_call_id=f"c{step}", name="bash"))
        if step % 5 == 4:  # the host edits an earlier message in place
            target = messages[rng.randrange(len(messages))]
            target.content = f"{target.content} (edited at step {step})"
        view = engine.prepare(messages, scope=scope)
        expected = _unchanged(shown, view.messages, engine.counter) if shown is not None else 0
        assert view.report.unchanged_prefix_tokens == expected
        shown = [m.model_copy(deep=True) for m in view.messages]


def test_a_content_list_grown_in_place_ends_the_unchanged_prefix() -> None:
    from ctxplugin import ContextConfig, Scope
    from ctxplugin.testing import memory_engine

    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="prefix-blocks")
    reply = AIMessage(content=[{"type": "text", "text": "Looking at tests/test_io.py"}])
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test"), reply]
    first = engine.prepare(messages, scope=scope)
    shown = [m.model_copy(deep=True) for m in first.messages]
    assert isinstance(reply.content, list)
    reply.content.append({"type": "text", "text": "and at src/io.py"})  # the host grows the block list in place
    messages.append(HumanMessage(content="go on"))  # the view would otherwise just grow
    second = engine.prepare(messages, scope=scope)
    assert second.report.unchanged_prefix_tokens == _unchanged(shown, second.messages, engine.counter)
    assert second.report.unchanged_prefix_tokens < sum(count_message(m, engine.counter) for m in shown)
