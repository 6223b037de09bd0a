"""Which fact scope a user's sentence is said in: its own words ("what if", "draft"), or those
of the sentence that opened the run it belongs to.

A draft or a supposition often opens a message and goes on over several sentences: "Draft:" on
a line of its own, "Here is a draft of the plan: the venue is Hall C. My budget is $900.",
"Suppose we move the event. Then the venue is Hall C." Read one sentence at a time, the
sentences after the opener were plain statements: they replaced the current venue and budget
and the view marked the user's real plan outdated. An opener's scope is carried over:

- after a sentence whose words before a colon say draft or hypothetical ("Draft:", "Here is a
  draft of the plan: ..."), to the end of the message or to a label saying what is settled
  ("Final:", "Confirmed:");
- after a hypothetical sentence, to each next sentence that follows from it ("Then ...", "...
  would ..."), until one does not. "I suppose", "I'd imagine" and "suppose so" give an opinion,
  not a supposition: they carry nothing.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

from ctxplugin.facts.model import FactScope

HYPOTHETICAL = re.compile(r"\b(what if|suppose|supposing|hypothetically|imagine|if we were to|in theory)\b", re.IGNORECASE)
DRAFT = re.compile(r"\b(draft|tentative(?:ly)?|proposal|proposed)\b", re.IGNORECASE)
_FOLLOWS = re.compile(r"^(?:and\s+|so\s+)?then\b|\bwould\b", re.IGNORECASE)
"""A sentence that follows from the supposition before it ("Then the venue is Hall C", "My
budget would be $900")."""
_OPINION = re.compile(r"\b(?:i|we)(?:\s+(?:do|would)|['\u2019]d)?\s+(?:suppose|imagine)\b|\b(?:suppose|imagine)\s+so\b", re.IGNORECASE)
"""Words of opinion that HYPOTHETICAL's words are part of ("I suppose that's fine", "suppose so")."""
_LABEL_COLON = re.compile(r"(?<!\d):|:(?!\d)")
"""A colon ending a label ("Draft:", "Step 2:"), not one between the digits of a time ("at 5:00")."""
_SETTLED = re.compile(
    r"^\W*(?:final|finali[sz]ed|decided|decision|confirmed|official)(?:\s+(?:version|plan|answer|decision|choice))?\W*$", re.IGNORECASE
)
"""A label saying what follows is settled ("Final:", "Confirmed:"): the draft before it has ended."""


def scope_of(sentence: str) -> FactScope:
    """``hypothetical`` or ``draft`` when the sentence's words say so, else ``global``."""
    return "hypothetical" if HYPOTHETICAL.search(sentence) else "draft" if DRAFT.search(sentence) else "global"


def carried(sentences: Iterable[str]) -> Iterator[tuple[str, FactScope | None]]:
    """Each of a user message's ``sentences`` with the scope an earlier sentence carries into it
    (None when none does)."""
    whole: FactScope | None = None  # "Draft:" covers the rest of the message
    supposed = False  # the sentence before was a supposition, or followed from one
    for sentence in sentences:
        label = _LABEL_COLON.search(sentence)  # "Draft:", not the colon of "5:00"
        head, colon = (sentence[: label.start()], True) if label else (sentence, False)
        if whole is not None and colon and _SETTLED.match(head):
            whole = None  # "Draft: ... Final: ...": what follows the label is not the draft
        if whole is not None:
            yield sentence, whole
            continue
        follows = supposed and _FOLLOWS.search(sentence) is not None
        yield sentence, ("hypothetical" if follows else None)
        if colon and scope_of(head) != "global":
            whole = scope_of(head)
        supposed = follows or HYPOTHETICAL.search(_OPINION.sub(" ", sentence)) is not None


__all__ = ["DRAFT", "HYPOTHETICAL", "carried", "scope_of"]
