"""The context notes of a conversation's condensed blocks, made once and found again by content.

See :mod:`ctxplugin.history.omission` for what a note lists and when blocks are condensed.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import compress, count
from operator import ne
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, RECENT_MESSAGES, PerMessage
from ctxplugin._messages import META_KEY
from ctxplugin._untrusted import json_text
from ctxplugin.config import HistoryConfig
from ctxplugin.history._dropped import OMITTED_NOTE
from ctxplugin.history._note_values import Labelled, _Valued, _valued
from ctxplugin.history._notes import _by_priority, _chronology, _note
from ctxplugin.history._reuse import Reuse, Run, gathered
from ctxplugin.tokens import TokenCounter, args_json, count_message

Exchange = tuple[BaseMessage, ...]


@dataclass(frozen=True)
class Keys:
    """The content keys of a conversation's blocks (each covers the blocks up to it), to be
    extended on a later call rather than computed again.

    Attributes:
        known: the task text they were made with.
        blocks: the exchange numbers of each block.
        keys: the key of each block.
        digest: the running hash after the last block.
        trail: the running hash after each of the last blocks (at most :data:`TRAIL`, the
            last one's last), so that keys can be resumed before one of them: the last
            blocks are those whose members change when a new user message takes protection
            from the previous one.
        held: the last block short of members (one holding a protected exchange: the latest
            user message's joins its block when the user speaks again, however long ago that
            block was condensed) and the running hash before it, so that keys can be resumed
            there too.
    """

    known: str
    blocks: tuple[tuple[int, ...], ...]
    keys: tuple[str, ...]
    digest: Any
    trail: tuple[Any, ...] = ()
    held: tuple[int, Any] | None = None


TRAIL = 8


_CACHE: OrderedDict[tuple[object, ...], tuple[HumanMessage | None, tuple[str, ...]]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4096
_RANKED: LRU[tuple[str, int, str], tuple[Reuse, tuple[Labelled, ...]]] = LRU(16)
"""The archives ranked lately, with what they were ranked from (a longer archive of the same
conversation is ranked from the longest of them it extends)."""
_BASES: LRU[tuple[str, int, str], Reuse] = LRU(16)
"""Figures of the blocks before a block that may change (see :meth:`Digests._figures`), to rank
an archive from when it does."""
_RUNS: LRU[tuple[bytes, str], Run] = LRU(1024)
"""The values of the blocks whose notes were made lately, gathered for the archive step that
takes them in (by the digest of the block's own exchanges and the counter: see
:meth:`Digests._run`): at most 1,024 blocks, each value of a block once (on the swe runs 14 KB a
block, 36 KB at most). Kept by the block's content, not by its key (which covers the blocks
before it too): when the user speaks again, the exchange their previous message protected joins
its block, and the keys of every later block change while their exchanges do not."""


class Digests:
    """The context notes that stand for condensed blocks of one conversation.

    The archive of blocks ``0 .. a - 1`` lists their values, ranked by :class:`Reuse`,
    deduplicated, within ``archive_tokens``; each later condensed block has a note of its own (within
    ``digest_tokens``) with the values the archive and earlier notes do not list. A note depends
    only on the blocks it covers and those before them, so it never changes while shown; notes
    are remembered by content, since the same old blocks come back on every call.

    Args:
        exchanges: every exchange of the conversation (original messages).
        spans_of_block: exchange numbers of each gisted block that may be condensed.
        gist_sizes: tokens of each block as the gist tier shows it (a note is never larger),
            read only as far as a note's cap needs.
        known: text always in view (the task); values in it are not listed.
        config: note sizes.
        counter: token counter.
        resume: the keys a previous call made for the same messages (the caller vouches for
            that); the blocks they cover are not hashed again.
        gist_over: whether a block's size in ``gist_sizes`` is over a number of tokens, known
            gisting no more of it than that needs: a block's note is capped by its gist only when
            the gist is not larger than ``digest_tokens`` (a block condensed as it leaves the
            trimmed tier is never gisted; one condensed as it leaves the verbatim tier is gisted
            only until its gists are over the cap).
    """

    def __init__(
        self,
        exchanges: Sequence[Exchange],
        spans_of_block: Sequence[Sequence[int]],
        gist_sizes: Sequence[int],
        known: str,
        config: HistoryConfig,
        counter: TokenCounter,
        resume: Keys | None = None,
        gist_over: Callable[[int, int], bool] | None = None,
    ) -> None:
        self._exchanges = exchanges
        self._spans = spans_of_block
        self._gist_sizes = gist_sizes
        self._gist_over = gist_over
        self._known = known
        self._config = config
        self._counter = counter
        self._seen: dict[tuple[object, ...], tuple[HumanMessage | None, tuple[str, ...]]] = {}
        task = known.encode("utf-8", "surrogatepass")
        # its length first: a task text ending as a message's bytes do cannot pass for that message
        start, keys, digest = 0, [], hashlib.sha1(len(task).to_bytes(8, "big") + task)
        trail: list[Any] = []
        if resume is not None and resume.known == known and len(resume.blocks) <= len(spans_of_block):
            # the same exchanges of the same conversation as the previous call: its keys stand
            # up to the first block whose members differ (one of the last, if any)
            same = next(compress(count(), map(ne, resume.blocks, map(tuple, spans_of_block))), len(resume.blocks))  # in C
            back = len(resume.blocks) - same  # blocks of the previous call not resumed
            if back == 0:
                start, keys, digest, trail = same, list(resume.keys), resume.digest.copy(), list(resume.trail)
            elif same and back < len(resume.trail):
                start, keys = same, list(resume.keys[:same])
                trail = list(resume.trail[: len(resume.trail) - back])
                digest = trail[-1].copy()
            elif resume.held is not None and resume.held[0] == same:
                start, keys, digest = same, list(resume.keys[:same]), resume.held[1].copy()
        size = config.block_size
        held_block = next((k for k in range(len(spans_of_block) - 1, 0, -1) if len(spans_of_block[k]) < size), None)
        held: tuple[int, Any] | None = None
        if resume is not None and resume.held is not None and held_block is not None and resume.held[0] == held_block < start:
            held = resume.held  # before the blocks resumed, which are the same
        contents: dict[int, bytes] = {}  # the blocks hashed here, by their own exchanges (see _content)
        for index in range(start, len(spans_of_block)):
            if index == held_block:
                held = (index, digest.copy())
            own = hashlib.sha1()
            for number in spans_of_block[index]:
                # each exchange closed: its values' ages count exchanges, not messages
                part = b"".join([b"\x00" + _digest(message) for message in exchanges[number]]) + b"\x02"
                digest.update(part)
                own.update(part)
            contents[index] = own.digest()
            digest.update(b"\x01")
            keys.append(digest.hexdigest())
            trail.append(digest.copy())
        self._contents = contents
        self._keys: list[str] = keys
        self._digest = digest
        self._trail = tuple(trail[-TRAIL:])
        self._held = held

    def keys(self) -> Keys:
        """What a later call on the same conversation can start its keys from."""
        return Keys(self._known, tuple(map(tuple, self._spans)), tuple(self._keys), self._digest.copy(), self._trail, self._held)

    def members(self, block: int) -> Sequence[int]:
        """Exchange numbers of ``block`` that may be condensed (not protected)."""
        return self._spans[block]

    def size(self, message: BaseMessage) -> int:
        """Tokens of a note."""
        return count_message(message, self._counter)

    def _cached(self, key: tuple[object, ...], make: Callable[[], tuple[HumanMessage | None, list[str]]]) -> tuple[HumanMessage | None, tuple[str, ...]]:
        # a plan asks for the same notes many times: looked up once per call, then here
        made = self._seen.get(key)
        if made is not None:
            return made
        with _CACHE_LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                made = _CACHE[key]
        if made is None:
            note, chosen = make()
            made = (note, tuple(chosen))
            with _CACHE_LOCK:
                _CACHE[key] = made
                while len(_CACHE) > _CACHE_SIZE:
                    _CACHE.popitem(last=False)
        self._seen[key] = made
        return made

    def _archive(self, upto: int, cap: int) -> tuple[HumanMessage | None, tuple[str, ...]]:
        if upto <= 0:
            return None, ()
        if cap <= 0:
            # no value fits (a tiny history budget): a line still says older exchanges are not
            # shown, or they would leave the view without a word (one message for those blocks,
            # as a note is, so that the next call's view begins with the very same one)
            return self._cached(("archive gone", self._keys[upto - 1], upto), lambda: (self._gone(upto), []))
        key = ("archive", self._keys[upto - 1], upto, cap, self._counter.name)
        return self._cached(key, lambda: self._archive_note(upto, min(cap, self._gisted(upto, cap) - 1)))

    def _gone(self, upto: int) -> HumanMessage:
        """The line standing for blocks ``0 .. upto - 1`` when no value of theirs fits."""
        spans = self._spans
        first = next((spans[k][0] for k in range(upto) if spans[k]), 0)
        last = next((spans[k][-1] for k in range(upto - 1, -1, -1) if spans[k]), first)
        return HumanMessage(content=OMITTED_NOTE, additional_kwargs={META_KEY: {"condensed": [first, last]}})

    def _gisted(self, upto: int, cap: int) -> int:
        """The gists of blocks ``0 .. upto - 1`` summed, or as far as they exceed ``cap``
        (which is all a cap needs): on a long thread the oldest few blocks, not every one of
        the thousands the archive stands for (each is gisted when its size is first read)."""
        total = 0
        for block in range(upto):
            total += self._gist_sizes[block]
            if total > cap:
                break
        return total

    def _archive_note(self, upto: int, cap: int) -> tuple[HumanMessage | None, list[str]]:
        spans = self._spans
        first = next((spans[k][0] for k in range(upto) if spans[k]), 0)
        last = next((spans[k][-1] for k in range(upto - 1, -1, -1) if spans[k]), 0)
        reuse, ranked = self._ranked(upto)
        return _note((first, last), ranked, reuse.when or {}, set(), self._known, cap, self._counter, first=True)

    def _ranked(self, upto: int) -> tuple[Reuse, tuple[Labelled, ...]]:
        """The values of blocks ``0 .. upto - 1`` the archive may list, as :class:`Reuse` ranks
        them: once for all the caps an archive is tried at, from the figures of the longest
        shorter archive ranked lately (the oldest blocks are read once as the archive grows)."""
        key = (self._keys[upto - 1], upto, self._counter.name)
        with _CACHE_LOCK:
            hit = _RANKED.hit(key)
        if hit is not None:
            return hit
        reuse = self._figures(upto)
        made = (reuse, tuple(reuse.ranked(archivable_only=True)))
        with _CACHE_LOCK:
            _RANKED.put(key, made)
        return made

    def _figures(self, upto: int) -> Reuse:
        """The figures of blocks ``0 .. upto - 1``: kept, or extended from the longest kept."""
        name = self._counter.name
        base, start = Reuse(), 0
        with _CACHE_LOCK:
            for shorter in range(upto, 0, -1):
                shorter_key = (self._keys[shorter - 1], shorter, name)
                found = _RANKED.get(shorter_key)
                kept = found[0] if found is not None else _BASES.get(shorter_key)
                if kept is not None:
                    base, start = kept, shorter
                    break
        if start == upto:
            return base
        # A block short of members holds a protected exchange; the latest user message's loses
        # that protection when the user speaks again, and the keys change from that block on.
        # The figures of the blocks before the last such block are kept, so that the archive is
        # then ranked again from there, not from the last archive ranked before it entered.
        # Blocks read for an archive ranked from kept figures are kept too (the block archived
        # as it is condensed, whose note was never made, is read again when the user speaks);
        # those of one ranked from nothing are not, the blocks after a held one included.
        keep = start > 0
        size = self._config.block_size
        held = next((k for k in range(upto - 1, start, -1) if len(self._spans[k]) < size), None)
        if held is not None:
            base = self._extended(base, start, held, keep)
            with _CACHE_LOCK:
                _BASES.put((self._keys[held - 1], held, name), base)
            start = held
        return self._extended(base, start, upto, keep)

    def _extended(self, base: Reuse, start: int, upto: int, keep: bool) -> Reuse:
        """``base`` (the figures of blocks ``0 .. start - 1``) extended by blocks ``start .. upto - 1``,
        their runs kept if ``keep``."""
        return base.joined([self._run(k, keep=keep) for k in range(start, upto)])

    def _run(self, block: int, valued: Sequence[Sequence[_Valued]] | None = None, *, keep: bool = False) -> Run:
        """The values of ``block``'s exchanges gathered: kept from when its note was made, else
        read now. Only a note's (``valued``: its exchanges' values, oldest first) is kept, or
        with ``keep``: an archive ranked from its first block reads every block once, and
        keeping those would push out the runs other conversations' next archive steps are
        waiting for."""
        key = (self._content(block), self._counter.name)
        with _CACHE_LOCK:
            run = _RUNS.hit(key)
        if run is None:
            if valued is None:
                valued = [_valued([self._exchanges[n]])[0] for n in self._spans[block]]
                if not keep:
                    return gathered(valued, self._counter)
            run = gathered(valued, self._counter)
            with _CACHE_LOCK:
                _RUNS.put(key, run)
        return run

    def _content(self, block: int) -> bytes:
        """The digest of ``block``'s own exchanges (hashed as its key hashes them): kept from
        the keys when they hashed it in this call (the blocks after one a user message joins
        when the user speaks again, which the archive is then ranked again from)."""
        found = self._contents.get(block)
        if found is not None:
            return found
        digest = hashlib.sha1()
        for number in self._spans[block]:
            digest.update(b"".join([b"\x00" + _digest(message) for message in self._exchanges[number]]) + b"\x02")
        return digest.digest()

    def archive(self, upto: int, cap: int) -> HumanMessage | None:
        """The note for blocks ``0 .. upto - 1`` within ``cap`` tokens (None if there are no
        such blocks or it lists nothing; at a cap of 0, a note listing no value that says older
        exchanges are not shown)."""
        return self._archive(upto, cap)[0]

    def block(self, block: int, archived: int, archive_cap: int) -> HumanMessage | None:
        """The note of one condensed ``block`` after an archive of ``archived`` blocks."""
        return self._block(block, archived, archive_cap)[0]

    def _block(self, block: int, archived: int, archive_cap: int) -> tuple[HumanMessage | None, tuple[str, ...]]:
        members = self._spans[block]
        if not members:
            return None, ()
        key = ("block", self._keys[block], block, archived, archive_cap, self._config.digest_tokens, self._counter.name)

        def make() -> tuple[HumanMessage | None, list[str]]:
            known = set(self._archive(archived, archive_cap)[1])
            for earlier in range(archived, block):
                known.update(self._block(earlier, archived, archive_cap)[1])
            cap = self._config.digest_tokens
            if self._gist_over is None or not self._gist_over(block, cap):
                cap = min(cap, self._gist_sizes[block] - 1)
            valued = _valued([self._exchanges[n] for n in reversed(members)])
            self._run(block, valued[::-1])  # for the archive step that takes this block in
            shown_first = archived == 0 and block == next(k for k, m in enumerate(self._spans) if m)
            return _note(
                (members[0], members[-1]), list(_by_priority(valued)), _chronology(valued), known, self._known, cap,
                self._counter, first=shown_first,
            )

        return self._cached(key, make)


_DIGESTS: PerMessage[bytes] = PerMessage(RECENT_MESSAGES)


def _digest(message: BaseMessage) -> bytes:
    """The sha1 of :func:`_text` of ``message``, once per message."""
    found = _DIGESTS.get(message)
    if found is None:
        found = hashlib.sha1(_text(message).encode("utf-8", "surrogatepass")).digest()
        _DIGESTS.put(message, found)
    return found


def _text(message: BaseMessage) -> str:
    """Everything of ``message`` a note's values and labels are read from: its role, a tool
    result's name, status and call, a call's tool names, ids and arguments, and its whole content,
    blocks of a provider's tools included. Notes are remembered by these across engines and
    scopes: what two conversations share a note by must be all that makes it."""
    calls = [[c["name"], c["id"], args_json(c["args"])] for c in message.tool_calls] if isinstance(message, AIMessage) else []
    said = [message.name, message.status, message.tool_call_id] if isinstance(message, ToolMessage) else [message.name]
    # the content as it is in the JSON, not as a text of its own: a text that spells a list of
    # blocks out is not those blocks
    return json_text([message.type, *said, calls, message.content], sort_keys=True, default=repr)


__all__ = ["Digests", "Exchange", "Keys"]
