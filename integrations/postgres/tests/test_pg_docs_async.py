"""The async store block of docs/scale-out.md runs as a script: it reads back what it stored and
the process ends (the store is closed as the page shows)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parents[3] / "docs"
OUTPUT = json.dumps([{"order": f"#W{i:04d}", "total": i * 7} for i in range(300)])


def test_async_store_block_runs_and_the_process_ends(pg_dsn: str, pg_schema: str) -> None:
    text = (DOCS / "scale-out.md").read_text(encoding="utf-8")
    section = text[
        text.index("\n## Tool outputs in Postgres\n") : text.index(
            "\n## Facts on a Chroma server\n"
        )
    ]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    assert len(blocks) == 2, "no async store block under 'Tool outputs in Postgres'"
    stored = (
        "from langchain_core.messages import ToolMessage\n"
        "from ctxplugin import ContextEngine, Scope\n"
        "from ctxplugin_postgres import PostgresCASStore\n"
        f"dsn, schema = {pg_dsn!r}, {pg_schema!r}\n"
        "scope = Scope(session_id='docs')\n"
        "cas = PostgresCASStore.from_dsn(dsn, schema=schema)\n"
        f"output = ToolMessage({OUTPUT!r}, tool_call_id='c1', name='search')\n"
        "ref_id = ContextEngine(cas=cas).capture_tool_result(output, scope=scope).additional_kwargs['ctxplugin']['ref']\n"
        "cas.close()\n"
    )
    script = stored + blocks[1]
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == OUTPUT + "\n"
