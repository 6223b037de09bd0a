"""History: the conversation compressed by age to fit the room it has.

Recent exchanges stay verbatim, older ones are trimmed, the oldest reduced to one-line gists
and, when even that does not fit, condensed into context notes (see :mod:`ctxplugin.history`).
The limits come from the room stage, so the fit stage has nothing left to drop and what is left
out changes only when tier boundaries move (cache-stable).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from langchain_core.messages import BaseMessage

from ctxplugin.config import HistoryConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.history import BackgroundSummarizer, HistoryBudget, compress_history
from ctxplugin.stages._attachments import UNSTORED, Attachments, condensed_attachments
from ctxplugin.stages._unstored_notes import unpromised_notes
from ctxplugin.stages.view import CallView
from ctxplugin.tokens import TokenCounter


@dataclass(frozen=True, slots=True)
class CompressHistory:
    """Compress ``history``; fill ``compressed``, ``omitted`` and ``facts_anchor`` (where the
    verbatim tier starts).

    Attributes:
        config: the history settings.
        counter: counts the history.
        summarizer: the background gist writer, if any (``prepare`` never waits for it).
        attachments: where a user's attachments are stored once their message is condensed,
            so that the note standing for it names them and their ref (None: not named).
    """

    name: ClassVar[str] = "history"
    config: HistoryConfig
    counter: TokenCounter
    summarizer: BackgroundSummarizer | None = None
    attachments: Attachments | None = None

    def apply(self, view: CallView) -> CallView:
        if view.room is None:
            raise InvalidInputError("the history stage needs view.room: run the room stage first")
        budget, room = view.room.budget, view.room.total
        if view.room.whole and budget.total != room:
            # max_tokens is what compression aims for once it starts; until the conversation
            # outgrows the room it has, it is sent as it is. Once it has, it is tiered from then
            # on, even where its stored (shorter) form would fit again: sending that whole would
            # only grow back to the room and be cut again, each cut a cache miss on all of it.
            budget = HistoryBudget(total=room, messages=budget.messages, tool_results=budget.tool_results)
        compressed = compress_history(
            view.history,  # (copied there)
            config=self.config,
            counter=self.counter,
            budget=budget,
            summarizer=self.summarizer,
            session=view.scope.key(),
            notes_from=view.unmarked,
            stamp=view.history_stamp,
        )
        body = compressed.messages
        if view.unstored:  # the CAS is down: a note for an output it could not store offers no ref
            body = unpromised_notes(view.history, body, view.unstored)
        if self.attachments is not None and self.attachments.holds_media(view.history, view.history_stamp, view.scope):
            body, noted = condensed_attachments(view.history, body, self.attachments, view.scope)
            if noted.used:
                view = view.override(refs_created=(*view.refs_created, *noted.created),
                                     refs_used=tuple(dict.fromkeys((*view.refs_used, *noted.used))),
                                     stored_texts={**view.stored_texts, **noted.texts})
            if noted.failed is not None:
                view = (view.degraded if noted.fresh else view.warn)(f"{UNSTORED}: {noted.failed}")
        anchor: BaseMessage | None = None
        if compressed.verbatim_from is not None and compressed.verbatim_from < len(body):
            anchor = body[compressed.verbatim_from]
        view = view.override(
            history=tuple(body),
            compressed=compressed.compressed_count,
            omitted=compressed.omitted_exchanges,
            facts_anchor=anchor,
        )
        if self.summarizer is not None:
            view = view.warn(*self.summarizer.take_warnings(view.scope.key()))
        return view


__all__ = ["CompressHistory"]
