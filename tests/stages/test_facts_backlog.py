"""Messages owed to the facts ledger after a long facts store outage: read a bounded number per
step once the store is back, oldest first, and never out of conversation order.

The stores are real (in memory, and the embedded SQLite CAS with Chroma on disk); the outage is
injected as facts writes that raise :class:`~ctxplugin.errors.StoreUnavailableError`, as a
Chroma server that refuses connections (or a Postgres table locked past ``stores.timeout``)
makes them raise."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextEngine, Scope
from ctxplugin._step import step_budget
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import Fact
from ctxplugin.stages._backlog import OWED_PER_STEP, Owed, Portion

S = Scope(session_id="s1", user_id="u1")
KEY = "reservation:OBUT9V"
Lookup = Callable[..., tuple[AIMessage, ToolMessage]]  # the reservation_lookup fixture (conftest.py)


class Outage:
    """The facts store's writes fail while ``down``."""

    def __init__(self, engine: ContextEngine, mocker: MockerFixture) -> None:
        self.down = False
        store = engine.facts.store
        for name in ("add", "update", "write"):
            real = getattr(store, name, None)
            if real is not None:
                mocker.patch.object(store, name, side_effect=self._failing(real))

    def _failing(self, real: object) -> object:
        def call(*args: Sequence[Fact]) -> None:
            if self.down:
                raise StoreUnavailableError("Chroma server: connection refused")
            real(*args)  # type: ignore[operator]

        return call


def cabin(engine: ContextEngine) -> str | None:
    fact = engine.facts.current(KEY, scope=S)
    if fact is None:
        return None
    return next(
        (
            part.split("=", 1)[1].strip(" ;,.")
            for part in fact.text.split()
            if part.startswith("cabin=")
        ),
        fact.text,
    )


def owed(warnings: Sequence[str]) -> bool:
    return any("owed to the facts ledger" in w for w in warnings)


def long_outage(engine: ContextEngine, outage: Outage, reservation_lookup: Lookup, steps: int) -> list[BaseMessage]:
    """``steps`` steps while the facts store is out, each with a tool output (read whole from the
    conversation) and a user message: the conversation at the end."""
    messages: list[BaseMessage] = [HumanMessage("Keep an eye on reservation OBUT9V", id="h0")]
    outage.down = True
    for step in range(steps):
        messages += [
            *reservation_lookup(f"c{step}", f"fare{step}"),
            AIMessage("Noted.", id=f"a{step}"),
            HumanMessage(f"Check it again ({step})", id=f"h{step + 1}"),
        ]
        assert any(
            "facts store unavailable" in w
            for w in engine.prepare(messages, scope=S).report.warnings
        )
    outage.down = False
    return messages


def catch_up(engine: ContextEngine, messages: list[BaseMessage], *, newer: str, wait: bool) -> None:
    """Steps until nothing is owed (a turn each), then ``newer`` is the current cabin; with
    ``wait``, it is not current on any step before that."""
    for step in range(5):
        report = engine.prepare(messages, scope=S).report
        if not owed(report.warnings):
            break
        if wait:
            assert cabin(engine) != newer  # not before the older values are read
        messages += [
            AIMessage("Working on it.", id=f"w{step}"),
            HumanMessage(f"Still? ({step})", id=f"v{step}"),
        ]
    assert not owed(report.warnings)
    assert cabin(engine) == newer


def test_the_messages_owed_after_a_long_outage_are_read_a_bounded_number_per_step_oldest_first(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    # twice as many messages owed as one step reads
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    report = engine.prepare(messages, scope=S).report
    assert owed(report.warnings)  # the report says the ledger is behind
    first = cabin(engine)
    assert (
        first is not None and first != f"fare{OWED_PER_STEP - 1}"
    )  # the oldest read, not all at once
    seen: list[str | None] = [first]
    for step in range(4):
        messages += [
            AIMessage("Still here.", id=f"x{step}"),
            HumanMessage(f"And now? ({step})", id=f"y{step}"),
        ]
        report = engine.prepare(messages, scope=S).report
        seen.append(cabin(engine))
        if not owed(report.warnings):
            break
    assert not owed(report.warnings)  # caught up within a few steps, nothing lost
    assert seen[-1] == f"fare{OWED_PER_STEP - 1}"
    numbers = [int(value[4:]) for value in seen if value is not None]
    assert numbers == sorted(numbers)  # the values came in the order they were stated


def test_an_output_captured_while_the_ledger_is_behind_is_not_superseded_by_an_older_one(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    assert owed(
        engine.prepare(messages, scope=S).report.warnings
    )  # the store is back; older messages still owed
    ask, output = reservation_lookup("new", "premium")
    compact = engine.capture_tool_result(output, scope=S)  # newer than every owed message
    messages += [
        ask,
        compact,
        AIMessage("Updated.", id="an"),
        HumanMessage("Which cabin now?", id="hn"),
    ]
    catch_up(engine, messages, newer="premium", wait=False)


def test_a_message_read_by_the_step_while_the_ledger_is_behind_waits_for_the_older_ones(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    # the step the store is back in brings a newer value than every owed message
    messages += [
        *reservation_lookup("new", "premium"),
        AIMessage("Updated.", id="an"),
        HumanMessage("Which cabin now?", id="hn"),
    ]
    catch_up(engine, messages, newer="premium", wait=True)


def test_an_outage_again_while_the_ledger_catches_up_loses_nothing(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    assert owed(engine.prepare(messages, scope=S).report.warnings)
    outage.down = True  # out again before the older messages are read
    messages += [AIMessage("Hm.", id="z0"), HumanMessage("Anything?", id="z1")]
    report = engine.prepare(messages, scope=S).report
    assert any("facts store unavailable" in w for w in report.warnings)
    outage.down = False
    for step in range(5):
        messages += [
            AIMessage("Back.", id=f"r{step}"),
            HumanMessage(f"Now? ({step})", id=f"q{step}"),
        ]
        report = engine.prepare(messages, scope=S).report
        if not owed(report.warnings):
            break
    assert not owed(report.warnings)
    assert cabin(engine) == f"fare{OWED_PER_STEP - 1}"


def test_a_capture_while_the_ledger_is_behind_reads_nothing_yet(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    engine.prepare(messages, scope=S)
    _, report = engine.capture_with_report(reservation_lookup("new", "premium")[1], S)
    assert report.facts_extracted == 0 and not report.warnings  # not degraded: read in its turn
    assert cabin(engine) != "premium"


@contextmanager
def portion(owed: Owed, scope: Scope, messages: Sequence[BaseMessage], *, kept: bool) -> Iterator[Portion]:
    """What one step of ``scope`` reads of ``messages``, taken as the facts stage takes it."""
    with owed.step(scope, kept=kept) as step:
        yield step.take(step.claims(messages))


def test_a_portion_the_step_store_time_ran_out_on_is_halved_then_grows_back() -> None:
    owed_ = Owed()
    messages: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(100)]
    with portion(owed_, S, messages, kept=False) as part:  # not behind: everything is read
        assert len(part.fresh) == 100
        with step_budget(0.0):  # the step's store time is spent: the store is slow rather than out
            owed_.failed(S, part)
    assert owed_.behind(S) == 100
    half = OWED_PER_STEP // 2
    with portion(owed_, S, messages, kept=False) as part:
        assert len(part.fresh) == OWED_PER_STEP and len(part.owed) == 100 - OWED_PER_STEP
        with step_budget(0.0):  # a whole portion it ran out on: halved
            owed_.failed(S, part)
    with portion(owed_, S, messages, kept=False) as part:
        assert len(part.fresh) == half  # written
    assert owed_.behind(S) == 100 - half
    with portion(owed_, S, messages[half:], kept=False) as part:
        assert len(part.fresh) == OWED_PER_STEP  # grown back as portions are written
        with portion(owed_, S, messages, kept=False) as other:  # a concurrent call of the scope reads none
            assert other.fresh == [] and not other.mine
    with portion(owed_, S, messages[half + OWED_PER_STEP :], kept=False) as part:
        assert len(part.fresh) == OWED_PER_STEP
    with portion(owed_, S, [], kept=False) as part:
        assert part.fresh == part.owed == []
    assert owed_.behind(S) == 0


def test_a_step_that_owed_a_few_messages_and_ran_out_of_time_changes_no_portion() -> None:
    owed_ = Owed()
    few: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(3)]
    with portion(owed_, S, few, kept=False) as part, step_budget(0.0):
        owed_.failed(S, part)
    with (
        portion(owed_, S, few, kept=True) as part,
        step_budget(0.0),
    ):  # behind, all it owes in one portion
        owed_.failed(S, part)
    with portion(owed_, S, [*few, *few * 20], kept=False) as part:
        assert len(part.fresh) == OWED_PER_STEP


def test_a_failure_that_leaves_store_time_does_not_shrink_the_portion() -> None:
    owed_ = Owed()
    messages: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(100)]
    with portion(owed_, S, messages, kept=False) as part, step_budget(5.0):  # the store refused at once
        owed_.failed(S, part)
    with portion(owed_, S, messages, kept=False) as part:
        assert len(part.fresh) == OWED_PER_STEP


def owed_count(warnings: Sequence[str]) -> int | None:
    return next((int(w.split()[0]) for w in warnings if "owed to the facts ledger" in w), None)


def test_a_step_whose_portion_fails_counts_that_portion_as_still_owed(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    before = owed_count(engine.prepare(messages, scope=S).report.warnings)
    assert before is not None
    outage.down = True  # out again: the portion this step reads is not written
    messages += [AIMessage("Hm.", id="z0"), HumanMessage("Anything?", id="z1")]
    report = engine.prepare(messages, scope=S).report
    assert any("facts store unavailable" in w for w in report.warnings)
    assert owed_count(report.warnings) == before + 1  # nothing of it was written


def test_sessions_caught_up_since_make_room_before_one_still_owed(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    owed_ = Owed(size=2)
    mocker.patch.object(engine._capture.reads, "owed", owed_)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    assert owed(engine.prepare(messages, scope=S).report.warnings)
    for n in range(3):  # sessions whose portion was halved, caught up since
        other = Scope(session_id=f"other{n}", user_id="u1")
        few: list[BaseMessage] = [HumanMessage(f"m{i}") for i in range(3)]
        for _ in range(2):  # out, then too slow for a whole portion: halved
            with portion(owed_, other, [*few, *few * 20], kept=False) as part, step_budget(0.0):
                owed_.failed(other, part)
        with portion(owed_, other, few, kept=False):
            pass
        assert owed_.behind(other) == 0
    assert owed_.behind(S) > 0  # still owed: a capture waits behind the owed messages
    ask, output = reservation_lookup("new", "premium")
    compact = engine.capture_tool_result(output, scope=S)
    messages += [ask, compact, HumanMessage("Which cabin now?", id="hn")]
    for step in range(5):
        if not owed(engine.prepare(messages, scope=S).report.warnings):
            break
        messages += [HumanMessage(f"Still? ({step})", id=f"v{step}")]
    assert cabin(engine) == "premium"


def test_a_concurrent_call_bringing_a_newer_value_does_not_read_it_before_the_owed_ones(
    engine: ContextEngine, mocker: MockerFixture, reservation_lookup: Lookup
) -> None:
    outage = Outage(engine, mocker)
    messages = long_outage(engine, outage, reservation_lookup, steps=OWED_PER_STEP)
    reads = engine._capture.reads
    real = reads.reading
    claimed = threading.Event()  # the first call claimed what it reads, and has not read it yet
    done = threading.Event()  # the second call read what it claimed

    @contextmanager
    def gated(messages: Sequence[BaseMessage], scope: Scope) -> Iterator[list[BaseMessage]]:
        with real(messages, scope) as taken:
            if threading.current_thread().name == "first":
                claimed.set()
                done.wait(10)
                yield taken
            else:
                try:
                    yield taken
                finally:
                    done.set()

    mocker.patch.object(reads, "reading", gated)
    newer = [*messages, *reservation_lookup("new", "premium"), HumanMessage("Cabin?", id="hn")]
    first = threading.Thread(
        target=engine.prepare, args=(messages,), kwargs={"scope": S}, name="first"
    )
    first.start()
    assert claimed.wait(10)
    engine.prepare(newer, scope=S)  # the same session at once, one message further
    first.join(20)
    mocker.stopall()
    for step in range(6):
        if not owed(engine.prepare(newer, scope=S).report.warnings):
            break
        newer += [HumanMessage(f"Still? ({step})", id=f"v{step}")]
    assert cabin(engine) == "premium"


def test_a_call_while_another_reads_the_kept_outputs_never_reports_none_owed(
    engine: ContextEngine,
    reservation_lookup: Lookup,
) -> None:
    reads = engine._capture.reads
    ask, output = reservation_lookup("c0", "economy")
    reads.unread.keep(output, S)  # captured while the store was out
    messages = [HumanMessage("Keep an eye on reservation OBUT9V", id="h0"), ask]
    with reads.owed.step(S, kept=True):  # another call of the session reads them now
        warnings = engine.prepare(messages, scope=S).report.warnings
    said = [w for w in warnings if "owed to the facts ledger" in w]
    assert said
    assert not said[0].startswith("0 ")
