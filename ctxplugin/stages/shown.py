"""Shown: facts the compressed history already shows are left out of the facts block.

A fact read from a message the view carries unchanged, or whose statement a user message of the
view holds word for word, adds nothing. While the whole history fits, the facts block is then
empty and the view is the conversation as it was, so a provider's prompt cache serves every
call but the newest turn.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from langchain_core.messages import BaseMessage, HumanMessage

from ctxplugin._messages import source_refs
from ctxplugin.budget import FactLine
from ctxplugin.facts.render import normalized, restates
from ctxplugin.stages.view import CallView
from ctxplugin.tokens import content_text


@dataclass(frozen=True, slots=True)
class SkipShown:
    """Drop from ``facts`` the lines the history already shows."""

    name: ClassVar[str] = "shown"

    def apply(self, view: CallView) -> CallView:
        if not view.facts:
            return view
        return view.override(facts=not_shown(view.facts, view.original, view.history))


def not_shown(lines: Sequence[FactLine], raw: Sequence[BaseMessage], view: Sequence[BaseMessage]) -> tuple[FactLine, ...]:
    """The lines of ``lines`` that ``view`` does not show: ``raw`` is the conversation as
    received, so a message of ``view`` found in it is shown unchanged."""
    originals = set(map(id, raw))
    refs: set[str] = set()
    said: list[str] = []
    for message in view:
        if id(message) not in originals:
            continue
        refs.update(source_refs(message))
        if isinstance(message, HumanMessage):
            said.append(content_text(message.content))
    spoken = normalized(tuple(said))  # memoised: the same user messages come back call after call
    return tuple(
        line
        for line in lines
        if not (line.source_ref is not None and line.source_ref in refs)
        and not (line.statement and restates(line.statement, spoken))
    )


__all__ = ["SkipShown", "not_shown"]
