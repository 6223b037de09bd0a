"""The schema registry: tools in every accepted form, hashes, token counts, versions."""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.tools import StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import count_tool_schemas, get_counter
from ctxplugin.tools import ToolRegistry, one_line_intent, schema_hash

COUNTER = get_counter()[0]


def fn_tool(name: str, description: str = "Do a thing.", **props: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": {k: {"type": v} for k, v in props.items()},
                           "required": sorted(props)},
        },
    }


@tool
def get_order_details(order_id: str) -> str:
    """Get the status and details of an order. The order id starts with '#'."""
    return order_id


def find_user(email: str, limit: int = 5) -> str:
    """Find user id by email."""
    return email


def test_every_accepted_form_gets_schema_hash_and_tokens() -> None:
    registry = ToolRegistry(COUNTER)
    anthropic_style = {"name": "list_airports", "description": "List all airports.",
                       "input_schema": {"type": "object", "properties": {}}}
    entries = registry.register_all([get_order_details, find_user, fn_tool("calculate", expression="string"),
                                     anthropic_style])
    assert [e.name for e in entries] == ["get_order_details", "find_user", "calculate", "list_airports"]
    for entry in entries:
        assert entry.schema["type"] == "function"
        assert entry.tokens == count_tool_schemas([entry.schema], COUNTER) > 0
        canonical = json.dumps(entry.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        assert entry.hash == hashlib.sha256(canonical.encode()).hexdigest() == schema_hash(entry.schema)
        assert entry.version == 1
    assert entries[1].parameters["required"] == ["email"]
    assert entries[0].intent() == "Get the status and details of an order"
    assert registry.names() == ["calculate", "find_user", "get_order_details", "list_airports"]
    assert "calculate" in registry and "nope" not in registry and len(registry) == 4


def test_mcp_style_tool_with_a_json_schema_dict_is_registered() -> None:
    # langchain-mcp-adapters builds StructuredTools whose args_schema is the server's JSON schema
    schema = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    mcp_tool = StructuredTool(name="read_file", description="Read a file from the workspace.",
                              args_schema=schema, func=lambda path: path)
    entry = ToolRegistry(COUNTER).register(mcp_tool)
    assert entry.parameters["required"] == ["path"]
    assert entry.check({"path": "a.txt"}) == []
    assert entry.check({}) != []


def test_a_changed_schema_under_the_same_name_is_a_new_version() -> None:
    registry = ToolRegistry(COUNTER)
    first = registry.register(fn_tool("search", "Search flights.", origin="string"))
    again = registry.register(fn_tool("search", "Search flights.", origin="string"))
    assert again == first and again.version == 1
    changed = registry.register(fn_tool("search", "Search flights.", origin="string", date="string"))
    assert changed.version == 2 and changed.hash != first.hash
    assert registry.get("search") == changed
    # going back to a known schema reuses its version instead of inventing a third
    assert registry.register(fn_tool("search", "Search flights.", origin="string")).version == 1
    assert [e.version for e in registry.versions("search")] == [1, 2]
    assert registry.versions("unknown") == []


def test_a_dict_edited_in_place_is_registered_again() -> None:
    registry = ToolRegistry(COUNTER)
    spec = fn_tool("search", "Search flights.", origin="string")
    assert registry.register(spec).version == 1
    spec["function"]["description"] = "Search flights and trains."
    assert registry.register(spec).version == 2
    assert registry.get("search") is not None
    assert registry.get("search").description == "Search flights and trains."  # type: ignore[union-attr]


class _Origin(BaseModel):
    origin: str


class _OriginAndDate(BaseModel):
    origin: str
    date: str


def test_a_base_tool_edited_in_place_is_registered_again() -> None:
    # a host that updates its tool object between calls (a new description, a new args_schema
    # class, an MCP schema dict changed in place) must not be answered with the old schema
    registry = ToolRegistry(COUNTER)
    search = StructuredTool(name="search", description="Search flights.", args_schema=_Origin, func=lambda **kw: "")
    assert registry.register(search).version == 1
    search.args_schema = _OriginAndDate
    search.description = "Search flights and trains."
    entry = registry.register(search)
    assert entry.version == 2 and registry.get("search") == entry
    assert entry.description == "Search flights and trains."
    assert set(entry.parameters["properties"]) == {"origin", "date"}
    assert entry.check({"origin": "SFO", "date": "2024-05-01"}) == []

    schema: dict[str, Any] = {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}
    mcp_tool = StructuredTool(name="read_file", description="Read a file.", args_schema=schema, func=lambda **kw: "")
    assert registry.register(mcp_tool).version == 1
    schema["properties"]["encoding"] = {"type": "string", "enum": ["utf-8", "latin-1"]}
    changed = registry.register(mcp_tool)
    assert changed.version == 2 and "encoding" in changed.parameters["properties"]
    assert changed.check({"path": "a.txt", "encoding": "utf-8"}) == []
    # registering the unchanged objects again finds the same entries
    assert registry.register(search) is entry and registry.register(mcp_tool) is changed


@pytest.mark.parametrize("bad", [42, "search", None, {"type": "function", "function": {"description": "no name"}}])
def test_unreadable_tools_are_rejected_clearly(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        ToolRegistry(COUNTER).register(bad)


def test_concurrent_registration_is_consistent() -> None:
    registry = ToolRegistry(COUNTER)
    a = fn_tool("shared", "Version A.", x="string")
    b = fn_tool("shared", "Version B.", y="integer")
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for j in range(60):
                registry.register(a if (i + j) % 2 else b)
                registry.register(fn_tool(f"tool_{i}_{j % 5}", x="string"))
        except BaseException as exc:  # collected for the assert below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    versions = registry.versions("shared")
    assert sorted(e.version for e in versions) == [1, 2]
    assert {e.description for e in versions} == {"Version A.", "Version B."}
    assert len(registry.names()) == 1 + 8 * 5


def test_memo_computes_once_per_key() -> None:
    registry = ToolRegistry(COUNTER)
    calls: list[int] = []

    def make(value: int) -> int:
        calls.append(value)
        return value

    assert registry.memo("k", lambda: make(7)) == 7
    assert registry.memo("k", lambda: make(8)) == 7
    assert calls == [7]


def test_functions_without_docstring_are_named_by_their_name() -> None:
    def lookup(code: str) -> str:
        return code

    entry = ToolRegistry(COUNTER).register(lookup)
    assert entry.description == "lookup"
    assert convert_to_openai_tool(get_order_details)["function"]["name"] == "get_order_details"


def test_intent_is_the_first_sentence_on_one_line() -> None:
    assert one_line_intent("Find user id by email. If the user is not found, error.") == "Find user id by email"
    assert one_line_intent("Search, e.g. Flights to SFO. Then more.") == "Search, e.g. Flights to SFO"
    assert one_line_intent("Line one\n  continues here.\n\nArgs:\n  x: y") == "Line one continues here"
    assert one_line_intent("Version 1.2 of the api.") == "Version 1.2 of the api"
    assert one_line_intent("anything", 0) == ""
    assert one_line_intent("") == ""


@settings(max_examples=60, deadline=None)
@given(text=st.text(max_size=400), limit=st.integers(1, 120))
def test_intent_is_one_short_line(text: str, limit: int) -> None:
    intent = one_line_intent(text, limit)
    assert "\n" not in intent
    assert len(intent) <= limit


def test_a_schema_nested_past_the_json_depth_limit_is_a_clear_error() -> None:
    deep: Any = {"type": "string"}
    for _ in range(500):
        deep = {"type": "object", "properties": {"x": deep}}
    with pytest.raises(InvalidInputError, match=r"tool 'nested' has a schema nested deeper than 100 levels"):
        ToolRegistry(COUNTER).register(fn_tool("nested") | {"function": {"name": "nested", "parameters": deep}})
    assert ToolRegistry(COUNTER).register(fn_tool("flat", q="string")).name == "flat"


class _Lookup(BaseModel):
    order_id: str


def _request_tools(description: str = "Find an order by its id.") -> list[Any]:
    """The tools a web app builds for each request (closures over the request's state)."""
    state = {"user": "mia"}
    return [
        fn_tool("cancel_order", "Cancel an order.", order_id="string"),
        StructuredTool.from_function(func=lambda order_id: state["user"], name="find_order", description=description, args_schema=_Lookup),
        StructuredTool.from_function(
            func=lambda **kw: "ok", name="refund", description="Refund an order.",
            args_schema={"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]},
        ),
    ]


def test_tools_built_anew_for_each_call_are_read_once_and_not_kept_alive() -> None:
    import gc
    import weakref

    registry = ToolRegistry(COUNTER)
    first = registry.register_all(_request_tools())
    later = []
    for _ in range(5):
        tools = _request_tools()
        later.append([weakref.ref(t) for t in tools if not isinstance(t, dict)])
        assert registry.register_all(tools) == first, "the same entries, versions unchanged"
        del tools
    gc.collect()
    assert all(ref() is None for refs in later for ref in refs), "a request's tools are not held by the registry"
    changed = registry.register_all(_request_tools("Find an order by its id or its email."))
    assert changed[0] == first[0] and changed[1] != first[1] and changed[1].version == first[1].version + 1
    assert "email" in changed[1].description and registry.get("find_order") == changed[1]


def test_a_tool_with_undecodable_bytes_is_registered_exactly() -> None:
    """A host that decoded a tool server's bytes with ``surrogateescape`` hands ctxplugin names
    and text holding lone surrogates: the tool is registered as given, hashed like any other."""
    registry = ToolRegistry(COUNTER)
    odd = fn_tool("caf\udce9_lookup", "Look up a caf\udce9 by id.", **{"shop\udcff": "string"})
    entry = registry.register(odd)
    assert (entry.name, entry.description) == ("caf\udce9_lookup", "Look up a caf\udce9 by id.")
    assert entry.schema == convert_to_openai_tool(odd) and entry.tokens > 0
    canonical = json.dumps(entry.schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert entry.hash == hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()
    assert registry.register(fn_tool("caf\udce9_lookup", "Look up a caf\udce9 by id.", **{"shop\udcff": "string"})) is entry
    assert registry.register(fn_tool("caf\udce8_lookup", "Look up a caf\udce9 by id.", **{"shop\udcff": "string"})).hash != entry.hash

    def odd_doc(order_id: str) -> str:
        """Find an order of Caf\udce9 Lumi\udce8re."""
        return order_id

    assert registry.register(odd_doc).description == "Find an order of Caf\udce9 Lumi\udce8re."
