"""The summarization job queue in Postgres.

A job asks for a one-line summary of a text. Jobs move through a closed set of states::

    queued --claim--> running --complete--> done
       ^                 |  \\--skip (quota)--> skipped
       |                 |
       +--fail, retry----+--fail, attempts used up--> failed

Workers claim with ``FOR UPDATE SKIP LOCKED``, so any number of them share one queue without
handing out a job twice. A claimed job carries a *lease*: a worker renews it while it works
(:meth:`SummaryJobQueue.heartbeat`); when a worker dies mid-job its lease runs out and the next
claim takes the job again as a new attempt, once per lost lease, until ``max_attempts``. Every
state change a worker makes is fenced by ``(worker_id, attempt_count)``, so a worker that lost
its lease can no longer complete or fail the job. Failures retry after an exponential backoff.
Finished summaries are kept by the sha256 of the text and shared by every process; token
quotas per session and per UTC day are counted in Postgres, across all workers.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, cast

from psycopg import sql
from psycopg_pool import ConnectionPool

from ctxplugin.cas import decode, encode
from ctxplugin.config import SummarizerConfig
from ctxplugin.errors import InvalidInputError, StoreError
from ctxplugin.history.summarizer import BackgroundSummarizer
from ctxplugin_postgres._db import DEFAULT_SCHEMA, POOL_TIMEOUT_S, Plan, Stmt
from ctxplugin_postgres._job_queries import JobQueries
from ctxplugin_postgres._store import PooledStore, owned_pool

JobState = Literal["queued", "running", "done", "failed", "skipped"]
JOB_STATES: tuple[JobState, ...] = ("queued", "running", "done", "failed", "skipped")

_ENQUEUE_ATTEMPTS = 3


@dataclass(frozen=True)
class SummaryJob:
    """One job as last read from the queue.

    Attributes:
        id: the job id.
        text_key: sha256 of the text (the summary cache key).
        session_key: whose quota the job counts against (``Scope.key()``; may be empty).
        ref_id: the CAS ref the text comes from, if any.
        text: the text to summarise.
        priority: higher runs first.
        state: ``queued``, ``running``, ``done``, ``failed`` or ``skipped``.
        attempt_count: claims so far (a lost lease counts as an attempt).
        max_attempts: claims allowed before the job is ``failed``.
        next_attempt_at: when a queued job may be claimed.
        lease_expires_at: when a running job's worker is presumed dead.
        worker_id: the worker that claimed it last.
        error_message: why the last attempt failed, or why the job was skipped.
        token_cost: tokens spent on the summary, once done.
    """

    id: int
    text_key: str
    session_key: str
    ref_id: str | None
    text: str
    priority: int
    state: JobState
    attempt_count: int
    max_attempts: int
    next_attempt_at: datetime
    lease_expires_at: datetime | None
    worker_id: str | None
    error_message: str | None
    token_cost: int | None

    @classmethod
    def from_row(cls, row: tuple[Any, ...]) -> SummaryJob:
        """Build from a row selected as the queue's statements read a job (``_job_queries._COLUMNS``)."""
        values = list(row)
        values[4] = decode(bytes(values[4]))
        return cls(*values)


@dataclass(frozen=True)
class Enqueued:
    """What :meth:`SummaryJobQueue.enqueue` did.

    Attributes:
        job_id: the live job for the text (new or already queued), or None when a summary
            already existed.
        summary: the existing summary, when there was one.
        created: a new job was inserted.
    """

    job_id: int | None
    summary: str | None = None
    created: bool = False


def _fence(job: SummaryJob) -> dict[str, Any]:
    return {"id": job.id, "worker": job.worker_id, "attempt": job.attempt_count}


def _session_bucket(job: SummaryJob) -> str:
    return f"session:{job.session_key}"


class SummaryJobQueue(PooledStore):
    """Summarization jobs, summaries and quota counters in Postgres, shared by many processes.

    Producers call :meth:`enqueue`; workers (:class:`~ctxplugin_postgres.SummaryWorker`, or
    ``ctxplugin-postgres work``) call :meth:`claim`, :meth:`heartbeat` and one of
    :meth:`complete`, :meth:`fail` or :meth:`skip`. Times are the database's clock, so workers
    on several machines agree on leases and backoff.

    Args:
        pool: a psycopg ``ConnectionPool``.
        schema: the Postgres schema holding the tables.
        config: quotas (``session_tokens``, ``daily_tokens``, ``artifact_tokens``) and
            ``max_attempts`` of new jobs.
        backoff_seconds: wait before the first retry of a failed attempt; doubled each attempt.
        max_backoff_seconds: the longest wait between attempts.
        auto_migrate: on first use, apply pending migrations.
        owns_pool: close ``pool`` in :meth:`close`.

    Raises:
        InvalidInputError: a non-positive backoff.
    """

    _closed_message = "the summary job queue is closed"

    def __init__(
        self,
        pool: ConnectionPool,
        *,
        schema: str = DEFAULT_SCHEMA,
        config: SummarizerConfig | None = None,
        backoff_seconds: float = 5.0,
        max_backoff_seconds: float = 600.0,
        auto_migrate: bool = True,
        owns_pool: bool = False,
    ) -> None:
        if not backoff_seconds > 0 or not max_backoff_seconds >= backoff_seconds:
            raise InvalidInputError(
                f"backoff must be positive and at most max_backoff_seconds, got {backoff_seconds} / {max_backoff_seconds}"
            )
        super().__init__(pool, schema=schema, auto_migrate=auto_migrate, owns_pool=owns_pool)
        self.config = config or SummarizerConfig()
        self.backoff_seconds = backoff_seconds
        self.max_backoff_seconds = max_backoff_seconds
        self._q = JobQueries.for_schema(schema)

    @classmethod
    def from_dsn(
        cls,
        dsn: str,
        *,
        schema: str = DEFAULT_SCHEMA,
        config: SummarizerConfig | None = None,
        backoff_seconds: float = 5.0,
        max_backoff_seconds: float = 600.0,
        auto_migrate: bool = True,
        max_size: int = 4,
        timeout: float = POOL_TIMEOUT_S,
    ) -> SummaryJobQueue:
        """A queue with its own pool on ``dsn`` (closed with the queue)."""
        pool = owned_pool(dsn, schema=schema, max_size=max_size, timeout=timeout, name="ctxplugin-jobs")
        return cls(
            pool, schema=schema, config=config, backoff_seconds=backoff_seconds,
            max_backoff_seconds=max_backoff_seconds, auto_migrate=auto_migrate, owns_pool=True,
        )

    # ------------------------------------------------------------------ producers
    def enqueue(self, text: str, *, session: str = "", ref_id: str | None = None, priority: int = 5) -> Enqueued:
        """Ask for a summary of ``text``; idempotent while a job for the same text is live.

        Args:
            text: what to summarise.
            session: whose quota it counts against (``Scope.key()`` of the caller).
            ref_id: the CAS ref the text comes from, if any (informational).
            priority: higher is claimed first (-32768..32767).

        Returns:
            The existing summary, the live job already asked for, or a new job.

        Raises:
            InvalidInputError: ``text`` is empty or not a ``str``.
            StoreError: the database failed (``StoreUnavailableError`` when unreachable).
        """
        if not isinstance(text, str) or not text.strip():
            raise InvalidInputError("enqueue() needs a non-empty text to summarise")
        params = {
            "key": BackgroundSummarizer.key(text), "session": session, "ref": ref_id, "text": encode(text),
            "priority": priority, "max_attempts": self.config.max_attempts,
        }
        return self._run("enqueue a summary job", lambda: self._enqueue_plan(params))

    def _enqueue_plan(self, params: dict[str, Any]) -> Plan[Enqueued]:
        for _ in range(_ENQUEUE_ATTEMPTS):
            found = (yield Stmt(self._q.find_summary, params)).first()
            if found is not None:
                return Enqueued(job_id=None, summary=found[0])
            inserted = (yield Stmt(self._q.insert, params)).first()
            if inserted is not None:
                return Enqueued(job_id=int(inserted[0]), created=True)
            live = (yield Stmt(self._q.live, params)).first()
            if live is not None:
                return Enqueued(job_id=int(live[0]))
        raise StoreError("a summary job kept finishing while being enqueued; retry")

    def summary(self, text: str | None = None, *, key: str | None = None) -> str | None:
        """The stored summary of ``text`` (or of the text with sha256 ``key``), if any."""
        if (text is None) == (key is None):
            raise InvalidInputError("summary() takes either text or key")
        lookup = key if key is not None else BackgroundSummarizer.key(cast(str, text))

        def plan() -> Plan[str | None]:
            row = (yield Stmt(self._q.find_summary, {"key": lookup})).first()
            return None if row is None else str(row[0])

        return self._run("read a summary", plan)

    def job(self, job_id: int) -> SummaryJob | None:
        """The job with this id as it is now, or None."""

        def plan() -> Plan[SummaryJob | None]:
            row = (yield Stmt(self._q.job, {"id": job_id})).first()
            return None if row is None else SummaryJob.from_row(row)

        return self._run("read a summary job", plan)

    def counts(self) -> dict[JobState, int]:
        """Jobs per state (every state present, zero when none)."""

        def plan() -> Plan[dict[JobState, int]]:
            rows = (yield Stmt(self._q.counts)).rows
            out: dict[JobState, int] = dict.fromkeys(JOB_STATES, 0)
            out.update({cast(JobState, state): int(n) for state, n in rows})
            return out

        return self._run("count summary jobs", plan)

    # ------------------------------------------------------------------ workers
    def claim(self, worker_id: str, *, lease_seconds: float = 60.0) -> SummaryJob | None:
        """Take the next due job (or one whose worker's lease ran out) for ``worker_id``.

        Jobs whose last allowed attempt lost its lease are marked ``failed`` first.

        Returns:
            The job, now ``running`` with ``attempt_count`` incremented, or None when no job
            is due.
        """
        if not lease_seconds > 0:
            raise InvalidInputError(f"lease_seconds must be positive, got {lease_seconds}")

        def plan() -> Plan[SummaryJob | None]:
            yield Stmt(self._q.reap)
            row = (yield Stmt(self._q.claim, {"worker": worker_id, "lease": float(lease_seconds)})).first()
            return None if row is None else SummaryJob.from_row(row)

        return self._run("claim a summary job", plan)

    def heartbeat(self, job: SummaryJob, *, lease_seconds: float = 60.0) -> bool:
        """Extend the lease of a claimed job; False when the worker no longer holds it."""
        return self._fenced("renew a job lease", self._q.heartbeat, {**_fence(job), "lease": float(lease_seconds)})

    def complete(self, job: SummaryJob, summary: str, *, tokens: int = 0, note: str | None = None) -> bool:
        """Store ``summary`` for the job's text and mark the job ``done``.

        ``note`` replaces the job's ``error_message`` when given; otherwise the error of an
        earlier attempt stays there for the record.

        Returns:
            False (and nothing stored) when the worker no longer holds the job.
        """
        params = {**_fence(job), "tokens": tokens, "note": note, "key": job.text_key, "summary": summary}

        def plan() -> Plan[bool]:
            done = yield Stmt(self._q.complete, params)
            if not done.rows:
                return False
            yield Stmt(self._q.save_summary, params)
            return True

        return self._run("complete a summary job", plan)

    def fail(self, job: SummaryJob, error: str) -> JobState | None:
        """Record a failed attempt: ``queued`` again after the backoff, or ``failed`` when the
        attempts are used up. None when the worker no longer holds the job."""
        params = {**_fence(job), "error": error[:2000], "base": self.backoff_seconds, "cap": self.max_backoff_seconds}

        def plan() -> Plan[JobState | None]:
            row = (yield Stmt(self._q.fail, params)).first()
            return None if row is None else cast(JobState, row[0])

        return self._run("fail a summary job", plan)

    def skip(self, job: SummaryJob, reason: str) -> bool:
        """Mark the job ``skipped`` (e.g. ``quota_exceeded``); False when no longer held."""
        return self._fenced("skip a summary job", self._q.skip, {**_fence(job), "error": reason[:2000]})

    def _fenced(self, what: str, query: sql.Composed, params: dict[str, Any]) -> bool:
        def plan() -> Plan[bool]:
            return bool((yield Stmt(query, params)).rows)

        return self._run(what, plan)

    # ------------------------------------------------------------------ quotas
    def reserve(self, job: SummaryJob, tokens: int) -> bool:
        """Count ``tokens`` against the job's session and today's quota if both have room.

        Returns:
            False (nothing counted) when either quota would be exceeded.
        """

        def plan() -> Plan[bool]:
            day = (yield Stmt(self._q.day_bucket)).rows[0][0]
            buckets = {"session": _session_bucket(job), "day": day}
            yield Stmt(self._q.open_buckets, buckets)
            used = dict((yield Stmt(self._q.lock_buckets, buckets)).rows)
            if (
                used[buckets["session"]] + tokens > self.config.session_tokens
                or used[day] + tokens > self.config.daily_tokens
            ):
                return False
            yield Stmt(self._q.charge, {**buckets, "tokens": tokens})
            return True

        return self._run("reserve summary tokens", plan)

    def charge(self, job: SummaryJob, tokens: int) -> None:
        """Add ``tokens`` (negative to give back) to the job's session and today's usage."""

        def plan() -> Plan[None]:
            day = (yield Stmt(self._q.day_bucket)).rows[0][0]
            buckets = {"session": _session_bucket(job), "day": day}
            yield Stmt(self._q.open_buckets, buckets)
            yield Stmt(self._q.lock_buckets, buckets)
            yield Stmt(self._q.charge, {**buckets, "tokens": tokens})

        self._run("charge summary tokens", plan)

    def close(self) -> None:
        """Release the queue (and its pool if owned). Idempotent."""
        super().close()

    def __enter__(self) -> SummaryJobQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


__all__ = ["JOB_STATES", "Enqueued", "JobState", "SummaryJob", "SummaryJobQueue"]
