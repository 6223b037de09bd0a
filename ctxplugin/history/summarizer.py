"""Optional model-written gists, produced off the request path.

:class:`BackgroundSummarizer` wraps any summarizer — a ``BaseChatModel``, any ``Runnable``, or a
plain sync or async function ``str -> str`` — behind a bounded queue served by one worker
thread. Summaries are cached by the sha256 of the text, and quotas per session,
per UTC day and per summary cap the spend. ``prepare`` never waits for it: until a
summary is ready the zero-LLM gist is used.

Cache stability: a message's gist is decided the first time the message is gisted and kept from
then on. A zero-LLM gist is replaced by a summary that arrived later at most once, and only on
a call where tier boundaries move (the cached prefix breaks at a boundary on such calls anyway).
A summary is asked for (:meth:`BackgroundSummarizer.prefetch`) only for a message whose gist a
view shows, not for one condensed into a context note.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import logging
import queue
import re
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Union

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda, RunnableParallel, RunnableSequence
from langchain_core.runnables.base import RunnableBindingBase
from langchain_core.runnables.fallbacks import RunnableWithFallbacks

from ctxplugin._lru import LRU
from ctxplugin.config import SummarizerConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.history.compressors import head_within
from ctxplugin.tokens import TokenCounter, content_text, get_counter

logger = logging.getLogger("ctxplugin.history")

SummarizerLike = Union[Runnable[Any, Any], Callable[[str], str], Callable[[str], Awaitable[str]]]  # noqa: UP007
"""What users may pass as a summarizer: a chat model or other Runnable, or a function."""

PROMPT = (
    "Condense the text below into one line of at most {tokens} tokens for a later reader who "
    "needs to know what it said. Keep every identifier, file path, URL, number and error message "
    "exactly as written. Answer with the line only.\n\n{text}"
)

_SPACE = re.compile(r"\s+")
_CACHE_SIZE = 16384
_SESSIONS = 4096
_DAY = 86400.0

def _resolve(value: Any) -> Any:
    if inspect.isawaitable(value):

        async def wait() -> Any:
            return await value

        return asyncio.run(wait())
    return value


def _async_only(runnable: Runnable[Any, Any]) -> bool:
    """Whether ``invoke`` cannot run ``runnable``: it holds a ``RunnableLambda`` made from an
    async function alone (LangChain raises on ``invoke`` then, and only ``ainvoke`` runs it)."""
    if isinstance(runnable, RunnableLambda):
        return not hasattr(runnable, "func")
    if isinstance(runnable, RunnableBindingBase):
        return _async_only(runnable.bound)
    if isinstance(runnable, RunnableSequence):
        return any(_async_only(step) for step in runnable.steps)
    if isinstance(runnable, RunnableParallel):
        return any(_async_only(step) for step in runnable.steps__.values())
    if isinstance(runnable, RunnableWithFallbacks):
        return any(_async_only(step) for step in (runnable.runnable, *runnable.fallbacks))
    return False


def as_summarize_fn(summarizer: SummarizerLike, *, max_tokens: int = 120) -> tuple[Callable[[str], str], bool]:
    """Normalise a summarizer into a blocking function, and whether it is given a prompt.

    Runnables (chat models included) get :data:`PROMPT` around the text; plain functions get
    the text itself. Async functions, and Runnables built on one (``RunnableLambda(async_fn)``),
    run to completion on the calling (worker) thread.

    Raises:
        InvalidInputError: ``summarizer`` is neither a Runnable nor callable.
    """
    if isinstance(summarizer, Runnable):
        runnable = summarizer
        async_only = _async_only(runnable)

        def run_model(text: str) -> str:
            prompt = PROMPT.format(tokens=max_tokens, text=text)
            output = asyncio.run(runnable.ainvoke(prompt)) if async_only else runnable.invoke(prompt)
            if isinstance(output, BaseMessage):
                return content_text(output.content)
            if isinstance(output, list) and all(isinstance(b, str | dict) for b in output):
                return content_text(output)  # a message's content blocks
            if not isinstance(output, str):
                # str() of a dict, a parsed object or None would lead the gist as if it were a summary
                raise InvalidInputError(f"summarizer returned {type(output).__name__}, expected str or a message")
            return output

        return run_model, True
    if callable(summarizer):
        function = summarizer

        def run_function(text: str) -> str:
            output = _resolve(function(text))
            if not isinstance(output, str):
                raise InvalidInputError(f"summarizer returned {type(output).__name__}, expected str")
            return output

        return run_function, False
    raise InvalidInputError(
        f"summarizer must be a chat model, a Runnable or a function str -> str, got {type(summarizer).__name__}"
    )


@dataclass
class SummarizerStats:
    """Counters since the summarizer was built."""

    requested: int = 0
    completed: int = 0
    dropped_queue_full: int = 0
    skipped_quota: int = 0
    failed: int = 0
    upgraded: int = 0
    tokens_used: int = 0


@dataclass(frozen=True)
class _Job:
    key: str
    text: str
    session: str


CLOSE_WAIT_SECONDS = 5.0
"""How long :meth:`BackgroundSummarizer.close` waits by default for the summary being written."""


class BackgroundSummarizer:
    """Model-written gist leads from a background thread, with a bounded queue and quotas.

    Args:
        summarizer: a chat model, a ``Runnable``, or a sync or async function ``str -> str``.
        config: queue size and token quotas.
        counter: token counter for quotas and the per-summary cap.
        clock: seconds since the epoch (the daily quota resets at UTC midnight).

    Example:
        >>> def first_words(text: str) -> str:
        ...     return " ".join(text.split()[:12])
        >>> summarizer = BackgroundSummarizer(first_words)
    """

    def __init__(
        self,
        summarizer: SummarizerLike,
        *,
        config: SummarizerConfig | None = None,
        counter: TokenCounter | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.config = config or SummarizerConfig()
        self._counter = counter or get_counter()[0]
        self._run, self._prompted = as_summarize_fn(summarizer, max_tokens=self.config.artifact_tokens)
        self._clock = clock
        self._queue: queue.Queue[_Job | None] = queue.Queue(maxsize=self.config.queue_size)
        self._lock = threading.Lock()
        self._idle = threading.Condition(self._lock)
        self._ready: LRU[str, str] = LRU(_CACHE_SIZE)
        self._decided: LRU[str, tuple[str | None, bool]] = LRU(_CACHE_SIZE)
        self._attempts: LRU[str, int] = LRU(_CACHE_SIZE)
        self._pending: set[str] = set()
        self._session_used: LRU[str, int] = LRU(_SESSIONS)
        self._warnings: LRU[str, list[str]] = LRU(_SESSIONS)
        self._day = -1
        self._day_used = 0
        self._thread: threading.Thread | None = None
        self._closed = False
        self._abandoned = False  # close() stopped waiting for the job running: its result is dropped
        self.stats = SummarizerStats()

    # ------------------------------------------------------------------ request path
    @staticmethod
    def key(text: str) -> str:
        """Cache key of a text: its sha256."""
        return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()

    def prefetch(self, text: str, *, session: str) -> None:
        """Queue a summary of ``text`` unless one is ready, queued, given up on or already
        leading its gist; never blocks."""
        key = self.key(text)
        with self._lock:
            decided = self._decided.get(key)
            if self._closed or key in self._ready or key in self._pending or self._exhausted(key) or (decided is not None and decided[1]):
                return
            if self._over_quota(session):
                self.stats.skipped_quota += 1
                return
            self._pending.add(key)
            self.stats.requested += 1
            self._start()
        try:
            self._queue.put_nowait(_Job(key=key, text=text, session=session))
        except queue.Full:
            with self._lock:
                self._pending.discard(key)
                self.stats.dropped_queue_full += 1
                self._idle.notify_all()

    def lead(self, text: str, *, session: str, upgrade: bool) -> str | None:
        """The summary leading the gist of ``text``, or None for the zero-LLM gist; asks for
        none (:meth:`prefetch` does, for the gists a view shows).

        The first answer for a text is kept; a None answer turns into a summary at most once,
        on a call with ``upgrade`` set."""
        key = self.key(text)
        with self._lock:
            decided = self._decided.get(key)
            ready = self._ready.get(key)
            if decided is None:
                self._decided.put(key, (ready, ready is not None or self._exhausted(key)))
                return ready
            current, final = decided
            if final or not upgrade:
                return current
            if ready is not None:
                self._decided.put(key, (ready, True))
                self.stats.upgraded += 1
            elif self._exhausted(key):
                self._decided.put(key, (None, True))
            return ready

    def take_warnings(self, session: str) -> list[str]:
        """Warnings about ``session``'s summaries since the last call (failures)."""
        with self._lock:
            return self._warnings.pop(session, [])

    # ------------------------------------------------------------------ control
    def drain(self, timeout: float | None = None) -> bool:
        """Wait until no summary is queued or running; False if ``timeout`` ran out first.

        For tests, benchmarks and shutdown; ``prepare`` never calls it."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._idle:
            while self._pending:
                remaining = None if deadline is None else deadline - time.monotonic()
                if remaining is not None and remaining <= 0:
                    return False
                self._idle.wait(remaining)
        return True

    def close(self, timeout: float | None = CLOSE_WAIT_SECONDS) -> None:
        """Stop the worker after the job it is running; queued jobs are discarded.

        The running job is waited for at most ``timeout`` seconds (None: however long it takes):
        a summarizer stuck in its call (a model client without a timeout on a stalled
        connection) must not hold ``close()``, and with it the end of an engine's ``with``
        block, forever. Its worker is a daemon thread; what the job returns after that is
        dropped."""
        with self._lock:
            self._closed = True
            thread = self._thread
        if thread is not None:
            while True:
                try:
                    self._queue.get_nowait()
                except queue.Empty:
                    break
            self._queue.put(None)
            thread.join(timeout)
            with self._lock:
                self._abandoned = self._abandoned or thread.is_alive()
            if thread.is_alive():
                logger.warning("summarizer still running after close(); its result will be dropped")
        with self._lock:
            self._pending.clear()
            self._idle.notify_all()

    def pending(self) -> int:
        """Summaries queued or running."""
        with self._lock:
            return len(self._pending)

    # ------------------------------------------------------------------ worker
    def _over_quota(self, session: str) -> bool:
        day_used = self._day_used if int(self._clock() // _DAY) == self._day else 0
        return (
            self._session_used.get(session, 0) >= self.config.session_tokens
            or day_used >= self.config.daily_tokens
        )

    def _exhausted(self, key: str) -> bool:
        return self._attempts.get(key, 0) >= self.config.max_attempts

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._work, name="ctxplugin-summarizer", daemon=True)
            self._thread.start()

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                self._serve(job)
            finally:
                with self._lock:
                    self._pending.discard(job.key)
                    self._idle.notify_all()

    def _charge(self, job: _Job, tokens: int, *, reserve: bool) -> bool:
        """Count ``tokens`` against the quotas; with ``reserve``, only if they fit."""
        day = int(self._clock() // _DAY)
        with self._lock:
            if day != self._day:
                self._day, self._day_used = day, 0
            used = self._session_used.get(job.session, 0)
            if reserve and (
                used + tokens > self.config.session_tokens or self._day_used + tokens > self.config.daily_tokens
            ):
                self.stats.skipped_quota += 1
                return False
            self._session_used.put(job.session, used + tokens)
            self._day_used += tokens
            self.stats.tokens_used += tokens
            return True

    def _serve(self, job: _Job) -> None:
        sent = PROMPT.format(tokens=self.config.artifact_tokens, text=job.text) if self._prompted else job.text
        estimate = self._counter.count(sent) + self.config.artifact_tokens
        if not self._charge(job, estimate, reserve=True):
            return
        try:
            output = self._run(job.text)
        except Exception as exc:  # a user summarizer may fail in any way; the zero-LLM gist stays
            self._failed(job, f"{type(exc).__name__}: {exc}")
            return
        line = _SPACE.sub(" ", output).strip()
        summary = head_within(line, self.config.artifact_tokens, self._counter)
        actual = self._counter.count(sent) + self._counter.count(output)
        self._charge(job, actual - estimate, reserve=False)
        if not summary:
            self._failed(job, "empty summary")
            return
        with self._lock:
            if self._abandoned:  # returned after close() stopped waiting for it: dropped, as it says
                return
            self._ready.put(job.key, summary)
            self.stats.completed += 1

    def _failed(self, job: _Job, reason: str) -> None:
        logger.warning("summarizer failed, the zero-LLM gist stays: %s", reason)
        with self._lock:
            self._attempts.put(job.key, self._attempts.get(job.key, 0) + 1)
            self.stats.failed += 1
            notes = self._warnings.get(job.session, [])
            self._warnings.put(job.session, [*notes, f"summarizer failed, the zero-LLM gist is used: {reason}"])


def make_summarizer(
    summarizer: SummarizerLike | BackgroundSummarizer | None,
    *,
    config: SummarizerConfig,
    counter: TokenCounter,
) -> BackgroundSummarizer | None:
    """The one place user summarizers are normalised (None stays None)."""
    if summarizer is None or isinstance(summarizer, BackgroundSummarizer):
        return summarizer
    return BackgroundSummarizer(summarizer, config=config, counter=counter)


__all__ = ["PROMPT", "BackgroundSummarizer", "SummarizerLike", "SummarizerStats", "as_summarize_fn", "make_summarizer"]
