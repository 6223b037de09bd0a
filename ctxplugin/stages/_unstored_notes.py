"""While the CAS is down, no note offers ``expand_ref`` for an output it could not store.

Such an output passes through whole, with no ref (see :mod:`ctxplugin.stages.refs`, which names
them in ``view.unstored``): a context note standing for its exchange, condensed by the history
stage or left out by the fit stage, must not say that its outputs are one ``expand_ref`` away.
Only those notes lose the line: a note standing for exchanges whose outputs are stored says what
it said before the outage, so it stays the same text from call to call (a note that changes
breaks a provider's cache of everything after it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._layout import is_condensed, is_note
from ctxplugin._messages import META_KEY, annotation, exchange_spans
from ctxplugin.history import without_expand_hint

UNSTORED_MARK = "unstored"
"""The annotation key of a condensed note that stands for an output the CAS could not store."""


def unpromised_notes(
    before: Sequence[BaseMessage], history: Sequence[BaseMessage], unstored: Collection[str]
) -> list[BaseMessage]:
    """``history``, the history stage's view of ``before``, with each condensed note whose
    exchanges (its ``condensed`` span, numbered as :func:`exchange_spans` numbers ``before``'s)
    hold one of the ``unstored`` outputs without its line on ``expand_ref``, and marked."""
    numbers = [
        number
        for number, (start, end) in enumerate(exchange_spans(before))
        if any(isinstance(m, ToolMessage) and m.tool_call_id in unstored for m in before[start:end])
    ]
    out: list[BaseMessage] = []
    for message in history:
        span = annotation(message).get("condensed") if is_condensed(message) else None
        if (
            isinstance(span, list)
            and len(span) == 2
            and all(isinstance(n, int) for n in span)
            and any(span[0] <= n <= span[1] for n in numbers)
        ):
            text = message.content
            meta = {
                **message.additional_kwargs,
                META_KEY: {**annotation(message), UNSTORED_MARK: True},
            }
            bare = without_expand_hint(text) if isinstance(text, str) else text
            message = message.model_copy(update={"content": bare, "additional_kwargs": meta})
        out.append(message)
    return out


def unpromised_dropped(
    before: Sequence[BaseMessage], history: list[BaseMessage], unstored: Collection[str]
) -> list[BaseMessage]:
    """``history``, what the budget left of ``before``, with no word of ``expand_ref`` in the
    note of the exchanges it dropped when they hold one of the ``unstored`` outputs (shown in
    ``before``, or in a condensed note standing for one)."""
    shown = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
    kept = {id(m) for m in history}
    dropped = any(
        isinstance(m, ToolMessage) and m.tool_call_id in unstored and m.tool_call_id not in shown
        for m in before
    ) or any(
        annotation(m).get(UNSTORED_MARK) and id(m) not in kept for m in before if is_condensed(m)
    )
    if not dropped:
        return history
    out: list[BaseMessage] = []
    for message in history:
        text = message.content
        hinted = is_note(message) and not is_condensed(message)  # the note of the exchanges dropped
        bare = without_expand_hint(text) if hinted and isinstance(text, str) else text
        out.append(message if bare == text else message.model_copy(update={"content": bare}))
    return out


__all__ = ["UNSTORED_MARK", "unpromised_dropped", "unpromised_notes"]
