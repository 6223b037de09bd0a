"""Model-written gist leads: where they come from, and which messages they are asked for.

A summary is asked for only for a message whose gist the view shows. Most exchanges of the
gist tier are condensed into context notes on the very call that gists them (the omission plan
stands a note for them), and a summary of one of those would be paid for and never read. A gist
shown without its summary gets it from the next boundary call on (see :meth:`GistSource.lead`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from typing import Protocol

from langchain_core.messages import BaseMessage

from ctxplugin.config import HistoryConfig
from ctxplugin.history._shown import _plain_text, _summarizable
from ctxplugin.history.omission import Digests, OmissionPlan
from ctxplugin.tokens import TokenCounter


class GistSource(Protocol):
    """Where model-written gist leads come from (see :class:`BackgroundSummarizer`)."""

    def prefetch(self, text: str, *, session: str) -> None:
        """Ask for a summary of ``text``, a message whose gist the view shows; never blocks."""

    def lead(self, text: str, *, session: str, upgrade: bool) -> str | None:
        """The summary to lead the gist of ``text`` with, or None for the zero-LLM gist; asks
        for none.

        ``upgrade`` is True on calls where tier boundaries move (the cache prefix breaks there
        anyway); only then may an earlier zero-LLM gist be replaced by a summary."""


def lead_text(message: BaseMessage, config: HistoryConfig, counter: TokenCounter) -> str | None:
    """The text a summary of ``message`` is asked for: its plain text when long enough that a
    summary can say more than the zero-LLM gist's first sentence, else None."""
    text = _plain_text(message)
    return text if text and _summarizable(text, config, counter) else None


def shown_gists(gist_end: int, notes: Digests | None, plan: OmissionPlan, block_size: int) -> Iterator[int]:
    """The exchanges of the gist tier (those before ``gist_end``) that the view shows: every one
    but the members of the blocks ``plan`` condenses (a protected exchange stays among them)."""
    condensed = plan.condensed if notes is not None else 0
    for number in range(gist_end):
        block = number // block_size
        if block < condensed and notes is not None and number in notes.members(block):
            continue
        yield number


def request_leads(
    source: GistSource,
    numbers: Iterator[int],
    messages: Sequence[BaseMessage],
    spans: Sequence[tuple[int, int]],
    protected: Collection[int],
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    session: str,
) -> None:
    """Ask ``source`` for a summary of every gisted message of exchanges ``numbers``."""
    for number in numbers:
        for index in range(*spans[number]):
            if index not in protected and (text := lead_text(messages[index], config, counter)) is not None:
                source.prefetch(text, session=session)


__all__ = ["GistSource", "lead_text", "request_leads", "shown_gists"]
