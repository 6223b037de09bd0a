"""The room stage alone: the solo room of an agent working without its user (``history.solo_exchanges``)."""

from __future__ import annotations

import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ChatMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin.config import ContextConfig
from ctxplugin.scope import Scope
from ctxplugin.stages import CallView, FindRoom, Validate
from ctxplugin.tokens import get_counter

COUNTER = get_counter("cl100k_base")[0]
SOLO = ContextConfig(
    encoding="cl100k_base",
    budget={"total": 7500, "history": 6875, "summaries": 6875, "facts": 200},
    history={"compress": "over_budget", "solo_exchanges": 12, "solo_tool_tokens": 1500},
)


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


def call(n: int) -> list[BaseMessage]:
    """One model turn calling ``lookup`` and its output (10 lines, about 170 tokens)."""
    output = "\n".join(f"src/module_{n}/file_{k}.py:{k}: def handler_{k}(self):" for k in range(10))
    return [
        AIMessage(
            content="", tool_calls=[{"name": "lookup", "args": {"order_id": str(n)}, "id": f"c{n}"}]
        ),
        ToolMessage(content=output, tool_call_id=f"c{n}", name="lookup"),
    ]


def room_of(
    messages: list[BaseMessage], config: ContextConfig = SOLO, *, stage: FindRoom | None = None
) -> CallView:
    view = CallView(
        scope=Scope(session_id="s1"),
        received=messages,
        tools_given=(lookup,),
        budgets=config.budget.resolve(),
        started=time.perf_counter(),
    )
    stage = stage or FindRoom(history=config.history, facts=config.facts, counter=COUNTER)
    return stage.apply(Validate().apply(view))


def outputs(view: CallView) -> int:
    return sum(COUNTER.count(str(m.content)) for m in view.history if isinstance(m, ToolMessage))


@pytest.mark.parametrize(
    "user",
    [
        ChatMessage(role="user", content="Try the other module too."),
        ChatMessage(role="human", content="Try the other module too."),
        HumanMessage(content="Try the other module too."),
    ],
    ids=["chat-user", "chat-human", "human"],
)
def test_a_user_message_in_any_form_ends_the_solo_run(user: BaseMessage) -> None:
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test.", id="h1")]
    for n in range(12):
        if n == 9:
            messages.append(user)
        messages.extend(call(n))
    out = room_of(messages)
    assert outputs(out) > 1500
    assert out.room is not None and out.room.whole, (
        "3 calls since the user spoke: the whole room is the history's"
    )


def test_a_message_in_another_role_does_not_end_the_solo_run() -> None:
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test.", id="h1")]
    for n in range(12):
        if n == 9:
            messages.append(ChatMessage(role="critic", content="Try the other module too."))
        messages.extend(call(n))
    out = room_of(messages)
    assert out.room is not None and not out.room.whole


class Watched(AIMessage):
    """An assistant turn that counts how often its tool calls are read."""

    def __getattribute__(self, name: str) -> Any:
        if name == "tool_calls":
            READS[0] += 1
        return super().__getattribute__(name)


READS = [0]


def test_an_agent_talking_alone_for_long_is_not_walked_back_on_every_call() -> None:
    # no user message, and fewer calls than solo_exchanges: the run never ends and never reaches the limit
    config = ContextConfig(encoding="cl100k_base", history={"compress": "over_budget", "solo_exchanges": 8})
    stage, validate = FindRoom(history=config.history, facts=config.facts, counter=COUNTER), Validate()
    messages: list[BaseMessage] = [Watched(content=f"step {n} done, moving on.") for n in range(300)]

    def call_on(messages: list[BaseMessage]) -> CallView:
        view = CallView(
            scope=Scope(session_id="s1"), received=messages, tools_given=(lookup,), budgets=config.budget.resolve(),
            started=time.perf_counter(),
        )
        return stage.apply(validate.apply(view))

    call_on(messages)
    READS[0] = 0
    for n in range(20):
        messages = [*messages, *call(n)] if n < 5 else [*messages, AIMessage(content=f"note {n}")]
        out = call_on(messages)
        assert out.room is not None
    assert READS[0] == 0, "the 300 turns seen before are not read again"


@pytest.mark.parametrize(
    ("max_tokens", "held"),
    [(None, True), (3000, False), (100_000, True)],
    ids=["unset", "below-the-room", "above-the-room"],
)
def test_the_outputs_are_held_to_the_solo_room_when_the_history_has_no_aim_below_its_room(max_tokens: int | None, held: bool) -> None:
    # 12 calls in a row: the solo room is reached; with max_tokens below the room the history
    # stage aims at max_tokens, with none (or one the room is under) it compresses to the room,
    # where the outputs must then fit the solo room
    config = SOLO.model_copy(update={"history": SOLO.history.model_copy(update={"max_tokens": max_tokens})})
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test.", id="h1")]
    for n in range(12):
        messages.extend(call(n))
    out = room_of(messages, config)
    assert out.room is not None and not out.room.whole
    budget = out.room.budget
    assert budget.tool_results == (1500 if held else 6875)
    assert (budget.room is None) is held, "an aim below the room keeps the room beside it"
    assert budget.total == (3000 if max_tokens == 3000 else out.room.total)
