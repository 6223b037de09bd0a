"""Messages owed to the facts ledger: read a bounded number per step, in conversation order.

While the facts store fails (or a step's store time, ``stores.timeout``, runs out before its
facts are written), the messages of those steps are owed: nothing marks them read, so a later
call finds them in the conversation again (and the tool outputs captured meanwhile are kept, see
:class:`~ctxplugin.stages._unread.UnreadOutputs`). Once the store is back they are read oldest
first, at most :data:`OWED_PER_STEP` per step (fewer after a step whose store time ran out on them),
so that no step reads a long outage's backlog at once.

Supersession follows the order facts are written in, so while a reader is behind nothing newer
is written before what is owed: the messages a step brings queue behind the owed ones, and an
output captured meanwhile (``capture_tool_result``) is kept for the facts stage like one captured
while the store was out (:func:`held_back`). One call of a scope reads the owed messages at a
time; a concurrent call of it claims none.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._step import step_wait
from ctxplugin.scope import Scope

OWED_PER_STEP = 32
"""Owed messages one step reads at most; a portion the step's store time ran out on is halved
for the next step (down to one message), and grows back as portions are written."""

SCOPES_OWED = 4096
"""Scopes whose owed count is kept: past it the one not read longest is read whole next time
(and an output captured for it before then is read at capture). As many scopes caught up since
keep a portion that is still growing back, in a map of their own: they never push out one
that owes messages."""


@dataclass(slots=True)
class Portion:
    """What one step reads of the messages it claimed (:meth:`Step.take`).

    Attributes:
        fresh: read now, oldest first.
        owed: left for later calls (the caller forgets that they were read).
        mine: whether this call reads the scope's owed messages (or the scope owes none).
        failed: writing ``fresh`` failed (see :meth:`Owed.failed`).
    """

    fresh: list[BaseMessage]
    owed: list[BaseMessage]
    mine: bool
    failed: bool = False


@dataclass(slots=True)
class Step:
    """One call's turn at a scope's owed messages (:meth:`Owed.step`).

    Attributes:
        behind: the scope owes messages (or keeps outputs): a bounded portion is read.
        mine: this call reads them (or the scope owes none); else another call does now.
        size: the portion this call reads while behind.
        owing: the messages owed as the last step counted them.
        portion: what :meth:`take` gave.
    """

    behind: bool
    mine: bool
    size: int
    owing: int
    portion: Portion | None = None

    def claims(self, messages: Sequence[BaseMessage]) -> Sequence[BaseMessage]:
        """What of ``messages`` this call may claim: none while another call reads the owed ones."""
        return messages if self.mine or not self.behind else []

    def take(self, claimed: Sequence[BaseMessage]) -> Portion:
        """What this call reads of ``claimed`` (in conversation order): all of them while not
        behind; else the oldest portion, or none while another call reads the owed ones."""
        cut = (self.size if self.mine else 0) if self.behind else len(claimed)
        self.portion = Portion(list(claimed[:cut]), list(claimed[cut:]), self.mine)
        return self.portion


class Owed:
    """Per scope: how many messages the facts ledger is owed, how many the next step reads, and
    whether a call reads them now. Locked: one engine serves many threads."""

    def __init__(self, size: int = SCOPES_OWED) -> None:
        self._lock = threading.Lock()
        # scope key -> (owed, portion) of the scopes owing messages; of those owing none whose
        # portion is still below the full one in ``_growing``
        self._owed: LRU[str, tuple[int, int]] = LRU(size)
        self._growing: LRU[str, tuple[int, int]] = LRU(size)
        self._reading: set[str] = set()

    def behind(self, scope: Scope) -> int:
        """How many messages ``scope``'s facts are owed (0: none; as the last step counted them)."""
        with self._lock:
            found = self._found(scope.key())
        return 0 if found is None else found[0]

    @contextmanager
    def step(self, scope: Scope, *, kept: bool) -> Iterator[Step]:
        """This step's turn at ``scope``'s owed messages, entered before it claims any (see
        :meth:`Step.claims`): while ``scope`` is behind (or keeps an output, ``kept``), one call
        at a time reads them, and a concurrent call claims none, so that no call writes a newer
        message while another still holds older ones. The portion taken counts as written when
        the block ends, unless the caller says it :meth:`failed` (or the block raised)."""
        key = scope.key()
        with self._lock:
            found = self._found(key)
            behind = kept or (found is not None and found[0] > 0)
            mine = not behind or key not in self._reading
            if behind and mine:
                self._reading.add(key)
        step = Step(
            behind=behind,
            mine=mine,
            size=OWED_PER_STEP if found is None else found[1],
            owing=0 if found is None else found[0],
        )
        try:
            yield step
        except BaseException:
            if step.portion is not None and not step.portion.failed:
                self._record(scope, step.portion, halve=False)
            raise
        else:
            if step.portion is not None and not step.portion.failed:
                self.written(scope, step.portion)
        finally:
            if behind and mine:
                with self._lock:
                    self._reading.discard(key)

    def written(self, scope: Scope, portion: Portion) -> None:
        """``portion``'s fresh messages were written (or it had none to write)."""
        if not portion.mine:
            return  # the call reading the owed messages counts them
        with self._lock:
            found = self._found(scope.key())
            if found is None and not portion.owed:
                return
            grown = min(
                OWED_PER_STEP,
                max(len(portion.fresh) * 2, found[1] if found is not None else OWED_PER_STEP),
            )
            self._set(scope.key(), len(portion.owed), grown)

    def failed(self, scope: Scope, portion: Portion) -> None:
        """Writing ``portion``'s fresh messages failed: they are owed too. When the step's store
        time ran out on a whole portion (a store slow rather than out), the next step reads half
        as many; a step that read all it owed (a few messages) changes no portion."""
        portion.failed = True
        self._record(scope, portion, halve=step_wait(1.0) <= _SPENT_S)

    def _record(self, scope: Scope, portion: Portion, *, halve: bool) -> None:
        with self._lock:
            found = self._found(scope.key())
            size = found[1] if found is not None else OWED_PER_STEP
            whole = portion.mine and portion.fresh and portion.owed  # the step read all it could
            if halve and whole:
                size = max(1, len(portion.fresh) // 2)
            self._set(scope.key(), max(1, len(portion.fresh) + len(portion.owed)), size)

    def _found(self, key: str) -> tuple[int, int] | None:
        """``key``'s owed count and portion (None: owes none, reads a full portion). Locked."""
        found = self._owed.get(key)
        return self._growing.get(key) if found is None else found

    def _set(self, key: str, owed: int, portion: int) -> None:
        """Record ``key``'s owed count and portion, in the map its count belongs in. Locked."""
        self._owed.pop(key, None)
        self._growing.pop(key, None)
        if owed:
            self._owed.put(key, (owed, portion))
        elif portion < OWED_PER_STEP:
            self._growing.put(key, (owed, portion))


_SPENT_S = 0.05
"""Store time left below which a step's store time counts as spent."""


def in_order(
    kept: Sequence[BaseMessage],
    sources: Sequence[BaseMessage],
    at: Sequence[int],
    conversation: Sequence[BaseMessage],
) -> list[BaseMessage]:
    """``sources`` (read from ``conversation``, each at its index in ``at``) with the outputs
    ``kept`` (captured while their facts were not read, see
    :class:`~ctxplugin.stages._unread.UnreadOutputs`) each placed where the conversation holds
    its tool call's output: the order the conversation states them in. One the conversation
    does not hold (trimmed from it) goes first, as the oldest."""
    if not kept:
        return list(sources)
    calls: dict[str, int] = {}
    for index, message in enumerate(conversation):
        if isinstance(message, ToolMessage):
            calls.setdefault(message.tool_call_id, index)
    placed = sorted(
        (
            (calls.get(m.tool_call_id, -1) if isinstance(m, ToolMessage) else -1, n)
            for n, m in enumerate(kept)
        )
    )
    ordered: list[BaseMessage] = []
    index = 0
    for source, position in zip(sources, at, strict=True):
        while index < len(placed) and placed[index][0] <= position:
            ordered.append(kept[placed[index][1]])
            index += 1
        ordered.append(source)
    ordered += [kept[n] for _, n in placed[index:]]
    return ordered


def owed_warning(count: int) -> str:
    """What the report says while ``count`` messages are still owed to the facts ledger."""
    return f"{count} messages still owed to the facts ledger (read oldest first over the next calls): their facts are not shown yet"


def held_back(owed: Owed, scope: Scope, kept: bool) -> bool:
    """Whether an output captured now is left for the facts stage to read in conversation order:
    ``scope``'s facts are owed messages, or outputs are ``kept`` for it."""
    return kept or owed.behind(scope) > 0


__all__ = ["OWED_PER_STEP", "Owed", "Portion", "Step", "held_back", "in_order", "owed_warning"]
