"""Which user message a fact was read from: what a store's ``from_messages`` finds it by."""

from __future__ import annotations

from ctxplugin.facts.model import Fact

AFTER = "after"
"""The annotation the facts stage gives a user message: the id of the message just before it in
the conversation (``additional_kwargs["ctxplugin"]["after"]``), kept with its facts
(:attr:`~ctxplugin.facts.model.Source.after`)."""


def said_by(fact: Fact) -> str | None:
    """The ref of the user message ``fact`` was read from (a conversation source, no call id),
    else ``None``."""
    source = fact.source
    return source.ref if source.type == "conversation" and source.call_id is None else None


__all__ = ["AFTER", "said_by"]
