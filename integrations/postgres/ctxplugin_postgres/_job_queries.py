"""The SQL of the summary job queue (:mod:`ctxplugin_postgres.jobs`), composed once per schema.

Tables (see :mod:`ctxplugin_postgres.migrations`): ``ctxplugin_summary_jobs`` holds the jobs,
``ctxplugin_summaries`` the finished summaries by the sha256 of their text, and
``ctxplugin_summary_usage`` the tokens spent per quota bucket (``day:<date>``,
``session:<key>``). Times are the database's clock (``clock_timestamp()``), so workers on
several machines agree on leases and backoff.
"""

from __future__ import annotations

from dataclasses import dataclass

from psycopg import sql

from ctxplugin_postgres._db import compose

# the columns of a job, in the order of SummaryJob's fields
_COLUMNS = (
    "id, text_key, session_key, ref_id, text, priority, state, attempt_count, max_attempts, "
    "next_attempt_at, lease_expires_at, worker_id, error_message, token_cost"
)
_NOW = "clock_timestamp()"
# a worker's change applies only while it still holds the job (same claim, same attempt)
_FENCE = "id = %(id)s AND state = 'running' AND worker_id = %(worker)s AND attempt_count = %(attempt)s"


@dataclass(frozen=True)
class JobQueries:
    """Each statement the queue runs, for one schema; a job is read as ``_COLUMNS``."""

    find_summary: sql.Composed
    insert: sql.Composed
    live: sql.Composed
    reap: sql.Composed
    claim: sql.Composed
    heartbeat: sql.Composed
    complete: sql.Composed
    save_summary: sql.Composed
    fail: sql.Composed
    skip: sql.Composed
    day_bucket: sql.Composed
    open_buckets: sql.Composed
    lock_buckets: sql.Composed
    charge: sql.Composed
    job: sql.Composed
    counts: sql.Composed

    @classmethod
    def for_schema(cls, s: str) -> JobQueries:
        jobs = "{s}.ctxplugin_summary_jobs"
        return cls(
            find_summary=compose("SELECT summary FROM {s}.ctxplugin_summaries WHERE text_key = %(key)s", s),
            insert=compose(
                f"INSERT INTO {jobs} (text_key, session_key, ref_id, text, priority, max_attempts) "
                "VALUES (%(key)s, %(session)s, %(ref)s, %(text)s, %(priority)s, %(max_attempts)s) "
                "ON CONFLICT (text_key) WHERE state IN ('queued', 'running') DO NOTHING RETURNING id",
                s,
            ),
            live=compose(f"SELECT id FROM {jobs} WHERE text_key = %(key)s AND state IN ('queued', 'running')", s),
            reap=compose(
                f"UPDATE {jobs} SET state = 'failed', completed_at = {_NOW}, lease_expires_at = NULL, "
                "error_message = 'worker ' || coalesce(worker_id, '?') || ' lost its lease on the last attempt' "
                f"WHERE id IN (SELECT id FROM {jobs} WHERE state = 'running' AND lease_expires_at < {_NOW} "
                "AND attempt_count >= max_attempts FOR UPDATE SKIP LOCKED)",
                s,
            ),
            claim=compose(
                f"WITH next AS (SELECT id FROM {jobs} WHERE (state = 'queued' AND next_attempt_at <= {_NOW}) "
                f"OR (state = 'running' AND lease_expires_at < {_NOW} AND attempt_count < max_attempts) "
                "ORDER BY priority DESC, next_attempt_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) "
                f"UPDATE {jobs} j SET error_message = CASE WHEN j.state = 'running' THEN 'worker ' || "
                "coalesce(j.worker_id, '?') || ' lost its lease' ELSE j.error_message END, "
                "state = 'running', attempt_count = j.attempt_count + 1, worker_id = %(worker)s, "
                f"lease_expires_at = {_NOW} + make_interval(secs => %(lease)s), started_at = {_NOW} "
                f"FROM next WHERE j.id = next.id RETURNING {', '.join('j.' + c.strip() for c in _COLUMNS.split(','))}",
                s,
            ),
            heartbeat=compose(
                f"UPDATE {jobs} SET lease_expires_at = {_NOW} + make_interval(secs => %(lease)s) "
                f"WHERE {_FENCE} RETURNING id",
                s,
            ),
            complete=compose(
                f"UPDATE {jobs} SET state = 'done', completed_at = {_NOW}, token_cost = %(tokens)s, "
                "lease_expires_at = NULL, error_message = coalesce(%(note)s, error_message) "
                f"WHERE {_FENCE} RETURNING id",
                s,
            ),
            save_summary=compose(
                "INSERT INTO {s}.ctxplugin_summaries (text_key, summary, tokens) VALUES (%(key)s, %(summary)s, "
                "%(tokens)s) ON CONFLICT (text_key) DO NOTHING",
                s,
            ),
            fail=compose(
                f"UPDATE {jobs} SET state = CASE WHEN attempt_count >= max_attempts THEN 'failed' ELSE 'queued' END, "
                "next_attempt_at = " + _NOW + " + make_interval(secs => least(%(cap)s, %(base)s * "
                "power(2, attempt_count - 1))), completed_at = CASE WHEN attempt_count >= max_attempts "
                f"THEN {_NOW} END, lease_expires_at = NULL, error_message = %(error)s WHERE {_FENCE} RETURNING state",
                s,
            ),
            skip=compose(
                f"UPDATE {jobs} SET state = 'skipped', completed_at = {_NOW}, lease_expires_at = NULL, "
                f"error_message = %(error)s WHERE {_FENCE} RETURNING id",
                s,
            ),
            day_bucket=compose(f"SELECT 'day:' || to_char({_NOW} AT TIME ZONE 'UTC', 'YYYY-MM-DD')", s),
            # rows are always created and locked in bucket order ('day:' < 'session:'), so two
            # workers charging the same buckets never wait on each other in a cycle
            open_buckets=compose(
                "INSERT INTO {s}.ctxplugin_summary_usage (bucket) VALUES (%(day)s), (%(session)s) "
                "ON CONFLICT (bucket) DO NOTHING",
                s,
            ),
            lock_buckets=compose(
                "SELECT bucket, tokens FROM {s}.ctxplugin_summary_usage WHERE bucket IN (%(session)s, %(day)s) "
                "ORDER BY bucket FOR UPDATE",
                s,
            ),
            charge=compose(
                f"UPDATE {{s}}.ctxplugin_summary_usage SET tokens = greatest(0, tokens + %(tokens)s), updated_at = {_NOW} "
                "WHERE bucket IN (%(session)s, %(day)s)",
                s,
            ),
            job=compose(f"SELECT {_COLUMNS} FROM {jobs} WHERE id = %(id)s", s),
            counts=compose(f"SELECT state, count(*) FROM {jobs} GROUP BY state", s),
        )


__all__ = ["JobQueries"]
