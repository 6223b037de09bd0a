"""One bounded least-recently-used map, and the key under which texts are memoised.

Everything derived from one message (its token count, its words, its embedding) is computed
once and kept here, keyed by the message text; every map is bounded, so a process serving many
sessions holds at most a fixed number of entries whatever the traffic.
"""

from __future__ import annotations

import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable
from itertools import islice
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

TextKey = tuple[int, int, str | int]

THREAD_TEXTS = 32_768
"""Entries of a memo of what is read from each text of a conversation (its values, its words,
its alert lines): more than one pass over a long thread reads. A memo smaller than a pass keeps
nothing for the next one, least recently used going first: the first call on a thread of
10,000 messages (14,000 texts with their gists) found the values of every text three times."""

RECENT_MESSAGES = 1024
"""Messages kept by a per-message memo that is read again only while its message is recent
(the facts stage's terms, prints and reads, block digests, note values, the copies tiers and
capture show): over 2,000 calls of the memory benchmark none of these was hit from more than
258 puts back."""


class LRU(OrderedDict[K, V]):
    """A dict that keeps its ``size`` most recently put or read (with :meth:`hit`) entries.

    Not locked: callers that share one across threads hold their own lock around it."""

    def __init__(self, size: int) -> None:
        super().__init__()
        if size < 1:
            raise ValueError(f"LRU size must be at least 1, got {size}")
        self._size = size

    def put(self, key: K, value: V) -> None:
        """Insert or replace ``key``; the least recently used entry goes when full.

        A :func:`text_key` is kept as the one copy of it every map holds: the same text keyed by
        the memos of its tokens, values, words and alert lines held a tuple and an ends string
        each, 2.7 MB of the 56 traced over 2,000 calls of the memory benchmark. Only a put pays
        for it, not a lookup. Bounded as :func:`shared`: past :data:`SHARED_VALUES` distinct
        keys the table starts again from none (a key holds at most 32 characters)."""
        if (
            isinstance(key, tuple)
            and len(key) == 3
            and type(key[0]) is int
            and type(key[1]) is int
            and (type(key[2]) is int or (type(key[2]) is str and len(key[2]) <= 32))
        ):
            table = _KEYS
            if len(table) > SHARED_VALUES:
                table.clear()
            key = table.setdefault(key, key)
        self[key] = value
        self.move_to_end(key)
        while len(self) > self._size:
            self.popitem(last=False)

    def hit_or_put(self, key: K, make: Callable[[], V]) -> V:
        """The value of ``key`` (marking it recently used), or ``make()`` put under it."""
        value = self.hit(key)
        if value is None:
            value = make()
            self.put(key, value)
        return value

    def hit(self, key: K) -> V | None:
        """The value of ``key`` (marking it recently used), or ``None``."""
        value = self.get(key)
        if value is not None:
            self.move_to_end(key)
        return value


class Memo(Generic[K, V]):
    """An :class:`LRU` of ``size`` entries shared across threads: a value is made outside the
    lock (two threads may both make a missing one; the later put wins), so a slow make never
    holds up lookups of other keys."""

    def __init__(self, size: int) -> None:
        self._entries: LRU[K, V] = LRU(size)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, key: object) -> bool:
        return key in self._entries

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value of ``key``, or ``make()`` kept under it."""
        with self._lock:
            value = self._entries.hit(key)
        if value is None:
            value = make()
            with self._lock:
                self._entries.put(key, value)
        return value


def text_key(text: str) -> TextKey:
    """A memo key for ``text`` that does not keep the text: its length, its hash (``str``
    caches it, so a text resent as the same object is not rehashed) and the hash of its two
    ends, its first and last 16 characters as one string (a text of 32 or fewer is itself).

    The ends are kept as their hash, not as a string: two texts of one length and hash are
    told apart as well by the hash of their ends (unequal ends hash alike once in 2**64), and
    an int weighs a third of a 32-character string; about 15,000 keys are alive after 2,000
    calls of the memory benchmark."""
    size = len(text)
    return (size, hash(text), text if size <= 32 else hash(text[:16] + text[-16:]))


_KEYS: dict[Any, Any] = {}
"""The one copy of each text key an :class:`LRU` was given lately (see :meth:`LRU.put`)."""


SHARED_VALUES = 32_768
"""Distinct values :func:`shared` keeps its one copy of before it starts again from none."""
_COPIES: dict[Any, Any] = {}
H = TypeVar("H", bound=Hashable)


def shared(items: Iterable[H]) -> tuple[H, ...]:
    """``items``, each as the one copy of that value (a string, a tuple of strings) the memos of
    texts and messages hold: the words, runs and values read from the texts of a conversation
    are mostly the same few thousand (``self``, ``return``, a path), and a memo entry of each
    text holding its own copies of them weighed as much as all the rest of it. Bounded: past
    :data:`SHARED_VALUES` distinct values the table starts again from none (copies already
    shared stay shared). Not :func:`sys.intern`, whose strings some Python versions keep for
    good."""
    table = _COPIES
    if len(table) > SHARED_VALUES:
        table.clear()
    found = items if isinstance(items, (list, tuple)) else list(items)
    return tuple(map(table.setdefault, found, found))


class PerMessage(Generic[V]):
    """Values derived from one message, found again by the message object itself.

    A host resends its conversation as the same message objects on every call, so a value
    computed once (a token count, the values a message names, its compressed form) is found
    by identity without even hashing the text. An entry holds the message weakly and stands
    only while the message still holds the very content, tool calls, extra fields and id it was
    computed from (compared by identity; a list content also by length), so a message given new
    content is computed again. An entry goes when its message is collected, and the oldest go
    first when the map is full, a sixteenth of it at once (a lookup is on the path of every
    message of every call, so it takes no lock and does not reorder; a message still in use
    whose entry went is computed once more). Thread-safe.

    Every map of the process shares one entry per message, holding each map's value: a
    conversation's messages are memoised by a dozen maps, and one weak reference and one dict
    per message, rather than a weak reference per map, leave the garbage collector fewer
    long-lived objects to go through.
    """

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError(f"PerMessage size must be at least 1, got {size}")
        self._size = size
        # what the shared entries hold this map's values by: not the map itself, so that a map
        # dropped (with its counter, say) is collected and its values go on the next put
        self._slot = slot = _Slot()
        self._entries = slot.entries
        self._dead = slot.dead  # entries of collected messages, dropped on the next put
        self._lock = threading.Lock()
        weakref.finalize(self, _DROPPED.append, slot).atexit = False

    def get(self, message: Any) -> V | None:
        """The value memoised for ``message`` as it is now, or ``None``."""
        entry = self._entries.get(id(message))  # one C call: safe beside a concurrent put
        if entry is None or entry() is not message:
            return None
        # a pydantic model's field values (a missing attribute is slow to ask for)
        fields = message.__dict__
        content = fields["content"]
        if (
            content is not entry.content
            or fields.get("tool_calls") is not entry.tool_calls
            or fields.get("additional_kwargs") is not entry.extra
            or fields.get("id") is not entry.message_id
            or (entry.length >= 0 and len(content) != entry.length)
        ):
            return None
        return entry.values.get(self._slot)

    def put(self, message: Any, value: V) -> None:
        """Remember ``value`` for ``message`` as it is now."""
        entry = _shared(message, id(message), self._slot, value)
        if entry is None:  # an object that cannot be weakly referenced is not memoised
            return
        key = entry.key  # one int for every map holding the message, not one each
        with self._lock:
            entries = self._entries
            while self._dead:
                dead = self._dead.pop()
                if entries.get(dead.key) is dead:
                    del entries[dead.key]
            old = entries.pop(key, None)
            if old is not None and old is not entry:
                _release(old, self._slot)
            entries[key] = entry
            if len(entries) > self._size:
                # the oldest (a dict keeps the order entries were put in) go a sixteenth at a
                # time: one at a time, each would be found past the places of those gone before
                for old_key in list(islice(entries, len(entries) - self._size + self._size // 16)):
                    _release(entries.pop(old_key), self._slot)

    def __len__(self) -> int:
        return len(self._entries)


class _Entry(weakref.ref):  # type: ignore[type-arg]
    """The entry of one message shared by every :class:`PerMessage`: a weak reference to the
    message that also holds its key, what the values were computed from and each map's value
    (``values``, by each map's :class:`_Slot`).

    The content, tool calls, extra fields and id are held, not only their ids, so that an id
    of a collected object reused by a new one cannot pass for the old."""

    __slots__ = ("content", "extra", "key", "length", "message_id", "tool_calls", "values")
    key: int
    content: Any
    length: int
    tool_calls: Any
    extra: Any
    message_id: Any
    values: dict[_Slot, Any]


class _Slot:
    """A :class:`PerMessage`'s key in the shared entries, with its entries and the entries of
    its collected messages (what a collected message's callback tells it)."""

    __slots__ = ("dead", "entries")

    def __init__(self) -> None:
        self.entries: dict[int, _Entry] = {}  # in the order put: a plain dict weighs half an OrderedDict
        self.dead: list[_Entry] = []


_SHARED: dict[int, _Entry] = {}
"""The entry of each message some map holds a value for, by the message's id."""
_SHARED_LOCK = threading.Lock()
_GONE: list[_Entry] = []
"""Entries of collected messages, dropped from :data:`_SHARED` on the next put."""
_DROPPED: list[_Slot] = []
"""Slots of collected maps, whose values go from the shared entries on the next put (a map may
be collected inside the garbage collector while a lock is held: its finalizer only appends)."""


def _shared(message: Any, key: int, owner: _Slot, value: Any) -> _Entry | None:
    """The entry of ``message`` as it is now (a new one when it holds other fields than its
    entry was made from) with ``owner``'s ``value`` put in it, or None when the message cannot
    be weakly referenced."""
    fields = message.__dict__
    content = fields["content"]
    tool_calls = fields.get("tool_calls")
    extra = fields.get("additional_kwargs")
    message_id = fields.get("id")
    length = -1 if isinstance(content, str) else len(content)
    with _SHARED_LOCK:
        while _GONE:
            dead = _GONE.pop()
            # its maps, told already, drop it on their next put: what it holds goes now
            dead.values.clear()
            dead.content = dead.tool_calls = dead.extra = dead.message_id = None
            if _SHARED.get(dead.key) is dead:
                del _SHARED[dead.key]
        while _DROPPED:
            slot = _DROPPED.pop()
            for held in slot.entries.values():
                held.values.pop(slot, None)
                if not held.values and _SHARED.get(held.key) is held:
                    del _SHARED[held.key]
            slot.entries.clear()
            slot.dead.clear()
        entry = _SHARED.get(key)
        if (
            entry is not None
            and entry() is message
            and entry.content is content
            and entry.tool_calls is tool_calls
            and entry.extra is extra
            and entry.message_id is message_id
            and entry.length == length
        ):
            entry.values[owner] = value
            return entry
        try:
            entry = _Entry(message, _gone)
        except TypeError:
            return None
        entry.key = key
        entry.content = content
        entry.length = length
        entry.tool_calls = tool_calls
        entry.extra = extra
        entry.message_id = message_id
        entry.values = {owner: value}
        _SHARED[key] = entry  # maps holding the one it replaces find it stale
        return entry


def _release(entry: _Entry, owner: _Slot) -> None:
    """``owner`` no longer holds a value in ``entry``; an entry no map holds a value in goes."""
    with _SHARED_LOCK:
        entry.values.pop(owner, None)
        if not entry.values and _SHARED.get(entry.key) is entry:
            del _SHARED[entry.key]


def _gone(entry: _Entry) -> None:
    """A memoised message was collected: its entry goes from every map on the map's next put.
    (This runs inside the garbage collector, maybe while a lock is held: it only appends; the
    maps are told before the entry is queued to be emptied.)"""
    for owner in list(entry.values):
        owner.dead.append(entry)
    _GONE.append(entry)


__all__ = ["LRU", "SHARED_VALUES", "THREAD_TEXTS", "PerMessage", "TextKey", "shared", "text_key"]
