"""Zero-LLM summaries of JSON outputs: keys, counts, identifiers and the first records.

Lists of objects are rendered as rows under one column list (keys are not repeated per row),
and every identifier the rendering leaves out is listed on its own lines, grouped by key.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ctxplugin.cas._array_ids import named_ids, primary_ids
from ctxplugin.cas._budget import Lines, shortened
from ctxplugin.cas._records import RecordSet, render_json, summarize_records, worth_a_record_set
from ctxplugin.tokens import TokenCounter

_ID_KEY = re.compile(r"(?i)(^|_)(id|ids|uuid|key|number|no|num|code|sha|hash|ref|slug|path|url|email|date|dob)s?$|[a-z]Id$")
_ID_VALUE = re.compile(r"^(?=[^\s]*\d)(?=[^\s]*[A-Za-z])[A-Za-z0-9][\w.:/@+-]{2,63}$|^(?=[^\s]*[A-Z])[A-Z0-9]{5,12}$")
_PRIMARY = re.compile(r"(?i)^(id|uuid|key|name|title)$|(_id|Id|_number|_no|_key|_code)$")
_NODE_CAP = 20_000
_CUT = object()  # what _walk yields last when it stopped at _NODE_CAP


@dataclass(frozen=True)
class _Level:
    width: int  # characters of a string value
    rows: int  # records shown inside one container
    depth: int  # nesting shown for containers that are not records
    nested: bool  # flatten dict-valued columns into ``key.sub`` columns
    cols: int  # columns of a record row


_LEVELS = (
    _Level(60, 8, 3, True, 16),
    _Level(40, 4, 2, True, 12),
    _Level(28, 3, 1, False, 8),
    _Level(20, 2, 1, False, 5),
    _Level(16, 0, 0, False, 3),
)


def _scalar(value: Any, width: int) -> str:
    if isinstance(value, str):
        if not value:
            return '""'
        text = " ".join(value.split()) if ("\n" in value or "\t" in value) else value
        return shortened(text, width)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, float) else str(value)


def _is_scalar(value: Any) -> bool:
    return not isinstance(value, (dict, list))


def _records(value: Any) -> list[dict[str, Any]] | None:
    """The objects of a list that is (mostly) objects, else None."""
    if not isinstance(value, list) or not value:
        return None
    dicts = [v for v in value if isinstance(v, dict)]
    return dicts if len(dicts) * 5 >= len(value) * 4 else None


def _keyed_records(value: Any) -> bool:
    """An object keyed by ids whose values are objects, e.g. ``{"card_1": {...}, "card_2": {...}}``."""
    return (
        isinstance(value, dict)
        and len(value) >= 2
        and all(isinstance(v, dict) for v in value.values())
        and all(_ID_VALUE.match(str(k)) for k in value)
    )


def _columns(records: list[dict[str, Any]], level: _Level) -> list[str]:
    cols: dict[str, None] = {}
    for record in records[:20]:
        for key, value in record.items():
            if isinstance(value, dict) and level.nested and all(_is_scalar(v) for v in value.values()):
                for sub in value:
                    cols.setdefault(f"{key}.{sub}", None)
            else:
                cols.setdefault(str(key), None)
    ordered = list(cols)
    if len(ordered) <= level.cols:
        return ordered
    keep = [c for c in ordered if _ID_KEY.search(c.split(".")[-1])][: level.cols]
    for c in ordered:
        if len(keep) >= level.cols:
            break
        if c not in keep:
            keep.append(c)
    return [c for c in ordered if c in keep]


def _cell(record: dict[str, Any], column: str, level: _Level) -> str:
    if column in record:
        return inline(record[column], _Level(level.width, 0, 0, False, level.cols))
    head, _, sub = column.partition(".")
    value = record.get(head)
    if isinstance(value, dict) and sub in value:
        return _scalar(value[sub], level.width)
    return "-"


def _rows(records: list[dict[str, Any]], cols: list[str], level: _Level) -> list[str]:
    return [", ".join(_cell(r, c, level) for c in cols) for r in records]


def inline(value: Any, level: _Level) -> str:
    """A compact, quote-free rendering of ``value`` bounded by ``level``."""
    if _is_scalar(value):
        return _scalar(value, level.width)
    records = _records(value)
    if records is not None:
        if level.rows <= 0:
            primary = _primary_key(records)
            if primary is None:
                return f"[{len(value)} objects]"
            names = [_scalar(r.get(primary), level.width) for r in records[:12]]
            more = f", …+{len(value) - len(names)}" if len(value) > len(names) else ""
            return f"[{len(value)} objects, {primary}: {', '.join(names)}{more}]"
        cols = _columns(records, level)
        shown = _rows(records[: level.rows], cols, level)
        rest = len(value) - len(shown)
        return f"[{len(value)}] ({', '.join(cols)}): " + " | ".join(shown) + (f" | …+{rest}" if rest else "")
    if _keyed_records(value):
        if level.rows <= 0:
            names = list(map(str, value))[:12]
            more = f", …+{len(value) - len(names)}" if len(value) > len(names) else ""
            return "{" + ", ".join(names) + more + "}"
        inner = list(value.items())
        cols = _columns([v for _, v in inner], level)
        cols = [c for c in cols if c != "id"]
        shown = [f"{k}: " + ", ".join(_cell(v, c, level) for c in cols) for k, v in inner[: level.rows]]
        rest = len(inner) - len(shown)
        return f"{{{len(value)}}} ({', '.join(cols)}): " + " | ".join(shown) + (f" | …+{rest}" if rest else "")
    if isinstance(value, dict):
        if not value:
            return "{}"
        if level.depth <= 0:
            return f"{{…{len(value)} keys}}"
        deeper = _Level(level.width, level.rows, level.depth - 1, level.nested, level.cols)
        pairs = list(value.items())[: level.cols]
        body = ", ".join(f"{k}={inline(v, deeper)}" for k, v in pairs)
        rest = len(value) - len(pairs)
        return "{" + body + (f", …+{rest}" if rest else "") + "}"
    if not value:
        return "[]"
    if level.depth <= 0 and not all(_is_scalar(v) for v in value[:8]):
        return f"[…{len(value)}]"
    deeper = _Level(level.width, level.rows, level.depth - 1, level.nested, level.cols)
    count = max(level.rows, 3) if all(_is_scalar(v) for v in value) else max(level.rows, 1)
    items = value[:count]
    body = ", ".join(inline(v, deeper) for v in items)
    rest = len(value) - len(items)
    return "[" + body + (f", …+{rest}" if rest else "") + "]"


# ---------------------------------------------------------------------------- identifiers
def _walk(value: Any) -> Iterator[tuple[str, Any]]:
    """(key, scalar) pairs in document order; iterative, so nesting depth cannot overflow."""
    stack: list[tuple[str, Any]] = [("", value)]
    seen = 0
    while stack and seen < _NODE_CAP:
        key, node = stack.pop()
        seen += 1
        if isinstance(node, dict):
            for k, v in node.items():
                if isinstance(v, dict) and _ID_VALUE.match(str(k)):
                    yield key or "key", str(k)  # objects keyed by id, e.g. payment methods
            stack.extend((str(k), v) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((key, v) for v in reversed(node))
        else:
            yield key, node
    if stack:
        yield "", _CUT  # the cap was reached: what is left was not read


def identifiers(value: Any) -> tuple[dict[str, list[str]], bool]:
    """Identifier values grouped by key in first-occurrence order; whether the walk stopped at the cap."""
    out: dict[str, list[str]] = {}
    seen: set[str] = set()
    for key, leaf in _walk(value):
        if leaf is _CUT:
            return out, True
        text = str(leaf)
        if isinstance(leaf, (bool, float)) or leaf is None or text in seen or len(text) > 64 or not text.strip():
            continue
        id_key = bool(_ID_KEY.search(key)) and not (" " in text and len(text) > 40)
        if id_key or (isinstance(leaf, str) and _ID_VALUE.match(text)):
            seen.add(text)
            out.setdefault(key or "value", []).append(text)
    return out, False


def _missing_ids(ids: dict[str, list[str]], shown: str) -> list[tuple[str, list[str]]]:
    out = []
    for key, values in ids.items():
        rest = [v for v in values if v not in shown]
        if rest:
            out.append((key, rest))
    return out


def _id_lines(lines: Lines, ids: dict[str, list[str]], cut: bool) -> None:
    for key, values in _missing_ids(ids, "\n".join(lines.lines)):
        if lines.add_list(f"{key}: ", values) == 0:
            break
    if cut:  # the counts above ("+N more") are of the part read, not of the whole output
        lines.add(f"identifiers read from the first {_NODE_CAP:,} values only", force=True)


# ---------------------------------------------------------------------------- objects
def _units(value: dict[str, Any], keys: list[str]) -> list[list[str]]:
    """Top-level keys in display units: runs of scalars share a unit, containers get their own."""
    units: list[list[str]] = []
    run: list[str] = []
    width = 0
    for key in keys:
        if _is_scalar(value[key]):
            run.append(key)
            width += len(key) + len(_scalar(value[key], 60)) + 4
            if width > 100:
                units.append(run)
                run, width = [], 0
            continue
        if run:
            units.append(run)
            run, width = [], 0
        units.append([key])
    if run:
        units.append(run)
    return units


def _render_unit(value: dict[str, Any], unit: list[str], level: _Level) -> str:
    if len(unit) == 1 and not _is_scalar(value[unit[0]]):
        return f"{unit[0]}: {inline(value[unit[0]], level)}"
    return ", ".join(f"{k}: {_scalar(value[k], level.width)}" for k in unit)


def _ids_first(ids: dict[str, list[str]]) -> dict[str, list[str]]:
    """Ids proper (``*_id``, ``*_number``, object keys) ahead of dates, emails and the like."""
    strong = re.compile(r"(?i)(^|_)(id|ids|uuid|number|no|key)$|[a-z]Id$")
    return dict(
        sorted(ids.items(), key=lambda kv: 0 if strong.search(kv[0]) or all(_ID_VALUE.match(v) for v in kv[1]) else 1)
    )


def summarize_object(value: dict[str, Any], counter: TokenCounter, budget: int) -> Lines:
    """Keys with compact values, each as detailed as the budget allows once every identifier
    the rendering leaves out is listed too; the biggest values give up detail first."""
    found, cut = identifiers(value)
    ids = _ids_first(found)
    keys = [str(k) for k in list(value)[:40]]
    units = _units(value, keys)
    levels = [0] * len(units)
    rendered = [_render_unit(value, u, _LEVELS[0]) for u in units]
    costs = [counter.count(r) + 1 for r in rendered]

    def id_cost(lines_text: str) -> int:
        lines = [f"{k}: {', '.join(v)}" for k, v in _missing_ids(ids, lines_text)]
        # a line far past any budget needs no exact count (and counting megabytes is slow)
        return sum(counter.count(line) + 1 if len(line) < 8 * budget else len(line) for line in lines)

    while sum(costs) + id_cost("\n".join(rendered)) > budget:
        candidates = [i for i in range(len(units)) if levels[i] < len(_LEVELS) - 1]
        if not candidates:
            break
        worst = max(candidates, key=lambda i: costs[i])
        levels[worst] += 1
        rendered[worst] = _render_unit(value, units[worst], _LEVELS[levels[worst]])
        costs[worst] = counter.count(rendered[worst]) + 1
    shown = len(units)
    while shown > 0 and sum(costs[:shown]) + id_cost("\n".join(rendered[:shown])) > budget:
        shown -= 1  # still too big: later keys go to "more keys", their ids stay listed
    lines = Lines(counter, budget)
    for line in rendered[:shown]:
        lines.add(line, force=True)
    hidden = [k for u in units[shown:] for k in u] + [str(k) for k in list(value)[len(keys) :]]
    _id_lines(lines, ids, cut)
    if hidden and lines.add_list("more keys: ", hidden, more_hint=" (expand_ref fields=[...])") == 0:
        named = Lines(counter, 30)  # identifiers took the budget: the keys are named all the same
        if named.add_list("more keys: ", hidden, more_hint=" (expand_ref fields=[...])"):
            lines.add(named.lines[0], force=True)
    return lines


# ---------------------------------------------------------------------------- arrays
def _primary_key(records: list[dict[str, Any]]) -> str | None:
    counts: dict[str, int] = {}
    for item in records[:50]:
        for k, v in item.items():
            if isinstance(v, (str, int)) and not isinstance(v, bool):
                counts[k] = counts.get(k, 0) + 1
    for k, n in counts.items():
        if n * 2 >= min(len(records), 50) and _PRIMARY.search(k):
            return k
    return None


def summarize_array(value: list[Any], counter: TokenCounter, budget: int) -> Lines:
    """Count, columns, every item's primary id (as many as fit), then the first rows."""
    lines = Lines(counter, budget)
    records = _records(value)
    nested = None if records is not None else _records([r for item in value[:50] if isinstance(item, list) for r in item])
    kinds = sorted({"object" if isinstance(v, dict) else "array" if isinstance(v, list) else type(v).__name__.replace("str", "string") for v in value[:200]})
    lines.add(f"JSON array of {len(value)} {'/'.join(k + 's' for k in kinds) or 'items'}")
    rows_of = records if records is not None else nested
    primary = _primary_key(records) if records is not None else None
    if primary is not None and records is not None:  # the primary ids, then a search result's urls
        named = named_ids(records, primary, counter, budget)
    else:
        id_budget = Lines(counter, max(0, lines.left * 2 // 3))
        _id_lines(id_budget, *identifiers(value))
        named = id_budget.lines
    for line in named:
        lines.add(line, force=True)
    shown = 0
    lines.budget -= 12  # keep room for the "… N more items" line
    for level in _LEVELS[:-1]:
        cols = _columns(rows_of, level) if rows_of else []
        header = f"columns: {', '.join(cols)}" if cols else ""
        rendered = [f"[{i}] {_item(v, cols, level)}" for i, v in enumerate(value[:2])]
        cost = (lines.cost(header) if header else 0) + sum(lines.cost(r) for r in rendered)
        if cost <= lines.left - 8 or level is _LEVELS[-2]:
            if header:
                lines.add(header)
            for i, v in enumerate(value):
                if not lines.add(f"[{i}] {_item(v, cols, level)}"):
                    break
                shown += 1
            break
    lines.budget += 12
    unnamed = rows_of and not shown and not any(ln.startswith("columns: ") for ln in lines.lines)  # no row fit
    keys = f"; keys: {', '.join(_columns(rows_of, _LEVELS[0]))}" if unnamed and rows_of else ""
    if shown < len(value):
        lines.add(f"… {len(value) - shown} more items{keys} (expand_ref offset={shown})", force=True)
    return lines


def _item(value: Any, cols: list[str], level: _Level) -> str:
    if cols and isinstance(value, dict):
        return ", ".join(_cell(value, c, level) for c in cols)
    if cols and isinstance(value, list) and all(isinstance(v, dict) for v in value):
        return " | ".join(", ".join(_cell(v, c, level) for c in cols) for v in value)
    return inline(value, level)


# ---------------------------------------------------------------------------- record sets

_CURSOR_KEY = re.compile(r"(?i)cursor|token|next|prev|page|offset|after|before|more|total|count|status|id$")


def record_list(value: dict[str, Any]) -> str | None:
    """The key of the largest list of objects in ``value`` when it is a record set."""
    best, size = None, 0
    for key, item in value.items():
        records = _records(item)
        if records is not None and len(item) > size and len(records) == len(item) and worth_a_record_set(records):
            best, size = str(key), len(item)
    return best


def summarize_records_array(value: list[Any], counter: TokenCounter, budget: int) -> Lines:
    """A JSON array of objects as a record set: keys, spreads, rare records in full, ids."""
    lines = Lines(counter, budget)
    records = value if set(map(type, value)) == {dict} else [v if isinstance(v, dict) else {"value": v} for v in value]
    summarize_records(RecordSet(records, render_json(value)), lines, prefix="JSON array of ", ids=lambda ls: primary_ids(records, ls, _primary_key(records)))
    return lines


def summarize_wrapped(value: dict[str, Any], key: str, counter: TokenCounter, budget: int) -> Lines:
    """An object around a record set (an API page, a log export): every top-level scalar
    verbatim (ids, cursors, totals, status), other top-level keys by size, then the record set."""
    lines = Lines(counter, budget)
    scalars = [(str(k), v) for k, v in value.items() if _is_scalar(v)]
    scalars.sort(key=lambda kv: 0 if _CURSOR_KEY.search(kv[0]) or _ID_KEY.search(kv[0]) else 1)
    parts = [f"{k}: {_scalar(v, 160 if _CURSOR_KEY.search(k) or _ID_KEY.search(k) else 60)}" for k, v in scalars]
    if parts:
        lines.add(", ".join(parts), force=True)
    others = [f"{k}: {inline(v, _LEVELS[-1])}" for k, v in value.items() if not _is_scalar(v) and str(k) != key]
    if others:
        lines.add_list("", others, more_hint=" (expand_ref fields=[...])", sep="; ")
    items = value[key]
    records = [v if isinstance(v, dict) else {"value": v} for v in items]
    summarize_records(
        RecordSet(records, render_json(items)), lines, prefix=f"{key}: ",
        ids=lambda ls: primary_ids(records, ls, _primary_key(records), paged=f" (expand_ref fields={json.dumps([key], ensure_ascii=False)} offset/limit)"),
    )
    return lines

