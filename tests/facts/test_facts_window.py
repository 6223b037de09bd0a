"""``facts.placement="window"``: the facts block sits before the verbatim history tier and is
chosen again only when the tier boundary moves, the question changes or a shown fact is
superseded — so consecutive calls share their prompt prefix, facts block included."""

from __future__ import annotations

import json
from typing import Literal

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._layout import facts_index, is_synthetic, synthetic_kind
from ctxplugin._messages import exchange_spans
from ctxplugin.engine import PreparedContext
from ctxplugin.history import tier_bounds
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import count_message

S = Scope(session_id="s1", user_id="u1")
BUDGET = {"total": 20_000, "header": 2000, "history": 10_000, "facts": 1500, "summaries": 6000}
TASK = "Checkout fails for some users: find which hosts are degraded and report each host's status and region."
SYSTEM = "You are an SRE agent."
TITLE = "Known facts"


def make_engine(
    placement: Literal["tail", "head", "window"] = "window",
    *,
    facts: dict[str, object] | None = None,
    **history: object,
) -> ContextEngine:
    # k is large enough that a chosen block lists every host fact, so a block that was not
    # chosen again is told apart by the facts it lacks
    config = ContextConfig(
        budget=BUDGET,
        facts={"placement": placement, "k": 40, **(facts or {})},
        history={"trim_tokens": 40, "gist_tokens": 20, **history},
    )
    engine: ContextEngine = memory_engine(config)
    return engine


def step(n: int, *, host: int | None = None, status: str | None = None) -> list[BaseMessage]:
    """One agent step: a model call to ``get_host`` and its JSON result (a fact keyed by host)."""
    host = n if host is None else host
    prose = (
        f"Host web-{host} is next: the load balancer log names it in the failing requests, "
        "so I check its status and region before moving on. "
    ) * 3
    record = {
        "host_id": f"web-{host}",
        "status": status or ("degraded" if host % 2 else "healthy"),
        "region": f"eu-{host}",
    }
    return [
        AIMessage(
            prose,
            id=f"ai_{n}",
            tool_calls=[
                {"name": "get_host", "args": {"host_id": f"web-{host}"}, "id": f"call_{n}"}
            ],
        ),
        ToolMessage(json.dumps(record), tool_call_id=f"call_{n}", name="get_host", id=f"tool_{n}"),
    ]


def session(steps: int) -> list[BaseMessage]:
    """System prompt, the task, then ``steps`` agent steps (exchanges = steps + 1)."""
    messages: list[BaseMessage] = [SystemMessage(SYSTEM), HumanMessage(TASK, id="task")]
    for n in range(steps):
        messages += step(n)
    return messages


def host_line(host: int, status: str | None = None) -> str:
    status = status or ("degraded" if host % 2 else "healthy")
    return f"host web-{host}: status={status}, region=eu-{host}"


def block_index(view: list[BaseMessage]) -> int:
    """Index of the facts block: the result of its lookup, or after the header on a first call."""
    found = [i for i, m in enumerate(view) if str(m.content).startswith(TITLE)]
    assert len(found) == 1, f"one facts block expected, found {len(found)}"
    at = facts_index(view)
    assert at == found[0], "the facts block is the one ctxplugin marks as such"
    block = view[at]
    if isinstance(block, ToolMessage):
        call = view[at - 1]
        assert isinstance(call, AIMessage) and is_synthetic(call) and call.tool_calls[0]["id"] == block.tool_call_id
    else:
        assert isinstance(block, SystemMessage) and at == 1, "without a lookup it follows the header"
    return at


def assert_tail(view: list[BaseMessage], at: int, steps: int) -> None:
    """The block is as late as fits: only the latest step (its call and result) follows it,
    and the latest message of the conversation is still the view's last."""
    assert [m.id for m in view[at + 1 :]] == [f"ai_{steps - 1}", f"tool_{steps - 1}"], "the block comes last"


def block_text(prepared: PreparedContext) -> str:
    return str(prepared.messages[block_index(prepared.messages)].content)


def verbatim_start(messages: list[BaseMessage], engine: ContextEngine) -> int:
    """First exchange of the verbatim tier (the body is everything after the system prompt)."""
    return tier_bounds(len(exchange_spans(messages[1:])), engine.config.history)[1]


def assert_valid_conversation(view: list[BaseMessage]) -> None:
    """Every tool call is answered right after its AI message, in order; no orphan results."""
    index = 0
    while index < len(view):
        message = view[index]
        assert not isinstance(message, ToolMessage), (
            f"tool result at {index} does not follow its call"
        )
        index += 1
        if isinstance(message, AIMessage) and message.tool_calls:
            for call in message.tool_calls:
                assert index < len(view), f"call {call['id']} has no result"
                result = view[index]
                assert isinstance(result, ToolMessage) and result.tool_call_id == call["id"], (
                    f"call {call['id']} is followed by {type(result).__name__}, not its result"
                )
                index += 1


def step_number(message: BaseMessage) -> int | None:
    """n of a message built by :func:`step` (``ai_n``/``tool_n``), else None."""
    if message.id and message.id.split("_")[0] in ("ai", "tool"):
        return int(message.id.split("_")[1])
    return None


def tier_of(message: BaseMessage) -> str | None:
    meta = message.additional_kwargs.get("ctxplugin", {})
    return meta.get("tier") if isinstance(meta, dict) else None


def is_condensed(message: BaseMessage) -> bool:
    """A context note (condensed history) or the lookup call that shows it."""
    return synthetic_kind(message) == "notes"


# ---------------------------------------------------------------- position
def test_block_sits_right_before_the_verbatim_tier_after_compressed_and_condensed_history() -> None:
    engine = make_engine(max_tokens=1500)  # tight enough that old blocks get condensed
    messages = session(30)
    seen_condensed = seen_compressed = 0
    for steps in range(1, 31):
        history = messages[: 2 + 2 * steps]
        view = engine.prepare(history, scope=S).messages
        assert_valid_conversation(view)
        at = block_index(view)
        first_verbatim = max(verbatim_start(history, engine), 1) - 1  # exchange k is step k-1
        assert view[at + 1].id == f"ai_{first_verbatim}", (
            f"{steps} steps: block not before the verbatim tier"
        )
        assert view[1].id == "task", "the task stays first, before the block"
        before, after = view[1 : at - 1], view[at + 1 :]
        for message in before:
            number = step_number(message)
            assert (
                message.id == "task"
                or is_condensed(message)
                or (number is not None and number < first_verbatim)
            )
        for message in after:
            number = step_number(message)
            assert number is not None and number >= first_verbatim and tier_of(message) is None
            assert not is_condensed(message)
        seen_condensed += any(is_condensed(m) for m in before)
        seen_compressed += any(tier_of(m) in ("trimmed", "gist") for m in before)
    assert seen_condensed and seen_compressed, (
        "the scenario reached condensed and compressed history"
    )


def test_block_follows_the_header_when_the_conversation_is_only_the_task() -> None:
    engine = make_engine()
    engine.facts.write("Checkout runs on hosts web-0 to web-9", key="checkout_hosts", scope=S)
    view = engine.prepare(session(0), scope=S).messages
    # no assistant turn yet to put a lookup before: the block joins the system prompt
    assert [type(m) for m in view] == [SystemMessage, SystemMessage, HumanMessage]
    assert block_index(view) == 1 and view[-1].id == "task", "the task stays the latest message"
    # with a second exchange the block moves before it, never before the end of the task
    view = engine.prepare(session(1), scope=S).messages
    assert block_index(view) == 3 and view[1].id == "task" and view[4].id == "ai_0"


# ---------------------------------------------------------------- stability
def choice_step(messages: list[BaseMessage], engine: ContextEngine) -> int:
    """The archive step the facts block is chosen for: the verbatim tier's start in steps of
    ``block_size * archive_blocks`` exchanges."""
    history = engine.config.history
    return verbatim_start(messages, engine) // (history.block_size * history.archive_blocks)


def test_block_is_frozen_between_archive_steps_and_chosen_again_after() -> None:
    engine = make_engine(block_size=2, archive_blocks=2)
    messages = session(16)
    # the first call where the step has just moved
    start = next(n for n in range(2, 16) if choice_step(messages[: 2 + 2 * n], engine) > choice_step(messages[: 2 * n], engine))
    first = engine.prepare(messages[: 2 + 2 * start], scope=S)
    frozen = block_text(first)
    assert host_line(start - 1) in frozen, "the facts known when it was chosen are shown"
    previous = first
    steps = start
    moves = 0
    while choice_step(messages[: 2 + 2 * (steps + 1)], engine) == choice_step(messages[: 2 + 2 * start], engine):
        steps += 1
        history = messages[: 2 + 2 * steps]
        moved_now = verbatim_start(history, engine) != verbatim_start(messages[: 2 * steps], engine)
        moves += moved_now
        prepared = engine.prepare(history, scope=S)
        assert engine.facts.current(f"host:web_{steps - 1}", scope=S) is not None, (
            "the new fact was ingested"
        )
        assert block_text(prepared) == frozen, (
            f"{steps} steps: the block changed within one archive step"
        )
        assert host_line(steps - 1) not in block_text(prepared)
        if not moved_now:  # between moves the previous view is a prefix
            assert prepared.report.unchanged_prefix_tokens >= sum(count_message(m, engine.counter) for m in previous.messages)
        previous = prepared
    assert steps - start >= 2, "several calls ran inside one archive step"
    assert moves >= 1, "a block boundary moved inside it, and the block stayed"
    moved = engine.prepare(messages[: 2 + 2 * (steps + 1)], scope=S)
    text = block_text(moved)
    assert text != frozen
    for host in range(start, steps + 1):
        assert host_line(host) in text, (
            f"web-{host}, learnt while the block was frozen, appears after the step"
        )


def test_block_is_frozen_per_session() -> None:
    # facts every session of the user can read, so only the per-session freeze tells them apart
    engine = make_engine(facts={"extract": False})
    other = Scope(session_id="s2", user_id="u1")
    engine.facts.write(
        "The incident channel is #inc-checkout", key="incident_channel", scope=S, visibility="user"
    )
    frozen = block_text(engine.prepare(session(5), scope=S))
    assert "#inc-checkout" in frozen
    engine.facts.write(
        "The payment gateway for checkout is stripe-eu",
        key="payment_gateway",
        scope=other,
        visibility="user",
    )
    shown = block_text(engine.prepare(session(5), scope=other))
    assert "stripe-eu" in shown, "another session's frozen block is not reused"
    assert block_text(engine.prepare(session(6), scope=S)) == frozen, (
        "nor is this session's block disturbed"
    )


# ---------------------------------------------------------------- when it is chosen again
def test_a_superseded_fact_in_the_frozen_block_is_replaced_on_the_next_call() -> None:
    engine = make_engine()
    messages = session(7)
    before = engine.prepare(messages[: 2 + 2 * 5], scope=S)
    assert host_line(0) in block_text(before)
    old = engine.facts.current("host:web_0", scope=S)
    assert old is not None
    engine.facts.write(host_line(0, "degraded"), key="host:web_0", scope=S)
    history = messages[: 2 + 2 * 6]
    assert verbatim_start(history, engine) == verbatim_start(messages[: 2 + 2 * 5], engine), (
        "no boundary move"
    )
    after = engine.prepare(history, scope=S)
    text = block_text(after)
    assert host_line(0, "degraded") in text and host_line(0) not in text
    assert old.id not in {use.id for use in after.report.facts}
    assert host_line(5) in text, "the block was chosen again, with what was learnt meanwhile"
    # the block chosen again is frozen in turn
    again = engine.prepare(messages[: 2 + 2 * 7], scope=S)
    assert block_text(again) == text and host_line(6) not in block_text(again)


def test_a_later_tool_read_superseding_a_shown_fact_replaces_it() -> None:
    engine = make_engine()
    history = session(5)
    assert host_line(2) in block_text(engine.prepare(history, scope=S))
    history = history + step(5, host=2, status="rebooting")  # the agent reads web-2 again
    assert verbatim_start(history, engine) == verbatim_start(session(5), engine), "no boundary move"
    text = block_text(engine.prepare(history, scope=S))
    assert host_line(2, "rebooting") in text and host_line(2) not in text


def test_a_new_question_chooses_the_facts_again() -> None:
    engine = make_engine()
    history = session(5)
    frozen = block_text(engine.prepare(history, scope=S))
    history = history + step(5)
    assert block_text(engine.prepare(history, scope=S)) == frozen and host_line(5) not in frozen
    history = [
        *history,
        AIMessage("web-1 and web-3 are degraded; the others are healthy.", id="answer"),
        HumanMessage("Which region is web-5 in, and is it degraded?", id="question"),
    ]
    assert verbatim_start(history, engine) == verbatim_start(session(5), engine), "no boundary move"
    asked = engine.prepare(history, scope=S)
    text = block_text(asked)
    assert text != frozen and host_line(5) in text, "the block was chosen for the new question"
    assert_valid_conversation(asked.messages)
    assert asked.messages[block_index(asked.messages) + 1].id == "ai_3"


# ---------------------------------------------------------------- other placements
@pytest.mark.parametrize("placement", ["tail", "head"])
def test_tail_and_head_placements_are_unchanged(placement: Literal["tail", "head"]) -> None:
    engine = make_engine(placement)
    for steps in (5, 6, 7):
        view = engine.prepare(session(steps), scope=S).messages
        at = block_index(view)
        if placement == "tail":
            assert_tail(view, at, steps)
        else:
            assert view[0].content == SYSTEM and view[1].id == "task"
            assert all(is_synthetic(m) for m in view[2:at]), "the block is the first thing after the task"
        assert host_line(steps - 1) in str(view[at].content), "chosen on every call"
        assert_valid_conversation(view)


def test_without_the_history_stage_the_block_goes_last_and_is_not_frozen() -> None:
    engine = make_engine(enabled=False)
    for steps in (5, 6, 7):
        view = engine.prepare(session(steps), scope=S).messages
        at = block_index(view)
        assert_tail(view, at, steps)
        assert host_line(steps - 1) in str(view[at].content), "chosen on every call"
