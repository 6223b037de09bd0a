"""Zero-LLM compressors: trim (head and tail kept, middle elided) and gist (one line).

Both are deterministic, so the same message always compresses to the same text and providers
can keep serving it from their prompt cache. Neither ever drops an exact value: identifiers and
error lines from the part that is cut are listed after the elision marker (see
:mod:`ctxplugin.history.identifiers`), and a stored tool output keeps its ref. A result that
would not be smaller than its input is discarded in favour of the input.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Callable

from ctxplugin._graphemes import head, tail
from ctxplugin.history.identifiers import alert_lines, identifiers, missing
from ctxplugin.tokens import TokenCounter, count_cached, has_count_memo

GIST_PREFIX = "[gist] "
"""Marks a message reduced to one line, so the model knows the detail was condensed."""

_SPACE = re.compile(r"\s+")
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
_NOISE_LINE = re.compile(r"^\W*$|^</?\w+>$")


class MemoCounter:
    """A token counter that remembers the counts of texts it has seen.

    History compression counts the same old messages and the same short pieces on every call.
    A text of 64 characters or more is counted as :func:`~ctxplugin.tokens.count_cached` counts
    it for ``counter``: in the memo the other stages use, so a message's text is encoded once
    whichever stage counts it first (and ``counts_as`` lets :func:`~ctxplugin.tokens.count_message`
    share that counter's memo of whole messages too). Shorter texts are remembered here, by
    the text itself, and so are longer ones, by their sha1, for a counter the shared memo cannot
    keep (one that cannot be weakly referenced)."""

    def __init__(self, counter: TokenCounter, size: int = 65536) -> None:
        self.name = counter.name
        self.counts_as = counter
        self._counter = counter
        self._shared = has_count_memo(counter)
        self._size = size
        self._counts: OrderedDict[str | bytes, int] = OrderedDict()
        self._lock = threading.Lock()

    def count(self, text: str) -> int:
        key: str | bytes = text
        if len(text) >= 64:
            if self._shared:
                return count_cached(text, self._counter)
            key = hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()
        with self._lock:
            hit = self._counts.get(key)
            if hit is not None:
                self._counts.move_to_end(key)
                return hit
        value = count_cached(text, self._counter)
        with self._lock:
            self._counts[key] = value
            while len(self._counts) > self._size:
                self._counts.popitem(last=False)
        return value


MEMO_COUNTERS = 32
"""Counters whose :class:`MemoCounter` is kept (the least recently used goes first): engines
built one after another with counters of their own do not each keep theirs for good."""

_MEMOS: OrderedDict[int, tuple[TokenCounter, MemoCounter]] = OrderedDict()
_MEMOS_LOCK = threading.Lock()


def memo_counter(counter: TokenCounter) -> MemoCounter:
    """The shared :class:`MemoCounter` of ``counter`` (``counter`` itself if it is one)."""
    if isinstance(counter, MemoCounter):
        return counter
    with _MEMOS_LOCK:
        entry = _MEMOS.get(id(counter))
        if entry is None or entry[0] is not counter:
            entry = (counter, MemoCounter(counter))
            _MEMOS[id(counter)] = entry
            while len(_MEMOS) > MEMO_COUNTERS:
                _MEMOS.popitem(last=False)
        _MEMOS.move_to_end(id(counter))
        return entry[1]


def head_within(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest prefix of ``text`` within ``max_tokens`` (binary search on characters) that
    ends where a character as a reader sees it ends (see :mod:`ctxplugin._graphemes`)."""
    return head(text, _longest(text, max_tokens, counter, lambda size: text[:size]))


def tail_within(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """The longest suffix of ``text`` within ``max_tokens``, starting where a character does."""
    return tail(text, _longest(text, max_tokens, counter, lambda size: text[len(text) - size :]))


def _longest(text: str, max_tokens: int, counter: TokenCounter, part: Callable[[int], str]) -> int:
    """The largest ``size`` whose ``part(size)`` of ``text`` fits ``max_tokens``."""
    if max_tokens <= 0:
        return 0
    if counter.count(text) <= max_tokens:
        return len(text)
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count(part(middle)) <= max_tokens:
            low = middle
        else:
            high = middle - 1
    return low


def _keeps(text: str, kept: str, extra: list[str] | None = None) -> str:
    """What must follow the elision marker so that every value of ``text`` stays visible."""
    alerts = [line for line in alert_lines(text) if line not in kept]
    seen = kept + "\n" + "\n".join(alerts)
    values = missing(identifiers(text), seen)
    for value in extra or []:
        if value not in seen and value not in values:
            values.append(value)
    parts: list[str] = []
    if alerts:
        parts.append("\n".join(alerts))
    if values:
        parts.append("keeps: " + " ".join(values))
    return "\n".join(parts)


def trim_text(text: str, *, max_tokens: int, counter: TokenCounter, must_keep: list[str] | None = None) -> str:
    """Keep the head and tail of ``text`` within about ``max_tokens``; elide the middle.

    Error lines and identifiers of the elided middle are listed at the elision point, so the
    result may exceed ``max_tokens`` when the middle is dense with them. Lines are kept whole
    where possible.

    Args:
        text: the text to trim.
        max_tokens: size target for head plus tail.
        counter: token counter.
        must_keep: values that must appear in the result (e.g. a ref).

    Returns:
        The trimmed text, or ``text`` itself when trimming would not make it smaller.
    """
    total = counter.count(text)
    if total <= max_tokens:
        return text
    lines = text.splitlines()
    head_budget = max_tokens * 3 // 5
    tail_budget = max_tokens - head_budget
    head: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line) + 1
        if used + cost > head_budget:
            break
        head.append(line)
        used += cost
    tail: list[str] = []
    used = 0
    for line in reversed(lines[len(head) :]):
        cost = counter.count(line) + 1
        if used + cost > tail_budget:
            break
        tail.append(line)
        used += cost
    tail.reverse()
    middle_lines = lines[len(head) : len(lines) - len(tail)]
    if not head and middle_lines:  # a first line longer than the head budget
        first = middle_lines[0]
        head = [head_within(first, head_budget, counter)]
        middle_lines = [first[len(head[0]) :], *middle_lines[1:]]
    head_text, tail_text = "\n".join(head), "\n".join(tail)
    middle = "\n".join(middle_lines)
    elided = counter.count(middle)
    keeps = _keeps(text, head_text + "\n" + tail_text, must_keep)
    marker = f"[… {elided} tokens elided …]"
    pieces = [p for p in (head_text, marker, keeps, tail_text) if p]
    result = "\n".join(pieces)
    return result if counter.count(result) < total else text


def _first_sentence(text: str) -> str:
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and not _NOISE_LINE.match(stripped):
            return _SENTENCE_END.split(_SPACE.sub(" ", stripped), maxsplit=1)[0]
    return _SPACE.sub(" ", text).strip()


def gist_text(
    text: str,
    *,
    max_tokens: int,
    counter: TokenCounter,
    lead: str | None = None,
    must_keep: list[str] | None = None,
) -> str:
    """Reduce ``text`` to one line: a lead sentence, then every error line and identifier.

    Args:
        text: the text to condense.
        max_tokens: size target of the lead sentence (identifiers and error lines come on top).
        counter: token counter.
        lead: the lead to use instead of the first sentence (a model-written summary), shown
            whole: :class:`~ctxplugin.history.summarizer.BackgroundSummarizer` caps it at ``artifact_tokens``, the size its
            prompt asks for.
        must_keep: values that must appear in the result (e.g. a ref).

    Returns:
        The gist, or ``text`` itself when the gist would not be smaller.
    """
    total = counter.count(text)
    if lead is not None:  # shown whole: its writer was asked for its size and capped it there
        short = _SPACE.sub(" ", lead).strip()
    else:
        sentence = _first_sentence(text)
        short = head_within(sentence, max_tokens, counter)
        if short != sentence:
            short = short.rstrip() + "…"
    alerts = [line for line in alert_lines(text) if line not in short]
    values = missing(identifiers(text), short + " " + " ".join(alerts))
    for value in must_keep or []:
        if value not in short and value not in values:
            values.append(value)
    parts = [GIST_PREFIX + short if short else GIST_PREFIX.strip()]
    parts.extend(alerts)
    if values:
        parts.append("keeps: " + " ".join(values))
    result = " | ".join(parts)
    return result if counter.count(result) < total else text


__all__ = ["GIST_PREFIX", "MemoCounter", "gist_text", "head_within", "memo_counter", "tail_within", "trim_text"]
