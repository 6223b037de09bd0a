"""What a person reading a ref at the command line is told when the options select nothing.

:func:`ctxplugin.cas.expand.expand` returns an empty text both for an output that is empty and
for a pattern that matched nothing or an offset past the end; the model's tool says which in
its header (``0 of 60 lines match 'x'``). ``ctxplugin expand`` prints the selection alone on
stdout, so it gives the same sentence on stderr.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxplugin.cas._patterns import check_options
from ctxplugin.cas.expand import _plain, _select
from ctxplugin.cas.store import CASStore
from ctxplugin.scope import Scope


def expand_noting(
    store: CASStore,
    ref_id: str,
    scope: Scope,
    *,
    fields: Sequence[str] | None = None,
    offset: int = 0,
    limit: int | None = None,
    pattern: str | None = None,
    regex: bool = False,
) -> tuple[str, str | None]:
    """:func:`ctxplugin.cas.expand.expand`, and a note when the options select nothing (None
    otherwise). Raises what ``expand`` raises."""
    check_options(offset, limit, pattern, regex)
    record = store.get(ref_id, scope)
    key = (ref_id, record.raw_hash, len(record.content), False)
    selection = _select(record.content, ref_id, fields, offset, limit, pattern, regex, key=key)
    text = _plain(selection)
    if selection.whole is not None or selection.page:
        return text, None
    kind = selection.unit
    if selection.filtered:
        note = f"{selection.matched} of {selection.total} {kind} match '{pattern}'"  # as typed, not repr
        return text, note if selection.matched == 0 else f"{note}; none at offset {offset}"
    return text, f"no {kind[:-1]} at offset {offset} (there are {selection.total} {kind})"


__all__ = ["expand_noting"]
