"""Which tool calls' outputs are behind a ref a view shows, from the refs stored so far.

The refs stage passes a session's whole map of refs (by tool-call id) on every call: a new
mapping that, as a rule, holds the previous one's items and a few more. Read item by item on
every call, it costs a pass over every output the session stored; here it is indexed by ref,
and only the items it gained are indexed. A :class:`GrownRefs` says itself which items it
gained since the map passed on before it; another mapping is compared with what was indexed by
a C-level set comparison of the items (no Python code per item). A mapping that lost or
changed an item is indexed afresh. The refs a view shows are then looked up in the index.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from functools import lru_cache

from ctxplugin._message_values import REF_SHAPE


class GrownRefs(dict[str, str]):
    """A map of refs by tool-call id that knows what it grew from: ``before``, the map the
    same session's previous call passed on, when this one is that one with the items ``added``
    (of keys it did not hold), else None. Neither is changed once passed on."""

    __slots__ = ("added", "before")

    def __init__(self, items: Mapping[str, str], before: GrownRefs | None = None, added: Sequence[tuple[str, str]] = ()) -> None:
        super().__init__(items)
        self.before = before
        self.added = tuple(added)
        if before is not None:  # only the latest step is ever asked about: no chain of maps builds up
            before.before = None


@lru_cache(maxsize=65536)
def _ref_shaped(ref: str) -> bool:
    """Whether ``ref`` has the shape :func:`~ctxplugin._message_values.refs_in` finds."""
    return REF_SHAPE.fullmatch(ref) is not None


class StoredRefs:
    """The refs stored by tool-call id, indexed by ref.

    Not locked: the session state that owns one holds its own lock."""

    __slots__ = ("_by_ref", "_last", "_odd", "_seen")

    def __init__(self) -> None:
        self._seen: dict[str, str] = {}  # the items indexed
        self._last: GrownRefs | None = None  # the map indexed, when it was one that knows its growth
        self._by_ref: dict[str, list[str]] = {}  # ref of REF_SHAPE -> its tool-call ids
        self._odd: dict[str, str] = {}  # tool-call id -> its ref, of another shape

    def calls_shown(self, stored: Mapping[str, str], refs: Collection[str], text: Callable[[], str]) -> list[str]:
        """The tool-call ids of ``stored`` whose ref a view shows: a ref of :data:`REF_SHAPE`
        when ``refs`` (every such ref the view holds) has it, one of another shape when the
        view's ``text`` (called only then) holds it."""
        self._update(stored)
        by_ref = self._by_ref
        shown = [call_id for ref in refs if ref in by_ref for call_id in by_ref[ref]]
        if self._odd:
            view_text = text()
            shown.extend(call_id for call_id, ref in self._odd.items() if ref in view_text)
        return shown

    def _update(self, stored: Mapping[str, str]) -> None:
        seen, last = self._seen, self._last
        self._last = stored if isinstance(stored, GrownRefs) else None
        if stored is last:
            return
        if last is not None and isinstance(stored, GrownRefs) and stored.before is last:
            new = list(stored.added)
        elif len(stored) == len(seen) and stored.items() == seen.items():
            return
        elif len(stored) > len(seen) and stored.items() >= seen.items():
            new = [(call_id, stored[call_id]) for call_id in stored.keys() - seen.keys()]
        else:  # an item left or changed: indexed afresh
            seen.clear()
            self._by_ref.clear()
            self._odd.clear()
            new = list(stored.items())
        for call_id, ref in new:
            seen[call_id] = ref
            if _ref_shaped(ref):
                self._by_ref.setdefault(ref, []).append(call_id)
            else:
                self._odd[call_id] = ref


__all__ = ["GrownRefs", "StoredRefs"]
