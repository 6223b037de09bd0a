"""What ``mode="whole"`` (the default) sets where a field is not given."""

from __future__ import annotations

import math
from collections.abc import Mapping
from contextlib import suppress
from contextvars import ContextVar
from typing import Any, TypeVar

from pydantic import BaseModel

C = TypeVar("C")

WHOLE_TOTAL = 7500
WHOLE_SHARES: dict[str, float] = {"header": 1 / 2, "history": 11 / 12, "facts": 2 / 75, "summaries": 11 / 12}
"""``mode="whole"``: what a section not set gets, as a share of the total — 3,750, 6,875, 200
and 6,875 of 7,500. History (messages) and summaries (tool outputs) overlap: either may take
most of the room, and the total still holds. The header's share is the half the system prompt
may take before :attr:`~ctxplugin.config.BudgetConfig.elastic` grows the total: the history's
room is what the header leaves, so a header within it is not reported as over."""

WHOLE_PRESET: dict[str, dict[str, Any]] = {
    "history": {
        "compress": "over_budget",
        "max_tokens": 1000,
        "verbatim_exchanges": 1,
        "trimmed_exchanges": 1,
        "block_size": 2,
        "digest_tokens": 100,
        "archive_tokens": 850,
        "solo_exchanges": 8,
        "solo_tool_tokens": 1500,
    },
    "cas": {"passthrough_tokens": 500},
    "facts": {"placement": "window", "skip_shown": True},
}
"""What ``mode="whole"`` sets where a field is not given (the budget as :data:`WHOLE_SHARES`)."""


def whole_preset(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with :data:`WHOLE_PRESET` and the whole-mode budget under every field not given.
    A section given as a model instance is taken as it is (:func:`mode_defaults` first turns one
    into the fields it was given); one that is no mapping is left to validation, which names it."""
    out = dict(data)
    for section, values in WHOLE_PRESET.items():
        given = out.get(section)
        if given is not None and not isinstance(given, Mapping):
            continue
        merged = {**values, **(given or {})}
        if section == "history" and "trimmed_exchanges" not in (given or {}) and "verbatim_exchanges" in merged:
            # a larger verbatim window given alone keeps trimmed >= verbatim
            with suppress(TypeError, ValueError):  # else left to validation, which names the field
                merged["trimmed_exchanges"] = max(int(merged["trimmed_exchanges"]), int(merged["verbatim_exchanges"]))
        out[section] = merged
    budget = out.get("budget")
    if budget is not None and not isinstance(budget, Mapping):
        return out
    sections = dict(budget or {})
    # the default total yields to a large system prompt; a total somebody set is a cap
    sections.setdefault("elastic", "total" not in sections)
    sections.setdefault("total", WHOLE_TOTAL)
    try:
        total = float(sections["total"])
    except (TypeError, ValueError):
        return {**out, "budget": sections}  # left to validation
    if not 0 < total < math.inf:  # left to validation, which then names the total alone
        return {**out, "budget": sections}
    for name, share in WHOLE_SHARES.items():
        if sections.get(name) is None:
            # tokens stay tokens (above 1); a share of the window stays a share
            sections[name] = max(total * share, 2.0) if total > 1 else total * share
    out["budget"] = sections
    return out


_PRESET_SECTIONS = frozenset({*WHOLE_PRESET, "budget"})


def _fields_given(section: Any) -> Any:
    """A section given as its config class (``HistoryConfig(block_size=3)``) as the fields it was
    given: the whole mode's preset then fills the others, as for ``{"block_size": 3}``."""
    fields_set = getattr(section, "model_fields_set", None)
    if not isinstance(section, BaseModel) or fields_set is None:
        return section
    return {name: getattr(section, name) for name in type(section).model_fields if name in fields_set}


_TOTAL_DEFAULTED: ContextVar[bool] = ContextVar("ctxplugin_total_defaulted", default=False)
"""Whether the configuration being validated got its total from the whole mode's preset."""


def mode_defaults(data: Any) -> Any:
    """``data`` with :func:`whole_preset` applied when its mode is the whole one (the validator
    that runs before the fields are read); notes whether the preset gave the total."""
    whole = isinstance(data, dict) and data.get("mode", "whole") == "whole"
    if whole:
        data = {key: _fields_given(value) if key in _PRESET_SECTIONS else value for key, value in data.items()}
    budget = data.get("budget") if whole else None
    _TOTAL_DEFAULTED.set(whole and (budget is None or (isinstance(budget, Mapping) and "total" not in budget)))
    return whole_preset(data) if whole else data


def unset_default_total(config: C) -> C:
    """``config`` (a ``ContextConfig`` just validated) with a total the whole mode's preset gave
    taken out of its budget's ``model_fields_set``: the total reads as nobody's (see
    :func:`total_not_set`) whether or not ``elastic`` is on."""
    if _TOTAL_DEFAULTED.get():
        _TOTAL_DEFAULTED.set(False)
        config.budget.__pydantic_fields_set__.discard("total")  # type: ignore[attr-defined]
    return config


def total_not_set(config: Any) -> bool:
    """Whether nobody capped the total of ``config`` (a ``ContextConfig``): it is its mode's
    default, or it yields to the system prompt (``budget.elastic``)."""
    return bool(config.budget.elastic) or "total" not in config.budget.model_fields_set


__all__ = ["WHOLE_PRESET", "WHOLE_SHARES", "WHOLE_TOTAL", "mode_defaults", "total_not_set", "unset_default_total", "whole_preset"]
