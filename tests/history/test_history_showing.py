"""Exchanges of the gist tier are gisted when read: the view is the one every exchange gisted
makes, and a long thread's condensed exchanges are never gisted."""

from __future__ import annotations

import random
from bisect import bisect_left
from collections.abc import Callable
from itertools import accumulate

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import HistoryConfig
from ctxplugin.history import HistoryBudget, compress_history
from ctxplugin.history._showing import EMPTY, BlockSizes, Showing
from ctxplugin.history._shown import _SHOWN, Tier, compress_message, shown_floor
from ctxplugin.history.omission import _After
from ctxplugin.tokens import (
    MESSAGE_OVERHEAD,
    content_text,
    count_cached,
    count_message,
    get_counter,
)

COUNTER = get_counter()[0]


class NoLeads:
    """A gist source that never has a summary: the zero-LLM gist, but every exchange of the
    gist tier gisted as the call goes (as the tiers do with a summarizer)."""

    def prefetch(self, text: str, *, session: str) -> None:
        return None

    def lead(self, text: str, *, session: str, upgrade: bool) -> str | None:
        return None


def test_the_counts_tried_are_those_the_bisection_of_every_block_finds() -> None:
    rng = random.Random(5)
    for _ in range(300):
        gists = [rng.choice([0, 1, 5, 40, 300]) for _ in range(rng.randrange(0, 30))]
        blocks = len(gists)
        after_all = [*accumulate(reversed(gists), initial=0)][::-1]
        below = [-a for a in after_all]
        read: list[int] = []

        def gist(block: int, gists: list[int] = gists, read: list[int] = read) -> int:
            read.append(block)
            return gists[block]

        after = _After(blocks, gist)
        for start in range(blocks + 1):
            allowance = rng.randrange(-5, sum(gists) + 10)
            assert after.counts_from(start, allowance) == range(bisect_left(below, -allowance, lo=start), blocks + 1)
            assert all(after[k] == after_all[k] for k in range(start, blocks + 1))
        assert len(read) == len(set(read)), "each block's gist is read once"


def long_history(session: Callable[..., list[BaseMessage]], exchanges: int) -> list[BaseMessage]:
    return [*session(exchanges), AIMessage("Looking further."), HumanMessage("And the next one?")]


def test_views_equal_those_made_with_every_exchange_gisted_call_after_call(agent_session: Callable[..., list[BaseMessage]]) -> None:
    config = HistoryConfig()
    budget = HistoryBudget(total=3000)
    lazy, eager = long_history(agent_session, 120), long_history(agent_session, 120)
    for end in range(len(lazy) - 40, len(lazy) + 1, 2):
        made = compress_history(lazy[:end], config=config, counter=COUNTER, budget=budget, session="lazy")
        every = compress_history(eager[:end], config=config, counter=COUNTER, budget=budget, session="eager", summarizer=NoLeads())
        assert made.omitted_exchanges > 0
        assert [(type(m), m.content, m.additional_kwargs) for m in made.messages] == [
            (type(m), m.content, m.additional_kwargs) for m in every.messages
        ]
        assert (made.tiers, made.compressed_count, made.verbatim_from) == (every.tiers, every.compressed_count, every.verbatim_from)


def test_a_long_threads_condensed_exchanges_are_never_gisted(agent_session: Callable[..., list[BaseMessage]]) -> None:
    messages = long_history(agent_session, 400)
    view = compress_history(messages, config=HistoryConfig(), counter=COUNTER, budget=HistoryBudget(total=3000), session="long")
    assert view.omitted_exchanges > 300
    gisted = [i for i, m in enumerate(messages) if _SHOWN.get(m) is not None]
    assert gisted, "the newest gisted blocks are read by the plan"
    assert len(gisted) < len(messages) // 4, "the thousands the archive stands for are not gisted"


def test_a_floor_is_never_above_what_the_tier_shows(agent_session: Callable[..., list[BaseMessage]]) -> None:
    config = HistoryConfig()
    long_command = {"command": "python - <<'EOF'\n" + "print('a long script line')\n" * 40 + "EOF"}
    messages = [
        *agent_session(6),
        AIMessage("", tool_calls=[{"name": "bash", "args": long_command, "id": "long"}]),
        AIMessage(
            [{"type": "text", "text": "Running it. " * 80}, {"type": "tool_use", "id": "block", "name": "bash", "input": {"command": "ls"}}],
            tool_calls=[{"name": "bash", "args": {"command": "ls"}, "id": "block"}],
        ),
    ]
    exact = 0
    for message in messages:
        for tier in (Tier.TRIMMED, Tier.GIST):
            floor = shown_floor(message, tier, config=config, counter=COUNTER)
            shown = count_message(compress_message(message, tier, config=config, counter=COUNTER), COUNTER)
            assert MESSAGE_OVERHEAD <= floor <= shown
            exact += isinstance(message, AIMessage) and floor == shown - count_cached(content_text(message.content), COUNTER)
        assert shown_floor(message, Tier.VERBATIM, config=config, counter=COUNTER) == count_message(message, COUNTER)
    assert exact, "a call kept whole counts in full"


def test_a_block_condensed_as_it_leaves_the_trimmed_tier_is_not_gisted(agent_session: Callable[..., list[BaseMessage]]) -> None:
    # each block's calls alone cost more than a note's cap: its note needs no gist to be capped by
    config = HistoryConfig(digest_tokens=40)
    messages = long_history(agent_session, 60)
    for end in range(len(messages) - 30, len(messages) + 1, 2):
        view = compress_history(messages[:end], config=config, counter=COUNTER, budget=HistoryBudget(total=1500), session="floor")
    assert view.omitted_exchanges > 40
    tiers = [{key[0] for key in _SHOWN.get(m) or {}} for m in messages if isinstance(m, AIMessage)]
    trimmed = [shown for shown in tiers if Tier.TRIMMED in shown]
    assert len(trimmed) >= 20, "exchanges shown trimmed at the end of the window, then condensed"
    assert not any(Tier.GIST in shown for shown in trimmed)


def _deferred(messages: list[BaseMessage], config: HistoryConfig) -> tuple[Showing, BlockSizes]:
    """``messages`` after the task as two-message exchanges, every one deferred to the gist tier,
    in blocks of two exchanges."""
    body = messages[1:]
    exchanges = [tuple(body[i : i + 2]) for i in range(0, len(body), 2)]
    showing = Showing([EMPTY] * len(exchanges))
    for number, exchange in enumerate(exchanges):
        showing.defer(number, exchange, (False,) * len(exchange), Tier.GIST, config, COUNTER)
    members = [tuple(range(k, min(k + 2, len(exchanges)))) for k in range(0, len(exchanges), 2)]
    return showing, BlockSizes(showing, members, COUNTER)


def test_a_block_is_over_a_count_as_its_gists_say_gisting_only_what_that_needs(agent_session: Callable[..., list[BaseMessage]]) -> None:
    config = HistoryConfig()
    whole = sum(count_message(compress_message(m, Tier.GIST, config=config, counter=COUNTER), COUNTER) for m in agent_session(4)[1:5])
    for tokens in (0, whole // 3, whole - 1, whole, whole + 1, 10 * whole):
        messages = agent_session(4)  # new objects: nothing of them gisted yet
        showing, sizes = _deferred(messages, config)
        assert sizes.over(0, tokens) == (whole > tokens)
        gisted = [m for m in messages[1:5] if _SHOWN.get(m) is not None]
        if tokens < whole // 2:
            assert len(gisted) < 4, "once the block is known to be over, the rest is not gisted"
        if tokens >= whole:
            assert len(gisted) == 4
        # made afterwards, the exchanges are what gisting each message at once makes, and add up to the same
        assert sum(showing.parts(n)[0] for n in (0, 1)) == sizes[0] == whole
        assert [m.content for n in (0, 1) for m in showing.rendered(n)] == [
            compress_message(m, Tier.GIST, config=config, counter=COUNTER).content for m in messages[1:5]
        ]
