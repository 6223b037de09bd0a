"""What ``mode="whole"`` (the default) sets where a field is not given."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from contextlib import suppress
from typing import Any, TypeVar

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
        "block_size": 4,
        "digest_tokens": 120,
        "archive_tokens": 850,
    },
    "cas": {"passthrough_tokens": 500},
    "facts": {"placement": "window", "skip_shown": True},
}
"""What ``mode="whole"`` sets where a field is not given (the budget as :data:`WHOLE_SHARES`)."""


def whole_preset(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` with :data:`WHOLE_PRESET` and the whole-mode budget under every field not given.
    A section given as a model instance is taken as it is; one that is no mapping is left to
    validation, which names it."""
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


def with_mode_defaults(data: Any, validate: Callable[[Any], C]) -> C:
    """``ContextConfig`` validated from ``data`` with the whole mode's defaults when that is its
    mode. The whole mode's total is put in the data as if given; when nobody gave it, it is
    taken out of the budget's ``model_fields_set`` again, so that the total reads as not set
    (the last resort then keeps the system prompt whole, ``stages.pipeline``) whether or not
    ``elastic`` is on."""
    if not (isinstance(data, dict) and data.get("mode", "whole") == "whole"):
        return validate(data)
    given = data.get("budget")
    config = validate(whole_preset(data))
    if given is None or (isinstance(given, Mapping) and "total" not in given):
        config.budget.__pydantic_fields_set__.discard("total")  # type: ignore[attr-defined]
    return config


__all__ = ["WHOLE_PRESET", "WHOLE_SHARES", "WHOLE_TOTAL", "whole_preset", "with_mode_defaults"]
