"""An async store left open when ``asyncio.run`` ends does not keep the process alive.

``asyncio.run`` ends by cancelling the tasks still running and waiting for them. A task of
psycopg's pool that is connecting at that moment takes the cancellation for a failed
connection, and waits for its next job for ever, so ``asyncio.run`` never returned. The script
below makes that moment certain: the server's first connection is served, any later one is
held unanswered, and the pool is growing when ``main`` returns.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from ctxplugin_postgres import AsyncPostgresCASStore
from psycopg.conninfo import conninfo_to_dict

SCRIPT = """
import asyncio, sys
from ctxplugin_postgres import AsyncPostgresCASStore

host, port, schema = sys.argv[1], int(sys.argv[2]), sys.argv[3]
served = 0

async def pipe(reader, writer):
    while data := await reader.read(65536):
        writer.write(data)
        await writer.drain()
    writer.close()

async def serve(reader, writer):
    global served
    served += 1
    if served > 1:  # a server slow to accept: the pool's next connection is still connecting
        await asyncio.Event().wait()
    up_reader, up_writer = await asyncio.open_connection(host, port)
    await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

async def main():
    proxy = await asyncio.start_server(serve, "127.0.0.1", 0)
    proxy_port = proxy.sockets[0].getsockname()[1]
    dsn = f"postgresql://{sys.argv[4]}@127.0.0.1:{proxy_port}/{sys.argv[5]}"
    cas = await AsyncPostgresCASStore.from_dsn(dsn, schema=schema, timeout=5.0)
    await asyncio.gather(*(cas.stats() for _ in range(4)))  # the pool grows
    # cas is not closed

asyncio.run(main())
print("asyncio.run returned", flush=True)
"""


def test_an_unclosed_async_store_lets_the_process_end(pg_dsn: str, pg_schema: str) -> None:
    params = conninfo_to_dict(pg_dsn)
    args = [
        str(params.get("host", "127.0.0.1")),
        str(params.get("port", 5432)),
        pg_schema,
        str(params.get("user", "postgres")),
        str(params.get("dbname", "test")),
    ]
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, *args], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == "asyncio.run returned\n"
    assert "was not closed" in done.stderr


def test_a_closed_async_store_leaves_no_task_running(
    pg_dsn: str, pg_schema: str, caplog: pytest.LogCaptureFixture
) -> None:
    async def main() -> set[asyncio.Task[object]]:
        async with await AsyncPostgresCASStore.from_dsn(pg_dsn, schema=pg_schema) as cas:
            await asyncio.gather(*(cas.stats() for _ in range(4)))
        await asyncio.sleep(0)  # a cancelled task ends on its next step
        return asyncio.all_tasks() - {asyncio.current_task()}

    assert asyncio.run(main()) == set()
    assert "was not closed" not in caplog.text
