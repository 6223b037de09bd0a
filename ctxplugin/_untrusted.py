"""Reading text that comes from outside (tool outputs, model replies) without being hurt by it.

Every parse of such text goes through :func:`load_json`, and text bound for a store that needs
valid Unicode (Chroma, SQL text columns) through :func:`valid_unicode`. A leaf module: it
imports nothing from ctxplugin.
"""

from __future__ import annotations

import json
import math
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from decimal import Decimal
from itertools import accumulate
from typing import Any

from langchain_core.messages import BaseMessage

MAX_JSON_DEPTH = 100
"""Deeper JSON is treated as text: the parser, and every walk over the value after it
(canonical hashing, summaries, fact rules), recurse once per level."""

MAX_INT_DIGITS = 4300
"""Integers with more digits are not converted (Python refuses beyond its own limit, 4,300 by
default, and the conversion is quadratic); such JSON is treated as text."""


class _TooLarge(ValueError):
    pass


class InexactJSON(ValueError):
    """JSON whose parsed value would not say what its text says (see :func:`load_json`)."""


def _int(digits: str) -> int:
    if len(digits) > min(MAX_INT_DIGITS, sys.get_int_max_str_digits() or MAX_INT_DIGITS):
        raise _TooLarge(f"an integer of {len(digits)} digits")
    return int(digits)


def _float(literal: str) -> float:
    value = float(literal)
    if not math.isfinite(value) or Decimal(repr(value)) != Decimal(literal):
        raise InexactJSON(f"the number {literal[:40]} does not fit a float")
    return value


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    value = dict(pairs)
    if len(value) != len(pairs):
        seen: set[str] = set()
        twice = next(key for key, _ in pairs if key in seen or seen.add(key))  # type: ignore[func-returns-value]
        raise InexactJSON(f"the key {twice[:40]!r} twice in one object")
    return value


_NOT_BRACKET_OR_QUOTE = bytes(b for b in range(256) if b not in b'[]{}"')
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_NUMBER_TABLE = bytes(
    ord("0") if b in b"0123456789" else ord("e") if b in b"eE" else ord("+") if b in b"+-" else ord(" ")
    for b in range(256)
)
_SURROGATE = re.compile("[\ud800-\udfff]")


def nesting_exceeds(value: Any, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether dicts, lists and tuples nest deeper than ``limit`` in ``value`` (walked without
    recursion: a value too deep for ``json.dumps`` is still measured)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def unwritable_int(value: Any) -> bool:
    """Whether an integer in ``value`` (dicts, their keys too, lists and tuples, walked without
    recursion) has more digits than Python writes as text (``sys.get_int_max_str_digits``):
    ``json.dumps``, and so every count and note of it, would fail."""
    limit = sys.get_int_max_str_digits()
    stack: list[Any] = [value]
    while limit and stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item)
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif isinstance(item, int) and item.bit_length() > limit * 3:  # fewer bits: fewer digits than the limit
            try:
                str(item)
            except ValueError:
                return True
    return False


def not_a_message(where: str, message: object) -> str | None:
    """What is wrong with ``message`` (named ``where``) when it is no langchain-core message."""
    if isinstance(message, BaseMessage):
        return None
    return (f"{where} is a {type(message).__name__}, not a langchain-core BaseMessage; "
            "langchain_core.messages.convert_to_messages makes messages of dicts, tuples and strings")


def content_problem(what: str, message: Any) -> str | None:
    """Why ``message`` (``what``), a langchain-core message, cannot be read, or ``None``: its
    content is neither a string nor a list, or its blocks hold a value nested deeper than
    :data:`MAX_JSON_DEPTH` or an integer Python does not write as text (every walk over
    them, ``repr`` and ``json.dumps`` included, would fail)."""
    content, named = message.content, f"{what} ({type(message).__name__})"
    if isinstance(content, str):
        return None
    if not isinstance(content, list):
        return f"{named} has content of type {type(content).__name__}; a message's content is a string or a list of content blocks"
    # a value in a block sits two levels below the list (a tool_use block's input): it may nest
    # as deep as a tool call's arguments
    if nesting_exceeds(content, MAX_JSON_DEPTH + 2):
        unreadable = f"hold a value nested deeper than {MAX_JSON_DEPTH} levels"
    elif unwritable_int(content):
        unreadable = f"hold an integer of over {sys.get_int_max_str_digits():,} digits"
    else:
        return None
    return (
        f"{named} has content blocks that {unreadable}, which ctxplugin does not walk; "
        "pass such a value as a JSON string (its text is stored and read as text)"
    )


def json_depth_exceeds(text: str, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether brackets outside JSON strings nest deeper than ``limit`` (linear, in C loops)."""
    if text.count("[") + text.count("{") <= limit:
        return False
    data = text.encode("utf-8", "surrogatepass")
    if b"\\" in data:  # escaped backslashes, then escaped quotes: every quote left opens or closes a string
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    # brackets and quotes, then no empty strings (two quotes in a row): quotes left are few
    marks = data.translate(None, _NOT_BRACKET_OR_QUOTE).replace(b'""', b"")
    brackets = b"".join(marks.split(b'"')[::2]) if b'"' in marks else marks
    if brackets.count(b"[") + brackets.count(b"{") <= limit:
        return False
    return max(accumulate(map(_STEP.__getitem__, brackets))) > limit


def _number_shapes(text: str) -> bytes:
    """``text`` as UTF-8 with every ASCII digit ``0``, ``e`` and ``E`` ``e``, ``+`` and ``-``
    ``+``, dots left out and every other byte a space: where a number literal's digits run
    past a limit, these bytes hold a run of as many ``0`` (bytes scanned in C, where a regex
    search of megabytes takes about a second)."""
    return text.encode("utf-8", "surrogatepass").translate(_NUMBER_TABLE, b".")


_FINE_NUMBER = (b"0" * 16, b"e000", b"e+000")
"""Where a float literal may hold more than a float keeps, in :func:`_number_shapes`: 16 digits
or more, or an exponent of three digits. A literal of at most 15 significant digits and a
smaller exponent always reads back as written (``sys.float_info.dig``), so the check of each
float is skipped without one."""

_parsed: ContextVar[dict[int, tuple[str, Any, str | None]] | None] = ContextVar("ctxplugin_parsed_json", default=None)


@contextmanager
def parse_once() -> Iterator[None]:
    """Within: a text :func:`load_json` has read (or refused) is not read again, as long as the
    block runs. For one tool output, which the store's summary and the facts reader both read;
    what they are given is the same value, which neither changes."""
    token = _parsed.set({})
    try:
        yield
    finally:
        _parsed.reset(token)


def load_json(text: str) -> Any:
    """``json.loads(text)`` within limits that make it safe for any input, and only for JSON
    whose value says what the text says.

    A number a float does not keep (``1.000000000000000001``, ``1E400``) or a key written twice
    in one object would parse to the value of another text: summaries and ``expand_ref`` would
    show a number the output never held, and canonical hashing would give two outputs one ref.
    Such JSON is read as text.

    Raises:
        ValueError: not JSON, nested deeper than :data:`MAX_JSON_DEPTH`, holding an integer of
            more than :data:`MAX_INT_DIGITS` digits, a number a float does not keep or a key
            twice in one object. Nothing else is raised (no ``RecursionError``), whatever
            ``text`` holds.
    """
    memo = _parsed.get()
    if memo is None:
        return _load_json(text)
    known = memo.get(len(text))
    if known is not None and (known[0] is text or known[0] == text):
        if known[2] is not None:
            raise ValueError(known[2])
        return known[1]
    try:
        value = _load_json(text)
    except ValueError as exc:
        memo[len(text)] = (text, None, str(exc))
        raise
    memo[len(text)] = (text, value, None)
    return value


_FIRST_LINE = 65_536
_NOT_SPACE = re.compile(r"\S")


def _value_then_more(text: str) -> bool:
    """Whether ``text`` opens with a line that is a whole JSON value and holds more after it, as
    JSON Lines do. The parser would then read that value and refuse what follows: the text is no
    JSON value, which this finds without the checks of :func:`_load_json` scanning all of it."""
    end = text.find("\n", 0, _FIRST_LINE)
    if end < 0 or _NOT_SPACE.search(text, end) is None:
        return False
    try:
        _load_json(text[:end])
    except ValueError:  # refused (inexact, too deep) or no value: the whole text is read as before
        return False
    return True


def _load_json(text: str) -> Any:
    if len(text) > _FIRST_LINE and _value_then_more(text):
        raise ValueError("Extra data: a JSON value on the first line, then more")
    if json_depth_exceeds(text):
        raise ValueError(f"JSON nested deeper than {MAX_JSON_DEPTH} levels")
    # the integer guard and the float check are a Python call per number: taken only when a
    # run of digits is long enough to need them (a run inside a string counts too, which only
    # costs time); the key check is a call per object, about a fifth of the parse
    limit = min(MAX_INT_DIGITS, sys.get_int_max_str_digits() or MAX_INT_DIGITS)
    shapes = _number_shapes(text)
    options: dict[str, Any] = {"object_pairs_hook": _object}
    if b"0" * (limit + 1) in shapes:
        options["parse_int"] = _int
    if any(run in shapes for run in _FINE_NUMBER):
        options["parse_float"] = _float
    try:
        return json.loads(text, **options)
    except RecursionError as exc:  # a small stack left by the caller
        raise ValueError("JSON nested too deeply for the parser") from exc


def inexact_json(text: str) -> str | None:
    """Why :func:`load_json` reads ``text``, JSON as far as the parser goes, as text: ``"that
    reads back as written (...)"`` for a number a float does not keep or a key twice in one
    object, ``"read as such (...)"`` for nesting or an integer past its limits; else None."""
    stripped = text.strip()
    if json_depth_exceeds(stripped):
        return f"read as such (nested deeper than {MAX_JSON_DEPTH} levels)" if _parses(stripped) else None
    try:
        load_json(stripped)
    except InexactJSON as exc:
        return f"that reads back as written ({exc})"
    except _TooLarge as exc:  # met as the parser reads on: what follows may be no JSON
        return f"read as such (it holds {exc})" if _parses(stripped) else None
    except ValueError:
        pass
    return None


def _parses(text: str) -> bool:
    """Whether ``text`` is JSON to the parser, whatever its integers (and as deep as the stack
    lets it read): a text that is none is not said to be JSON read as text."""
    try:
        json.loads(text, parse_int=len)
    except RecursionError:
        return True
    except ValueError:
        return False
    return True


def valid_unicode(text: str) -> str:
    """``text`` with lone surrogates (Python's stand-in for undecodable bytes) replaced by U+FFFD.

    Returns ``text`` itself when it holds none, which is almost always.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


def json_text(value: Any, **options: Any) -> str:
    """``json.dumps(value, ensure_ascii=False, **options)``, or with ``\\u`` escapes where
    ``value`` holds lone surrogates (undecodable bytes): no UTF-8 file, terminal or SQLite text
    takes those, and the escapes read back exactly."""
    text = json.dumps(value, ensure_ascii=False, **options)
    return text if valid_unicode(text) is text else json.dumps(value, **options)


REF_TEXT = r"ref:[a-z0-9][a-z0-9_-]{0,39}:[0-9a-f]{16}"
"""A ref as the CAS writes it, as a pattern to build others from: ``ref:<kind>:<16 hex digits>``."""
_REF_FORM = re.compile(REF_TEXT)
_ID_FORM = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+=-]{0,127}")
_NAME_FORM = re.compile(r"\w[\w.:@+=/-]{0,127}")
_LINE_BREAKS = str.maketrans({"\u2028": "\\u2028", "\u2029": "\\u2029", "\x85": "\\u0085"})


_REF_IN_TEXT = re.compile(rf"(?<![\w:-]){REF_TEXT}(?![0-9a-f])")
_REF_WHOLE = re.compile(rf"^{REF_TEXT}$")


def ref_as_written(ref_id: str) -> str:
    """The ref a model meant when it wrote one inside other text (`` `ref:bash:…` ``, a trailing
    full stop, spaces, "see ref:…"): the one ref it holds, else ``ref_id`` as given."""
    if isinstance(ref_id, str) and not _REF_WHOLE.match(ref_id):
        found = set(_REF_IN_TEXT.findall(ref_id))
        if len(found) == 1:
            return str(found.pop())
    return ref_id


def ref_form(value: object) -> str | None:
    """``value`` when it is a ref as the CAS writes it (``ref:<kind>:<16 hex digits>``), else
    None: what a message's metadata or a fact's provenance calls a ref is shown only so."""
    return value if isinstance(value, str) and _REF_FORM.fullmatch(value) else None


def id_form(value: object) -> str | None:
    """``value`` when it is a ref or a plain id (letters, digits and ``_.:@+=-``, at most 128
    characters: a message id, a tool call id, a uuid), else None. A tool that returns its own
    ``ToolMessage`` chooses its id; an id of another form could close ctxplugin's brackets."""
    return value if isinstance(value, str) and _ID_FORM.fullmatch(value) else None


def name_form(value: object) -> str | None:
    """``value`` when it has the form of a tool's name, else None: as :func:`id_form`, with the
    letters and digits of any script (a model served locally may be given a tool named
    ``météo``) and slashes (an MCP server's tool may be named ``user-profile/update``); no space,
    bracket or line break."""
    return value if isinstance(value, str) and _NAME_FORM.fullmatch(value) else None


def one_line(quoted_text: str) -> str:
    """JSON string text (``json.dumps(..., ensure_ascii=False)``) with the line breaks JSON
    leaves as they are escaped too: U+2028, U+2029 and U+0085 break a line for
    ``str.splitlines`` and many renderers."""
    return quoted_text.translate(_LINE_BREAKS)


def storable_text(text: str) -> str:
    """:func:`valid_unicode`, with NUL characters replaced by U+FFFD as well: text every store
    keeps as text (Postgres ``TEXT`` refuses NUL). For derived text only (summaries, facts);
    originals are stored as bytes, exactly."""
    text = valid_unicode(text)
    return text.replace("\x00", "\ufffd") if "\x00" in text else text


__all__ = [
    "MAX_INT_DIGITS", "MAX_JSON_DEPTH", "REF_TEXT", "InexactJSON", "content_problem", "id_form", "inexact_json", "json_depth_exceeds", "json_text",
    "load_json", "name_form", "nesting_exceeds", "not_a_message", "one_line", "parse_once", "ref_as_written", "ref_form", "storable_text", "unwritable_int",
    "valid_unicode",
]
