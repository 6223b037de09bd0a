"""The summarization job queue: claims, leases, retries with backoff, attempt limits, quotas,
and a worker process killed mid-job."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import psycopg
import pytest
from ctxplugin_postgres import QueuedSummarizer, SummaryJob, SummaryJobQueue, SummaryWorker
from psycopg_pool import ConnectionPool

from ctxplugin.config import SummarizerConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.history.summarizer import BackgroundSummarizer

pytestmark = pytest.mark.postgres

TESTS = Path(__file__).resolve().parent


@pytest.fixture
def queue(pg_pool: ConnectionPool, pg_schema: str) -> Iterator[SummaryJobQueue]:
    q = SummaryJobQueue(pg_pool, schema=pg_schema, backoff_seconds=30.0, max_backoff_seconds=3600.0)
    yield q
    q.close()


def _sql(dsn: str, statement: str, *params: object) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn, autocommit=True) as conn:
        cur = conn.execute(statement, params or None)
        return cur.fetchall() if cur.description else []


def _expire_lease(dsn: str, schema: str, job_id: int) -> None:
    """What a dead worker leaves behind: a running job whose lease is in the past."""
    _sql(dsn, f"UPDATE {schema}.ctxplugin_summary_jobs SET lease_expires_at = now() - interval '1 second' WHERE id = %s", job_id)


def _make_due(dsn: str, schema: str, job_id: int) -> None:
    _sql(dsn, f"UPDATE {schema}.ctxplugin_summary_jobs SET next_attempt_at = now() WHERE id = %s", job_id)


def _job(queue: SummaryJobQueue, job_id: int | None) -> SummaryJob:
    assert job_id is not None
    job = queue.job(job_id)
    assert job is not None
    return job


def test_enqueue_is_idempotent_while_live_and_answers_from_the_cache(queue: SummaryJobQueue) -> None:
    first = queue.enqueue("a long tool log to condense", session="s1")
    again = queue.enqueue("a long tool log to condense", session="s2")
    assert first.created and not again.created
    assert again.job_id == first.job_id
    job = queue.claim("w1")
    assert job is not None and job.id == first.job_id and job.session_key == "s1"
    assert queue.complete(job, "condensed log", tokens=42)
    later = queue.enqueue("a long tool log to condense", session="s3")
    assert later.job_id is None and later.summary == "condensed log"
    assert queue.summary("a long tool log to condense") == "condensed log"
    assert queue.counts() == {"queued": 0, "running": 0, "done": 1, "failed": 0, "skipped": 0}


def test_text_is_stored_exactly(queue: SummaryJobQueue) -> None:
    text = "nul \x00 and \udcff surrogate and 🚀"
    queue.enqueue(text)
    job = queue.claim("w1")
    assert job is not None and job.text == text
    assert job.text_key == BackgroundSummarizer.key(text)


def test_concurrent_workers_claim_each_job_once(queue: SummaryJobQueue) -> None:
    texts = [f"text number {i} to summarise" for i in range(24)]
    for text in texts:
        queue.enqueue(text, session="s")
    calls: list[str] = []
    lock = threading.Lock()

    def summarize(text: str) -> str:
        with lock:
            calls.append(text)
        return "summary of " + text

    def serve(n: int) -> None:
        SummaryWorker(queue, summarize, worker_id=f"w{n}", poll_seconds=0.05).run(exit_when_idle=True)

    threads = [threading.Thread(target=serve, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(calls) == sorted(texts)
    assert queue.counts()["done"] == 24
    for text in texts:
        assert queue.summary(text) == "summary of " + text


def test_failures_back_off_exponentially_then_fail(pg_dsn: str, pg_schema: str, queue: SummaryJobQueue) -> None:
    queued = queue.enqueue("always fails")
    states = []
    waits = []
    for attempt in (1, 2, 3):
        job = queue.claim("w1")
        assert job is not None and job.attempt_count == attempt
        states.append(queue.fail(job, f"model error {attempt}"))
        row = _sql(pg_dsn, f"SELECT next_attempt_at - clock_timestamp() FROM {pg_schema}.ctxplugin_summary_jobs WHERE id = %s", job.id)
        waits.append(row[0][0])
        if states[-1] == "queued":
            assert queue.claim("w2") is None  # not due during the backoff
            _make_due(pg_dsn, pg_schema, job.id)
    assert states == ["queued", "queued", "failed"]
    first_wait, second_wait = waits[0], waits[1]
    assert isinstance(first_wait, timedelta) and isinstance(second_wait, timedelta)
    assert timedelta(seconds=25) < first_wait <= timedelta(seconds=30)
    assert timedelta(seconds=55) < second_wait <= timedelta(seconds=60)
    final = _job(queue, queued.job_id)
    assert final.state == "failed" and final.error_message == "model error 3"
    assert queue.claim("w3") is None


def test_a_worker_that_lost_its_lease_cannot_finish(pg_dsn: str, pg_schema: str, queue: SummaryJobQueue) -> None:
    queue.enqueue("contended")
    stale = queue.claim("slow-worker")
    assert stale is not None
    _expire_lease(pg_dsn, pg_schema, stale.id)
    fresh = queue.claim("fresh-worker")
    assert fresh is not None and fresh.id == stale.id and fresh.attempt_count == 2
    assert fresh.error_message == "worker slow-worker lost its lease"
    assert queue.heartbeat(stale) is False
    assert queue.complete(stale, "late answer") is False
    assert queue.fail(stale, "late failure") is None
    assert queue.heartbeat(fresh) is True
    assert queue.complete(fresh, "timely answer") is True
    assert queue.summary("contended") == "timely answer"


def test_a_lost_lease_on_the_last_attempt_fails_the_job(pg_dsn: str, pg_schema: str, pg_pool: ConnectionPool) -> None:
    queue = SummaryJobQueue(pg_pool, schema=pg_schema, config=SummarizerConfig(max_attempts=1))
    queued = queue.enqueue("one try only")
    job = queue.claim("doomed")
    assert job is not None
    _expire_lease(pg_dsn, pg_schema, job.id)
    assert queue.claim("next") is None
    final = _job(queue, queued.job_id)
    assert final.state == "failed"
    assert final.error_message == "worker doomed lost its lease on the last attempt"


def test_quotas_per_session_and_per_day(pg_pool: ConnectionPool, pg_schema: str) -> None:
    config = SummarizerConfig(session_tokens=500, daily_tokens=800, artifact_tokens=40)
    queue = SummaryJobQueue(pg_pool, schema=pg_schema, config=config)
    text = "word " * 200  # about 200 tokens: 240 reserved with the answer, about 201 charged

    def worker_output(t: str) -> str:
        return "short"

    worker = SummaryWorker(queue, worker_output, worker_id="quota")
    outcomes = []
    for session, n in (("a", 0), ("a", 1), ("a", 2), ("b", 3), ("c", 4)):
        queue.enqueue(f"{text}{n}", session=session)
        served = worker.run_once()
        assert served is not None
        outcomes.append((session, served[1]))
    # session a: two summaries fit its 500 tokens, the third does not; the day's 800 tokens
    # run out at the fifth summary whatever its session
    assert outcomes == [("a", "done"), ("a", "done"), ("a", "skipped"), ("b", "done"), ("c", "skipped")]
    skipped = [j for j in (queue.job(i) for i in range(1, 6)) if j is not None and j.state == "skipped"]
    assert all(j.error_message and j.error_message.startswith("quota_exceeded") for j in skipped)


def test_a_summary_already_stored_is_reused(pg_dsn: str, pg_schema: str, queue: SummaryJobQueue) -> None:
    queue.enqueue("summarised elsewhere")
    key = BackgroundSummarizer.key("summarised elsewhere")
    _sql(pg_dsn, f"INSERT INTO {pg_schema}.ctxplugin_summaries (text_key, summary) VALUES (%s, 'from the cache')", key)

    def never(text: str) -> str:
        raise AssertionError("the summarizer must not run for a cached text")

    served = SummaryWorker(queue, never).run_once()
    assert served is not None and served[1] == "done"
    job = _job(queue, served[0].id)
    assert job.error_message == "cached" and job.token_cost == 0


def test_summarizer_errors_are_retried(pg_dsn: str, pg_schema: str, queue: SummaryJobQueue) -> None:
    calls: list[str] = []

    def flaky(text: str) -> str:
        calls.append(text)
        if len(calls) == 1:
            raise TimeoutError("model timed out")
        return "  a   summary\nacross lines "

    queued = queue.enqueue("flaky text")
    worker = SummaryWorker(queue, flaky)
    first = worker.run_once()
    assert first is not None and first[1] == "queued"
    _make_due(pg_dsn, pg_schema, first[0].id)
    second = worker.run_once()
    assert second is not None and second[1] == "done"
    job = _job(queue, queued.job_id)
    assert (job.attempt_count, job.error_message) == (2, "TimeoutError: model timed out")
    assert queue.summary("flaky text") == "a summary across lines"


def test_queued_summarizer_gets_summaries_from_workers(queue: SummaryJobQueue) -> None:
    stop = threading.Event()
    worker = SummaryWorker(queue, lambda text: "gist: " + text[:20], poll_seconds=0.05)
    thread = threading.Thread(target=worker.run, kwargs={"stop": stop})
    thread.start()
    first = QueuedSummarizer(queue, poll_seconds=0.05, wait_seconds=30)
    second = QueuedSummarizer(queue, poll_seconds=0.05, wait_seconds=30)
    text = "an old assistant message that deserves a model-written gist"
    try:
        assert first.lead(text, session="|||thread-9", upgrade=False) is None  # never waits, asks for nothing
        first.prefetch(text, session="|||thread-9")  # asked for once its gist is shown
        assert first.drain(timeout=30)
        assert first.lead(text, session="|||thread-9", upgrade=True) == "gist: " + text[:20]
        second.prefetch(text, session="|||thread-2")  # another process: answered from Postgres
        assert second.drain(timeout=30)
        assert second.lead(text, session="|||thread-2", upgrade=True) == "gist: " + text[:20]
    finally:
        stop.set()
        thread.join()
        first.close()
        second.close()
    jobs = [j for j in (queue.job(i) for i in range(1, 4)) if j is not None]
    assert [(j.session_key, j.state) for j in jobs] == [("|||thread-9", "done")]


def test_bad_arguments_are_invalid_input(queue: SummaryJobQueue, pg_pool: ConnectionPool) -> None:
    with pytest.raises(InvalidInputError):
        queue.enqueue("   ")
    with pytest.raises(InvalidInputError):
        queue.claim("w", lease_seconds=0)
    with pytest.raises(InvalidInputError):
        SummaryJobQueue(pg_pool, backoff_seconds=0)
    with pytest.raises(InvalidInputError):
        SummaryWorker(queue, lambda t: t, lease_seconds=-1)


def test_worker_killed_mid_job_is_retried_exactly_once(pg_dsn: str, pg_schema: str, queue: SummaryJobQueue, tmp_path: Path) -> None:
    """A real worker process takes a job and is killed with SIGKILL while summarising; after its
    lease runs out another worker takes the job once, finishes it, and nothing runs it again."""
    marker = tmp_path / "calls.txt"
    queued = queue.enqueue("summarise me, then die", session="s")
    command = [
        str(Path(sys.executable).parent / "ctxplugin-postgres"), "work", "--dsn", pg_dsn, "--schema", pg_schema,
        "--summarizer", "pg_workers:hang", "--lease", "1", "--poll", "0.1", "--worker-id", "doomed",
    ]
    env = {**os.environ, "PYTHONPATH": str(TESTS), "CTXPLUGIN_TEST_MARKER": str(marker)}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 120
        while not (marker.exists() and marker.read_text()):
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            assert time.monotonic() < deadline, "the worker process never started the job"
            time.sleep(0.05)
        running = _job(queue, queued.job_id)
        assert (running.state, running.worker_id, running.attempt_count) == ("running", "doomed", 1)
        process.send_signal(signal.SIGKILL)
        process.wait()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        if process.stderr:
            process.stderr.close()

    calls: list[str] = []

    def summarize(text: str) -> str:
        calls.append(text)
        return "done by the survivor"

    survivor = SummaryWorker(queue, summarize, worker_id="survivor", lease_seconds=5)
    deadline = time.monotonic() + 60
    served = survivor.run_once()
    while served is None:  # until the dead worker's lease runs out
        assert time.monotonic() < deadline, "the job was never handed to another worker"
        time.sleep(0.1)
        served = survivor.run_once()
    assert served[1] == "done"
    assert survivor.run_once() is None  # nothing left: not retried again
    job = _job(queue, queued.job_id)
    assert (job.state, job.attempt_count, job.worker_id) == ("done", 2, "survivor")
    assert job.error_message == "worker doomed lost its lease"
    assert calls == ["summarise me, then die"]
    assert len(marker.read_text().splitlines()) == 1
    assert queue.summary("summarise me, then die") == "done by the survivor"
