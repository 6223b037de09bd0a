"""Progressive compression of history by age.

The newest exchanges stay verbatim, the next ones are trimmed (head and tail kept), older
ones are reduced to one-line gists, and the oldest gists are omitted when the history must fit
a budget. Exact values — ids, paths, URLs, numbers, error lines — survive every tier; protected
messages (the task, the latest user message, pinned messages) are never altered. Tier
boundaries move in blocks so consecutive calls share their prompt prefix.

An optional summarizer (any chat model, ``Runnable`` or function) writes better gists in the
background; see :class:`BackgroundSummarizer`.
"""

from langchain_core.messages import BaseMessage

from ctxplugin._messages import META_KEY
from ctxplugin.history._dropped import without_expand_hint, without_latest_refs, without_tool_values
from ctxplugin.history.compressors import GIST_PREFIX, gist_text, trim_text
from ctxplugin.history.identifiers import alert_lines, identifiers
from ctxplugin.history.omission import (
    OMITTED_NOTE,
    Digests,
    HistoryBudget,
    OmissionPlan,
    note_values,
    plan_omission,
)
from ctxplugin.history.summarizer import (
    BackgroundSummarizer,
    SummarizerLike,
    SummarizerStats,
    as_summarize_fn,
    make_summarizer,
)
from ctxplugin.history.tiers import (
    GistSource,
    HistoryView,
    Tier,
    compress_history,
    compress_message,
    is_boundary_call,
    protected_indexes,
    tier_bounds,
)

PIN_KEY = "pinned"
"""Set ``message.additional_kwargs["ctxplugin"]["pinned"] = True`` to keep a message verbatim."""

__all__ = [
    "GIST_PREFIX",
    "OMITTED_NOTE",
    "PIN_KEY",
    "BackgroundSummarizer",
    "Digests",
    "GistSource",
    "HistoryBudget",
    "HistoryView",
    "OmissionPlan",
    "SummarizerLike",
    "SummarizerStats",
    "Tier",
    "alert_lines",
    "as_summarize_fn",
    "compress_history",
    "compress_message",
    "gist_text",
    "identifiers",
    "is_boundary_call",
    "make_summarizer",
    "note_values",
    "pin",
    "plan_omission",
    "protected_indexes",
    "tier_bounds",
    "trim_text",
    "without_expand_hint",
    "without_latest_refs",
    "without_tool_values",
]


def pin(message: BaseMessage) -> BaseMessage:
    """A copy of ``message`` marked as pinned: history compression never alters it.

    Example:
        >>> from langchain_core.messages import HumanMessage
        >>> pinned = pin(HumanMessage(content="Budget is 1,200 EUR; never exceed it."))
        >>> pinned.additional_kwargs["ctxplugin"]["pinned"]
        True
    """
    note = message.additional_kwargs.get(META_KEY)
    meta = {**note, PIN_KEY: True} if isinstance(note, dict) else {PIN_KEY: True}
    return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: meta}})
