"""The summarizer is asked only for the messages whose gist a view shows."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from langchain_core.messages import BaseMessage

from ctxplugin import HistoryConfig
from ctxplugin.config import SummarizerConfig
from ctxplugin.history import (
    GIST_PREFIX,
    BackgroundSummarizer,
    HistoryBudget,
    compress_history,
    is_boundary_call,
)
from ctxplugin.tokens import content_text, get_counter

COUNTER = get_counter()[0]
WAIT = 30.0  # generous: only reached when something is broken
LEAD = "Summary: looked at one module."


class Asked:
    """A summarizer function that records the texts it was asked for."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def __call__(self, text: str) -> str:
        self.texts.append(text)
        return LEAD


@pytest.fixture
def summarizer() -> Iterator[tuple[BackgroundSummarizer, Asked]]:
    asked = Asked()
    made = BackgroundSummarizer(asked, config=SummarizerConfig(session_tokens=10**6, daily_tokens=10**7), counter=COUNTER)
    yield made, asked
    made.close()


def gists(messages: list[BaseMessage]) -> dict[str | None, str]:
    return {m.id: text for m in messages if (text := content_text(m.content)).startswith(GIST_PREFIX)}


def test_gists_all_condensed_into_notes_ask_for_no_summary(
    summarizer: tuple[BackgroundSummarizer, Asked], agent_session: Callable[..., list[BaseMessage]]
) -> None:
    source, asked = summarizer
    body = agent_session(40)
    condensed = 0
    for steps in range(8, 40):
        view = compress_history(
            body[: 1 + 2 * steps], config=HistoryConfig(), counter=COUNTER, budget=HistoryBudget(total=3000),
            summarizer=source, session="condensed",
        )
        assert source.drain(WAIT)
        assert gists(view.messages) == {}, "every gist-tier exchange stands in a note"
        condensed = max(condensed, view.omitted_exchanges)
    assert condensed > 20
    assert source.stats.requested == 0 and asked.texts == [], "no summary is paid for that no view shows"


def test_shown_gists_ask_for_their_summaries_and_show_them_from_the_next_boundary_call(
    summarizer: tuple[BackgroundSummarizer, Asked], agent_session: Callable[..., list[BaseMessage]]
) -> None:
    source, asked = summarizer
    config = HistoryConfig()
    body = agent_session(40)
    originals = {m.id: content_text(m.content) for m in body}
    first: dict[str | None, str] = {}
    ever_shown: set[str] = set()
    upgraded = False
    for steps in range(8, 40):
        exchanges = steps + 1
        view = compress_history(body[: 1 + 2 * steps], config=config, counter=COUNTER, summarizer=source, session="shown")
        shown = gists(view.messages)
        ever_shown.update(originals[i] for i in shown)
        if first:
            led = {i for i, text in shown.items() if text.startswith(GIST_PREFIX + LEAD)}
            if not is_boundary_call(exchanges, config):
                assert not led, "between boundary moves a gist stays as first shown"
            else:
                assert led == {i for i in first if originals[i] in asked.texts}, "the gists shown before lead with their summaries"
                upgraded = True
                break
        elif shown:
            first = shown
            assert not any(text.startswith(GIST_PREFIX + LEAD) for text in shown.values())
            assert source.drain(WAIT)
            # a message up to twice gist_tokens long is gisted whole enough: no summary is asked for it
            long_enough = sorted(originals[i] for i in shown if COUNTER.count(originals[i]) > 2 * config.gist_tokens)
            assert long_enough and sorted(asked.texts) == long_enough, "each long message shown as a gist is summarized"
        assert source.drain(WAIT)
    assert upgraded
    assert set(asked.texts) <= ever_shown, "only messages shown as a gist are summarized"
