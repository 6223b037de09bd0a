"""capture(): a tool output in, the compact text the conversation carries out."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

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
from ctxplugin.scope import Scope
from ctxplugin.tokens import TokenCounter, content_text, count_text


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
    """

    text: str
    ref_id: str | None
    passthrough: bool
    created: bool
    original_tokens: int
    compact_tokens: int


def _text_of(content: Any) -> tuple[str, bool]:
    """The text of a ToolMessage content, and whether it is text only (images stay in place)."""
    if isinstance(content, str):
        return content, True
    if isinstance(content, list):
        text_only = all(isinstance(b, str) or (isinstance(b, dict) and isinstance(b.get("text"), str)) for b in content)
        return content_text(content), text_only
    return str(content), False


def compact_text(ref_id: str, label: str, original_tokens: int, summary: str) -> str:
    """The ref line followed by the summary; the ref comes first so trimming keeps it."""
    head = f"[{ref_id} · {label} · {original_tokens:,} tokens stored · expand_ref for more]"
    return f"{head}\n{summary}" if summary else head


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

    Outputs at or below ``config.passthrough_tokens``, content with non-text blocks, error
    outputs up to ``config.error_passthrough_tokens``, and outputs whose compact form would not
    be smaller are passed through untouched and not stored.

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
    text, text_only = _text_of(content)
    tokens = count_text(text, counter)
    limit = config.error_passthrough_tokens if is_error else config.passthrough_tokens
    if not config.enabled or not text_only or tokens <= limit:
        return Captured(text, None, True, False, tokens, tokens)
    parsed = parse_json(text)
    summary = summarize(
        text, parsed, counter, config.summary_tokens, is_error=is_error, error_budget=config.error_passthrough_tokens
    )
    digest = content_hash(text, parsed)
    kind = kind_slug(tool_name, summary.shape)
    ref_id = make_ref(kind, digest)
    # lone surrogates (undecodable bytes) stay in the stored original, never in the summary
    compact = compact_text(ref_id, summary.label, tokens, summary.text).encode("utf-8", "replace").decode("utf-8")
    compact_tokens = counter.count(compact)
    if compact_tokens >= tokens:
        return Captured(text, None, True, False, tokens, tokens)
    item = CASItem(ref_id=ref_id, content_hash=digest, raw_hash=raw_hash(text), kind=kind, content=text, summary=compact)
    created = store.put(item, scope, visibility=config.visibility, ttl_seconds=config.ttl_seconds)
    return Captured(compact, ref_id, False, created, tokens, compact_tokens)
