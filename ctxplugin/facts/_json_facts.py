"""Record facts from JSON tool results: one fact per object ("reservation OI5L9G: origin=MCO,
..."), keyed by the record's id field so a later read of the same record supersedes the earlier
one; and the clipping every rule-made fact's text goes through."""

from __future__ import annotations

import re
from typing import Any

from ctxplugin._graphemes import head
from ctxplugin.facts._text import identifiers
from ctxplugin.facts.extract import FactDraft
from ctxplugin.facts.model import MAX_TEXT

_ID_FIELD = re.compile(r"^(?:id|.+_id|.+_number|.+_code|.+_ref|sku|slug)$", re.IGNORECASE)
MAX_RECORDS = 5


def record_fact(data: dict[str, Any], label: str, *, keyed: bool) -> FactDraft | None:
    id_field = next((k for k, v in data.items() if _ID_FIELD.match(k) and isinstance(v, (str, int)) and str(v)), None)
    parts: list[str] = []
    for name, value in data.items():
        if name == id_field:
            continue
        parts.append(f"{name}={_brief(value)}")
    if id_field is not None:
        stem = re.sub(r"_(?:id|number|code|ref)$", "", id_field, flags=re.IGNORECASE)
        stem = label if stem.lower() == "id" else stem
        head = f"{stem} {data[id_field]}"
        key = f"{stem}:{data[id_field]}" if keyed else None
    else:
        head, key = label, None
    if not parts and id_field is None:
        return None
    text = clip(f"{head}: " + ", ".join(parts)) if parts else head
    names = {k.lower() for k in _keys(data)}
    values = " ".join(_brief(v) for v in data.values())
    found = ([str(data[id_field]).lower()] if id_field else []) + [i for i in identifiers(values) if i not in names]
    tags = tuple(dict.fromkeys(found))[:8]
    return FactDraft(text=text, key=key, kind="entity", tags=tags, importance=0.5, record=key is None)


def _keys(data: Any, depth: int = 3) -> list[str]:
    """Field names of nested JSON (so they are not taken for identifiers)."""
    if depth == 0:
        return []
    if isinstance(data, dict):
        return [str(k) for k in data] + [n for v in data.values() for n in _keys(v, depth - 1)]
    if isinstance(data, list):
        return [n for v in data[:20] for n in _keys(v, depth - 1)]
    return []


def _brief(value: Any) -> str:
    if isinstance(value, dict):
        inner = ", ".join(f"{k}={_brief(v)}" for k, v in list(value.items())[:4] if not isinstance(v, (dict, list)))
        return "{" + inner + ("…" if len(value) > 4 else "") + "}"
    if isinstance(value, list):
        ids = [str(v.get(k)) for v in value if isinstance(v, dict) for k in v if _ID_FIELD.match(k)][:6]
        if ids:
            return "[" + ", ".join(ids) + "]"
        scalars = [str(v) for v in value if not isinstance(v, (dict, list))][:6]
        return "[" + ", ".join(scalars) + ("…" if len(value) > 6 else "") + "]" if scalars else f"[{len(value)} items]"
    return str(value)


def flat_items(data: list[Any]) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    for item in data:
        if isinstance(item, dict):
            items.append(item)
        elif isinstance(item, list):
            items.extend(i for i in item if isinstance(i, dict))
    return items


def tool_label(name: str | None) -> str:
    if not name:
        return "tool result"
    label = re.sub(r"^(?:get|fetch|read|search|list|find)_", "", name)
    return re.sub(r"_(?:details|info|data)$", "", label) or name


def clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else head(text, MAX_TEXT - 1).rstrip() + "…"


__all__ = ["MAX_RECORDS", "clip", "flat_items", "record_fact", "tool_label"]
