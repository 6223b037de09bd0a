"""The per-session fidelity account (ctxplugin._fidelity_sessions) and the account stage's
carried token sums give, call for call, what checking each call from scratch gives."""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any, ClassVar

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._fidelity_sessions import SessionFidelity, _Session
from ctxplugin._prefix import Stamp
from ctxplugin.fidelity import Fidelity, behind_texts, value_fidelity
from ctxplugin.replay.loaders import SWE_BASH_TOOL, load_file
from ctxplugin.stages import Account, CallView
from ctxplugin.tokens import count_message, count_messages

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"
SWE = DATA / "trajectories" / "swe"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"


def figures(report: Any) -> tuple[object, ...]:
    return (
        report.values_used,
        report.values_shown,
        report.values_behind_refs,
        tuple(report.values_left),
        tuple(report.values_left_from_user),
    )


def expected_figures(fidelity: Fidelity) -> tuple[object, ...]:
    return (fidelity.used, fidelity.shown, len(fidelity.behind_refs), fidelity.left, fidelity.left_from_user)


@dataclass(frozen=True)
class CheckedAccount:
    """The account stage, followed by the same figures computed from scratch for the same view."""

    name: ClassVar[str] = "account"
    inner: Account
    calls: list[tuple[tuple[object, ...], tuple[object, ...]]] = field(default_factory=list)

    def apply(self, view: CallView) -> CallView:
        out = self.inner.apply(view)
        assert out.report is not None and out.fitted is not None and view.plan is not None
        counter = self.inner.counter
        fresh = value_fidelity(view.original, out.fitted.messages, view.stored)
        report = out.report
        sections = report.sections
        expected = (
            *expected_figures(fresh),
            count_messages(list(view.received), counter) + view.plan.schema_tokens_full,
            sum(count_message(m, counter) for m in view.original if not isinstance(m, ToolMessage)),
            sum(count_message(m, counter) for m in view.original if isinstance(m, ToolMessage)),
        )
        got = (*figures(report), report.tokens_before, sections["history"].before, sections["summaries"].before)
        self.calls.append((got, expected))
        return out


def chained(names: list[str]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for name in names:
        messages = list(load_file(SWE / name).conversations[0].messages)
        out.extend(m for m in messages if not (out and isinstance(m, SystemMessage)))
    return out


def two_recordings() -> list[BaseMessage]:
    """Two swe recordings chained, in an order whose views show refs with missing values behind them."""
    return chained(["pydicom__pydicom-1139.traj.json", "marshmallow-code__marshmallow-1359.traj.json"])


def replay(engine: ContextEngine, messages: list[BaseMessage]) -> None:
    """``messages`` replayed through ``engine`` as a host runs them: a view before every
    assistant message, every tool output captured as it comes."""
    scope = Scope(session_id="replay")
    bound: list[Any] = [SWE_BASH_TOOL, *engine.tools_for_model()]
    captured: list[BaseMessage] = []
    for index, message in enumerate(messages):
        if index > 0 and isinstance(message, AIMessage):
            engine.prepare(captured, tools=bound, scope=scope)
        captured.append(engine.capture_tool_result(message, scope) if isinstance(message, ToolMessage) else message)


@pytest.mark.skipif(not SWE.is_dir(), reason=f"the recorded conversations are not at {SWE} (../shared/data)")
def test_a_replayed_session_gets_the_figures_of_a_check_from_scratch_on_every_call() -> None:
    """Two recordings chained into one long session (one of them ends on a call with no result,
    which validation answers with a new message on every call), replayed as a host runs them."""
    engine = ContextEngine(ContextConfig(encoding="cl100k_base"))
    stages = engine._stages
    checked = CheckedAccount(next(s for s in stages if isinstance(s, Account)))
    engine._stages = tuple(checked if isinstance(s, Account) else s for s in stages)
    replay(engine, two_recordings())
    assert len(checked.calls) > 100
    wrong = [i for i, (got, expected) in enumerate(checked.calls) if got != expected]
    assert not wrong, f"calls {wrong[:10]} differ: {checked.calls[wrong[0]]}"
    # the session exercised every outcome: values shown, behind refs and gone
    assert any(got[2] for got, _ in checked.calls) and any(got[3] for got, _ in checked.calls)


class Compared(SessionFidelity):
    """The account stage's session fidelity, each result kept beside a check from scratch."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[Fidelity, Fidelity]] = []

    def check(
        self,
        session: str,
        history: Sequence[BaseMessage],
        view: Sequence[BaseMessage],
        stored: Mapping[str, str] | None = None,
        stamp: Stamp | None = None,
    ) -> Fidelity:
        got = super().check(session, history, view, stored, stamp)
        self.calls.append((got, value_fidelity(history, view, stored)))
        return got


def benchmark_chain() -> list[BaseMessage]:
    """The latency benchmark's long session: six swe recordings chained (453 calls)."""
    return chained([path.name for path in sorted(SWE.glob("*.traj.json"))[:6]])


def tau_thread() -> list[BaseMessage]:
    """The first ten tau airline conversations as one chat thread, the user speaking every few calls."""
    out: list[BaseMessage] = []
    for conversation in load_file(TAU).conversations[:10]:
        out.extend(m for m in conversation.messages if not (out and isinstance(m, SystemMessage)))
    return out


@pytest.mark.parametrize("conversation", [benchmark_chain, two_recordings, tau_thread])
def test_every_call_of_a_long_replayed_session_gets_the_fidelity_of_a_check_from_scratch(
    conversation: Callable[[], list[BaseMessage]],
) -> None:
    """Values, outputs behind refs and who wrote each value, call after call, as the view's
    messages come and go and the stored refs grow."""
    if not SWE.is_dir() or not TAU.is_file():
        pytest.skip(f"the recorded conversations are not at {DATA} (../shared/data)")
    engine = ContextEngine(ContextConfig(encoding="cl100k_base"))
    compared = Compared()
    account = next(s for s in engine._stages if isinstance(s, Account))
    object.__setattr__(account, "_fidelity", compared)
    replay(engine, conversation())
    assert len(compared.calls) > 100
    wrong = [i for i, (got, expected) in enumerate(compared.calls) if got != expected]
    assert not wrong, f"calls {wrong[:10]} differ: {compared.calls[wrong[0]]}"
    # values left the view (between them, the three sessions also show values behind refs and the user's)
    assert any(got.left for got, _ in compared.calls)


VALUES = ["HAT136", "HAT1367", "mia_li_3668", "/testbed/src/a.py", "v2.1", "2.10", "ZFA04Y", "-42.5", "snake_case_name",
          "CamelName", "plain", "ref:bash:0123456789abcdef", "ref:json:fedcba9876543210", "a.b.c", "under_score_", "ünï_cødé",
          "Ⅻ12", "***", "--->", *(f"ID{n}" for n in range(25))]
BEFORE = ["", "", "", "(", "x", "/", '"', "`", "ref:bash:", "-"]
AFTER = ["", "", "", ")", "x", ".", "7", '"', "`", "/y", ".py", "\n", "0123456789abcdef"]


def random_text(rng: random.Random) -> str:
    """Values, bare or inside longer tokens, quotes and paths (so that many occur as a token
    without being one of the text's own values)."""
    return " ".join(rng.choice(BEFORE) + rng.choice(VALUES) + rng.choice(AFTER) for _ in range(rng.randint(0, 8)))


def random_message(rng: random.Random, calls: list[str]) -> BaseMessage:
    kind = rng.randrange(4)
    if kind == 0:
        return HumanMessage(random_text(rng))
    if kind == 1:
        call_id = f"c{rng.randrange(30)}"
        calls.append(call_id)
        return AIMessage(random_text(rng), tool_calls=[{"name": "t", "args": {"q": random_text(rng)}, "id": call_id}])
    if kind == 2 and calls:
        return ToolMessage(random_text(rng), tool_call_id=rng.choice(calls))
    return AIMessage(random_text(rng))


@pytest.mark.parametrize("seed", range(20))
def test_histories_and_views_that_change_anywhere_get_the_figures_of_a_check_from_scratch(seed: int) -> None:
    """Messages appended, replaced by equal or different ones, given new content in place or
    dropped; views that keep, drop, reorder and add messages."""
    rng = random.Random(seed)
    tracker = SessionFidelity(sessions=2)
    calls: list[str] = []
    history: list[BaseMessage] = [SystemMessage("sys HAT136")]
    view: list[BaseMessage] = []
    for step in range(60):
        history.extend(random_message(rng, calls) for _ in range(rng.randint(0, 3)))
        change = rng.randrange(8)
        if change == 0 and len(history) > 2:  # replaced by an equal message
            i = rng.randrange(1, len(history))
            history[i] = history[i].model_copy()
        elif change == 1 and len(history) > 2:  # replaced by a different one
            history[rng.randrange(1, len(history))] = random_message(rng, calls)
        elif change == 2 and len(history) > 2:  # new content in place
            history[rng.randrange(1, len(history))].content = random_text(rng)
        elif change == 3 and len(history) > 3:
            del history[rng.randrange(1, len(history))]
        kept = [m for m in view if rng.random() < 0.8]
        if rng.random() < 0.3 and kept:
            kept[rng.randrange(len(kept))].content = random_text(rng)
        fresh = [rng.choice(history) for _ in range(rng.randint(0, 3))] + [AIMessage(random_text(rng))]
        view = kept + fresh
        if rng.random() < 0.2:
            rng.shuffle(view)
        stored = {c: rng.choice(["ref:bash:0123456789abcdef", "ref:json:fedcba9876543210", "odd-ref"]) for c in set(calls) if rng.random() < 0.5}
        other = rng.choice(["", "", "", "b", "c"])  # three sessions, two kept: "a" starts over at times
        if other:
            tracker.check(other, [HumanMessage("other HAT1367")], [], {})
        got = tracker.check("a", history, view, stored)
        assert got == value_fidelity(history, view, stored), f"step {step}"


def test_a_value_the_user_writes_after_it_left_the_view_counts_as_the_users_on_the_next_call() -> None:
    """The view is the same on both calls and the value stays missing: only who wrote it changed."""
    tracker = SessionFidelity()
    history: list[BaseMessage] = [
        HumanMessage("start"),
        AIMessage("", tool_calls=[{"name": "t", "args": {"q": "HAT1367"}, "id": "c1"}]),
        ToolMessage("done", tool_call_id="c1"),
    ]
    view: list[BaseMessage] = [history[0], AIMessage("later")]
    first = tracker.check("a", history, view, {})
    assert first.left == ("HAT1367",) and first.left_from_user == ()
    history.append(HumanMessage("again HAT1367 please"))
    second = tracker.check("a", history, view, {})
    assert second == value_fidelity(history, view, {})
    assert second.left_from_user == ("HAT1367",)


def test_values_held_by_a_cut_message_are_behind_its_ref_however_the_lists_and_texts_change() -> None:
    """``behind`` gives what ``behind_texts`` gives on every call, whether the figures' lists are
    the previous call's own (the view unchanged) or new, and the cut texts the same or not."""
    tracker = SessionFidelity()
    history: list[BaseMessage] = [
        HumanMessage("start HAT1367 and QX-77"),
        AIMessage("", tool_calls=[{"name": "t", "args": {"q": "HAT1367"}, "id": "c1"}]),
        ToolMessage("done", tool_call_id="c1"),
    ]
    view: list[BaseMessage] = [AIMessage("later")]
    steps: list[tuple[str, ...]] = [
        ("the cut text holds HAT1367",),
        ("the cut text holds HAT1367",),  # the same lists and texts: the previous answer
        ("nothing of them",),  # the same lists, another text
        (),
        ("both HAT1367 and QX-77",),
    ]
    for step, texts in enumerate(steps):
        if step == 3:
            history.append(HumanMessage("now RT-9"))  # new lists
        fidelity = tracker.check("a", history, view, {})
        assert tracker.behind("a", fidelity, texts) == behind_texts(fidelity, texts), f"step {step}"
    assert tracker.behind("a", fidelity, steps[-1]).left == ("RT-9",)


def test_a_second_output_behind_a_shown_ref_puts_a_missing_value_behind_the_ref() -> None:
    """The view and the values it lacks stay the same; a new output of the same call holds one."""
    tracker = SessionFidelity()
    ref = "ref:bash:0123456789abcdef"
    history: list[BaseMessage] = [
        HumanMessage("start"),
        AIMessage("", tool_calls=[{"name": "t", "args": {"q": "HAT1367"}, "id": "c1"}]),
        ToolMessage("nothing yet", tool_call_id="c1"),
    ]
    view: list[BaseMessage] = [history[0], AIMessage(f"stored as {ref}")]
    first = tracker.check("a", history, view, {"c1": ref})
    assert first.left == ("HAT1367",) and first.behind_refs == ()
    history.append(ToolMessage("found HAT1367", tool_call_id="c1"))
    second = tracker.check("a", history, view, {"c1": ref})
    assert second == value_fidelity(history, view, {"c1": ref})
    assert second.behind_refs == ("HAT1367",) and second.left == ()


def test_a_check_cut_short_starts_the_session_over_instead_of_leaving_half_made_counts(mocker: Any) -> None:
    tracker = SessionFidelity()
    history: list[BaseMessage] = [HumanMessage("use HAT1367 and mia_li_3668")]
    view: list[BaseMessage] = [AIMessage("working on mia_li_3668")]
    tracker.check("a", history, view, {})
    cut = mocker.patch.object(_Session, "_figures", side_effect=MemoryError("cut short"))
    view = [AIMessage("now HAT1367")]
    with pytest.raises(MemoryError):
        tracker.check("a", history, view, {})
    mocker.stop(cut)
    # the same view again: nothing changed since the call cut short, whose figures were never made
    again = tracker.check("a", history, view, {})
    assert again == value_fidelity(history, view, {})
    assert again.left == ("mia_li_3668",)


def test_a_value_with_a_line_break_found_across_two_view_messages_is_looked_for_again(mocker: Any) -> None:
    """No extractor here finds values with a line break; were one to, such a value found in the
    view's joined text (in no single message) must not be carried over once a message leaves."""
    import ctxplugin._message_values as values

    lined = "line one\nline two"
    real = values.identifiers  # type: ignore[attr-defined]
    mocker.patch.object(values, "identifiers", side_effect=lambda text: [*real(text), *([lined] if lined in text else [])])
    tracker = SessionFidelity()
    history: list[BaseMessage] = [HumanMessage(f"remember: {lined} and HAT1367")]
    first_half, second_half = AIMessage("so far: line one"), AIMessage("line two, then more")
    view: list[BaseMessage] = [first_half, second_half]
    first = tracker.check("a", history, view, {})
    assert first == value_fidelity(history, view, {}) and lined not in first.left
    view = [first_half, AIMessage("something else")]
    second = tracker.check("a", history, view, {})
    assert second == value_fidelity(history, view, {}) and lined in second.left


def shared_share(before: Sequence[BaseMessage], after: Sequence[BaseMessage]) -> float:
    """The share of ``after``'s messages that ``before`` held too (the very objects)."""
    held = {id(m) for m in before}
    return sum(id(m) in held for m in after) / len(after) if after else 1.0


@pytest.mark.skipif(not SWE.is_dir(), reason=f"the recorded conversations are not at {SWE} (../shared/data)")
def test_the_report_is_that_of_a_check_from_scratch_on_extended_remade_and_edited_calls() -> None:
    """Calls whose view extends the previous one, calls whose view is made afresh, and calls
    after an earlier message was edited: replaced by an edited copy (as a host's reducer does
    by id) or given new content in place."""
    engine = ContextEngine(ContextConfig(encoding="cl100k_base"))
    checked = CheckedAccount(next(s for s in engine._stages if isinstance(s, Account)))
    engine._stages = tuple(checked if isinstance(s, Account) else s for s in engine._stages)
    messages = [m.model_copy() for m in two_recordings()]
    scope = Scope(session_id="edited")
    bound: list[Any] = [SWE_BASH_TOOL, *engine.tools_for_model()]
    captured: list[BaseMessage] = []
    views: list[list[BaseMessage]] = []
    edited: list[int] = []  # the calls made right after an edit
    for index, message in enumerate(messages):
        if index > 0 and isinstance(message, AIMessage):
            calls = len(views)
            if calls in (40, 90):  # the user's first words edited: a copy with a value more
                at = next(i for i, m in enumerate(captured) if isinstance(m, HumanMessage))
                captured[at] = captured[at].model_copy(update={"content": f"{captured[at].content} HAT{calls} ZFA04Y{calls}"})
                edited.append(calls)
            if calls in (60, 120):  # the user's latest words given new content in place, a value with them
                latest = [m for m in captured if isinstance(m, HumanMessage)][-1]
                latest.content = f"{latest.content} now with mia_li_{calls}"
                edited.append(calls)
            views.append(engine.prepare(captured, tools=bound, scope=scope).messages)
        captured.append(engine.capture_tool_result(message, scope) if isinstance(message, ToolMessage) else message)
    assert len(checked.calls) == len(views) > 130
    wrong = [i for i, (got, expected) in enumerate(checked.calls) if got != expected]
    assert not wrong, f"calls {wrong[:10]} differ: {checked.calls[wrong[0]]}"
    shares = [shared_share(before, after) for before, after in pairwise(views)]
    extended = [i + 1 for i, share in enumerate(shares) if share >= 0.75]  # the previous view, give or take its end
    remade = [i + 1 for i, share in enumerate(shares) if share < 0.5]
    assert len(extended) > 5 and len(remade) > 5 and edited == [40, 60, 90, 120]
    # each edit shows in the figures: the values it brought count as used from that call on
    used = [got[0] for got, _ in checked.calls]
    assert all(used[call] != used[call - 1] for call in edited)
