"""Tool outputs into a content-addressable store, with ``expand_ref`` to read them back.

:func:`capture` stores a tool output once (sha256 of its canonical form) and returns the compact
text the conversation carries: a ``ref:<kind>:<hash16>`` line and a shape-aware summary.
:func:`expand` / :func:`expand_for_model` read the original back, whole or in parts
(:func:`expand_content_for_model` gives the model the images of an output back). Stores
implement the small :class:`CASStore` protocol; :class:`MemoryCASStore` and
:class:`SQLiteCASStore` ship here, server backends plug in through the same port.
"""

from ctxplugin.cas._blocks import is_image_block
from ctxplugin.cas._canon import (
    canonical_json,
    check_ref,
    content_hash,
    decode,
    encode,
    make_ref,
    normalize_text,
    parse_json,
    raw_hash,
)
from ctxplugin.cas.annotation import (
    FACTS_UNREAD,
    HOST_ANSWER,
    content_marks,
    facts_unread,
    host_answer,
    masked_refs,
    scrubbed,
    withheld,
    without_lead,
    without_stale,
)
from ctxplugin.cas.capture import (
    Captured,
    capture,
    compact_content,
    compact_message,
    compact_text,
    non_text_blocks,
    shows_compact,
    store_text,
)
from ctxplugin.cas.expand import (
    expand,
    expand_content_for_model,
    expand_for_model,
    parse_path,
    select,
)
from ctxplugin.cas.memory import MemoryCASStore
from ctxplugin.cas.sqlite import SQLiteCASStore
from ctxplugin.cas.store import CASItem, CASRecord, CASStore, Clock, RefExistence, RefRevocation
from ctxplugin.cas.summarize import Summary, summarize

__all__ = [
    "FACTS_UNREAD",
    "HOST_ANSWER",
    "CASItem",
    "CASRecord",
    "CASStore",
    "Captured",
    "Clock",
    "MemoryCASStore",
    "RefExistence",
    "RefRevocation",
    "SQLiteCASStore",
    "Summary",
    "canonical_json",
    "capture",
    "check_ref",
    "compact_content",
    "compact_message",
    "compact_text",
    "content_hash",
    "content_marks",
    "decode",
    "encode",
    "expand",
    "expand_content_for_model",
    "expand_for_model",
    "facts_unread",
    "host_answer",
    "is_image_block",
    "make_ref",
    "masked_refs",
    "non_text_blocks",
    "normalize_text",
    "parse_json",
    "parse_path",
    "raw_hash",
    "scrubbed",
    "select",
    "shows_compact",
    "store_text",
    "summarize",
    "withheld",
    "without_lead",
    "without_stale",
]
