"""Block keys resumed from a previous call are the keys made afresh, also when the last blocks'
members changed since (a new user message takes protection from the previous one)."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin import HistoryConfig
from ctxplugin.history import _digests, _reuse
from ctxplugin.history._digests import TRAIL, Digests
from ctxplugin.tokens import get_counter

EXCHANGES = [(HumanMessage(f"step {n}: open src/mod_{n}.py"), AIMessage(f"Read mod_{n}: {n * 7} lines.")) for n in range(64)]



def blocks(size: int, count: int, held: frozenset[int] = frozenset()) -> list[list[int]]:
    """Exchange numbers of ``count`` blocks of ``size``, without those ``held`` (protected)."""
    return [[n for n in range(k * size, (k + 1) * size) if n not in held] for k in range(count)]


def digests(members: list[list[int]], resume=None) -> Digests:  # type: ignore[no-untyped-def]
    return Digests(
        EXCHANGES, members, [50] * len(members), "the task", HistoryConfig(), get_counter("cl100k_base")[0], resume=resume
    )


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (blocks(4, 10), blocks(4, 12)),  # grown
        (blocks(4, 10, frozenset({39})), blocks(4, 11)),  # the last block's held exchange joined it
        (blocks(4, 10, frozenset({33, 38})), blocks(4, 10)),  # two of the last blocks changed
        (blocks(4, 10, frozenset({2})), blocks(4, 10)),  # the first block changed: nothing resumed
        (blocks(4, 12, frozenset({4 * (12 - TRAIL) - 1})), blocks(4, 12)),  # changed before the trail
        (blocks(4, 12, frozenset({47})), blocks(4, 12, frozenset({47}))),  # the same blocks
    ],
    ids=["grown", "last-block", "two-blocks", "first-block", "before-trail", "same"],
)
def test_resumed_keys_are_the_keys_made_afresh(before: list[list[int]], after: list[list[int]]) -> None:
    previous = digests(before)
    resumed = digests(after, resume=previous.keys())
    fresh = digests(after)
    assert resumed.keys().keys == fresh.keys().keys
    assert resumed.keys().digest.hexdigest() == fresh.keys().digest.hexdigest()
    # and a later call resumed from the resumed keys agrees too
    later = blocks(4, len(after) + 2)
    assert digests(later, resume=resumed.keys()).keys().keys == digests(later).keys().keys


@pytest.mark.parametrize("resumed", [False, True], ids=["afresh", "resumed"])
def test_a_blocks_content_digest_is_the_same_kept_from_its_key_or_hashed_alone(resumed: bool) -> None:
    """The digest of a block's own exchanges (what its gathered values are kept by) is kept from
    the keys of the blocks they hashed in the same call, and hashed alone for the others."""
    before = blocks(4, 10, frozenset({19}))  # the held exchange joins block 4: keys made again from there
    after = blocks(4, 12)
    made = digests(after, resume=digests(before).keys() if resumed else None)
    assert len(made._contents) == (12 - 4 if resumed else 12)
    alone = digests(after, resume=digests(after).keys())  # every key resumed: no block hashed
    assert not alone._contents
    assert [made._content(k) for k in range(12)] == [alone._content(k) for k in range(12)]
    assert len({alone._content(k) for k in range(12)}) == 12


def test_changed_members_change_the_keys_from_their_block() -> None:
    # the check above is not met by keys that ignore members
    held = digests(blocks(4, 10, frozenset({39})))
    whole = digests(blocks(4, 10))
    assert held.keys().keys[:9] == whole.keys().keys[:9]
    assert held.keys().keys[9] != whole.keys().keys[9]


def test_an_archive_ranked_again_after_a_held_exchange_joins_its_block_is_the_one_ranked_afresh(clear_memos: Callable[[], None]) -> None:
    """The figures of the blocks before a block holding a protected exchange are kept; when the
    exchange joins its block (the user spoke again), the archive is ranked from them, as it
    would be from the first block."""
    clear_memos()
    held = frozenset({27})  # in block 6
    digests(blocks(4, 8, held)).archive(4, 600)
    digests(blocks(4, 12, held)).archive(8, 600)
    assert any(key[1] == 6 for key in _digests._BASES)  # kept before the block that may change
    joined = digests(blocks(4, 12))
    ranked, note = joined._ranked(8), joined.archive(8, 600)
    clear_memos()
    fresh = digests(blocks(4, 12))
    assert fresh._ranked(8)[1] == ranked[1]
    assert fresh._ranked(8)[0].when == ranked[0].when
    assert note is not None and fresh.archive(8, 600) is not None
    assert fresh.archive(8, 600).content == note.content  # type: ignore[union-attr]


def test_keys_resume_at_a_held_block_condensed_long_ago() -> None:
    """The last block short of members (its exchange held by the latest user message) keeps the
    running hash before it: when its exchange joins it, the keys resume there, however many
    blocks came after, and are the keys made afresh."""
    held = frozenset({4 * 3 + 2})  # block 3, with TRAIL blocks and more after it
    previous = digests(blocks(4, TRAIL + 6, held))
    before = previous.keys().held
    assert before is not None and before[0] == 3
    # a call that only grew keeps it
    grown = digests(blocks(4, TRAIL + 7, held), resume=previous.keys())
    kept = grown.keys().held
    assert kept is not None and kept[0] == 3
    joined = digests(blocks(4, TRAIL + 7), resume=grown.keys())
    fresh = digests(blocks(4, TRAIL + 7))
    assert joined.keys().keys == fresh.keys().keys
    assert joined.keys().digest.hexdigest() == fresh.keys().digest.hexdigest()
    assert joined.keys().held is None and fresh.keys().held is None


def test_a_blocks_note_gathers_it_for_the_archive_which_is_then_the_same(clear_memos: Callable[[], None]) -> None:
    """Making a block's note keeps its exchanges gathered for the archive step that takes the
    block in; the archive made then is the one made without them kept."""
    from ctxplugin.history._note_values import _valued

    clear_memos()
    counter = get_counter("cl100k_base")[0]
    made = digests(blocks(4, 12))
    assert made.block(9, 8, 600) is not None
    kept = _digests._RUNS.get((made._content(9), counter.name))
    assert kept is not None
    assert kept == _reuse.gathered([_valued([EXCHANGES[n]])[0] for n in blocks(4, 12)[9]], counter)
    read = made.archive(10, 600)
    clear_memos()
    fresh = digests(blocks(4, 12)).archive(10, 600)
    assert read is not None and fresh is not None
    assert read.content == fresh.content


def test_gathering_many_exchanges_keeps_the_entries_memo_within_its_bound() -> None:
    from ctxplugin.history._note_values import _valued

    counter = get_counter("cl100k_base")[0]
    many = range(_reuse._ENTRIES._size + 50)
    spans = [_valued([(HumanMessage(f"open src/file_{n}.py"),)])[0] for n in many]
    _reuse.gathered(spans, counter)
    assert len(_reuse._ENTRIES) <= _reuse._ENTRIES._size
    kept = _reuse._ENTRIES.get((counter.name, tuple(spans[-1])))
    _reuse._ENTRIES.clear()
    assert kept == _reuse._entries(spans[-1], counter)  # what a fresh reading gives


def test_a_shared_prefix_archived_after_two_different_blocks_gives_the_notes_made_afresh(clear_memos: Callable[[], None]) -> None:
    """Two conversations share their first blocks and then differ: each archive, ranked from the
    figures and the gathered blocks the other left kept, is the archive made with nothing kept."""
    other = [
        *EXCHANGES[:32],
        *((HumanMessage(f"other {n}: see lib/x_{n}.c"), AIMessage(f"x_{n} has {n} lines.")) for n in range(32)),
    ]

    def made(exchanges: list[tuple[HumanMessage, AIMessage]]) -> Digests:
        counter = get_counter("cl100k_base")[0]
        return Digests(exchanges, blocks(4, 14), [50] * 14, "the task", HistoryConfig(), counter)

    clear_memos()
    notes: dict[str, list[str | None]] = {"one": [], "two": []}
    for name, exchanges in (("one", EXCHANGES), ("two", other), ("one", EXCHANGES)):
        for upto in (8, 10, 12, 14):
            one = made(exchanges)
            for block in range(upto - 2, upto):
                one.block(block, upto - 4, 600)
            note = one.archive(upto, 600)
            notes[name].append(None if note is None else str(note.content))
    for name, exchanges in (("one", EXCHANGES), ("two", other)):
        for n, upto in enumerate((8, 10, 12, 14)):
            clear_memos()
            fresh = made(exchanges).archive(upto, 600)
            assert notes[name][n] == (None if fresh is None else str(fresh.content))
            assert notes[name][n + 4 if name == "one" else n] == notes[name][n]
    assert notes["one"][3] != notes["two"][3]


def test_a_task_text_ending_as_a_message_digest_does_not_share_the_keys_of_that_message() -> None:
    """The task text is hashed before the blocks; one that ends with the bytes a message adds to
    the hash (a NUL and that message's digest) must not give the blocks after it the keys of a
    conversation whose first block has that message, or its notes would be that one's."""
    first = HumanMessage("open src/a_2292.py")  # its digest reads as text
    digest = _digests._digest(first).decode("utf-8", "surrogatepass")
    rest = AIMessage("Read it: 12 lines.")
    counter = get_counter("cl100k_base")[0]
    one = Digests([(first, rest)], [[0]], [50], "the task", HistoryConfig(), counter)
    two = Digests([(rest,)], [[0]], [50], "the task\x00" + digest, HistoryConfig(), counter)
    assert one.keys().keys != two.keys().keys
    shown = one.archive(1, 600)
    assert shown is not None and "a_2292" in str(shown.content)
    other = two.archive(1, 600)
    assert other is None or "a_2292" not in str(other.content)


def test_the_same_messages_split_into_other_exchanges_have_other_keys() -> None:
    """A block's gathered values and ranking count its exchanges (the newest exchange naming a
    value sets its age), so blocks of the same messages split otherwise must not share keys."""
    first, second = EXCHANGES[0], EXCHANGES[1]
    counter = get_counter("cl100k_base")[0]
    apart = Digests([first, second], [[0, 1]], [50], "the task", HistoryConfig(), counter)
    together = Digests([(*first, *second)], [[0]], [50], "the task", HistoryConfig(), counter)
    assert apart.keys().keys != together.keys().keys
