"""The tool-schema catalogue: shared version numbers, idempotent records, warming a registry."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ctxplugin_postgres import PostgresToolSchemas
from psycopg import sql
from psycopg_pool import ConnectionPool

from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import get_counter
from ctxplugin.tools.registry import ToolRegistry, schema_hash

pytestmark = pytest.mark.postgres


def _tool(name: str, description: str, **properties: Any) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": sorted(properties)},
        },
    }


SEARCH_V1 = _tool("search_issues", "Search issues in a repository.", query={"type": "string"})
SEARCH_V2 = _tool("search_issues", "Search issues in a repository.", query={"type": "string"}, state={"type": "string"})
READ_PAGE = _tool("read_page", "Read a page of the wiki.", page_id={"type": "string"})


@pytest.fixture
def registry() -> ToolRegistry:
    return ToolRegistry(counter=get_counter()[0])


def test_versions_are_numbered_per_tool_and_records_are_idempotent(
    pg_pool: ConnectionPool, pg_schema: str, registry: ToolRegistry
) -> None:
    catalogue = PostgresToolSchemas(pg_pool, schema=pg_schema)
    first = catalogue.record(registry.register(SEARCH_V1), server="github")
    again = catalogue.record(registry.register(SEARCH_V1), server="github")
    second = catalogue.record(registry.register(SEARCH_V2), server="github")
    page = catalogue.record(registry.register(READ_PAGE), server="notion")
    assert (first.version, again.version, second.version, page.version) == (1, 1, 2, 1)
    assert first.hash == schema_hash(first.schema) and first.schema == registry.versions("search_issues")[0].schema
    assert second.token_count == registry.get("search_issues").tokens  # type: ignore[union-attr]
    assert [s.version for s in catalogue.versions("search_issues")] == [1, 2]
    assert catalogue.get("search_issues", 1) == catalogue.versions("search_issues")[0]
    current = catalogue.get("search_issues")
    assert current is not None and current.version == 2
    catalogue.record(registry.register(SEARCH_V1), server="github")  # back to the first schema
    current = catalogue.get("search_issues")
    assert current is not None and current.version == 1
    assert [s.name for s in catalogue.current(server="notion")] == ["read_page"]
    assert catalogue.get("unknown") is None


def test_processes_agree_on_version_numbers(pg_dsn: str, pg_schema: str) -> None:
    """Many writers recording schemas of one tool at once get one number per schema."""
    schemas = [_tool("lookup", f"Look up variant {i}.", key={"type": "string"}) for i in range(12)]
    results: list[tuple[str, int]] = []
    lock = threading.Lock()
    start = threading.Barrier(4)

    def writer() -> None:
        catalogue = PostgresToolSchemas.from_dsn(pg_dsn, schema=pg_schema)
        own = ToolRegistry(counter=get_counter()[0])
        try:
            start.wait()
            for schema in schemas:
                stored = catalogue.record(own.register(schema))
                with lock:
                    results.append((stored.hash, stored.version))
        finally:
            catalogue.close()

    threads = [threading.Thread(target=writer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    by_hash: dict[str, set[int]] = {}
    for digest, version in results:
        by_hash.setdefault(digest, set()).add(version)
    assert len(by_hash) == 12 and all(len(v) == 1 for v in by_hash.values())
    assert sorted(v.pop() for v in by_hash.values()) == list(range(1, 13))


def test_a_new_registry_is_warmed_from_the_catalogue(pg_pool: ConnectionPool, pg_schema: str, registry: ToolRegistry) -> None:
    catalogue = PostgresToolSchemas(pg_pool, schema=pg_schema)
    catalogue.record_all(_registered(registry, SEARCH_V2, READ_PAGE), server="mcp")
    fresh = ToolRegistry(counter=get_counter()[0])
    loaded = catalogue.load_into(fresh)
    assert sorted(e.name for e in loaded) == ["read_page", "search_issues"]
    assert fresh.get("search_issues").hash == registry.get("search_issues").hash  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError):
        catalogue.record(SEARCH_V1)  # type: ignore[arg-type]


def _registered(registry: ToolRegistry, *tools: dict[str, Any]) -> ToolRegistry:
    registry.register_all(tools)
    return registry


def test_tools_postgres_text_cannot_hold_are_recorded_exactly_and_apart(
    pg_pool: ConnectionPool, pg_schema: str, registry: ToolRegistry
) -> None:
    catalogue = PostgresToolSchemas(pg_pool, schema=pg_schema)
    odd = _tool("lookup\x00", "Look up \x00 a record.", key={"type": "string", "description": "the\x00key"})
    twins = [_tool(name, "Look up a record.", key={"type": "string"}) for name in ("lookup%00", "lookup", "lookup%")]
    stored = [catalogue.record(registry.register(tool)) for tool in [odd, *twins]]
    assert [s.version for s in stored] == [1, 1, 1, 1]  # four tools, not one name's versions
    for tool, got in zip([odd, *twins], stored, strict=True):
        name = tool["function"]["name"]
        assert (got.name, got.schema, got.description) == (name, tool, tool["function"]["description"])
        assert catalogue.get(name) == got and catalogue.versions(name) == [got]
    assert sorted(s.name for s in catalogue.current()) == sorted(t["function"]["name"] for t in [odd, *twins])
    fresh = ToolRegistry(counter=get_counter()[0])
    catalogue.load_into(fresh)
    assert fresh.get("lookup\x00") is not None and fresh.get("lookup\x00").schema == odd  # type: ignore[union-attr]


@pytest.mark.parametrize("server", ["mcp\x00a", "mcp\ud800", "mcp%00a"])
def test_a_server_name_postgres_text_cannot_hold_is_recorded_exactly_and_apart(
    pg_pool: ConnectionPool, pg_schema: str, registry: ToolRegistry, server: str
) -> None:
    catalogue = PostgresToolSchemas(pg_pool, schema=pg_schema)
    odd = _tool("caf\udce9_lookup", "Look up a caf\udce9.", key={"type": "string"})
    stored = catalogue.record(registry.register(odd), server=server)
    catalogue.record(registry.register(READ_PAGE), server="mcp")  # an ordinary server beside it
    assert stored.server == server and stored.schema == odd and catalogue.get("caf\udce9_lookup") == stored
    assert [s.name for s in catalogue.current(server=server)] == ["caf\udce9_lookup"]
    assert [s.name for s in catalogue.current(server="mcp")] == ["read_page"]
    for other in {"mcp\x00a", "mcp%00a", "mcp%2500a"} - {server}:
        assert catalogue.current(server=other) == []


def test_ordinary_tools_are_stored_as_before(pg_pool: ConnectionPool, pg_schema: str, registry: ToolRegistry) -> None:
    PostgresToolSchemas(pg_pool, schema=pg_schema).record(registry.register(SEARCH_V1), server="github")
    with pg_pool.connection() as conn:
        row = conn.execute(
            sql.SQL("SELECT tool_name, description, schema_json FROM {}.ctxplugin_tool_schemas").format(sql.Identifier(pg_schema))
        ).fetchone()
    assert row == ("search_issues", "Search issues in a repository.", SEARCH_V1)
