"""One message as its tier shows it: verbatim, trimmed or reduced to a gist.

Compressed forms are remembered by message, so an old message is compressed once and the same
copy is shown on every later call (what is derived from it is then found by identity too).
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolCall

from ctxplugin._lru import RECENT_MESSAGES, PerMessage
from ctxplugin._messages import META_KEY, annotation
from ctxplugin.config import HistoryConfig
from ctxplugin.history.compressors import MemoCounter, gist_text, memo_counter, trim_text
from ctxplugin.tokens import (
    MESSAGE_OVERHEAD,
    TokenCounter,
    call_tokens,
    content_text,
    count_message,
)


class Tier(StrEnum):
    """How much of a message the view keeps."""

    VERBATIM = "verbatim"
    TRIMMED = "trimmed"
    GIST = "gist"
    OMITTED = "omitted"


_TEXT_KEYS = frozenset({"type", "text", "id", "index"})
_CALL_KEYS = {
    "tool_use": frozenset({"type", "id", "name", "input", "index", "partial_json"}),  # Anthropic's
    "tool_call": frozenset({"type", "id", "name", "args", "index"}),  # LangChain's standard block
}
_CALL_ARGS = {"tool_use": "input", "tool_call": "args"}


def _text_beside_calls(message: BaseMessage) -> str | None:
    """The text of an AI message whose content holds text blocks and its own tool calls as
    blocks (the shape Claude answers in), or None for any other content. A block that carries
    more than its text or its call (a citation, a thinking signature, a provider's caller), a
    call block that is not among the message's ``tool_calls``, and any other block leave the
    message out: its blocks could not be rewritten and stay as they are."""
    content = message.content
    if not isinstance(message, AIMessage) or isinstance(content, str):
        return None
    ids = {call["id"] for call in message.tool_calls}
    calls = 0
    for block in content:
        if isinstance(block, str):
            continue
        if not isinstance(block, dict):
            return None
        kind = block.get("type")
        if kind in _CALL_KEYS and block.keys() <= _CALL_KEYS[kind] and block.get("id") in ids:
            calls += 1
        elif not (kind == "text" and block.keys() <= _TEXT_KEYS and isinstance(block.get("text"), str)):
            return None
    return content_text(content) if calls else None


def _rebuilt(content: list[Any], text: str | None, calls: list[ToolCall] | None) -> list[Any]:
    """``content`` (see :func:`_text_beside_calls`) with its text blocks made one block holding
    ``text`` where the first was (None: kept as they are) and its call blocks holding the
    arguments of ``calls`` (None: kept as they are)."""
    args = {call["id"]: call["args"] for call in calls or ()}
    out: list[Any] = []
    placed = False
    for block in content:
        if isinstance(block, str) or block.get("type") == "text":
            if text is None:
                out.append(block)
            elif not placed:
                placed = True
                if text:
                    out.append({"type": "text", "text": text})
            continue
        kind = block["type"]
        out.append({**block, _CALL_ARGS[kind]: args[block["id"]]} if block["id"] in args else block)
    return out


def _plain_text(message: BaseMessage) -> str | None:
    """The text of a message that is text only, or None (multimodal content passes through)."""
    content = message.content
    if isinstance(content, str):
        return content
    if all(isinstance(b, str) or (isinstance(b, dict) and b.get("type") == "text") for b in content):
        return content_text(content)
    return None


@lru_cache(maxsize=4096)
def _compressed(text: str, tier: Tier, max_tokens: int, counter: MemoCounter, ref: str | None, lead: str | None) -> str:
    keep = [ref] if ref else None
    if tier is Tier.TRIMMED:
        return trim_text(text, max_tokens=max_tokens, counter=counter, must_keep=keep)
    return gist_text(text, max_tokens=max_tokens, counter=counter, lead=lead, must_keep=keep)


def _summarizable(text: str, config: HistoryConfig, counter: TokenCounter) -> bool:
    return counter.count(text) > 2 * config.gist_tokens


_SHOWN: PerMessage[dict[tuple[object, ...], BaseMessage]] = PerMessage(RECENT_MESSAGES)
"""Each message as its tiers showed it, by message: an old message keeps its tier for many calls
and is compressed once; the same copy is shown again, so what is derived from the copy (its
token count) is found by identity too."""


def compress_message(
    message: BaseMessage,
    tier: Tier,
    *,
    config: HistoryConfig,
    counter: TokenCounter,
    lead: str | None = None,
) -> BaseMessage:
    """``message`` as its tier shows it: a copy with new content, or ``message`` itself.

    Text content is compressed, and only when that makes it smaller. Tool calls of AI messages
    keep their ids, names and short arguments; a long string argument is trimmed (its exact
    values listed at the marker), in its content blocks too when it holds its calls there (see
    :func:`_text_beside_calls`; other block lists pass through). A
    stored tool output keeps its ref."""
    if tier is Tier.VERBATIM:
        return message
    max_tokens = config.trim_tokens if tier is Tier.TRIMMED else config.gist_tokens
    memo = memo_counter(counter)
    key = (tier, max_tokens, lead, memo)
    shown = _SHOWN.get(message)
    if shown is not None and key in shown:
        return shown[key]
    out = _compress_message(message, tier, max_tokens, memo, lead)
    if shown is None:
        shown = {}
        _SHOWN.put(message, shown)
    shown[key] = out
    return out


def shown_floor(message: BaseMessage, tier: Tier, *, config: HistoryConfig, counter: TokenCounter) -> int:
    """Tokens ``message`` costs at least as ``tier`` shows it, known without compressing it: its
    overhead and its tool calls, which keep their names and, unless one is long enough to be
    trimmed (see :func:`_trimmed_calls`), their arguments. Its text may shrink to nothing."""
    if tier is Tier.VERBATIM:
        return count_message(message, counter)
    if not isinstance(message, AIMessage):
        return MESSAGE_OVERHEAD
    limit = 4 * (config.trim_tokens if tier is Tier.TRIMMED else config.gist_tokens)
    total = MESSAGE_OVERHEAD
    for call in message.tool_calls:
        if any(isinstance(value, str) and len(value) > limit for value in call["args"].values()):
            total += counter.count(call["name"]) + 3
        else:
            total += call_tokens(call, counter)
    return total


def _compress_message(message: BaseMessage, tier: Tier, max_tokens: int, memo: MemoCounter, lead: str | None) -> BaseMessage:
    update: dict[str, object] = {}
    text = _plain_text(message)
    blocks = text is None and (text := _text_beside_calls(message)) is not None
    note = annotation(message)
    extra = dict(message.additional_kwargs)
    calls = _trimmed_calls(message, max_tokens, memo) if text is not None else None
    if calls is not None:
        update["tool_calls"] = calls
        extra.pop("tool_calls", None)  # a provider's raw copy of the calls would still hold the long arguments
    if text:
        ref = note.get("ref") if isinstance(note.get("ref"), str) else None
        new = _compressed(text, tier, max_tokens, memo, ref, lead)
        if new != text:
            # an assistant turn's text blocks stay a list: langchain-openai reads the reasoning and
            # the call item ids a Responses API turn keeps beside them (output_version="v0") only
            # from a list, and would send its calls without the reasoning they follow
            keep_list = isinstance(message, AIMessage) and not blocks and isinstance(message.content, list)
            update["content"] = [{"type": "text", "text": new}] if keep_list else new
    if blocks and update:
        shorter = update.get("content")
        update["content"] = _rebuilt(list(message.content), shorter if isinstance(shorter, str) else None, calls)
    if not update:
        return message
    meta = {**note, "tier": tier.value}
    update["additional_kwargs"] = {**extra, META_KEY: meta}
    return message.model_copy(update=update)


def _trimmed_calls(message: BaseMessage, max_tokens: int, counter: MemoCounter) -> list[ToolCall] | None:
    """The tool calls of an AI message with every long string argument trimmed (its exact
    values listed at the elision point), or None when none is long."""
    if not isinstance(message, AIMessage) or not message.tool_calls:
        return None
    changed = False
    calls: list[ToolCall] = []
    for call in message.tool_calls:
        args = dict(call["args"])
        for key, value in args.items():
            if isinstance(value, str) and len(value) > 4 * max_tokens:
                short = _compressed(value, Tier.TRIMMED, max_tokens, counter, None, None)
                if short != value:
                    args[key] = short
                    changed = True
        calls.append({**call, "args": args})
    return calls if changed else None


__all__ = ["Tier", "compress_message", "shown_floor"]
