"""What the system prompt states, for the facts block to leave to it.

The system prompt is sent whole on every call and is not stored as facts. A tool output that
states a value under the same key ("Max discount is 90%" beside the prompt's "Max discount is
15%") would then be the only fact of that key, shown in a block that calls its facts current:
text a tool returned would stand in for what the system prompt says. The keys the rules read
in the prompt let the facts stage leave such tool facts out (the output itself stays in view).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import islice

from ctxplugin.facts._text import sentences
from ctxplugin.facts.model import normalize_key
from ctxplugin.facts.rules import RuleExtractor

_READER = RuleExtractor(max_per_message=10_000)
_PER_READ = 30
"""Sentences given to the rules at once: they read the first 40 sentences of a text."""
_MAX_SENTENCES = 600
"""Sentences of the prompt read at most (about 25k words: a prompt that changes on every call
costs its reading on every call that shows a keyed tool fact)."""


@lru_cache(maxsize=32)
def stated_keys(texts: Sequence[str]) -> frozenset[str]:
    """The keys of the statements the rules read in ``texts`` (the system prompt's parts), a
    few sentences at a time so that a long prompt is read to its end. Memoised: agents share a
    few system prompts, sent on every call."""
    keys: set[str] = set()
    for chunk in _chunks(texts):
        for draft in _READER.from_text(chunk):
            key = normalize_key(draft.key)
            if key is not None and draft.scope in ("global", "session"):
                keys.add(key)
    return frozenset(keys)


def _chunks(texts: Sequence[str]) -> Iterator[str]:
    for text in texts:
        parts = list(islice(sentences(text), _MAX_SENTENCES))  # split as the rules split them
        for start in range(0, len(parts), _PER_READ):
            yield "\n".join(parts[start : start + _PER_READ])


__all__ = ["stated_keys"]
