"""Canonical hashing, ref ids and cheap shape parsing: the pure core shared by every store."""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from ctxplugin._untrusted import load_json
from ctxplugin.cas._budget import clip
from ctxplugin.errors import InvalidInputError

REF_RE = re.compile(r"^ref:([a-z0-9][a-z0-9_-]{0,39}):([0-9a-f]{16})$")
"""A ref id: ``ref:<kind>:<first 16 hex digits of the canonical sha256>``."""

_SLUG_DROP = re.compile(r"[^a-z0-9_-]+")



def encode(text: str) -> bytes:
    """UTF-8 bytes of ``text``; lone surrogates (from undecodable bytes) survive the trip."""
    return text.encode("utf-8", "surrogatepass")


def decode(data: bytes) -> str:
    """Inverse of :func:`encode`."""
    return data.decode("utf-8", "surrogatepass")


def raw_hash(text: str) -> str:
    """sha256 of the exact text: identifies one byte-exact variant of an output."""
    return hashlib.sha256(encode(text)).hexdigest()


def parse_json(text: str) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is a JSON object or array, else ``(False, None)``.

    Scalars are left to the text path on purpose: a bare ``42`` or ``"ok"`` is text to a reader.
    Invalid JSON that merely looks like JSON, and JSON past the limits of
    :func:`ctxplugin._untrusted.load_json` (nesting, huge integers), are text too.
    """
    stripped = text.strip()
    if len(stripped) < 2 or (stripped[0], stripped[-1]) not in (("{", "}"), ("[", "]")):
        return False, None
    try:
        return True, load_json(stripped)
    except ValueError:
        return False, None


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is.

    Raises:
        RecursionError: nesting too deep to serialise.
    """
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def normalize_text(text: str) -> str:
    """Line endings to ``\\n``, trailing whitespace of every line and of the text removed."""
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    return "\n".join(line.rstrip() for line in text.split("\n")).rstrip()


def content_hash(text: str, parsed: tuple[bool, Any] | None = None) -> str:
    """sha256 hex of the canonical form: canonical JSON for structured output, normalized text
    otherwise. Outputs that differ only in key order or whitespace share a hash."""
    is_json, value = parsed if parsed is not None else parse_json(text)
    if is_json:
        try:
            return hashlib.sha256(encode(canonical_json(value))).hexdigest()
        except RecursionError:
            pass
    return hashlib.sha256(encode(normalize_text(text))).hexdigest()


def kind_slug(tool_name: str | None, fallback: str) -> str:
    """The ``<kind>`` of a ref: a short slug of the tool name, or of the content shape."""
    slug = _SLUG_DROP.sub("_", (tool_name or "").lower()).strip("_-")[:40].rstrip("_-")
    if not slug or not slug[0].isalnum():
        slug = _SLUG_DROP.sub("_", fallback.lower()).strip("_-") or "tool"
    return slug


def make_ref(kind: str, digest: str) -> str:
    """``ref:<kind>:<hash16>``."""
    ref = f"ref:{kind}:{digest[:16]}"
    check_ref(ref)
    return ref


def check_ref(ref_id: object) -> str:
    """``ref_id`` if it is well formed.

    Raises:
        InvalidInputError: not of the form ``ref:<kind>:<16 hex digits>``.
    """
    if not isinstance(ref_id, str) or not REF_RE.match(ref_id):
        raise InvalidInputError(  # the start of it: a model may pass a whole output as the ref
            f"{clip(repr(ref_id), 80)} is not a ref id; refs look like 'ref:<kind>:<16 hex digits>', "
            "e.g. 'ref:bash:0123abcd4567ef89'"
        )
    return ref_id
