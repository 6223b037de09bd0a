"""capture(): a tool output in, the compact text the conversation carries out."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

from langchain_core.messages import ToolMessage

from ctxplugin._aside import count_beside, counts_beside
from ctxplugin._block_text import is_media_block
from ctxplugin._graphemes import head
from ctxplugin._lru import RECENT_MESSAGES, PerMessage
from ctxplugin._messages import META_KEY
from ctxplugin._untrusted import storable_text
from ctxplugin.cas._blocks import blocks_label, blocks_text, is_text_block
from ctxplugin.cas._canon import (
    content_hash,
    kind_slug,
    make_ref,
    parse_json,
    raw_hash,
)
from ctxplugin.cas.store import CASItem, CASStore
from ctxplugin.cas.summarize import summarize
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope, Visibility
from ctxplugin.tokens import TokenCounter, blocks_tokens, content_text, count_cached


@dataclass(frozen=True)
class Captured:
    """The outcome of :func:`capture`.

    Attributes:
        text: what the conversation carries: summary plus ref, or the original on pass-through.
        ref_id: the ref of the stored original, None on pass-through.
        passthrough: the original is kept as is (small, an error, not text, or not worth it).
        created: a new grant was written (False when this scope had stored it already).
        original_tokens: tokens of the original text (extrapolated above 256 KB).
        compact_tokens: tokens of ``text``.
        shape: what the summary took the output for (``code``, ``log``, ``json``...; see
            :func:`~ctxplugin._text_shapes.detect_text_shape`), None on pass-through.

    An output with non-text blocks (images) keeps them in view after ``text``
    (:func:`compact_content`); its stored original is the JSON of all its blocks.
    """

    text: str
    ref_id: str | None
    passthrough: bool
    created: bool
    original_tokens: int
    compact_tokens: int
    shape: str | None = None


_SHOWN: PerMessage[tuple[str, str, ToolMessage]] = PerMessage(RECENT_MESSAGES)


def non_text_blocks(content: Any) -> list[Any]:
    """The blocks of a message content that are not text (images, files, audio), in order."""
    if not isinstance(content, list):
        return []
    return [b for b in content if not is_text_block(b)]


def _media_blocks(content: Any) -> list[Any]:
    """The blocks of a tool output a compact form keeps whole (images, audio, files), in order;
    data blocks are read as text (:func:`~ctxplugin.cas._blocks.is_data_block`)."""
    return [b for b in non_text_blocks(content) if is_media_block(b)]


def compact_content(text: str, content: Any) -> str | list[Any]:
    """What a view shows for an output stored with compact form ``text``: ``text`` alone, or,
    when the output (``content``, the original or this very form) has non-text blocks, a text
    block of ``text`` followed by each of them: an image is never summarised away."""
    blocks = _media_blocks(content)
    return [{"type": "text", "text": text}, *blocks] if blocks else text


def shows_compact(content: Any, text: str) -> bool:
    """Whether ``content`` is the compact form ``text`` (with its non-text blocks), not the original."""
    if isinstance(content, str) or not isinstance(content, list) or not content:
        return content == text
    first = content[0]
    return isinstance(first, dict) and first.get("text") == text and content[1:] == _media_blocks(content)


def compact_message(message: ToolMessage, text: str, ref: str) -> ToolMessage:
    """``message`` as a view shows it once its output is stored: ``text`` (the summary and
    ``ref``) in place of the output's text, its non-text blocks, ids, status and artifact kept
    (a ``content_and_artifact`` tool's artifact is never sent to the model, but is the host's). The same
    message gives the same object on every call (memoised per message, bounded), so what later
    stages derive from it is found by identity."""
    hit = _SHOWN.get(message)
    if hit is not None and hit[0] == text and hit[1] == ref:
        return hit[2]
    shown = ToolMessage(
        content=compact_content(text, message.content),
        tool_call_id=message.tool_call_id,
        name=message.name,
        id=message.id,
        status=message.status,
        artifact=message.artifact,
        additional_kwargs={META_KEY: {"ref": ref}},
    )
    _SHOWN.put(message, (text, ref, shown))
    return shown


def _text_of(content: Any) -> tuple[str, bool]:
    """The text of a ToolMessage content, and whether it is text only (images stay in place)."""
    if isinstance(content, str):
        return content, True
    if isinstance(content, list):
        text_only = all(is_text_block(b) for b in content)
        return (content_text(content) if text_only else blocks_text(content)), text_only
    return str(content), False


_FAILED_EXIT = re.compile(r"exit (?!0\b)-?\d+")  # how a summary of a failed command starts


SUMMARY_BOUND = 2
"""A summary body is cut past this many times ``summary_tokens`` (plus the error allowance of a
failed output)."""


def bounded(text: str, limit: int, counter: TokenCounter) -> str:
    """``text`` within ``limit`` tokens: whole lines while they fit, then a note of what was cut.

    The hard bound on every summary, whatever the summarizer made of the output (a line of
    dense text or CJK can cost far more tokens than its characters suggest).
    """
    if counter.count(text) <= limit:
        return text
    lines = text.split("\n")
    note = f"… {{n}} more summary lines cut at {limit} tokens (expand_ref for the original)"
    room = limit - counter.count(note.format(n=len(lines))) - 1
    kept: list[str] = []
    used = 0
    for line in lines:
        cost = counter.count(line) + 1
        if used + cost > room:
            if not kept and room > 8:  # one huge first line: keep its start
                kept.append(_cut(line, room - 1, counter))
            break
        kept.append(line)
        used += cost
    kept.append(note.format(n=len(lines) - len(kept)))
    return "\n".join(kept)


def _cut(line: str, limit: int, counter: TokenCounter) -> str:
    """The longest start of ``line`` within ``limit`` tokens (with an ellipsis), by bisection."""
    low, high = 0, min(len(line), limit * 16)
    while low < high:
        mid = (low + high + 1) // 2
        if counter.count(line[:mid] + "…") <= limit:
            low = mid
        else:
            high = mid - 1
    return head(line, low) + "…"


EXPAND_MORE = " · expand_ref for more]"
"""How the ref line of a compact form ends (see :func:`compact_text`)."""


def compact_text(ref_id: str, label: str, original_tokens: int, summary: str) -> str:
    """The ref line followed by the summary; the ref comes first so trimming keeps it."""
    head = f"[{ref_id} · {label} · {original_tokens:,} tokens stored{EXPAND_MORE}"
    return f"{head}\n{summary}" if summary else head


def shows_ref(text: str, ref_id: str) -> bool:
    """Whether ``text`` begins with the ref line of ``ref_id`` (see :func:`compact_text`): the
    compact form of the output stored under it, not the output itself."""
    return text.startswith(f"[{ref_id} ")


def _shared_with(visibility: Visibility, scope: Scope) -> Visibility:
    """``visibility`` as far as ``scope`` can give it: a scope without a user id (a workspace id)
    cannot share with its user's (workspace's) sessions, and a grant to them would be readable
    by none, its own session included; its outputs are granted to its session alone."""
    if visibility == "user" and scope.user_id is None:
        return "session"
    if visibility == "workspace" and scope.workspace_id is None:
        return "session"
    return visibility


def _granted(item: CASItem, store: CASStore, scope: Scope, config: CASConfig) -> bool:
    """Store ``item`` and grant it to ``scope`` as every stored output is granted (the
    configured visibility as far as ``scope`` can give it, the configured TTL); whether a new
    grant was written."""
    return store.put(item, scope, visibility=_shared_with(config.visibility, scope), ttl_seconds=config.ttl_seconds)


def store_text(text: str, *, store: CASStore, scope: Scope, config: CASConfig, kind: str = "user") -> tuple[str, bool]:
    """Store ``text`` whole (a user's message the budget cuts) as a tool output is stored: under
    ``ref:<kind>:<hash16>``, granted to ``scope`` with the visibility and TTL of tool outputs.
    The same text gives the same ref.

    Returns:
        The ref, and whether a new grant was written.

    Raises:
        StoreError: the store failed.
    """
    digest = content_hash(text)
    ref_id = make_ref(kind, digest)
    item = CASItem(ref_id=ref_id, content_hash=digest, raw_hash=raw_hash(text), kind=kind, content=text)
    return ref_id, _granted(item, store, scope, config)


def capture(
    content: Any,
    *,
    store: CASStore,
    scope: Scope,
    config: CASConfig,
    counter: TokenCounter,
    tool_name: str | None,
    is_error: bool = False,
) -> Captured:
    """Store a tool output and return the compact text the conversation should carry.

    Outputs at or below ``config.passthrough_tokens``, error outputs up to
    ``config.error_passthrough_tokens``, and outputs whose compact form would not be smaller are
    passed through untouched and not stored. Content with non-text blocks (images) is always
    stored, so that it stays recoverable when the history lets its exchange go; its view keeps
    the blocks (see :func:`_capture_blocks`). :func:`compacted` then :func:`stored`.

    Args:
        content: a ``ToolMessage.content`` (a string or a list of content blocks).
        store: where originals go.
        scope: the owner of the stored output.
        config: thresholds, summary size, TTL and visibility.
        counter: token counter.
        tool_name: the tool's name; its slug is the ref's ``<kind>``.
        is_error: the tool reported failure (``ToolMessage.status == "error"``).

    Raises:
        StoreError: the store failed (the engine passes the original through and warns).
    """
    made = compacted(content, config=config, counter=counter, tool_name=tool_name, is_error=is_error)
    return stored(made, store=store, scope=scope, config=config)


@dataclass(frozen=True, slots=True)
class Compacted:
    """A tool output summarized, not yet stored (:func:`compacted`): what :func:`stored` sends
    to the CAS, kept by a caller whose store failed so that trying again summarizes nothing.

    Attributes:
        captured: what the conversation carries once it is stored (``created`` False).
        item: what is stored; None when the output passes through, unstored.
    """

    captured: Captured
    item: CASItem | None


def stored(made: Compacted, *, store: CASStore, scope: Scope, config: CASConfig) -> Captured:
    """``made`` stored and granted to ``scope`` (nothing for an output passed through).

    Raises:
        StoreError: the store failed.
    """
    if made.item is None:
        return made.captured
    return replace(made.captured, created=_granted(made.item, store, scope, config))


def compacted(content: Any, *, config: CASConfig, counter: TokenCounter, tool_name: str | None, is_error: bool = False) -> Compacted:
    """The compact form of a tool output and the item that stores it, without the store (see
    :func:`capture`): the summary made, the hashes taken."""
    text, text_only = _text_of(content)
    if config.enabled and not text_only and isinstance(content, list):
        blocks = _capture_blocks(content, text, config=config, counter=counter, tool_name=tool_name, is_error=is_error)
        if blocks is not None:
            return blocks
    if not (config.enabled and text_only):
        tokens = count_cached(text, counter)
        return Compacted(Captured(text, None, True, False, tokens, tokens), None)
    limit = config.error_passthrough_tokens if is_error else config.passthrough_tokens

    made = partial(_made, text, config, counter, is_error)
    # counted into the memo prepare counts the same text in, once; a long output while a worker
    # makes its summary, any other counted first: one of few tokens is passed through unsummarized
    if counts_beside(text, counter):
        tokens, summary = count_beside(text, counter, made)
    else:
        tokens = count_cached(text, counter)
        if tokens <= limit:
            return Compacted(Captured(text, None, True, False, tokens, tokens), None)
        summary = made()
    if tokens <= limit:  # a long text of very few tokens: the summary was made for nothing
        return Compacted(Captured(text, None, True, False, tokens, tokens), None)
    kind = kind_slug(tool_name, summary.shape)
    ref_id = make_ref(kind, summary.digest)
    compact = compact_text(ref_id, storable_text(summary.label), tokens, summary.body)
    compact_tokens = counter.count(compact)
    if compact_tokens >= tokens:
        return Compacted(Captured(text, None, True, False, tokens, tokens), None)
    item = CASItem(ref_id=ref_id, content_hash=summary.digest, raw_hash=summary.raw_digest, kind=kind, content=text, summary=compact)
    return Compacted(Captured(compact, ref_id, False, False, tokens, compact_tokens, summary.shape), item)


@dataclass(frozen=True, slots=True)
class _Summarized:
    """What :func:`capture` makes of a text output before its count is known."""

    shape: str
    label: str
    body: str
    digest: str
    raw_digest: str


def _made(text: str, config: CASConfig, counter: TokenCounter, is_error: bool) -> _Summarized:
    """The summary of ``text`` within its hard bound, and its hashes."""
    parsed = parse_json(text)
    summary = summarize(
        text, parsed, counter, config.summary_tokens, is_error=is_error, error_budget=config.error_passthrough_tokens
    )
    failed = is_error or _FAILED_EXIT.match(summary.text) is not None
    # summaries aim at summary_tokens; the hard bound leaves a shape's structure (a listing's
    # paths, a table's header) room to overshoot that aim up to twice, and no further
    body_limit = SUMMARY_BOUND * config.summary_tokens + (config.error_passthrough_tokens if failed else 0)
    # lone surrogates (undecodable bytes) stay in the stored original, never in the summary
    body = bounded(storable_text(summary.text), body_limit, counter)
    return _Summarized(summary.shape, summary.label, body, content_hash(text, parsed), raw_hash(text))


def _capture_blocks(
    content: list[Any],
    text: str,
    *,
    config: CASConfig,
    counter: TokenCounter,
    tool_name: str | None,
    is_error: bool,
) -> Compacted | None:
    """:func:`capture` of an output with non-text blocks: the JSON of every block stored under a
    ref; the compact text is the ref line and the output's text (its summary when the text
    alone is above the pass-through threshold). None when the blocks are not JSON (passed
    through whole, unstored)."""
    try:
        original = json.dumps(content, ensure_ascii=False)
    except (TypeError, ValueError):
        return None
    others = _media_blocks(content)
    images = blocks_tokens(others, counter)
    tokens = count_cached(text, counter)
    limit = config.error_passthrough_tokens if is_error else config.passthrough_tokens
    shape = None
    body = storable_text(text)
    if tokens > limit:
        summary = summarize(text, parse_json(text), counter, config.summary_tokens, is_error=is_error,
                            error_budget=config.error_passthrough_tokens)
        body = bounded(storable_text(summary.text), SUMMARY_BOUND * config.summary_tokens, counter)
        shape = summary.shape
    digest = content_hash(original, parse_json(original))
    kind = kind_slug(tool_name, shape or "blocks")
    ref_id = make_ref(kind, digest)
    compact = compact_text(ref_id, blocks_label(others) if others else storable_text(shape or "blocks"), tokens + images, body)
    item = CASItem(ref_id=ref_id, content_hash=digest, raw_hash=raw_hash(original), kind=kind, content=original, summary=compact)
    return Compacted(Captured(compact, ref_id, False, False, tokens + images, counter.count(compact) + images, shape), item)
