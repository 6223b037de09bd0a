"""Workers that serve the Postgres summary queue, and the engine-side summarizer that uses it.

- :class:`SummaryWorker` claims jobs and runs a summarizer (a chat model, any ``Runnable`` or
  a function), renewing its lease while it works. Run many, in any processes or machines
  (``ctxplugin-postgres work --summarizer package.module:name``).
- :class:`QueuedSummarizer` is a :class:`~ctxplugin.history.BackgroundSummarizer` whose
  summaries come from those workers: pass it as ``ContextEngine(summarizer=...)``. Its
  background thread enqueues a job and waits for the result off the request path, so every
  engine process shares the summaries, the quotas and the retries kept in Postgres.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterator
from contextlib import contextmanager, suppress

from ctxplugin.config import SummarizerConfig
from ctxplugin.errors import InvalidInputError, StoreError, StoreUnavailableError
from ctxplugin.history.compressors import head_within
from ctxplugin.history.summarizer import (
    PROMPT,
    BackgroundSummarizer,
    SummarizerLike,
    as_summarize_fn,
)
from ctxplugin.tokens import TokenCounter, get_counter
from ctxplugin_postgres.jobs import JobState, SummaryJob, SummaryJobQueue

logger = logging.getLogger("ctxplugin.postgres")

_SPACE = re.compile(r"\s+")
_SESSIONS_REMEMBERED = 16384


def default_worker_id() -> str:
    """``host:pid:random`` — unique per worker, readable in the jobs table."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class SummaryWorker:
    """Serves the summary queue: claim, check the cache and quotas, summarise, complete.

    Args:
        queue: the job queue.
        summarizer: a chat model or ``Runnable`` (given :data:`~ctxplugin.history.summarizer.PROMPT`),
            or a sync or async function ``str -> str`` (given the text).
        worker_id: how this worker signs its claims (unique; default host, pid and a random part).
        lease_seconds: how long a claim holds without a heartbeat; a worker that dies is
            replaced this long after its last heartbeat. Heartbeats are sent every third of it.
        poll_seconds: pause of :meth:`run` when no job is due.
        counter: token counter for quotas and the per-summary cap.

    Raises:
        InvalidInputError: a non-positive lease or poll interval, or an unusable summarizer.
    """

    def __init__(
        self,
        queue: SummaryJobQueue,
        summarizer: SummarizerLike,
        *,
        worker_id: str | None = None,
        lease_seconds: float = 60.0,
        poll_seconds: float = 1.0,
        counter: TokenCounter | None = None,
    ) -> None:
        if not lease_seconds > 0 or not poll_seconds > 0:
            raise InvalidInputError(f"lease_seconds and poll_seconds must be positive, got {lease_seconds}, {poll_seconds}")
        self.queue = queue
        self.worker_id = worker_id or default_worker_id()
        self.lease_seconds = lease_seconds
        self.poll_seconds = poll_seconds
        self._counter = counter or get_counter()[0]
        self._summarize, self._prompted = as_summarize_fn(summarizer, max_tokens=queue.config.artifact_tokens)

    def run_once(self) -> tuple[SummaryJob, JobState | None] | None:
        """Claim and serve one job.

        Returns:
            The claimed job and the state it was left in (None when the lease was lost before
            the result could be recorded), or None when no job was due.

        Raises:
            StoreError: the database failed (the claimed job, if any, is retried after its lease).
        """
        job = self.queue.claim(self.worker_id, lease_seconds=self.lease_seconds)
        if job is None:
            return None
        try:
            return job, self._serve(job)
        except StoreError as exc:
            # hand the job back now rather than when the lease runs out, if the database lets us
            with suppress(StoreError):
                self.queue.fail(job, f"store error: {exc}")
            raise

    def _serve(self, job: SummaryJob) -> JobState | None:
        config = self.queue.config
        cached = self.queue.summary(key=job.text_key)
        if cached is not None:  # already summarised by hash
            return "done" if self.queue.complete(job, cached, tokens=0, note="cached") else None
        sent = PROMPT.format(tokens=config.artifact_tokens, text=job.text) if self._prompted else job.text
        estimate = self._counter.count(sent) + config.artifact_tokens
        if not self.queue.reserve(job, estimate):
            reason = f"quota_exceeded: {estimate} tokens would pass the session or daily summarizer quota"
            return "skipped" if self.queue.skip(job, reason) else None
        with self._heartbeat(job):
            try:
                output = self._summarize(job.text)
            except Exception as exc:  # a user summarizer may fail in any way: the job is retried
                logger.warning("summary job %s attempt %s failed: %s", job.id, job.attempt_count, exc)
                return self.queue.fail(job, f"{type(exc).__name__}: {exc}")
        actual = self._counter.count(sent) + self._counter.count(output)
        self.queue.charge(job, actual - estimate)
        summary = head_within(_SPACE.sub(" ", output).strip(), config.artifact_tokens, self._counter)
        if not summary:
            return self.queue.fail(job, "the summarizer returned an empty summary")
        return "done" if self.queue.complete(job, summary, tokens=actual) else None

    @contextmanager
    def _heartbeat(self, job: SummaryJob) -> Iterator[None]:
        stop = threading.Event()

        def beat() -> None:
            while not stop.wait(self.lease_seconds / 3):
                try:
                    if not self.queue.heartbeat(job, lease_seconds=self.lease_seconds):
                        logger.warning("worker %s lost the lease of job %s", self.worker_id, job.id)
                        return
                except StoreError as exc:  # the database may be back before the lease runs out
                    logger.warning("heartbeat of job %s failed: %s", job.id, exc)

        thread = threading.Thread(target=beat, name=f"ctxplugin-heartbeat-{job.id}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join()

    def run(self, *, stop: threading.Event | None = None, max_jobs: int | None = None, exit_when_idle: bool = False) -> int:
        """Serve jobs until ``stop`` is set, ``max_jobs`` were served, or (with
        ``exit_when_idle``) no job is due. Database outages are logged and waited out.

        Returns:
            The number of jobs served.
        """
        stop = stop or threading.Event()
        served = 0
        while not stop.is_set() and (max_jobs is None or served < max_jobs):
            try:
                outcome = self.run_once()
            except StoreUnavailableError as exc:
                logger.warning("summary worker %s waits for the database: %s", self.worker_id, exc)
                stop.wait(self.poll_seconds)
                continue
            if outcome is None:
                if exit_when_idle:
                    break
                stop.wait(self.poll_seconds)
                continue
            served += 1
        return served


class QueuedSummarizer(BackgroundSummarizer):
    """A background summarizer whose summaries are written by :class:`SummaryWorker` processes.

    The request path is unchanged (``prepare`` never waits); the summarizer's thread enqueues a
    job per text and waits up to ``wait_seconds`` for a worker to finish it. A summary another
    process already obtained is returned at once.

    Args:
        queue: the Postgres job queue.
        config: local quotas (defaults to the queue's); the queue enforces them across processes.
        counter: token counter.
        wait_seconds: how long to wait for a worker before this attempt counts as failed.
        poll_seconds: how often to look at the job while waiting.

    Example:
        >>> queue = SummaryJobQueue.from_dsn(dsn)  # doctest: +SKIP
        >>> engine = ctxplugin.connect(summarizer=QueuedSummarizer(queue))  # doctest: +SKIP
    """

    def __init__(
        self,
        queue: SummaryJobQueue,
        *,
        config: SummarizerConfig | None = None,
        counter: TokenCounter | None = None,
        wait_seconds: float = 60.0,
        poll_seconds: float = 0.25,
    ) -> None:
        if not wait_seconds > 0 or not poll_seconds > 0:
            raise InvalidInputError(f"wait_seconds and poll_seconds must be positive, got {wait_seconds}, {poll_seconds}")
        self._pg_queue = queue
        self._pg_wait = wait_seconds
        self._pg_poll = poll_seconds
        self._pg_sessions: OrderedDict[str, str] = OrderedDict()
        self._pg_lock = threading.Lock()
        super().__init__(self._remote, config=config or queue.config, counter=counter)

    def prefetch(self, text: str, *, session: str) -> None:
        """See :meth:`BackgroundSummarizer.prefetch`; remembers whose quota the job counts against."""
        key = self.key(text)
        with self._pg_lock:
            self._pg_sessions[key] = session
            self._pg_sessions.move_to_end(key)
            while len(self._pg_sessions) > _SESSIONS_REMEMBERED:
                self._pg_sessions.popitem(last=False)
        super().prefetch(text, session=session)

    def _remote(self, text: str) -> str:
        with self._pg_lock:
            session = self._pg_sessions.get(self.key(text), "")
        queued = self._pg_queue.enqueue(text, session=session)
        if queued.summary is not None:
            return queued.summary
        deadline = time.monotonic() + self._pg_wait
        job_id = queued.job_id
        while job_id is not None and time.monotonic() < deadline:
            job = self._pg_queue.job(job_id)
            if job is not None and job.state == "done":
                summary = self._pg_queue.summary(key=job.text_key)
                if summary is not None:
                    return summary
            if job is None or job.state in ("failed", "skipped"):
                reason = job.error_message if job is not None else "the job disappeared"
                raise StoreError(f"summary job {job_id} ended {job.state if job else 'missing'}: {reason}")
            time.sleep(self._pg_poll)
        raise StoreUnavailableError(
            f"no summary worker finished job {job_id} within {self._pg_wait:g}s; "
            "are `ctxplugin-postgres work` processes running?"
        )


__all__ = ["QueuedSummarizer", "SummaryWorker", "default_worker_id"]
