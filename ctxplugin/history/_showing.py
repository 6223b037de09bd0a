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
from operator import itemgetter

from langchain_core.messages import BaseMessage, ToolMessage

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
    """An exchange of the gist tier, gisted when first read (then kept); its messages may be
    gisted one at a time before (see :meth:`BlockSizes.over`)."""

    __slots__ = ("_config", "_counter", "_done", "_kept", "_made", "_messages", "_tier")

    def __init__(self, messages: tuple[BaseMessage, ...], kept: tuple[bool, ...], tier: Tier, config: HistoryConfig, counter: TokenCounter) -> None:
        self._messages, self._kept, self._tier = messages, kept, tier
        self._config, self._counter = config, counter
        self._made: Shown | None = None
        self._done: dict[int, BaseMessage] | None = None  # messages gisted alone, by place

    def made(self) -> Shown:
        # the messages are read before the result: another thread may make it meanwhile, and it
        # lets go of the messages only once the result is set
        messages = self._messages
        made = self._made
        if made is None:
            done = self._done or {}
            config, counter, tier = self._config, self._counter, self._tier
            out = [
                m if keep else done[k] if k in done else compress_message(m, tier, config=config, counter=counter)
                for k, (m, keep) in enumerate(zip(messages, self._kept, strict=True))
            ]
            made = self._made = show(messages, out, counter)
            self._messages = ()  # held by the view's own messages as long as needed
            self._done = None
        return made

    def floors(self) -> list[int]:
        """Tokens of each message as shown: exact for those kept or gisted (all of them once the
        exchange is made), a floor for the others (see :func:`~ctxplugin.history._shown.shown_floor`)."""
        messages = self._messages  # before the result, as in :meth:`made`
        made = self._made
        if made is not None:
            return [count_message(m, self._counter) for m in made[0]]
        config, counter, tier, done = self._config, self._counter, self._tier, self._done or {}
        return [
            count_message(m, counter) if keep else count_message(done[k], counter) if k in done else shown_floor(m, tier, config=config, counter=counter)
            for k, (m, keep) in enumerate(zip(messages, self._kept, strict=True))
        ]

    def pending(self) -> list[tuple[int, BaseMessage]]:
        """Each message still to gist, with its place among the exchange's messages (none once
        the exchange is made)."""
        messages = self._messages  # before the result, as in :meth:`made`
        if self._made is not None:
            return []
        done = self._done or {}
        return [(k, m) for k, (m, keep) in enumerate(zip(messages, self._kept, strict=True)) if not keep and k not in done]

    def gist(self, place: int) -> int:
        """Gist the message at ``place`` alone (kept for when the exchange is made); its tokens."""
        messages = self._messages
        made = self._made
        if made is not None:
            return count_message(made[0][place], self._counter)
        out = compress_message(messages[place], self._tier, config=self._config, counter=self._counter)
        if self._done is None:
            self._done = {}
        self._done[place] = out
        return count_message(out, self._counter)


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

    def __init__(self, showing: Showing, members: Sequence[Sequence[int]], counter: TokenCounter) -> None:
        self._showing = showing
        self._members = members
        self._counter = counter
        self._sizes: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self._members)

    def __getitem__(self, block: int) -> int:  # type: ignore[override]
        size = self._sizes.get(block)
        if size is None:
            size = self._sizes[block] = sum(self._showing.parts(i)[0] for i in self._members[block])
        return size

    def over(self, block: int, tokens: int) -> bool:
        """Whether ``block`` counts more than ``tokens``, its messages gisted one at a time only
        until that is known, each one's size as shown replacing its floor in the sum (a block
        note's cap asks no more; the rest are gisted if the block is read). Tool results go
        first, the longest first: their floor is their overhead alone, and their gists cost less
        than an assistant turn's (whose long call arguments are trimmed, line by line). On the
        swe recordings this gists a third of the messages, at about 40% of the time."""
        size = self._sizes.get(block)
        if size is not None:
            return size > tokens
        showing, total = self._showing, 0
        waiting: list[tuple[bool, int, int, _Later, int]] = []  # (not a result, -own tokens, floor, exchange, place)
        for i in self._members[block]:
            found = showing._entries[i]
            if not isinstance(found, _Later):
                total += found[1][0]
                continue
            floors = found.floors()
            total += sum(floors)
            waiting.extend(
                (not isinstance(message, ToolMessage), -count_message(message, self._counter), floors[place], found, place)
                for place, message in found.pending()
            )
        if total > tokens:
            return True
        waiting.sort(key=itemgetter(0, 1))  # stable: equals stay in the exchanges' order
        for _, _, floor, later, place in waiting:
            total += later.gist(place) - floor
            if total > tokens:
                return True
        self._sizes[block] = total
        return False


__all__ = ["EMPTY", "BlockSizes", "PartsOf", "Showing", "Shown", "show"]
