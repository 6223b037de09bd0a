"""Reading stored outputs back: whole, by JSON paths, by item or line ranges, by pattern."""

from __future__ import annotations

import json
import re
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from ctxplugin._block_text import is_media_block
from ctxplugin._graphemes import ceil_boundary, head
from ctxplugin._text_shapes import without_escapes
from ctxplugin._untrusted import inexact_json, ref_as_written
from ctxplugin.cas._blocks import blocks_for_model, blocks_text, images_note, stored_blocks
from ctxplugin.cas._budget import cut_around, echoed, window
from ctxplugin.cas._canon import parse_json
from ctxplugin.cas._json_path import parse_path, select, select_fields
from ctxplugin.cas._parsed import ParsedMemo
from ctxplugin.cas._patterns import Matcher, check_options
from ctxplugin.cas.store import CASStore
from ctxplugin.errors import (
    CtxpluginError,
    InvalidInputError,
    RefNotFoundError,
    StoreError,
    StoreUnavailableError,
)
from ctxplugin.scope import Scope
from ctxplugin.tokens import TokenCounter, count_text

_PARSED = ParsedMemo()
"""The last few large JSON outputs read, parsed (bounded: see :mod:`ctxplugin.cas._parsed`)."""


# ---------------------------------------------------------------------------- selection
@dataclass(frozen=True)
class _Unit:
    index: int
    text: str
    value: Any
    label: str | None = None  # where a record sits (``records[137]``, ``line 4 [2]``)
    before: str | None = None  # the line before a matching line (model output only)
    after: str | None = None
    at: int = 0  # where in ``text`` the pattern first matched


@dataclass(frozen=True)
class _Selection:
    ref_id: str
    unit: Literal["items", "lines"]
    total: int
    matched: int
    offset: int
    page: list[_Unit]
    filtered: bool
    whole: str | None  # the untouched original when no option was given


def _select(
    content: str,
    ref_id: str,
    fields: Sequence[str] | None,
    offset: int,
    limit: int | None,
    pattern: str | None,
    regex: bool,
    *,
    whole_as_units: bool = False,
    page_cap: int | None = None,
    context: bool = False,
    screen: bool = False,
    key: Hashable | None = None,
) -> _Selection:
    # ``key`` names the stored text exactly (see :mod:`ctxplugin.cas._parsed`); ``screen`` is part of it
    key = None if key is None else (key, screen)
    matcher = check_options(offset, limit, pattern, regex)
    limit = limit or None  # 0 is no limit, for code as for the tool (a model sends 0 for "unused")
    if isinstance(fields, str):
        fields = [fields]
    content = without_escapes(content) if screen else content  # no escape spans a line break
    paged = bool(offset or limit is not None or matcher)
    if not fields and not paged and not whole_as_units:
        return _Selection(ref_id, "lines", 0, 0, 0, [], False, content)
    values: list[Any]
    labels: list[str] | None = None
    unit: Literal["items", "lines"]
    if fields:
        is_json, value = _PARSED.parsed(key, content, parse_json)
        if not is_json:
            raise _not_json(ref_id, content)
        doc = select_fields(value, list(fields))
        if isinstance(doc, list):
            unit, values = "items", doc
        elif matcher is not None and isinstance(doc, dict):
            unit, (labels, values) = "items", _records_of(doc)
        else:
            unit, values = "lines", json.dumps(doc, ensure_ascii=False, indent=2 if paged else None).split("\n")
    else:
        # a JSON array's items are its units; a pattern searches an object record by record;
        # anything else is lines
        is_json, value = _PARSED.parsed(key, content, parse_json) if content.lstrip()[:1] in ("[", "{") else (False, None)
        if is_json and isinstance(value, list):
            unit, values = "items", value
        elif is_json and isinstance(value, dict) and matcher is not None:
            unit, (labels, values) = "items", _records_of(value)
        elif is_json and isinstance(value, dict) and "\n" not in content.strip():
            # a one-line JSON object has one line: page the lines of its indented form instead
            unit, values = "lines", json.dumps(value, ensure_ascii=False, indent=2).split("\n")
        else:
            values = [ln.removesuffix("\r") for ln in content.split("\n")]  # CRLF lines too (csv, HTTP)
            if len(values) > 1 and values[-1] == "":
                values.pop()
            unit = "lines"

    def text(v: Any) -> str:
        return json.dumps(v, ensure_ascii=False) if unit == "items" else str(v)

    end = None if limit is None else offset + limit
    if page_cap is not None:
        end = offset + page_cap if end is None else min(end, offset + page_cap)
    if matcher is None:
        indexes: Sequence[int] = range(len(values))
        page = [_Unit(i, text(values[i]), values[i]) for i in indexes[offset:end]]
        return _Selection(ref_id, unit, len(values), len(indexes), offset, page, False, None)
    matches = list(_matches(values, unit, labels, matcher, text))
    page = matches[offset:end]
    if context and unit == "lines":
        page = [replace(u, before=_neighbour(values, u.index - 1), after=_neighbour(values, u.index + 1)) for u in page]
    return _Selection(ref_id, unit, len(values), len(matches), offset, page, True, None)


def _not_json(ref_id: str, content: str) -> InvalidInputError:
    """The error for ``fields`` on an output not read as JSON; why, when it looks like JSON."""
    why = inexact_json(content)
    why = f" {why}" if why else ""
    return InvalidInputError(f"{ref_id} is not JSON{why}; fields work on JSON outputs (use pattern or offset/limit)")


def _records_of(value: dict[str, Any]) -> tuple[list[str], list[Any]]:
    """An object cut into records: each item of a list under a key (``records[137]``), each
    other key with its value (``{"next_cursor": ...}``); nested objects are walked two levels."""
    labels: list[str] = []
    values: list[Any] = []
    stack: list[tuple[str, dict[str, Any], int]] = [("", value, 0)]
    while stack:
        path, node, depth = stack.pop(0)
        for key, item in node.items():
            where = f"{path}.{key}" if path else str(key)
            if isinstance(item, list) and item and not all(not isinstance(v, (dict, list)) for v in item):
                labels.extend(f"{where}[{i}]" for i in range(len(item)))
                values.extend(item)
            elif isinstance(item, dict) and item and depth < 2:
                stack.append((where, item, depth + 1))
            else:
                labels.append(where)
                values.append({str(key): item})
    return labels, values


def _matches(
    values: list[Any],
    unit: str,
    labels: list[str] | None,
    matcher: Matcher,
    text: Any,
) -> Any:
    """Matching units in order; a line holding a JSON array is searched item by item, and the
    items that match come back whole."""
    for i, value in enumerate(values):
        rendered = text(value)
        found = matcher.search(rendered)
        if found is None:
            continue
        if unit == "lines" and rendered.lstrip()[:1] == "[" and len(rendered) > 200:
            is_json, items = parse_json(rendered)
            if is_json and isinstance(items, list):
                for k, item in enumerate(items):
                    item_text = json.dumps(item, ensure_ascii=False)
                    if (in_item := matcher.search(item_text)) is not None:
                        yield _Unit(i, item_text, item, label=f"line {i} [{k}]", at=in_item.start())
                continue
        yield _Unit(i, rendered, value, label=labels[i] if labels is not None else None, at=found.start())


def _neighbour(values: list[Any], index: int) -> str | None:
    return clip_line(str(values[index])) if 0 <= index < len(values) else None


def clip_line(text: str, limit: int = 300) -> str:
    """A context line cut to ``limit`` characters."""
    return text if len(text) <= limit else head(text, limit - 1) + "…"


def _plain(selection: _Selection) -> str:
    if selection.whole is not None:
        return selection.whole
    if selection.unit == "items":
        return json.dumps([u.value for u in selection.page], ensure_ascii=False)
    return "\n".join(u.text for u in selection.page)


def expand(
    store: CASStore,
    ref_id: str,
    scope: Scope,
    *,
    fields: Sequence[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
    pattern: str | None = None, regex: bool = False,
) -> str:
    """The stored original of ``ref_id`` or a part of it.

    Without options: the original exactly, as stored. ``fields`` selects JSON paths (one path
    gives its value, several give an object keyed by path). The result is then cut into units —
    the items of a JSON array, otherwise lines — which ``pattern`` filters (case-insensitive
    substring, or a regular expression with ``regex=True``) and ``offset``/``limit`` page.
    Items come back as a JSON array, lines joined by ``\\n``.

    Raises:
        RefNotFoundError: unknown, expired, or not readable from ``scope``.
        InvalidInputError: a malformed ref, path, pattern or range, or ``fields`` on non-JSON.
        StoreError: the store failed.
    """
    check_options(offset, limit, pattern, regex)  # a bad option is reported before the store is asked
    record = store.get(ref_id, scope)
    return _plain(_select(record.content, ref_id, fields, offset, limit, pattern, regex, key=(ref_id, record.raw_hash, len(record.content), False)))


def expand_for_model(
    store: CASStore,
    ref_id: str,
    scope: Scope,
    *,
    max_tokens: int,
    counter: TokenCounter,
    fields: Sequence[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
    pattern: str | None = None, regex: bool = False,
) -> str:
    """:func:`expand` for the ``expand_ref`` tool: at most ``max_tokens``, with a note on how to
    page further. Never raises: problems come back as a sentence the model can act on. A ref
    written inside other text (quotes, backticks, a full stop) is read as that ref. The text is
    read as a terminal shows it, as summaries quote it: escape codes out, line numbers kept.

    The text alone of an output stored with images (see :func:`expand_content_for_model`,
    which gives the images too)."""
    out = expand_content_for_model(store, ref_id, scope, max_tokens=max_tokens, counter=counter, fields=fields,
                                   offset=offset, limit=limit, pattern=pattern, regex=regex)
    if isinstance(out, str):
        return out
    text = blocks_text(out)
    return text if not any(map(is_media_block, out)) else text + "\n" + images_note(ref_as_written(ref_id), out)


def expand_content_for_model(
    store: CASStore, ref_id: str, scope: Scope, *, max_tokens: int, counter: TokenCounter,
    fields: Sequence[str] | None = None, offset: int = 0, limit: int | None = None, pattern: str | None = None, regex: bool = False,
) -> str | list[Any]:
    """:func:`expand_for_model`, with an output stored with images given back as content blocks (see
    :func:`~ctxplugin.cas._blocks.blocks_for_model`): its text (paged like a text output's when over the cap) and
    every image whole. ``fields``, ``pattern`` and ``offset``/``limit`` read its text alone, and return text."""
    return read_for_model(store, ref_id, scope, max_tokens=max_tokens, counter=counter, fields=fields, offset=offset, limit=limit, pattern=pattern, regex=regex)[0]


def read_for_model(
    store: CASStore, ref_id: str, scope: Scope, *, max_tokens: int, counter: TokenCounter,
    fields: Sequence[str] | None = None, offset: int = 0, limit: int | None = None, pattern: str | None = None, regex: bool = False,
) -> tuple[str | list[Any], bool]:
    """:func:`expand_content_for_model`'s answer, and whether it read the ref (``False``: the
    answer says why it could not: unknown or unreadable ref, invalid option, store failure)."""
    ref_id = ref_as_written(ref_id)
    try:
        check_options(offset, limit, pattern, regex)
        record = store.get(ref_id, scope)
        blocks = stored_blocks(record)
        content = record.content if blocks is None else blocks_text(blocks)
        # a unit costs at least one token: no page holds more than max_tokens of them
        key = (ref_id, record.raw_hash, len(record.content), blocks is not None)  # the blocks' text, or the output itself
        selection = _select(content, ref_id, fields, offset, limit, pattern, regex, page_cap=max_tokens, context=True, screen=True, key=key)
    except RefNotFoundError:
        return f"expand_ref: no such ref visible here: {ref_id!r}. Refs are readable only in the conversation that stored them and until they expire; use a ref shown in this conversation.", False
    except InvalidInputError as exc:
        return f"expand_ref: {exc}", False
    except StoreUnavailableError as exc:
        return f"expand_ref: the store is unavailable right now ({exc}); continue without it or try again later.", False
    except StoreError as exc:  # not an outage (a damaged value, a closed store): the same call fails again
        return f"expand_ref: this output cannot be read ({exc}); trying again will not help, continue without it.", False
    if selection.whole is not None:
        whole = selection.whole
        if len(whole) <= max_tokens * 8 and count_text(whole, counter) <= max_tokens:
            return (whole if blocks is None else blocks_for_model(blocks, None)), True
        try:
            selection = _select(content, ref_id, None, 0, None, None, False, whole_as_units=True, page_cap=max_tokens, screen=True,
                                key=key)
        except CtxpluginError as exc:
            return f"expand_ref: {exc}", False
        page = _page_for_model(selection, content, max_tokens, counter, fields, pattern, regex)
        return (page if blocks is None else blocks_for_model(blocks, page)), True
    page = _page_for_model(selection, content, max_tokens, counter, fields, pattern, regex)
    return (page if blocks is None or not any(map(is_media_block, blocks)) else f"{page}\n{images_note(ref_id, blocks)}"), True


_READ_ON_TOKENS = 40
"""Tokens a cut unit leaves for the call that reads on past it."""


def _read_on(ref_id: str, text: str, end: int, content: str) -> str:
    """The call that shows ``text`` on from ``end``: a pattern for the few characters before
    ``end``, found once in ``content`` (any case). A line longer than the cap, such as a page of
    Chinese or Japanese without line breaks, is read to its end call after call."""
    if end >= len(text):
        return ""
    for size in (12, 24):
        piece = text[ceil_boundary(text, max(0, end - size)) : end]
        if piece.strip() and len(re.findall(re.escape(piece), content, re.IGNORECASE)) == 1:
            return f" To read on: expand_ref(ref_id={ref_id!r}, pattern={piece!r})."
    return ""


def _page_for_model(
    selection: _Selection,
    content: str,
    max_tokens: int,
    counter: TokenCounter,
    fields: Sequence[str] | None,
    pattern: str | None,
    regex: bool,
) -> str:
    budget = max(20, max_tokens - 60)  # room for the header and the paging note
    shown: list[str] = []
    shown_at: set[int] = set()
    page_at = {u.index for u in selection.page}
    used = 0
    cut_note = ""
    for unit in selection.page:
        label = f"[{unit.label or unit.index}] " if selection.filtered else ""
        text = label + unit.text
        if unit.before is not None and unit.index - 1 not in shown_at:
            text = f"  {unit.index - 1}- {unit.before}\n{text}"
        if unit.after is not None and unit.index + 1 not in page_at:
            text += f"\n  {unit.index + 1}- {unit.after}"
            shown_at.add(unit.index + 1)  # the next match's line before is this one: shown once
        shown_at.add(unit.index)
        cost = count_text(text, counter) + 1
        if used + cost > budget:
            if not shown:
                # one unit alone is over the budget: the part of it around the pattern's match
                # (the model searched for that), without its neighbours
                room = max(budget // 2, budget - count_text(label, counter) - _READ_ON_TOKENS)
                text = label + cut_around(unit.text, room, counter, around=unit.at)
                json_output = selection.unit == "items" or bool(fields)
                cut_note = f" The {selection.unit[:-1]} at {unit.index} is cut to fit" + (
                    "; shown around the first match (a pattern for other text on it shows that part)"
                    if selection.filtered
                    else "; pattern='<text on it>' shows the part around that text"
                    + (", fields=[...] narrows it" if json_output else "")
                ) + "." + _read_on(selection.ref_id, unit.text, window(unit.text, room, counter, around=unit.at)[1], content)
                shown.append(text)
            break
        shown.append(text)
        used += cost
    first = selection.offset
    last = first + len(shown) - 1
    kind = selection.unit
    what = f"matching {kind}" if selection.filtered else kind
    if selection.filtered:
        given = echoed(pattern, f"the pattern given ({len(pattern or ''):,} characters)")
        found = f"{selection.matched} of {selection.total} {kind} match {given}"
        prefix = "its path" if kind == "items" and any(u.label for u in selection.page) else (
            "its offset (a summary's L-number less one)" if kind == "lines" else f"its {kind[:-1]} number"
        )
        context = "; neighbouring lines as 'N- '" if kind == "lines" else ""
        span = f"showing matches {first}–{last}, each prefixed with {prefix}{context}" if shown else f"none at offset {first}"
        header = f"[{selection.ref_id} · {found}; {span}]"
    elif shown:
        header = f"[{selection.ref_id} · {kind} {first}–{last} of {selection.total}]"
    else:
        header = f"[{selection.ref_id} · no {kind} at offset {first} (there are {selection.total})]"
    out = header + "\n" + "\n".join(shown) if shown else header
    remaining = selection.matched - (first + len(shown))
    if remaining > 0:
        options = []
        if fields:
            options.append(f"fields={echoed(list(fields), '<the same fields>')}")
        if pattern:
            options.append(f"pattern={echoed(pattern, '<the same pattern>')}" + (", regex=True" if regex else ""))
        options.append(f"offset={first + len(shown)}")
        out += (
            f"\n[{remaining} more {what}: call expand_ref(ref_id={selection.ref_id!r}, {', '.join(options)}) "
            f"to continue{' (offset counts matches)' if selection.filtered else ''}.{cut_note}]"
        )
    elif cut_note:
        out += f"\n[{cut_note.strip()}]"
    return out


__all__ = ["clip_line", "expand", "expand_content_for_model", "expand_for_model", "parse_path", "read_for_model", "select"]
