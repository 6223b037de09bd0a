"""What the stages remember between calls, shared with the capture path.

A tool output is compacted once (:class:`CaptureMemo`) whether it arrives through
``capture_tool_result`` or in a history passed to ``prepare``; a message is read for facts once
(:class:`ReadMemo`), whichever path saw it first. Both maps are bounded and locked: one engine
serves many threads.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin._deadline import step_deadline, waiting
from ctxplugin._lru import LRU
from ctxplugin._messages import REPEAT, annotation
from ctxplugin._names import META_TOOL_NAMES
from ctxplugin.cas import Captured, CASStore, RefRevocation, host_answer, masked_refs, store_text
from ctxplugin.cas.annotation import cleared_from_request
from ctxplugin.cas.capture import Compacted, compacted, stored
from ctxplugin.config import CASConfig
from ctxplugin.errors import StoreError
from ctxplugin.facts.model import output_digest
from ctxplugin.scope import Scope
from ctxplugin.stages._backlog import Owed
from ctxplugin.stages._mark_owners import MarkOwners
from ctxplugin.stages._unread import UnreadOutputs
from ctxplugin.stages.view import log_degraded
from ctxplugin.tokens import TokenCounter, content_text

MEMO_SIZE = 4096


class CaptureMemo:
    """Tool outputs as captured into the CAS, by scope, tool call and content.

    Args:
        store: the CAS the outputs are stored in.
        config: how outputs are compacted.
        counter: counts the tokens of originals and compact forms.
    """

    def __init__(self, store: CASStore, config: CASConfig, counter: TokenCounter, size: int = MEMO_SIZE) -> None:
        self.store = store
        self.config = config
        self.counter = counter
        self._lock = threading.Lock()
        self._memo: LRU[tuple[str, str, int, int], Captured] = LRU(size)  # by scope, call id and content
        # outputs the CAS failed to store, summarized (None: not yet), for when it is back
        self._unstored: LRU[tuple[str, str, int, int], Compacted | None] = LRU(size)
        self._texts: LRU[tuple[str, int, int], str] = LRU(size)  # user texts stored: by scope and text, their ref
        self.owners = MarkOwners(size)  # the tool calls each ref was stored for
        self.revocations = Revocations(store, size, revoked=self._revoked, owners=self.owners)

    def captured(self, message: ToolMessage, scope: Scope, key: tuple[str, str, int, int] | None = None) -> Captured:
        """``message``'s output stored and compacted (once per scope, call id and content, its
        :func:`capture_key` when given; ``created`` only the first time). Raises StoreError: the
        CAS failed (the summary is kept for the next try)."""
        key = key or capture_key(message, scope)
        with self._lock:
            hit = self._memo.get(key)
            made = self._unstored.get(key)
        if hit is not None:
            if hit.ref_id is not None:
                self.owners.record(hit.ref_id, message.tool_call_id, scope, created=False)
            return hit
        if made is None:
            made = compacted(message.content, config=self.config, counter=self.counter, tool_name=message.name,
                             is_error=message.status == "error")
        try:
            captured = stored(made, store=self.store, scope=scope, config=self.config)
        except StoreError:
            with self._lock:
                self._unstored.put(key, made)
            raise
        with self._lock:
            self._unstored.pop(key, None)
            # a later lookup stores nothing: it did not create the grant
            self._memo.put(key, dataclasses.replace(captured, created=False) if captured.created else captured)
        if captured.ref_id is not None:
            self.owners.record(captured.ref_id, message.tool_call_id, scope, created=captured.created)
        if captured.created and captured.ref_id is not None:
            self.revocations.forget(captured.ref_id, scope)  # a new grant, revoked again if masked again
        return captured

    def known(self, message: ToolMessage, scope: Scope) -> Captured | None:
        """``message``'s output as :meth:`captured` stored it before, or None: asks no store."""
        with self._lock:
            return self._memo.get(capture_key(message, scope))

    def unstored(self, message: ToolMessage, scope: Scope, key: tuple[str, str, int, int] | None = None) -> bool:
        """Whether ``message``'s output (its :func:`capture_key`) passed through unstored before."""
        with self._lock:
            return (key or capture_key(message, scope)) in self._unstored

    def put_off(self, message: ToolMessage, scope: Scope) -> bool:
        """Count ``message``'s output :meth:`unstored`, the CAS not asked; whether it was not before."""
        key = capture_key(message, scope)
        with self._lock:
            if key in self._unstored:
                return False
            self._unstored.put(key, None)
            return True

    def _revoked(self, ref: str, scope: Scope) -> None:
        """Forget the captures of ``ref`` in ``scope``, revoked from the CAS: an output of that
        content seen again (a thread rewound to before the mask) is stored again."""
        key = scope.key()
        with self._lock:
            for gone in [k for k, c in self._memo.items() if k[0] == key and c.ref_id == ref]:
                del self._memo[gone]

    def stored_text(self, text: str, scope: Scope) -> tuple[str, bool]:
        """The ref ``text`` (a user's message the budget cuts) is stored under in ``scope``,
        and whether this call stored it (once per scope and text; see
        :func:`~ctxplugin.cas.store_text`).

        Raises:
            StoreError: the CAS failed.
        """
        key = (scope.key(), len(text), hash(text))
        with self._lock:
            hit = self._texts.get(key)
        if hit is not None:
            return hit, False
        ref, created = store_text(text, store=self.store, scope=scope, config=self.config)
        with self._lock:
            self._texts.put(key, ref)
        return ref, created


STILL_STORED = "CAS unavailable; an output masked after capture is still stored whole"
UNREVOKED = (
    "a tool output masked after capture is still stored whole: the CAS store has no "
    "revoke(ref_id, scope) method (see RefRevocation); its ref stays withheld from expand_ref"
)


def capture_key(message: ToolMessage, scope: Scope) -> tuple[str, str, int, int]:
    """Where the capture memo keeps ``message``'s output: its scope, tool call and content."""
    text = message.content if isinstance(message.content, str) else repr(message.content)
    return (scope.key(), message.tool_call_id, len(text), hash(text))


class Revocations:
    """The grants of tool outputs masked after capture, taken back from the CAS
    (:class:`~ctxplugin.cas.RefRevocation`): each ref once per scope, not again on every call;
    a ref a failing store kept is tried again on the scope's next call.

    Args:
        store: the CAS the outputs were stored in.
        revoked: told of each ref revoked, with its scope.
    """

    def __init__(
        self, store: CASStore, size: int = MEMO_SIZE, *, revoked: Callable[[str, Scope], None] | None = None,
        owners: MarkOwners | None = None,
    ) -> None:
        self.store = store
        self._revoked = revoked
        self._owners = owners
        self._lock = threading.Lock()
        self._done: LRU[tuple[str, str], bool] = LRU(size)  # scope key and ref revoked
        self._pending: LRU[str, tuple[str, ...]] = LRU(size)  # scope key -> refs a failure left

    def revoke(self, refs: Sequence[str], scope: Scope) -> bool:
        """Revoke ``scope``'s grants of ``refs`` (outputs masked after capture, see
        :func:`~ctxplugin.cas.masked_refs`) and of the refs a failure left before.

        Returns:
            False when some were due and the store cannot revoke (it stays holding them).

        Raises:
            StoreError: the CAS failed; the refs left are tried again on the next call.
        """
        key = scope.key()
        with self._lock:
            if not refs and key not in self._pending:
                return True
            due = [ref for ref in dict.fromkeys((*self._pending.pop(key, ()), *refs)) if (key, ref) not in self._done]
        for index, ref in enumerate(due):
            if isinstance(self.store, RefRevocation):
                try:
                    self.store.revoke(ref, scope)
                except StoreError:
                    with self._lock:
                        self._pending.put(key, tuple(due[index:]))
                    raise
                if self._revoked is not None:
                    self._revoked(ref, scope)
            with self._lock:
                self._done.put((key, ref), True)
        return not due or isinstance(self.store, RefRevocation)

    def revoke_masked(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """:meth:`revoke` the refs the outputs among ``messages`` withhold
        (:func:`~ctxplugin.cas.masked_refs`), outside ``prepare`` (a host saving them
        scrubbed): a failing store, or one that cannot revoke, is logged at WARNING. A mark
        naming another tool call's output revokes nothing (see :class:`MarkOwners`)."""
        if self._owners is not None:
            messages, _ = self._owners.without_foreign(messages, scope, log=False)
        try:
            revoked = self.revoke(masked_refs(messages), scope)
        except StoreError as exc:
            log_degraded(scope, f"{STILL_STORED}: {exc}")
        else:
            if not revoked:
                log_degraded(scope, UNREVOKED)

    def forget(self, ref: str, scope: Scope) -> None:
        """``scope`` was granted ``ref`` again: revoke it again should it be masked again."""
        with self._lock:
            self._done.pop((scope.key(), ref), None)


class ReadMemo:
    """Messages already read for facts, by scope and content; and the tool outputs read, by
    scope and tool call id, to notice one its host replaced after it was read (a PII filter
    masking a card number): the facts read from the old content are then withdrawn."""

    def __init__(self, size: int = MEMO_SIZE * 4) -> None:
        self._lock = threading.Lock()
        self._read: LRU[_ReadKey, bool] = LRU(size)
        self._outputs: LRU[str, str] = LRU(size)  # scope and tool call id -> digest of the output read
        self._reading: dict[_ReadKey, threading.Event] = {}  # read now by the call that claimed them; set when done
        self.unread = UnreadOutputs()  # outputs captured while the facts store failed
        self.owed = Owed()  # scopes whose facts are owed messages: read a portion per call

    def first_read(self, message: BaseMessage, scope: Scope) -> bool:
        """Whether ``message`` is read for the first time (it counts as read from now on). The
        caller reads it, then calls :meth:`finished` (:meth:`claim` does both)."""
        key = _read_key(message, scope)
        with self._lock:
            if key in self._read:
                return False
            self._read.put(key, True)
            self._reading[key] = threading.Event()
        return True

    def finished(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """The reading of ``messages`` (claimed with :meth:`first_read`) ended, its facts stored
        or not: calls waiting for it go on."""
        with self._lock:
            ended = [self._reading.pop(_read_key(message, scope), None) for message in messages]
        for event in ended:
            if event is not None:
                event.set()

    @contextmanager
    def claim(self, messages: Sequence[BaseMessage], scope: Scope) -> Iterator[list[BaseMessage]]:
        """The messages among ``messages`` read for the first time, for the block to read; they
        count as read from now on (unless the block fails, see :meth:`unless_done`)."""
        fresh = [message for message in messages if self.first_read(message, scope)]
        try:
            with self.unless_done(fresh, scope):
                yield fresh
        finally:
            self.finished(fresh, scope)

    @contextmanager
    def reading(self, messages: Sequence[BaseMessage], scope: Scope) -> Iterator[list[BaseMessage]]:
        """:meth:`claim`, then a wait for the others of ``messages`` that another call of the
        scope is reading right now (two calls of one session at once), until the step's deadline
        (``stores.timeout``) at the latest: what the caller looks up next holds their facts, as
        it would had the calls come one after the other."""
        with self.claim(messages, scope) as fresh:
            yield fresh
        deadline = step_deadline()
        if deadline is None or not self._reading:  # outside a step nothing bounds the wait
            return
        with self._lock:
            others = [event for message in messages if (event := self._reading.get(_read_key(message, scope))) is not None]
        with waiting():  # the step's store time: what the other call reads is stored meanwhile
            for event in others:
                wait = deadline - time.monotonic()
                if wait <= 0 or not event.wait(wait):
                    return

    def forget(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """Forget that ``messages`` were read: their facts were not stored (the store failed)."""
        with self._lock:
            for message in messages:
                self._read.pop(_read_key(message, scope), None)

    @contextmanager
    def unless_done(self, messages: Sequence[BaseMessage], scope: Scope) -> Iterator[None]:
        """Forget that ``messages`` were read when the block reading them does not finish,
        whatever stopped it (a store error, a ``KeyboardInterrupt``, an extractor that
        raised): a later call reads them again rather than never."""
        try:
            yield
        except BaseException:
            self.forget(messages, scope)
            raise

    def replaced(
        self, messages: Sequence[BaseMessage], conversation: Sequence[BaseMessage], scope: Scope
    ) -> dict[str, tuple[str, ...]]:
        """The tool outputs among ``messages`` (read now, from ``conversation``) that replace
        one read before under the same tool call id, or that the host marked ``replaced`` in
        ``additional_kwargs["ctxplugin"]`` (validation marks an annotation the content no
        longer matches, see :mod:`ctxplugin.cas.annotation`): tool call id -> the digests of the outputs ``conversation``
        holds under that id, whose facts stay (see :meth:`FactsLedger.withdraw`).

        An output read before and still in ``conversation`` was not replaced: some recordings
        give several outputs one tool call id."""
        candidates: dict[str, str | None] = {}
        for message in messages:
            if isinstance(message, ToolMessage):
                with self._lock:
                    before = self._outputs.get(_output_key(message, scope))
                if annotation(message).get("replaced") is True:
                    candidates[message.tool_call_id] = None
                elif before is not None and before != output_digest(content_text(message.content)):
                    candidates.setdefault(message.tool_call_id, before)
        if not candidates:
            return {}
        present: dict[str, set[str]] = {call_id: set() for call_id in candidates}
        for message in conversation:
            if isinstance(message, ToolMessage) and message.tool_call_id in present:
                present[message.tool_call_id].add(output_digest(content_text(message.content)))
        return {
            call_id: tuple(sorted(present[call_id]))
            for call_id, before in candidates.items()
            if before is None or before not in present[call_id]
        }

    def read_outputs(self, messages: Sequence[BaseMessage], scope: Scope) -> None:
        """Remember the content of the tool outputs among ``messages`` as read for facts."""
        for message in messages:
            if isinstance(message, ToolMessage):
                digest = output_digest(content_text(message.content))
                with self._lock:
                    self._outputs.put(_output_key(message, scope), digest)


def _output_key(message: ToolMessage, scope: Scope) -> str:
    return f"{scope.key()}\x00{message.tool_call_id}"


_ReadKey = tuple[str, str, str, str, int, int]


def _read_key(message: BaseMessage, scope: Scope) -> _ReadKey:
    """What tells one reading of ``message`` from another: its scope, its id, the tool call a
    tool output answers (the same output returned by a later call states its values again, after
    whatever changed them in between), which repetition of an earlier message without an id it
    is (see :data:`~ctxplugin._messages.REPEAT`), and its text."""
    text = content_text(message.content)
    call = message.tool_call_id if isinstance(message, ToolMessage) else ""
    repeat = annotation(message).get(REPEAT, "")
    # str hashes are cached on the object: a long tool output resent on every call is not
    # hashed again (the memo lives in this process only, so the salted hash is stable)
    return (scope.key(), message.id or "", call, repeat if isinstance(repeat, str) else "", len(text), hash(text))


def fact_source(message: BaseMessage) -> bool:
    """Whether facts are extracted from ``message``: user turns and real tool outputs, not
    ctxplugin's own meta-tool results, not errors (a failed call states no fact), not an output
    its host left out of this one request (:func:`cleared_from_request`) and not what a host
    wrote itself in answer to a call (:func:`~ctxplugin.cas.host_answer`); not a summary that
    stands in for older messages (:func:`summary_of_earlier`)."""
    if isinstance(message, HumanMessage):
        return not summary_of_earlier(message)
    return (
        isinstance(message, ToolMessage)
        and message.name not in META_TOOL_NAMES
        and message.status != "error"
        and not cleared_from_request(message)
        and not host_answer(message)
    )


def rewritten_summary(message: BaseMessage) -> bool:
    """Whether ``message`` is a compact form rewritten after capture (a state kept it in place
    of the output, and a PII filter masked a line of it; marked ``summary``, see
    :mod:`ctxplugin.cas.annotation`). It withdraws the facts read from its output, as any
    replaced output does, and states none itself: its lines are a summary's."""
    return annotation(message).get("summary") is True


def summary_of_earlier(message: HumanMessage) -> bool:
    """Whether LangChain's ``SummarizationMiddleware`` wrote ``message``: a model's summary of
    the messages it replaced in the agent's state, in a user message. What it restates was read
    from those messages when they came, and the next summary replaces it: facts read from it
    would outlive it, in the user's name, and disagree with the next one's."""
    return message.additional_kwargs.get("lc_source") == "summarization"


__all__ = ["MEMO_SIZE", "CaptureMemo", "ReadMemo", "capture_key", "cleared_from_request", "fact_source", "rewritten_summary", "summary_of_earlier"]
