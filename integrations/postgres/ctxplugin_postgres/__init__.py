"""ctxplugin-postgres: ctxplugin's stores on Postgres, for many processes and machines.

- :class:`PostgresCASStore` / :class:`AsyncPostgresCASStore`: the content-addressable store
  (the :class:`ctxplugin.cas.CASStore` port) over a psycopg 3 connection pool.
- :class:`SummaryJobQueue`, :class:`SummaryWorker`, :class:`QueuedSummarizer`: background
  summarization with ``FOR UPDATE SKIP LOCKED`` workers, leases, retries with backoff,
  attempt limits and token quotas per session and per day.
- :class:`PostgresToolSchemas`: the versioned tool-schema catalogue.
- :class:`PostgresWriteLock`: advisory locks that serialise the facts ledger's supersession
  across processes and machines.
- :func:`migrate` / :func:`schema_version` and the ``ctxplugin-postgres`` command: versioned
  migrations.

With ``CTXPLUGIN_POSTGRES_DSN`` set, :func:`ctxplugin.connect` builds an engine on these stores;
no code change in the agent.
"""

from ctxplugin_postgres._db import make_async_pool, make_pool
from ctxplugin_postgres.cas import AsyncPostgresCASStore, PostgresCASStore
from ctxplugin_postgres.health import check_dsn, check_server, ping
from ctxplugin_postgres.jobs import JOB_STATES, Enqueued, JobState, SummaryJob, SummaryJobQueue
from ctxplugin_postgres.locks import PostgresWriteLock
from ctxplugin_postgres.migrations import LATEST, MIGRATIONS, Migration, migrate, schema_version
from ctxplugin_postgres.tool_schemas import PostgresToolSchemas, StoredSchema
from ctxplugin_postgres.worker import QueuedSummarizer, SummaryWorker

__version__ = "0.1.0"

__all__ = [
    "JOB_STATES",
    "LATEST",
    "MIGRATIONS",
    "AsyncPostgresCASStore",
    "Enqueued",
    "JobState",
    "Migration",
    "PostgresCASStore",
    "PostgresToolSchemas",
    "PostgresWriteLock",
    "QueuedSummarizer",
    "StoredSchema",
    "SummaryJob",
    "SummaryJobQueue",
    "SummaryWorker",
    "__version__",
    "check_dsn",
    "check_server",
    "make_async_pool",
    "make_pool",
    "migrate",
    "ping",
    "schema_version",
]
