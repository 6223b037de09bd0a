"""The messages a session sent last time, to tell which of this call's are new.

A host resends its conversation on every call as the same message objects, with a few new ones
at the end. What is derived from the whole conversation (a sum of tokens, the values it used)
can then be carried from one call to the next and brought up to date with the new messages
only, provided the earlier ones are still the very same objects holding the very same content. :class:`Prefix` checks that with a few C-level passes, without reading any
text.
"""

from __future__ import annotations

from array import array
from collections.abc import Collection, Sequence
from itertools import compress, count, repeat
from operator import attrgetter, eq, is_, not_
from typing import Any

from pydantic import BaseModel

_content = attrgetter("content")
_FEW = 4  # messages taken in one by one (a call's new ones, as a rule), more in passes over all of them
_UNREAD: dict[str, Any] = {"content": None}  # stands for the fields of a message read as attributes


def changed_positions(
    seen: Sequence[Any],
    contents: Sequence[Any],
    lengths: Sequence[int],
    messages: Sequence[Any],
    measured: Collection[int] | None = None,
) -> list[int] | None:
    """Positions of the messages ``seen`` (with the ``contents`` and content ``lengths`` they
    had) that ``messages`` no longer holds as the same object with the same content (``[]``
    when all still are), or ``None`` when ``messages`` is shorter than what was seen. A copy,
    even an equal one, is another message: what was derived from the one seen (by another engine,
    say, in the same process) is not taken for the copy's.

    ``measured``: the positions whose content is not a string, when the caller knows them (a
    string cannot change in place, so only the others need their length compared); all when
    None."""
    count = len(seen)
    if len(messages) < count:
        return None
    head = messages[:count]
    if not isinstance(head, list):
        head = list(head)
    now = list(map(_content, head))
    # the messages by identity, the contents by list equality, which takes the very same object as
    # equal without calling its __eq__: both in C, and no text held unchanged is read
    if all(map(is_, head, seen)) and _equal(now, contents):
        if measured is None:
            if all(map(eq, map(len, now), lengths)):  # any sequence of lengths (a list, an array)
                return []
        elif all(len(now[i]) == lengths[i] for i in measured):
            return []
    return [
        i
        for i, (message, was, content, had, length) in enumerate(zip(head, seen, now, contents, lengths, strict=True))
        if not (message is was and (content is had or _equal(content, had)) and len(content) == length)
    ]


def _equal(one: Any, other: Any) -> bool:
    """Whether ``one == other``; False when their ``__eq__`` gives no truth value (a content
    block holding an array compares to an array, which is neither true nor false, and says so
    with a ``ValueError``): a content that cannot be told the same is taken as another one."""
    try:
        return bool(one == other)
    except (ValueError, TypeError):
        return False


class Stamp:
    """One call's sequence of messages, told apart from every other: a stage that checked a
    sequence whole stamps what it passes on, and ``before`` is the stamp of the same session's
    previous sequence when this one is that one with messages appended (the very objects,
    holding the very content), else None. A stage whose state was brought up to date with the
    ``before`` sequence then knows, without reading the messages again, that only the messages
    past ``before.length`` are new."""

    __slots__ = ("before", "length")

    def __init__(self, before: Stamp | None, length: int) -> None:
        self.before = before
        self.length = length

    @classmethod
    def after(cls, before: Stamp | None, length: int) -> Stamp:
        """The stamp of a sequence of ``length`` messages grown from ``before`` (None: not
        grown from anything known). Only the latest step is ever asked about, so ``before``
        lets go of its own predecessor: no chain of stamps builds up over a session."""
        if before is not None:
            before.before = None
        return cls(before, length)

    def grew_from(self, stamp: Stamp | None) -> bool:
        """Whether this sequence is the one ``stamp`` names with messages appended."""
        return stamp is not None and self.before is stamp


class Prefix:
    """Messages seen before, in order, with the identity and length of each one's content (a
    message given new content, or whose block list grew, is not the one seen; tool calls
    replaced on a message that keeps its content are not noticed).

    The messages are held, as the host holds them: the session state that owns a prefix is
    bounded, and holding them is what keeps the check to a few C-level passes. So are their
    field dicts: the content is read from them straight, not through the model's attribute
    lookup (the one pass of a check that reaches into every message; see :func:`_fields`). When the
    sequence it was last brought up to date with came with a :class:`Stamp`, a sequence
    stamped as grown from it is taken as continuing it without that check.
    Not locked: the per-session state that owns one holds its own lock."""

    __slots__ = ("_contents", "_fields", "_lens", "_listed", "_messages", "_unread", "stamp")

    def __init__(self) -> None:
        self._messages: list[Any] = []
        self._fields: list[dict[str, Any]] = []  # each message's field dict, or _UNREAD
        self._unread: set[int] = set()  # positions whose content is read as an attribute, and copied only when it is
        self._contents: list[Any] = []
        self._lens = array("q")  # machine integers: a list would hold an int object for each length over 256
        self._listed: set[int] = set()  # positions whose content is not a string (a list may grow)
        self.stamp: Stamp | None = None  # of the sequence the messages are, when known

    def __len__(self) -> int:
        return len(self._messages)

    @property
    def held(self) -> Sequence[Any]:
        """The messages seen, in order (the prefix's own list: read it, do not change it)."""
        return self._messages

    def changed(self, messages: Sequence[Any], stamp: Stamp | None = None) -> list[int] | None:
        """See :func:`changed_positions`; ``[]`` at once when ``stamp`` (that of ``messages``)
        grew from the stamp of the messages seen."""
        if (
            stamp is not None
            and stamp.grew_from(self.stamp)
            and len(self._messages) == stamp.before.length  # type: ignore[union-attr]
            and len(messages) == stamp.length
        ):
            return []
        self.stamp = None
        seen = self._messages
        if len(messages) >= len(seen) and all(map(is_, messages, seen)):  # the very objects, compared in C by identity
            # each content read straight from its field dict, and the list of them compared in C,
            # which takes the very same object as equal without reading it: one pass that reads
            # every message's fields (the cost of a check is in fetching them from memory)
            now = list(map(dict.__getitem__, self._fields, repeat("content")))
            for i in self._unread:
                now[i] = seen[i].content
            if _equal(now, self._contents) and all(len(now[i]) == self._lens[i] for i in self._listed):
                return []
        return changed_positions(seen, self._contents, self._lens, messages, self._listed)

    def replace(self, index: int, message: Any) -> None:
        """Take ``message`` as the one seen at ``index``."""
        self.stamp = None
        self._messages[index] = message
        self._fields[index] = fields = _fields(message)
        if fields is _UNREAD:
            self._unread.add(index)
        else:
            self._unread.discard(index)
        self._contents[index] = message.content
        self._lens[index] = len(message.content)
        if isinstance(message.content, str):
            self._listed.discard(index)
        else:
            self._listed.add(index)

    def extend(self, messages: Sequence[Any], stamp: Stamp | None = None) -> None:
        """Take ``messages`` as seen after the others; ``stamp`` names the whole sequence seen
        now (when the owner has brought itself up to date with all of it)."""
        start = len(self._messages)
        if len(messages) <= _FEW:
            self._extend_few(messages, start)
        else:
            self._extend_many(messages, start)
        self.stamp = stamp if stamp is not None and stamp.length == len(self._messages) else None

    def _extend_few(self, messages: Sequence[Any], start: int) -> None:
        # a call's new messages, one by one: fewer objects made than by the passes below (the
        # contents read first: a message without one changes nothing)
        contents = [message.content for message in messages]
        for index, message, content in zip(range(start, start + len(contents)), messages, contents, strict=True):
            if not isinstance(content, str):
                self._listed.add(index)
            fields = _fields(message)
            if fields is _UNREAD:
                self._unread.add(index)
            self._fields.append(fields)
            self._messages.append(message)
            self._contents.append(content)
            self._lens.append(len(content))

    def _extend_many(self, messages: Sequence[Any], start: int) -> None:
        contents = list(map(_content, messages))
        self._listed.update(compress(count(start), map(not_, map(isinstance, contents, repeat(str)))))
        if all(map(_keeps_fields, set(map(type, messages)))):  # (in C, each message; the kinds are few)
            self._fields.extend(map(vars, messages))
        else:
            fields = list(map(_fields, messages))
            self._unread.update(i for i, found in enumerate(fields, start) if found is _UNREAD)
            self._fields.extend(fields)
        self._messages.extend(messages)
        self._contents.extend(contents)
        self._lens.extend(map(len, contents))

    def clear(self) -> None:
        """Forget every message seen."""
        self.stamp = None
        self._listed.clear()
        self._unread.clear()
        self._fields.clear()
        self._messages.clear()
        self._contents.clear()
        del self._lens[:]


def _fields(message: Any) -> dict[str, Any]:
    """The dict ``message`` keeps its fields in, when giving it a field puts the value in that
    very dict; else :data:`_UNREAD`."""
    return message.__dict__ if _keeps_fields(type(message)) else _UNREAD


def _keeps_fields(kind: type) -> bool:
    """Whether giving a ``kind`` a field puts the value in its field dict: a pydantic model's
    does, unless it validates assignment (a new dict is put in place) or sets attributes its own
    way."""
    keeps = _KEEPS_FIELDS.get(kind)
    if keeps is None:
        keeps = (
            issubclass(kind, BaseModel)
            and kind.__setattr__ is BaseModel.__setattr__
            and not kind.model_config.get("validate_assignment")
        )
        if len(_KEEPS_FIELDS) >= 1024:  # classes made on the fly: the answers are cheap to find again
            _KEEPS_FIELDS.clear()
        _KEEPS_FIELDS[kind] = keeps
    return keeps


_KEEPS_FIELDS: dict[type, bool] = {}  # by message class


__all__ = ["Prefix", "Stamp", "changed_positions"]
