"""What a constraint the user sets limits: a budget, a deadline, a capacity, a schedule, or else
a policy (``FactDraft.constraint_type``)."""

from __future__ import annotations

import re

_CONSTRAINT_TYPE = (
    (re.compile(r"\b(?:budget|cost|spend|price|discount)|[$€£]\s?\d", re.IGNORECASE), "budget"),
    (re.compile(r"\b(deadline|due|by (?:mon|tue|wed|thu|fri|sat|sun)\w*|until)\b", re.IGNORECASE), "deadline"),
    (re.compile(r"\b(capacity|seats|headcount|max(?:imum)? \d+ (?:people|users|items))\b", re.IGNORECASE), "capacity"),
    (re.compile(r"\b(?:before|after|earlier than|later than|between)\b", re.IGNORECASE), "schedule"),
)


def constraint_type_of(sentence: str) -> str:
    """The kind of limit a constraint ``sentence`` sets (the first that fits, else ``policy``)."""
    return next((name for pattern, name in _CONSTRAINT_TYPE if pattern.search(sentence)), "policy")


__all__ = ["constraint_type_of"]
