"""Tool call ids used twice: the error names every message involved, so the user can find the
duplicate in a long thread (the first result as well as the second, or both calls of one AI
message), and two calls of one AI message sharing an id are refused where they are made, not
blamed on a tool result later."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import InvalidInputError, Scope
from ctxplugin._messages import validate
from ctxplugin.testing import memory_engine


def test_a_second_result_names_the_first_result_and_the_call() -> None:
    messages: list[BaseMessage] = [
        HumanMessage(content="go", id="h1"),
        AIMessage(content="", id="a1", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}]),
        ToolMessage(content="first", tool_call_id="c1", id="t-first"),
        HumanMessage(content="and?", id="h2"),
        ToolMessage(content="again", tool_call_id="c1", id="t-again"),
    ]
    with pytest.raises(InvalidInputError) as raised:
        validate(messages)
    text = str(raised.value)
    assert "message 4" in text and "t-again" in text  # the second result
    assert "message 2" in text and "t-first" in text  # the result that answered the call first
    assert "message 1" in text  # the call
    _, notes = validate(messages, orphans="drop")
    assert "message 2" in notes[0] and "message 4" in notes[0]


@pytest.mark.parametrize("answered", [1, 2])
def test_two_calls_of_one_message_sharing_an_id_are_refused_where_they_are_made(answered: int) -> None:
    results = [ToolMessage(content=f"r{i}", tool_call_id="dup", name=n) for i, n in enumerate(["lookup", "refund"][:answered])]
    messages: list[BaseMessage] = [
        HumanMessage(content="go"),
        AIMessage(content="", id="a1", tool_calls=[
            {"name": "lookup", "args": {}, "id": "dup"},
            {"name": "search", "args": {}, "id": "ok"},
            {"name": "refund", "args": {}, "id": "dup"},
        ]),
        *results,
        HumanMessage(content="next"),
    ]
    with pytest.raises(InvalidInputError, match=r"message 1 .*'dup'.*'lookup'.*'refund'") as raised:
        memory_engine().prepare(messages, scope=Scope(session_id="dups"))
    assert "tool result" not in str(raised.value)  # not blamed on a result
