"""Tool schemas from a JSON file, as ``ctxplugin replay --tools`` reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin._untrusted import MAX_JSON_DEPTH, json_depth_exceeds
from ctxplugin.errors import InvalidInputError
from ctxplugin.replay._anthropic import tool as anthropic_tool


def load_tools_file(path: str | Path) -> tuple[dict[str, Any], ...]:
    """Tool schemas from a JSON file: a list (or ``{"tools": [...]}``) of OpenAI-format tools or
    Anthropic tools (``name``, ``description``, ``input_schema``), read as OpenAI-format schemas
    as an Anthropic request's tools are (provider tools, which have no schema, are left out).

    Raises:
        InvalidInputError: unreadable file or an item that is not a tool schema.
    """
    name = Path(path).as_posix()
    try:
        text = Path(path).read_text(encoding="utf-8-sig")  # a byte-order mark is not content
        if json_depth_exceeds(text):
            raise InvalidInputError(f"{name}: JSON nested deeper than {MAX_JSON_DEPTH} levels: not a list of tool schemas")
        data = json.loads(text)
    except OSError as exc:
        raise InvalidInputError(f"{name}: cannot be read ({exc.strerror or exc})") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{name}: not valid JSON ({exc.msg} at line {exc.lineno})") from exc
    except UnicodeDecodeError as exc:
        raise InvalidInputError(f"{name}: not UTF-8 text (byte {exc.start}); tool schemas are a JSON file") from exc
    items = data.get("tools") if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise InvalidInputError(f"{name}: expected a list of tool schemas")
    tools: list[dict[str, Any]] = []
    for index, item in enumerate(items):
        schema = _tool_schema(item, index, name)
        if schema is not None:
            tools.append(schema)
    return tuple(tools)


def holds_tool_schemas(data: Any) -> bool:
    """Whether parsed JSON is what a tools file holds (and not a recording): a list of tool
    schemas, or ``{"tools": [...]}`` alone."""
    items = data.get("tools") if isinstance(data, dict) and list(data) == ["tools"] else data
    if not isinstance(items, list) or not items:
        return False
    try:
        schemas = [_tool_schema(item, index, "") for index, item in enumerate(items)]
    except InvalidInputError:
        return False
    return any(schema is not None for schema in schemas)


def _tool_schema(value: Any, index: int, name: str) -> dict[str, Any] | None:
    """One item of a tools file as an OpenAI-format schema (None: an Anthropic provider tool)."""
    item: dict[str, Any] = value if isinstance(value, dict) else {}  # anything else is named below
    kind = item.get("type")
    if "input_schema" in item or (isinstance(kind, str) and kind != "function" and "name" in item):
        try:
            return anthropic_tool(item, f"item {index}")
        except InvalidInputError as exc:
            raise InvalidInputError(f"{name}: {exc}") from exc
    if kind == "function" and _is_function(item.get("function")):
        return item
    if kind is None and "function" not in item and _is_function(item):  # the bare function object
        return convert_to_openai_tool(item)
    raise InvalidInputError(
        f"{name}: item {index} is neither an OpenAI-format nor an Anthropic tool "
        "({'type': 'function', 'function': {'name', 'parameters'}} or {'name', 'input_schema'})"
    )


def _is_function(value: Any) -> bool:
    return (
        isinstance(value, dict)
        and isinstance(value.get("name"), str)
        and bool(value["name"])
        and isinstance(value.get("parameters", {}), dict)
    )
