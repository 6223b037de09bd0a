"""Stored outputs with non-text blocks (a screenshot tool's text and images): how they are
labelled when stored, and how the ``expand_ref`` tool gives them back to the model, as
content blocks. An image goes back as the image it was, never as the text of its base64."""

from __future__ import annotations

import json
import re
from typing import Any

from ctxplugin._block_text import is_media_block
from ctxplugin.cas._budget import clip
from ctxplugin.cas.store import CASRecord

TOOL_RESULT_BLOCK_TYPES = frozenset(
    ("text", "image_url", "image", "json", "search_result", "custom_tool_call_output", "document", "file")
)
"""The block types LangChain takes in a tool's returned content list: one block of any other
type makes it send the JSON text of the whole list instead (base64 included)."""

_KEPT = re.compile(r"\d+ (?:image|non-text block)s? kept · [\d,]+ tokens stored · ")


def is_text_block(block: Any) -> bool:
    """A string or a block with a ``text`` string: what a content's text is made of."""
    return isinstance(block, str) or (isinstance(block, dict) and isinstance(block.get("text"), str))


def is_image_block(block: Any) -> bool:
    """An image block, in any of the shapes LangChain and the providers write (``image``,
    ``image_url``)."""
    return isinstance(block, dict) and str(block.get("type", "")).startswith("image")


def is_data_block(block: Any) -> bool:
    """A block that is neither text nor media (a ``json`` block, a search result, a block of a
    type LangChain does not know): data, read as the text of its JSON, never kept whole in a
    compact form nor given back whole past ``expand_ref``'s cap."""
    return not is_text_block(block) and not is_media_block(block)


def blocks_text(blocks: list[Any]) -> str:
    """The text of an output's blocks as its summary and pages read it: text blocks, and the JSON
    of each data block (:func:`is_data_block`), in order; media left out."""
    parts: list[str] = []
    for block in blocks:
        if isinstance(block, str):
            parts.append(block)
        elif is_text_block(block):
            parts.append(block["text"])
        elif is_data_block(block):
            parts.append(json.dumps(block, ensure_ascii=False))
    return "\n".join(parts)


def blocks_label(others: list[Any]) -> str:
    """What the ref line of an output with the non-text blocks ``others`` says of them."""
    noun = "image" if all(map(is_image_block, others)) else "non-text block"
    return f"{len(others)} {noun}{'s' if len(others) > 1 else ''} kept"


def stored_blocks(record: CASRecord) -> list[Any] | None:
    """The content blocks of a stored output captured with non-text blocks, or None for any
    other output. Only ctxplugin's own ref line (:func:`blocks_label`) makes an item blocks: a
    text output that merely reads as the JSON of image blocks stays text (its URLs are data,
    never images sent to a provider)."""
    head = f"[{record.ref_id} · "
    if not record.summary.startswith(head) or not _KEPT.match(record.summary, len(head)):
        return None
    try:
        blocks = json.loads(record.content)
    except ValueError:
        return None
    if not isinstance(blocks, list) or not all(isinstance(b, (str, dict)) for b in blocks):
        return None
    return blocks if not all(is_text_block(b) for b in blocks) else None


def images_note(ref_id: str, blocks: list[Any]) -> str:
    """The line a text-only read of ``blocks`` ends with: what it left out, and how to see it."""
    count = sum(is_media_block(b) for b in blocks)
    what = f"{count} image{'s' if count > 1 else ''}" if _all_images(blocks) else f"{count} non-text blocks"
    return f"[this output also holds {what}, not shown here; expand_ref(ref_id={ref_id!r}) alone returns them]"


def _all_images(blocks: list[Any]) -> bool:
    return all(is_image_block(b) for b in blocks if is_media_block(b))


def blocks_for_model(blocks: list[Any], text_page: str | None) -> list[Any]:
    """The content of the ``expand_ref`` tool result for a stored output with non-text blocks.

    Every block as stored, in order, when the output's text fitted the cap (``text_page`` is
    None); otherwise ``text_page`` (the first page of the text, with its paging note) in place of
    the text and data blocks, then the media blocks. A block a tool result cannot carry (a type
    LangChain does not take there) is named in a text block instead."""
    out: list[Any] = [] if text_page is None else [{"type": "text", "text": text_page}]
    for index, block in enumerate(blocks):
        if is_text_block(block) or (is_data_block(block) and text_page is not None):  # in the page
            if text_page is None:
                out.append(block)
        elif isinstance(block, dict) and block.get("type") in TOOL_RESULT_BLOCK_TYPES:
            out.append(block)
        else:
            kind = clip(str(block.get("type")) if isinstance(block, dict) else type(block).__name__, 40)
            out.append({"type": "text", "text": f"[block {index}: a {kind!r} block, stored but not returnable in a tool result]"})
    return out


__all__ = ["TOOL_RESULT_BLOCK_TYPES", "blocks_for_model", "blocks_label", "blocks_text", "images_note", "is_data_block", "is_image_block", "is_text_block", "stored_blocks"]
