"""Each exchange of a history as its tier shows it; one of the gist tier is gisted only when read.

On a long thread's first call nearly every exchange is in the gist tier, and nearly all of them
are then condensed into context notes: the omission plan reads the sizes of the gists from the
newest gisted block back only as far as its limits reach, the archive from the oldest only as
far as its cap, and the view shows no condensed exchange. A deferred exchange is made, when
first read, from the very messages and tier it would have been made from when deferred; showing
a message is deterministic, so every reader sees what an eager call would have made, and the
exchanges nothing reads (the thousands of a long thread's archive) are never gisted.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from langchain_core.messages import BaseMessage

from ctxplugin.config import HistoryConfig
from ctxplugin.history._shown import Tier, compress_message, shown_floor
from ctxplugin.history.omission import Parts, parts_of
from ctxplugin.tokens import TokenCounter, count_message

Shown = tuple[tuple[BaseMessage, ...], Parts, int]
"""One exchange as shown: its messages, their :data:`Parts`, how many of them were changed."""

EMPTY: Shown = ((), (0, 0, 0), 0)


def show(messages: Sequence[BaseMessage], shown: Sequence[BaseMessage], counter: TokenCounter) -> Shown:
    """The :data:`Shown` of one exchange's ``messages`` shown as ``shown``."""
    out = tuple(shown)
    return out, parts_of(out, [count_message(m, counter) for m in out]), sum(1 for m, o in zip(messages, out, strict=True) if o is not m)


class _Later:
    """An exchange of the gist tier, gisted when first read (then kept)."""

    __slots__ = ("_config", "_counter", "_kept", "_made", "_messages", "_tier")

    def __init__(self, messages: tuple[BaseMessage, ...], kept: tuple[bool, ...], tier: Tier, config: HistoryConfig, counter: TokenCounter) -> None:
        self._messages, self._kept, self._tier = messages, kept, tier
        self._config, self._counter = config, counter
        self._made: Shown | None = None

    def made(self) -> Shown:
        # the messages are read before the result: another thread may make it meanwhile, and it
        # lets go of the messages only once the result is set
        messages = self._messages
        made = self._made
        if made is None:
            config, counter, tier = self._config, self._counter, self._tier
            out = [m if keep else compress_message(m, tier, config=config, counter=counter) for m, keep in zip(messages, self._kept, strict=True)]
            made = self._made = show(messages, out, counter)
            self._messages = ()  # held by the view's own messages as long as needed
        return made

    def floor(self) -> int:
        """Tokens of the exchange as shown, or a floor of them known without gisting it."""
        messages = self._messages  # before the result, as in :meth:`made`
        made = self._made
        if made is not None:
            return made[1][0]
        config, counter, tier = self._config, self._counter, self._tier
        return sum(
            count_message(m, counter) if keep else shown_floor(m, tier, config=config, counter=counter)
            for m, keep in zip(messages, self._kept, strict=True)
        )


class Showing:
    """Each exchange of a conversation as shown, some of them deferred (see the module).

    The next view of the session takes it over and extends it (:meth:`extend`): the view it
    was made for is claimed by that call, and read by no other."""

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[Shown | _Later] = ()) -> None:
        self._entries: list[Shown | _Later] = list(entries)

    def __len__(self) -> int:
        return len(self._entries)

    def entry(self, number: int) -> Shown:
        """Exchange ``number`` as shown (gisted now if it was deferred)."""
        found = self._entries[number]
        return found.made() if isinstance(found, _Later) else found

    def rendered(self, number: int) -> tuple[BaseMessage, ...]:
        return self.entry(number)[0]

    def parts(self, number: int) -> Parts:
        return self.entry(number)[1]

    def floor(self, number: int) -> int:
        """Tokens of exchange ``number`` as shown, or a floor of them when it is not gisted yet
        (see :func:`~ctxplugin.history._shown.shown_floor`)."""
        found = self._entries[number]
        return found.floor() if isinstance(found, _Later) else found[1][0]

    def changed(self, number: int) -> int:
        return self.entry(number)[2]

    def put(self, number: int, shown: Shown) -> None:
        self._entries[number] = shown

    def defer(self, number: int, messages: tuple[BaseMessage, ...], kept: tuple[bool, ...], tier: Tier, config: HistoryConfig, counter: TokenCounter) -> None:
        """Show exchange ``number`` (``messages``, those ``kept`` exact) at ``tier`` when read."""
        self._entries[number] = _Later(messages, kept, tier, config, counter)

    def extend(self, added: Iterable[Shown]) -> None:
        """Put ``added`` exchanges after these."""
        self._entries.extend(added)

    def all_parts(self) -> PartsOf:
        """The :data:`Parts` of every exchange, as a sequence that shows an exchange when read."""
        return PartsOf(self)


class PartsOf(Sequence[Parts]):
    """The :data:`Parts` of a :class:`Showing`'s exchanges, each read when asked for."""

    def __init__(self, showing: Showing) -> None:
        self._showing = showing

    def __len__(self) -> int:
        return len(self._showing)

    def __getitem__(self, number: int) -> Parts:  # type: ignore[override]
        return self._showing.parts(number)


class BlockSizes(Sequence[int]):
    """Tokens of each block of exchanges (``members``) as shown, each summed when first asked for."""

    def __init__(self, showing: Showing, members: Sequence[Sequence[int]]) -> None:
        self._showing = showing
        self._members = members
        self._sizes: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __getitem__(self, block: int) -> int:  # type: ignore[override]
        size = self._sizes.get(block)
        if size is None:
            size = self._sizes[block] = sum(self._showing.parts(i)[0] for i in self._members[block])
        return size

    def floor(self, block: int) -> int:
        """The tokens of ``block``, or a floor of them known without gisting its exchanges when
        they are not yet (a cap the floor already exceeds needs no size)."""
        size = self._sizes.get(block)
        return size if size is not None else sum(self._showing.floor(i) for i in self._members[block])


__all__ = ["EMPTY", "BlockSizes", "PartsOf", "Showing", "Shown", "show"]
