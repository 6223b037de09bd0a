"""Summaries of record sets — JSON lists of objects, JSON Lines, CSV/TSV and fixed-width tables.

A record set is summarized by what sets records apart, not by its first rows: the keys with
their types (and how many records carry a key most do not), the spread of each categorical
column (``level: INFO×199, ERROR×1``), and then the rare records — those whose level, status or
outcome differs from the majority, or that carry a key the others lack — shown in full. What
does not fit is counted, with the ``expand_ref`` call that returns it.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from itertools import chain, repeat
from typing import Any

from ctxplugin._graphemes import head
from ctxplugin.cas._budget import Lines, clip

_SCAN = 200_000  # records looked at for columns, spreads and rare values; linear, bounded
_KEY_SCAN = 20_000  # records looked at for keys and their types
_CATEGORY_MAX = 24  # distinct values a categorical column may have
_STATUS_KEY = re.compile(r"(?i)(^|[_.\s])(level|severity|status|state|outcome|result|phase|type|kind|event|code|reason|ready|error)s?$")
_BAD_VALUE = re.compile(
    r"(?i)error|fail|fatal|crit|panic|exception|crash|backoff|denied|declin|reject|refus|chargeback|dispute|"
    r"fraud|timeout|timed.?out|oom|killed|evict|unhealthy|invalid|abort|cancel|refund|warn|pending|unknown"
)
_RECORD_CHARS = 480


@dataclass(frozen=True)
class RecordSet:
    """Records to summarize and how to show one of them.

    Attributes:
        records: the records (keys in document order).
        render: one record as the reader should see it (compact JSON, the original line).
        noun: what a record is called (``records``, ``rows``, ``lines``).
        positions: where each record is in the stored output, as ``expand_ref`` ``offset``
            counts (a row's line, header and blank lines included); None: its index.
    """

    records: Sequence[dict[str, Any]]
    render: Callable[[int], str]
    noun: str = "records"
    positions: Sequence[int] | None = None

    # each read once per record set: every one is a pass over up to _SCAN records in Python
    @cached_property
    def kinds(self) -> list[tuple[str, str, int]]:
        """:func:`key_types` of the records."""
        return key_types(self.records)

    @cached_property
    def categorical(self) -> list[tuple[str, Counter[str]]]:
        """The categorical columns of the records (see :func:`rare_indexes`)."""
        return _categorical(self.records)

    @cached_property
    def rare(self) -> list[tuple[int, str]]:
        """:func:`rare_indexes` of the records."""
        return rare_indexes(self.records, kinds=self.kinds, categorical=self.categorical)

    def at(self, index: int) -> int:
        """The ``offset`` that returns record ``index``: the label it is shown with."""
        return index if self.positions is None else self.positions[index]


def _type_name(kind: type) -> str:
    """The JSON name of values of type ``kind``."""
    if kind is type(None):
        return "null"
    if issubclass(kind, bool):
        return "bool"
    if issubclass(kind, int):
        return "int"
    if issubclass(kind, float):
        return "number"
    if issubclass(kind, str):
        return "string"
    return "object" if issubclass(kind, dict) else "array"


_MISSING = object()


def _columns(records: Sequence[dict[str, Any]]) -> Iterator[tuple[str, list[Any], list[int] | None]]:
    """``(key, column, places)`` for every key, in first-seen order: ``column`` the key's value
    in each record or _MISSING (``places`` None), gathered in C (``map``), where a loop over
    every record's items runs in Python; or, when most records lack most keys (a column per key
    would cost keys times records), its values in the records that carry it, and ``places``
    their indexes, from one loop over the items."""
    keys = dict.fromkeys(chain.from_iterable(records))
    if len(keys) * len(records) <= _SPARSE * (sum(map(len, records)) + len(records)):
        for key in keys:
            yield key, list(map(dict.get, records, repeat(key), repeat(_MISSING))), None
        return
    values: dict[str, list[Any]] = {key: [] for key in keys}
    places: dict[str, list[int]] = {key: [] for key in keys}
    for index, record in enumerate(records):
        for key, value in record.items():
            values[key].append(value)
            places[key].append(index)
    for key in keys:
        yield key, values[key], places[key]


_SPARSE = 4
"""Above this many keys times records per value held, :func:`_columns` reads the records item by
item."""


def key_types(records: Sequence[dict[str, Any]]) -> list[tuple[str, str, int]]:
    """``(key, types, records carrying it)`` in first-seen order."""
    out = []
    for key, column, _ in _columns(records[:_KEY_SCAN]):
        kinds = Counter(map(type, column))
        carried = len(column) - kinds.pop(object, 0)  # the type of _MISSING
        names: Counter[str] = Counter()
        for kind, count in kinds.items():  # in first-seen order, as most_common breaks ties
            names[_type_name(kind)] += count
        out.append((str(key), "/".join(t for t, _ in names.most_common(2)), carried))
    return out


def keys_line(records: Sequence[dict[str, Any]], *, typed: bool = True, kinds: list[tuple[str, str, int]] | None = None) -> str:
    """``keys: ts, level, msg: string; duration_ms: int; error: object (1 of 200)``: keys grouped
    by type in first-seen order; a key most records lack says how many carry it."""
    scanned = min(len(records), _KEY_SCAN)
    groups: dict[str, list[str]] = {}
    for key, types, count in key_types(records) if kinds is None else kinds:
        name = key if count >= scanned else f"{key} ({count} of {scanned})"
        groups.setdefault(types if typed else "", []).append(name)
    if not typed:
        return "keys: " + ", ".join(groups[""])
    return "keys: " + "; ".join(f"{', '.join(names)}: {types}" for types, names in groups.items())


def _categorical(records: Sequence[dict[str, Any]]) -> list[tuple[str, Counter[str]]]:
    """Columns of short text values that repeat: ``(key, value counts)``, status-like first."""
    scanned = records[:_SCAN]
    n = len(scanned)
    if n < 5:
        return []
    values: dict[str, Counter[str]] = {}
    first: dict[str, tuple[int, int]] = {}  # where a key's first counted value is: its place
    for key, column, places in _columns(scanned):
        counter = _category_counts(column)
        if counter:
            values[key] = counter
            at = next(i for i, v in enumerate(column) if _countable(v))
            at = at if places is None else places[at]
            first[key] = (at, list(scanned[at]).index(key))
    out = []
    for key, counter in sorted(values.items(), key=lambda kc: first[kc[0]]):
        total = sum(counter.values())
        distinct = len(counter)
        if total * 2 < n or distinct < 2 or distinct > _CATEGORY_MAX or distinct * 3 > total:
            continue
        out.append((key, counter))
    out.sort(key=lambda kc: (0 if _STATUS_KEY.search(kc[0]) else 1, -max(kc[1].values()) / sum(kc[1].values())))
    return out


def _countable(value: Any) -> bool:
    """Whether a column's value is counted as a category: short text, or true / false."""
    return isinstance(value, (str, bool)) and len(str(value)) <= 40


def _category_counts(column: list[Any]) -> Counter[str] | None:
    """The counted values of a column (true / false for booleans), in first-seen order; None
    when more than _CATEGORY_MAX distinct (an id or free text, not a category)."""
    kinds = set(map(type, column))
    if not any(issubclass(kind, (str, bool)) for kind in kinds):
        return None
    if bool in kinds or any(issubclass(kind, (dict, list)) for kind in kinds):
        # what a dict cannot key (an object, a list) or takes for another (True for 1): one by one
        raw = Counter(str(v).lower() if isinstance(v, bool) else v for v in column if _countable(v))
    else:
        raw = Counter(column)  # counted in C
    counter: Counter[str] = Counter()
    for value, count in raw.items():
        if _countable(value):
            counter[value] = count
            if len(counter) > _CATEGORY_MAX:
                return None
    return counter


def rare_indexes(
    records: Sequence[dict[str, Any]],
    *,
    kinds: list[tuple[str, str, int]] | None = None,
    categorical: list[tuple[str, Counter[str]]] | None = None,
) -> list[tuple[int, str]]:
    """Records that differ from the majority, most telling first, each with why:
    a rare value of a categorical column (``status=CHARGEBACK``) or a key few records carry.
    ``kinds`` and ``categorical``: :func:`key_types` and the categorical columns of ``records``
    when known."""
    scanned = records[:_SCAN]
    n = len(scanned)
    if n < 5:
        return []
    limit = max(1, n // 20)
    scored: dict[int, tuple[float, str]] = {}

    def note(index: int, score: float, why: str) -> None:
        if index not in scored or scored[index][0] < score:
            scored[index] = (score, why)

    rare_of: dict[str, tuple[Counter[str], set[str]]] = {}
    for key, counter in _categorical(scanned) if categorical is None else categorical:
        majority = counter.most_common(1)[0][1]
        if majority * 2 < sum(counter.values()):
            continue  # no majority to differ from
        rare = {v for v, c in counter.items() if c <= limit}
        if rare:
            rare_of[key] = (counter, rare)
    if rare_of:
        for index, record in enumerate(scanned):  # one pass for every column with rare values
            for key, (counter, rare) in rare_of.items():
                value = record.get(key)
                text = str(value).lower() if isinstance(value, bool) else value
                if isinstance(text, str) and text in rare:
                    status = 2.0 if _STATUS_KEY.search(key) else 1.0
                    bad = 2.0 if _BAD_VALUE.search(text) else 1.0
                    note(index, status * bad / counter[text] ** 0.5, f"{key}={text}")
    keyed = min(n, _KEY_SCAN)
    scarce = {key: count for key, _, count in (key_types(scanned) if kinds is None else kinds) if count <= max(1, keyed // 20)}
    if scarce:
        for index, record in enumerate(scanned):
            for key in scarce.keys() & record.keys():
                bad = 2.0 if _BAD_VALUE.search(key) else 1.0
                note(index, 1.5 * bad / scarce[key] ** 0.5, f"has {key}")
    return [(i, why) for i, (_, why) in sorted(scored.items(), key=lambda kv: (-kv[1][0], kv[0]))]


def worth_a_record_set(records: Sequence[Any]) -> bool:
    """Whether a list of objects reads better as a record set than row by row: 20 or more of
    them, or 8 or more with one whose status or level says something went wrong."""
    if len(records) >= 20:
        return True
    if len(records) < 8 or not all(isinstance(r, dict) for r in records):
        return False
    return any(_BAD_VALUE.search(why) for _, why in rare_indexes(records))


def spread_line(key: str, counter: Counter[str]) -> str:
    """``level: INFO×199, ERROR×1`` (most common first, at most eight values)."""
    items = counter.most_common()
    shown = ", ".join(f"{v}×{c}" for v, c in items[:8])
    return f"{key}: {shown}" + (f", … {len(items) - 8} more values" if len(items) > 8 else "")


def summarize_records(
    rs: RecordSet,
    lines: Lines,
    *,
    prefix: str = "",
    ids: Callable[[Lines], None] | None = None,
    head: bool = True,
) -> None:
    """Keys (unless ``head`` is False: a table has named its columns), spreads, rare records in
    full, identifiers (``ids``), then the first record; the last line says how to get the rest.

    Rare records take precedence over spreads and identifiers; the first one is cut to fit only
    when it alone is larger than what is left.
    """
    records = rs.records
    n = len(records)
    rare = rs.rare
    # fields take JSON paths: they read a JSON document, not the lines of a table or of JSON Lines
    paging = "fields=[...], offset/limit page" if rs.noun == "records" else "offset/limit page"
    hint = f"… expand_ref pattern={_pattern_hint(rare)} returns matching {rs.noun} whole; {paging}"
    reserved = lines.cost(hint)
    lines.budget -= reserved
    if head:
        line = f"{prefix}{n} {rs.noun}; " + keys_line(records, kinds=rs.kinds)
        if not lines.add(line):  # too many keys for the budget: names only, as many as fit
            lines.add_list(f"{prefix}{n} {rs.noun}; keys: ", [k for k, _, _ in rs.kinds])
    constant = _constant_keys(records)
    rendered = []
    for i, why in rare[:12]:
        full = f"[{rs.at(i)}] {clip(rs.render(i), _RECORD_CHARS)}"
        if lines.cost(full) > lines.left * 3 // 5 and isinstance(records[i], dict):
            full = f"[{rs.at(i)}] {_compact(records[i], why, constant)}"  # the telling fields first
        rendered.append(full)
    header = f"rare {rs.noun} ({len(rare)} of {n}; " + ", ".join(dict.fromkeys(w for _, w in rare[:3])) + "):" if rare else ""
    first_cost = (lines.cost(header) + min(lines.cost(rendered[0]), max(lines.left * 3 // 5, 0))) if rare else 0
    spreads = Lines(lines.counter, lines.left - first_cost)
    reasons = {w.split("=", 1)[0] for _, w in rare}
    for key, counter in sorted(rs.categorical, key=lambda kc: kc[0] not in reasons)[:3]:
        spreads.add(spread_line(key, counter))
    for line in spreads.lines:
        lines.add(line, force=True)
    shown_rare = 0
    if rare:
        lines.add(header, force=True)
        for line in rendered:
            if not lines.add(line):
                if not shown_rare:
                    lines.add(fit(line, max(lines.left - 1, 12), lines), force=True)
                    shown_rare += 1
                break
            shown_rare += 1
    if ids is not None:
        ids(lines)
    if n and not (rare and rare[0][0] == 0):
        lines.add(f"[{rs.at(0)}] {clip(rs.render(0), 240)}")
    lines.budget += reserved
    hidden = len(rare) - shown_rare
    lines.add((f"… {hidden} more rare {rs.noun}; " if hidden > 0 else "") + hint.removeprefix("… "), force=True)


def _constant_keys(records: Sequence[dict[str, Any]]) -> set[str]:
    """Keys whose value is the same in every record (shown once, not per record)."""
    if len(records) < 2:
        return set()
    first = records[0]
    keys = {k for k, v in first.items() if not isinstance(v, (dict, list))}
    for record in records[1:_SCAN]:
        keys = {k for k in keys if record.get(k) == first[k]}
        if not keys:
            break
    return keys


def _compact(record: dict[str, Any], why: str, constant: set[str]) -> str:
    """``level=ERROR msg=… request_id=…``: the field that makes the record rare first, then the
    others (longest text first), without the fields every record shares."""
    reason = why.split("=", 1)[0].removeprefix("has ")
    keys = [k for k in record if k not in constant and k != reason]
    keys.sort(key=lambda k: -len(str(record[k])) if isinstance(record[k], str) else 0)
    ordered = ([reason] if reason in record else []) + keys
    return clip(" ".join(f"{k}={_value(record[k])}" for k in ordered), _RECORD_CHARS)


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return str(value)


def fit(text: str, tokens: int, lines: Lines) -> str:
    """``text`` cut (with an ellipsis) to at most ``tokens`` tokens."""
    if lines.counter.count(text) <= tokens:
        return text
    size = min(len(text), tokens * 4)
    while size > 8 and lines.counter.count(text[:size] + "…") > tokens:
        size = size * 5 // 6
    return head(text, size).rstrip() + "…"


def _pattern_hint(rare: list[tuple[int, str]]) -> str:
    for _, why in rare:
        if "=" in why:
            return repr(why.split("=", 1)[1])
        return repr(why.removeprefix("has "))
    return "'<value>'"


def render_json(records: Sequence[Any]) -> Callable[[int], str]:
    """A record as compact JSON, keys in document order."""

    def render(index: int) -> str:
        try:
            return json.dumps(records[index], ensure_ascii=False, separators=(",", ":"))
        except (TypeError, ValueError, RecursionError):
            return str(records[index])

    return render
