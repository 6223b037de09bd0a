"""JSON field paths: parsing ``a.b[0]``-style paths and resolving them in a parsed value, with
errors that name the failing step."""

from __future__ import annotations

import re
from typing import Any

from ctxplugin.errors import InvalidInputError

_WILD = object()
MAX_FIELDS = 100
"""The most distinct field paths one read selects: each walks the whole output (a model sending
thousands of ``*`` paths held the step for over a minute on a 100,000-item array)."""
_MAX_INDEX_DIGITS = 18
"""An index with more digits is past the end of any array (and past what ``int`` converts)."""
_SEGMENT = re.compile(r"""\.?(?P<name>[^.\[\]]+)|\[(?P<index>-?\d+|\*)\]|\[(?P<q>["'])(?P<quoted>.*?)(?P=q)\]""")


def parse_path(path: str) -> list[Any]:
    """Segments of a field path: keys (str), indexes (int) and wildcards.

    Accepts ``a.b``, ``a[0]``, ``a[-1]``, ``a[*].id``, ``a.*``, ``["key.with.dots"]`` and an
    optional leading ``$``/``$.``.

    Raises:
        InvalidInputError: the path cannot be parsed.
    """
    if not isinstance(path, str):
        raise InvalidInputError(f"a field path is a string, got {type(path).__name__}")
    text = path.strip()
    text = text[1:] if text.startswith("$") else text
    segments: list[Any] = []
    position = 0
    while position < len(text):
        match = _SEGMENT.match(text, position)
        if match is None or (match.group("name") is not None and position > 0 and text[position] != "."):
            raise InvalidInputError(f"cannot read field path {path!r} at {text[position:]!r}; use a.b, a[0], a[*].id or [\"odd.key\"]")
        if match.group("name") is not None:
            name = match.group("name")
            segments.append(_WILD if name == "*" else name)
        elif match.group("index") is not None:
            index = match.group("index")
            if len(index.lstrip("-")) > _MAX_INDEX_DIGITS:
                raise InvalidInputError(f"index {index[:24]}… in field path is past the end of any array")
            segments.append(_WILD if index == "*" else int(index))
        else:
            segments.append(match.group("quoted"))
        position = match.end()
    if not segments:
        raise InvalidInputError(f"empty field path {path!r}")
    return segments


def _describe(segments: list[Any]) -> str:
    out = ""
    for seg in segments:
        if seg is _WILD:
            out += "[*]"
        elif isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += f".{seg}" if out else str(seg)
    return out or "the top level"


def select(value: Any, path: str) -> Any:
    """The value at ``path`` in ``value``; a wildcard gives a list of the matches under it.

    Raises:
        InvalidInputError: the path does not exist (the message names the failing step and what
            is there instead).
    """
    segments = parse_path(path)
    found, result, problem = _walk(value, segments, 0)
    if not found:
        raise InvalidInputError(f"field {path!r}: {problem}")
    return result


def select_fields(value: Any, fields: list[str]) -> Any:
    """The value at one path, or ``{path: value}`` for several (each path once).

    Raises:
        InvalidInputError: more than :data:`MAX_FIELDS` paths, or one :func:`select` refuses.
    """
    paths = list(dict.fromkeys(fields))
    if len(paths) > MAX_FIELDS:
        raise InvalidInputError(f"{len(paths):,} field paths in one read, over the {MAX_FIELDS} read; ask for fewer, or use a wildcard (items[*].id)")
    return select(value, paths[0]) if len(paths) == 1 else {f: select(value, f) for f in paths}


def _walk(value: Any, segments: list[Any], at: int) -> tuple[bool, Any, str]:
    if at == len(segments):
        return True, value, ""
    seg = segments[at]
    where = _describe(segments[:at])
    if seg is _WILD:
        children = list(value.values()) if isinstance(value, dict) else value if isinstance(value, list) else None
        if children is None:
            return False, None, f"{where} is {_type(value)}, nothing to iterate"
        results = []
        problem = f"{where} is empty"
        for child in children:
            ok, result, problem = _walk(child, segments, at + 1)
            if ok:
                results.append(result)
        return (True, results, "") if results or not children else (False, None, f"no item under {where} matches ({problem})")
    if isinstance(seg, int):
        if not isinstance(value, list):
            return False, None, f"{where} is {_type(value)}, not an array"
        if not -len(value) <= seg < len(value):
            return False, None, f"index {seg} is out of range at {where} ({len(value)} items)"
        return _walk(value[seg], segments, at + 1)
    if isinstance(value, list) and seg.isascii() and seg.isdigit():  # not "²", which int() refuses
        if len(seg) > _MAX_INDEX_DIGITS:
            return False, None, f"index {seg[:24]}… is out of range at {where} ({len(value)} items)"
        return _walk(value, [*segments[:at], int(seg), *segments[at + 1 :]], at)
    if not isinstance(value, dict):
        return False, None, f"{where} is {_type(value)}, not an object"
    if seg not in value:
        keys = ", ".join(list(map(str, value))[:20]) + (", …" if len(value) > 20 else "")
        return False, None, f"no key {seg!r} at {where} (keys there: {keys or 'none'})"
    return _walk(value[seg], segments, at + 1)


def _type(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, str):
        return "a string"
    return "null" if value is None else f"a {type(value).__name__}"


__all__ = ["MAX_FIELDS", "parse_path", "select", "select_fields"]
