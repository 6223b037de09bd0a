"""Text cut to a token budget, and a message's content cut so that what a provider needs of it
stays.

The budget's last resort (:func:`ctxplugin.budget.minimum_viable`) cuts every message above a
common size (:func:`water_level`). Text can be cut. The other blocks of a message cannot: an image is what the user
or a tool sent, a ``thinking`` block carries a signature the provider checks (Anthropic refuses
a tool-use turn whose thinking was dropped or altered while extended thinking is on), a
``tool_use`` block pairs with its result. Those are kept whole and only the text is cut, so a
view may stay over its budget by their size; the budget stage says so.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Container, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage

from ctxplugin._graphemes import head, tail
from ctxplugin.tokens import TokenCounter, blocks_tokens, content_text, count_cached, count_message

Keep = Callable[[str], str | None]
"""Stores a text about to be cut and gives the ref it is read back by (None: not stored)."""


CUT_WORDS = "tokens cut to fit the budget"
"""What the note in a text cut to fit says after the count of tokens cut (see :func:`cut_text`)."""


def cut_text(text: str, max_tokens: int, counter: TokenCounter, keep: Keep | None = None) -> str:
    """Keep head and tail of ``text`` within ``max_tokens`` (with an elision marker).

    With ``keep``, a text that is cut is given to it first, and the marker names the ref it
    returns, where ``expand_ref`` reads the whole text; when no head and tail fit beside that
    marker, the plain one is used."""
    if (total := count_cached(text, counter)) <= max_tokens:
        return text
    if max_tokens <= 8:
        return "[…]"
    ref = keep(text) if keep is not None else None
    notes = [f"[… {total} {CUT_WORDS}; expand_ref(ref_id='{ref}') reads the whole message …]"] if ref else []
    for note in (*notes, f"[… {total} {CUT_WORDS} …]"):
        budget_chars = max(8, max_tokens * 3)
        while budget_chars > 8:
            candidate = f"{head(text, budget_chars * 2 // 3)}\n{note}\n{tail(text, budget_chars // 3)}"
            if counter.count(candidate) <= max_tokens:
                return candidate
            budget_chars = int(budget_chars * 0.8)
    return "[…]"


def _is_text(block: Any) -> bool:
    return isinstance(block, str) or (isinstance(block, dict) and isinstance(block.get("text"), str))


def cut_content(content: str | list[Any], max_tokens: int, counter: TokenCounter, keep: Keep | None = None) -> str | list[Any]:
    """``content`` within ``max_tokens`` as far as its text allows.

    A string is cut (:func:`cut_text`), and so is a list of text blocks alone (to one string).
    A list with other blocks keeps each of them, whole and in its place; its text is cut to what
    they leave (counted as :func:`~ctxplugin.tokens.count_message` counts them) and put in the
    first text block, and the other text blocks go. Without text, nothing can be cut: the
    content is returned as it is. ``keep`` is given the whole text when it is cut (see
    :func:`cut_text`)."""
    if isinstance(content, str):
        return cut_text(content, max_tokens, counter, keep)
    others = sum(1 for block in content if not _is_text(block))
    if not others:
        return cut_text(content_text(content), max_tokens, counter, keep)
    text = content_text(content)
    if not text:
        return content
    cut = cut_text(text, max(8, max_tokens - blocks_tokens(content, counter)), counter, keep)
    out: list[Any] = []
    placed = False
    for block in content:
        if not _is_text(block):
            out.append(block)
        elif not placed:
            out.append(cut if isinstance(block, str) else {**block, "text": cut})
            placed = True
    return out


def uncut_tokens(message: BaseMessage, counter: TokenCounter) -> int:
    """Tokens of the blocks of ``message`` that :func:`cut_content` keeps whole (all but its
    text), as :func:`~ctxplugin.tokens.count_message` counts them."""
    if isinstance(message.content, str):
        return 0
    calls = message.tool_calls if isinstance(message, AIMessage) else []
    return blocks_tokens(message.content, counter, frozenset(str(c.get("id")) for c in calls))


def text_share(sizes: Sequence[int], fixed: Sequence[int], held: Container[int], over: int) -> tuple[list[int], int]:
    """The common cap above which the texts of messages of ``sizes`` tokens (``fixed`` of them
    in blocks never cut) are cut for their total to lose ``over`` (those ``held`` are not cut),
    and the tokens of each message left out of its text's share.

    The blocks never cut (an image, thinking, a ``tool_use``) are left out: the text beside an
    image is cut to the same size as the others', not to nothing. When those blocks leave no
    room for text (screenshots alone over the total), the cap is over whole messages instead,
    so the texts beside them go first and the others keep a share."""
    texts = [size - f for size, f in zip(sizes, fixed, strict=True)]
    free = [text for k, text in enumerate(texts) if k not in held]
    room = sum(free) - over - 8 * len(sizes)
    if room >= 8 * len(free):
        return list(fixed), water_level(free or [0], room)
    whole = [size for k, size in enumerate(sizes) if k not in held]
    return [0] * len(sizes), water_level(whole or [0], sum(whole) - over - 8 * len(sizes))


def cut_call_args(message: AIMessage, max_tokens: int, counter: TokenCounter) -> AIMessage:
    """``message`` with the longest string values of its tool calls' arguments cut at head and
    tail (a file a coding agent wrote) until it fits ``max_tokens`` as
    :func:`~ctxplugin.tokens.count_message` counts it; other values, names and ids stay.

    A message whose content repeats a call (a ``tool_use``, ``function_call`` or
    ``custom_tool_call`` block, which is kept whole and which some providers read the arguments
    from) is returned as it is. A Responses API block names the call by its ``call_id``, its
    ``id`` being the item's own."""
    calls = message.tool_calls
    over = count_message(message, counter) - max_tokens
    ids = {str(call["id"]) for call in calls if call.get("id") is not None}
    if over <= 0 or not calls or (isinstance(message.content, list) and any(
        isinstance(b, dict) and b.get("type") in ("tool_use", "function_call", "custom_tool_call")
        and not ids.isdisjoint(str(b[key]) for key in ("id", "call_id") if b.get(key) is not None)
        for b in message.content
    )):
        return message
    new_calls = copy.deepcopy(calls)
    leaves: list[tuple[Any, Any, str]] = []  # (container, key, text)
    stack: list[Any] = [call["args"] for call in new_calls]
    while stack:
        node = stack.pop()
        for key, value in (node.items() if isinstance(node, dict) else enumerate(node)):
            if isinstance(value, str):
                leaves.append((node, key, value))
            elif isinstance(value, (dict, list)):
                stack.append(value)
    if not leaves:
        return message
    # sized as they are counted: JSON-escaped, newlines as two characters
    sizes = [count_cached(json.dumps(text, ensure_ascii=False), counter) for _, _, text in leaves]
    cap = water_level(sizes, sum(sizes) - over)
    for (node, key, text), size in zip(leaves, sizes, strict=True):
        if size > cap:
            node[key] = cut_text(text, max(8, cap * count_cached(text, counter) // size - 4), counter)
    return message.model_copy(update={"tool_calls": new_calls})


def water_level(sizes: Sequence[int], available: int) -> int:
    """The largest cap such that ``sum(min(size, cap)) <= available``."""
    if sum(sizes) <= available:
        return max(sizes, default=0)
    used = 0
    ordered = sorted(sizes)
    for position, size in enumerate(ordered):
        remaining = len(ordered) - position
        if used + size * remaining > available:
            return max(8, (available - used) // remaining)
        used += size
    return max(8, ordered[-1])


__all__ = ["CUT_WORDS", "Keep", "cut_call_args", "cut_content", "cut_text", "text_share", "uncut_tokens", "water_level"]
