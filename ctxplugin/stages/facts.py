"""Facts: read new facts from the conversation, mark what is no longer current, and choose the
facts block for the latest question.

Facts are read from each message as it was received (a tool output whole, not its summary),
once per message (:class:`~ctxplugin.stages.memos.ReadMemo`). A message stating something a
newer fact replaced is marked in the view, never changed in the agent's state. The block holds
the facts most relevant to the latest human message within the facts budget, leaving out what
the system prompt and the task already say. When the facts store fails the call goes on without
facts, with a warning, and the messages are read again on a later call. What the messages of a
branch the host went back from stated (time travel on a checkpointed thread) is no longer
current once the conversation holds them no more (see :meth:`~ctxplugin.stages._seen.Seen.left_behind`).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._lru import LRU
from ctxplugin._prefix import Stamp
from ctxplugin.budget import FactLine
from ctxplugin.config import FactsConfig, HistoryConfig
from ctxplugin.errors import StoreError
from ctxplugin.facts import FactsLedger
from ctxplugin.facts.model import output_digest
from ctxplugin.facts.outdated import InForce, in_force, replaced_in_view
from ctxplugin.facts.render import current_once, fact_line, normalized, restates, tracked
from ctxplugin.facts.stated import stated_keys
from ctxplugin.history import tier_bounds
from ctxplugin.scope import Scope
from ctxplugin.stages._backlog import in_order, owed_warning
from ctxplugin.stages._seen import Seen, rejoining, user_names
from ctxplugin.stages._shared_window import SharedWindow, current_ids, query_digest, stands
from ctxplugin.stages.memos import ReadMemo, rewritten_summary
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView
from ctxplugin.tokens import TokenCounter, content_text


@dataclass(frozen=True, slots=True)
class ChooseFacts:
    """Extract, mark outdated statements in ``history`` and fill ``facts``,
    ``facts_extracted`` and ``outdated_marked``.

    Attributes:
        config: the facts settings.
        history: the history settings (with ``placement="window"`` the block is chosen again
            only when the verbatim tier moves).
        ledger: the facts ledger.
        counter: counts the lines of the block.
        reads: messages already read, shared with ``capture_tool_result``.
        lines_budget: tokens the block may take.
    """

    name: ClassVar[str] = "facts"
    config: FactsConfig
    history: HistoryConfig
    ledger: FactsLedger
    counter: TokenCounter
    reads: ReadMemo
    lines_budget: int
    # placement="window": the lines shown per reader and the tier position they were chosen
    # at, reused until the boundary moves (or the question changes), with the store's count
    # (see _generation) they were last found current at
    _window_lines: LRU[str, tuple[str, tuple[FactLine, ...], int | None]] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    # per reader: what earlier calls read and marked of the conversation, extended as it grows
    _seen: LRU[str, Seen] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    # per reader: the ids of the user messages left behind on a branch, current again if they come back
    _left: LRU[str, frozenset[str]] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    # per reader: the facts in force and the store's count (see _generation) they were read at
    _rules: LRU[str, tuple[int, InForce]] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        # an embedding with tables to load (the default's) loads them as the engine is built,
        # so the first model call does not wait for them
        warm = getattr(getattr(self.ledger.store, "embedding", None), "warm", None)
        if callable(warm):
            warm()

    def apply(self, view: CallView) -> CallView:
        body = view.history
        scope = view.scope
        key = _reader_key(scope)
        with self._lock:
            # claimed while this call runs: a concurrent call of the same reader starts afresh
            seen = self._seen.pop(key, None)
            self._seen.put(key, _CLAIMED)
        claimed = seen is _CLAIMED  # a concurrent call's: its branch is no branch gone back from
        seen = None if claimed else seen
        left: list[BaseMessage] = []  # read last call, on a branch the host has gone back from since
        back: list[BaseMessage] = []  # left behind before, in the conversation again
        resumed = seen is None and not claimed  # not read before by this process: what it left behind is told by the facts stored
        if seen is None or not seen.continued_by(view.original, body, view.original_stamp, view.history_stamp):
            left = seen.left_behind(view.original) if seen is not None else []
            with self._lock:
                gone = self._left.hit(key) or frozenset()
            back = rejoining(view.original, gone)
            seen = Seen()
        grown = seen.size
        was_latest = seen.latest
        was_marked = seen.marked_stamp
        changed = seen.extend(view.original, body, view.original_stamp, view.history_stamp)
        seen.marked_stamp = None  # until marked below
        latest = seen.latest
        query = content_text(body[latest].content) if latest >= 0 else ""
        window = self._window_key(seen.exchanges, query)
        standing = _standing_text(view.header, body)
        extracted = view.facts_extracted
        marked = view.outdated_marked
        unread = False  # new messages left unread: the next call reads the conversation afresh
        shown: Sequence[BaseMessage] = body
        in_force_now: InForce | None = None  # what marking reads; facts restating a change are not current
        shared: SharedWindow | None = None  # the window's block as the processes sharing the store agree on it
        if self.config.extract:
            if left or back or resumed:
                try:  # before the new branch is read: what it states anew replaces nothing of the old one
                    self._leave(left, back, view.original, key, scope, resumed=resumed)
                except StoreError as exc:  # resuming: only a check that nothing was left
                    what = "facts of an abandoned branch stay current" if left or back else "not checked whether stored facts came from messages no longer in the conversation"
                    view = view.degraded(f"facts store unavailable; {what}: {exc}")
            # outputs captured while their facts were not read (summaries in the history) in their place
            unread_outputs = self.reads.unread.kept(scope)
            self.ledger.polls.asked(seen.calls.answered, scope=scope)  # settled as the outputs are read
            ordered = in_order(unread_outputs, seen.new_sources, seen.new_at, view.original)
            with self.reads.owed.step(scope, kept=bool(unread_outputs)) as step, self.reads.reading(step.claims(ordered), scope) as taken:
                part = step.take(taken)  # the rest is read by a later call (the next one reads the conversation afresh)
                self.reads.forget(part.owed, scope)
                fresh, unread = part.fresh, bool(part.owed) or not part.mine
                if fresh:
                    try:
                        # facts read from an output the host has since replaced go first: until
                        # they are gone no fact is shown (the outer handler skips the block)
                        with self.reads.unless_done(fresh, scope):
                            replaced = self.reads.replaced(fresh, view.original, scope)
                            if replaced:
                                self.ledger.withdraw(replaced, scope=scope)
                        if replaced and not self.ledger.can_withdraw:
                            with self._lock:  # a frozen block may hold them: chosen again below
                                self._window_lines.pop(key, None)
                            view = view.warn(_UNWITHDRAWN)
                    except StoreError as exc:
                        self.reads.owed.failed(scope, part)
                        view = view.degraded(f"facts store unavailable; facts skipped for this call: {exc}")
                        return self._done(view, shown, (), extracted, marked, None)
                    try:
                        with self.reads.unless_done(fresh, scope):
                            extracted += len(self.ledger.ingest([m for m in fresh if not rewritten_summary(m)], scope=scope))
                            self.reads.read_outputs(fresh, scope)
                            self.reads.unread.settled([m for m in unread_outputs if all(m is not o for o in part.owed)], scope)
                    except StoreError as exc:
                        # read again on a later call, once the store takes writes again; what is
                        # stored already is still read below (a read takes no write lock)
                        self.reads.owed.failed(scope, part)
                        view = view.degraded(f"facts store unavailable; new facts not recorded in this call: {exc}")
                        unread = True
                if part.owed or not part.mine:  # with the portion this step failed to write; else as last counted, or what it left
                    view = view.warn(owed_warning(len(part.owed) + (len(fresh) if part.failed else 0) if part.mine else step.owing or len(ordered)))
            try:
                # a tool called again with the same arguments: its output replaces the earlier one's
                self.ledger.polls.answered(seen.calls.answered, scope=scope)
            except StoreError as exc:
                view = view.degraded(f"facts store unavailable; a tool output called for again replaced nothing: {exc}")
                unread = True
        try:
            if self.config.mark_outdated:
                # the latest user message is shown exactly as sent; the one before it no longer
                again = (was_latest,) if was_latest not in (-1, latest) else ()
                rules = in_force_now = self._in_force(key, scope)
                if view.room is not None and view.room.whole:
                    rules = replaced_in_view(rules, body)
                before = len(seen.marking.out)
                seen.marking.update(
                    body, rules, spans=seen.spans.spans, asides=seen.asides.spans, keep={latest}, start=min(changed, grown), again=again
                )
                shown = seen.marking.out
                marked = seen.marking.count
                # the marked history is the one passed on last with new messages appended when
                # no earlier mark was made again
                seen.marked_stamp = Stamp.after(was_marked if seen.marking.kept == before else None, len(shown))
            else:
                seen.marked_stamp = view.history_stamp
            if window is not None:
                with self._lock:
                    frozen = self._window_lines.get(key)
                if frozen is not None and frozen[0] == window and self._all_current(key, frozen, scope, in_force_now):
                    return self._done(view, shown, frozen[1], extracted, marked, None if unread else seen)
                if self._generation() is None:  # a store other processes may write: they may have chosen it
                    shared = SharedWindow.of(self.ledger.store, scope, key, window, self._settings())
            generation = self._generation()  # before the read: a write during it reads again later
            if shared is not None:
                try:
                    agreed = shared.agreed(in_force_now)
                except StoreError as exc:
                    view, shared = view.degraded(f"{_UNSHARED}: {exc}"), None
                else:
                    if agreed is not None:
                        with self._lock:
                            self._window_lines.put(key, (shared.window, agreed, generation))
                        return self._done(view, shown, agreed, extracted, marked, None if unread else seen)
            scored = self.ledger.search(query, scope=scope, k=self.config.k) if query and self.config.k else []
        except StoreError as exc:
            # read again on a later call, once the store is back (the reading starts afresh)
            view = view.degraded(f"facts store unavailable; facts skipped for this call: {exc}")
            return self._done(view, shown, (), extracted, marked, None)
        lines: list[FactLine] = []
        used = 0
        prompt_keys: frozenset[str] | None = None  # read when a keyed tool fact asks
        for hit in current_once(scored):
            fact = hit.fact
            if not stands(fact, in_force_now):
                continue  # restates a replaced value: its message is marked, the fact is not current
            if fact.from_tool and fact.key is not None:
                if prompt_keys is None:
                    prompt_keys = stated_keys(tuple(content_text(m.content) for m in view.header))
                if fact.key in prompt_keys:
                    continue  # the system prompt states this; a tool's value does not stand in for it
            keyed = self.config.skip_shown and tracked(fact)
            stated = restates(fact.text, standing)
            if stated and not keyed:
                continue
            try:
                basis = self.ledger.changed_basis(fact, scope=scope) if fact.needs_review else []
            except StoreError as exc:
                view = view.degraded(f"facts store unavailable; a changed dependency is not named: {exc}")
                basis = []
            text = fact_line(fact, basis)
            tokens = self.counter.count(fact.key if stated and fact.key else text) + 2  # stated: named only
            if used + tokens > self.lines_budget:
                break
            used += tokens
            lines.append(
                FactLine(
                    text=text,
                    score=float(hit.score),
                    fact_id=fact.id,
                    key=fact.key,
                    source_ref=fact.source.ref,
                    statement=fact.text,
                    kind=fact.kind,
                    # a review note quotes the facts that replaced its basis: tool text when a
                    # tool read them, which never goes in a system message either
                    from_tool=fact.from_tool or any(b.from_tool for b in basis),
                    tracked=keyed,
                    stated=stated,
                )
            )
        block = tuple(lines)
        if shared is not None:
            try:
                block = shared.offer(block)
            except StoreError as exc:
                view = view.degraded(f"{_UNSHARED}: {exc}")
        if window is not None:
            with self._lock:
                self._window_lines.put(key, (window, block, generation))
        return self._done(view, shown, block, extracted, marked, None if unread else seen)

    def _done(
        self,
        view: CallView,
        shown: Sequence[BaseMessage],
        lines: tuple[FactLine, ...],
        extracted: int,
        marked: int,
        seen: Seen | None,
    ) -> CallView:
        history = tuple(shown)  # before ``seen`` is given back: the next call extends it
        stamp = seen.marked_stamp if seen is not None else None
        with self._lock:
            if seen is not None:
                self._seen.put(_reader_key(view.scope), seen)
            elif self._seen.hit(_reader_key(view.scope)) is _CLAIMED:
                self._seen.pop(_reader_key(view.scope), None)  # the next call reads the conversation afresh
        return view.override(
            history=history,
            history_stamp=stamp,
            unmarked=view.history,
            facts=lines,
            facts_extracted=extracted,
            outdated_marked=marked,
        )

    def forget(self, scope: Scope) -> None:
        """Read ``scope``'s conversation afresh on its next call (its host cleared it)."""
        with self._lock:
            self._seen.pop(_reader_key(scope), None)

    def _leave(
        self, left: Sequence[BaseMessage], back: Sequence[BaseMessage], conversation: Sequence[BaseMessage], key: str, scope: Scope, *, resumed: bool
    ) -> None:
        """What the messages ``left`` (of an abandoned branch) stated is no longer current: a user
        message's facts are marked so, a tool output's are withdrawn unless ``conversation``
        holds the output under its call id (what they replaced is current again). What the user messages ``back``, left behind before
        and in ``conversation`` again, stated is current again (a sub-agent of the thread was
        handed part of it, or the user went back to the first branch). ``resumed``: this process
        did not read the conversation before; what it left behind is told by the facts stored."""
        outputs = {m.tool_call_id: set[str]() for m in left if isinstance(m, ToolMessage)}
        for message in conversation:
            if isinstance(message, ToolMessage) and message.tool_call_id in outputs:
                outputs[message.tool_call_id].add(output_digest(content_text(message.content)))
        told = self.ledger.leave(left, scope=scope, back=back, unread=conversation if resumed else (), outputs=outputs)
        # withdrawn: read again when the conversation holds them again (the first branch taken up again)
        self.reads.forget([m for m in left if isinstance(m, ToolMessage)], scope)
        with self._lock:
            gone = (self._left.hit(key) or frozenset()) - user_names(back)
            said = user_names(left) | {f.source.ref for f in told}
            self._left.put(key, gone | {ref for ref in said if ref})

    def _in_force(self, key: str, scope: Scope) -> InForce:
        """The facts in force for the reader ``key``; read again only when what is in force may
        have changed since (see :meth:`_generation`; a store that counts nothing is read on
        every call)."""
        generation = self._generation()
        if generation is None:
            return in_force(self.ledger, scope)
        with self._lock:
            kept = self._rules.hit(key)
        if kept is not None and kept[0] == generation:
            return kept[1]
        rules = in_force(self.ledger, scope)
        with self._lock:
            self._rules.put(key, (generation, rules))
        return rules

    def _window_key(self, exchanges: int, query: str) -> str | None:
        """With ``facts.placement="window"``: what the facts block is chosen for — the start of
        the verbatim tier (``exchanges`` is how many exchanges the history holds), counted in
        archive steps (``block_size * archive_blocks`` exchanges: the block sits after the
        archive note, which changes that often), and the question. None with any other
        placement."""
        if self.config.placement != "window" or not self.history.enabled:
            return None
        step = tier_bounds(exchanges, self.history)[1] // (self.history.block_size * self.history.archive_blocks)
        return f"{step}\x00{query_digest(query)}"

    def _settings(self) -> str:
        """What, besides the reader and the window, a facts block chosen by another process
        depends on: the settings of the block (the same in every process of a deployment)."""
        return hashlib.sha256(repr((self.config, self.history, self.lines_budget, self.counter.name)).encode()).hexdigest()

    def _generation(self) -> int | None:
        """What the facts in force and a frozen block were read at: the fact store's ``revisions``,
        else its ``generation`` (see :class:`~ctxplugin.facts.store.FactStore`); None: neither."""
        for name in ("revisions", "generation"):
            counted = getattr(self.ledger.store, name, None)
            if isinstance(counted, int):
                return counted
        return None

    def _all_current(
        self, key: str, frozen: tuple[str, tuple[FactLine, ...], int | None], scope: Scope, rules: InForce | None
    ) -> bool:
        """Whether every fact of the frozen lines is still valid (none superseded since it was
        chosen, none restating a value ``rules`` replaced): read again only when the store was
        written since they were last found so."""
        window, lines, checked = frozen
        generation = self._generation()
        if generation is not None and generation == checked:
            return True
        ids = [line.fact_id for line in lines]
        if ids:
            valid = current_ids(self.ledger.store, ids, scope, rules)
            if not all(fact_id in valid for fact_id in ids):
                return False
        with self._lock:
            self._window_lines.put(key, (window, lines, generation))
        return True


def _standing_text(header: Sequence[SystemMessage], body: Sequence[BaseMessage]) -> str:
    """What every call shows whole — the system messages and the task (first human message) —
    lowercased with whitespace collapsed, for :func:`~ctxplugin.facts.render.restates`."""
    task = next((m for m in body if isinstance(m, HumanMessage)), None)
    return normalized(tuple(content_text(m.content) for m in (*header, *([task] if task is not None else []))))


_CLAIMED = Seen()
"""What a reader's entry holds while a call of it runs (never extended: a concurrent call starts afresh)."""

_UNSHARED = "facts store unavailable; the facts block is chosen by this process alone (other processes may show another)"

_UNWITHDRAWN = (
    "facts read from a tool output the host has since replaced could not be withdrawn: the facts "
    "store has no withdraw(owner, outputs) method (see FactStore); they stay stored, left out of the facts block"
)


def _reader_key(scope: Scope) -> str:
    """What the facts shown depend on: the scope and the reader's roles (facts restricted to
    a role are shown only to readers that have it)."""
    return scope.key() + ("\x00" + ",".join(scope.roles) if scope.roles else "")


__all__ = ["ChooseFacts"]
