"""The identifiers a JSON array of records names: its primary ids and its links."""

from __future__ import annotations

import json
from typing import Any

from ctxplugin.cas._budget import Lines
from ctxplugin.tokens import TokenCounter


def _link_keys(records: list[dict[str, Any]], primary: str) -> list[str]:
    """The keys besides ``primary`` whose values are web addresses in at least half the records."""
    counts: dict[str, int] = {}
    for record in records[:50]:
        for key, value in record.items():
            if key != primary and isinstance(value, str) and value.startswith(("https://", "http://")):
                counts[key] = counts.get(key, 0) + 1
    return [k for k, n in counts.items() if n * 2 >= min(len(records), 50)]


def named_ids(records: list[dict[str, Any]], primary: str, counter: TokenCounter, budget: int) -> list[str]:
    """``primary (all): …`` with the value of ``primary`` in every record that has one (in two
    thirds of ``budget``, leaving room for a first row), then ``url (all): …`` for each key whose
    values are web addresses (in ``budget`` each): a search result's ``url`` beside its ``title``
    is what the next step fetches, and a url cut short is of no use."""
    out: list[str] = []
    columns = [(primary, [str(r[primary]) for r in records if isinstance(r.get(primary), (str, int))])]
    columns += [(key, [r[key] for r in records if isinstance(r.get(key), str)]) for key in _link_keys(records, primary)]
    for key, values in columns:
        line = Lines(counter, max(0, budget * 2 // 3 if key == primary else budget))
        line.add_list(f"{key} (all): ", values, more_hint=" (expand_ref offset/limit)")
        out += line.lines
    return out


def primary_ids(records: list[dict[str, Any]], lines: Lines, primary: str | None, paged: str = " (expand_ref offset/limit)") -> None:
    """The ``primary`` ids of ``records`` not shown whole in ``lines`` so far, and how ``paged``
    reads the rest (the records of a list under an object's key are paged within that key)."""
    if primary is None:
        return
    shown = "\n".join(lines.lines)
    # the ids of the records shown whole above are not listed again; an id that only happens to
    # read like a count the lines give ("2 keys", "true×150") is: every record's id is listed or counted
    field = json.dumps(primary, ensure_ascii=False) + ":"
    values = [
        str(r[primary]) for r in records
        if isinstance(r.get(primary), (str, int)) and not _shown_whole(field + json.dumps(r[primary], ensure_ascii=False), shown)
    ]
    lines.add_list(f"{primary}: ", values, more_hint=paged)


def _shown_whole(pair: str, shown: str) -> bool:
    """Whether ``pair`` (``"id":2``) is a field of a record ``shown`` prints as JSON."""
    at = shown.find(pair)
    while at >= 0:
        after = shown[at + len(pair) : at + len(pair) + 1]
        if after in (",", "}", ""):
            return True
        at = shown.find(pair, at + 1)
    return False
