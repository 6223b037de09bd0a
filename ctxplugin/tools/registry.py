"""The schema registry: one entry per tool name, with hash, token count and version.

Tools arrive as ``BaseTool``s (MCP tools loaded through ``langchain-mcp-adapters`` are
``BaseTool``s too), plain functions, or dicts in a format ``convert_to_openai_tool`` reads
(OpenAI function tools, Anthropic ``input_schema`` tools). A registry is shared by every
session of an engine, so it only holds facts about tools, never per-call state; which tools
each agent was offered is kept per scope beside it (:mod:`ctxplugin.tools.offered`).
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from langchain_core.tools import BaseTool, StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin._graphemes import head
from ctxplugin._lru import LRU
from ctxplugin._names import RESERVED_TOOL_NAMES, is_meta_tool
from ctxplugin._untrusted import MAX_JSON_DEPTH, nesting_exceeds
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import Scope
from ctxplugin.tokens import TokenCounter, count_tool_schemas
from ctxplugin.tools._validate import Checker, checker_for
from ctxplugin.tools.offered import OfferedTools
from ctxplugin.tools.resolve import make_load_tools_tool

_IDENTITY_CACHE = 4096
_VERSIONS_KEPT = 16
_MEMO_SIZE = 256
T = TypeVar("T")
# a sentence ends at . ! ? before a capital letter, except after "e.g." / "i.e."
_SENTENCE_END = re.compile(r"(?<!\be\.g\.)(?<!\bi\.e\.)(?<=[.!?])\s+(?=[A-Z])")
_SPACES = re.compile(r"\s+")


@dataclass(frozen=True)
class ToolEntry:
    """One version of one tool's schema.

    Attributes:
        name: the tool name the model calls.
        schema: the tool as an OpenAI function tool (what binding it sends).
        hash: sha256 of the canonical JSON of ``schema``.
        tokens: tokens ``schema`` costs in a request.
        version: 1 for the first schema seen under ``name``, +1 for every new one.
        description: the tool's full description.
        check: validates call arguments; returns error lines (empty when valid).
    """

    name: str
    schema: dict[str, Any]
    hash: str
    tokens: int
    version: int
    description: str = ""
    check: Checker = field(default=lambda args: [], repr=False, compare=False)

    def intent(self, max_chars: int = 80) -> str:
        """The first sentence of the description on one line, cut to ``max_chars``."""
        return one_line_intent(self.description, max_chars)

    @property
    def parameters(self) -> dict[str, Any]:
        """The JSON schema of the arguments."""
        params = self.schema.get("function", {}).get("parameters")
        return params if isinstance(params, dict) else {}


def one_line_intent(description: str, max_chars: int = 80) -> str:
    """First sentence of ``description``, whitespace collapsed, trailing period dropped,
    cut at a word boundary to at most ``max_chars`` characters."""
    if max_chars <= 0:
        return ""
    first_paragraph = description.strip().split("\n\n", 1)[0]
    text = _SPACES.sub(" ", first_paragraph).strip()
    text = _SENTENCE_END.split(text, 1)[0].rstrip(".").strip()
    if len(text) <= max_chars:
        return text
    cut = head(text, max_chars - 1).rsplit(" ", 1)[0].rstrip(",;:")
    return f"{cut}…"


def schema_hash(schema: dict[str, Any]) -> str:
    """sha256 of the canonical JSON of a schema (sorted keys, no spaces), as UTF-8 with lone
    surrogates (undecodable bytes of a tool's name or text) kept, as the CAS hashes them."""
    canonical = json.dumps(schema, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8", "surrogatepass")).hexdigest()


def tool_name(tool: Any) -> str | None:
    """The name a model would call ``tool`` by, or ``None`` for tools without one
    (provider built-ins such as ``{"type": "web_search"}``)."""
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, dict):
        fn = tool.get("function")
        if isinstance(fn, dict) and isinstance(fn.get("name"), str):
            return str(fn["name"])
        name = tool.get("name")
        return name if isinstance(name, str) else None
    if callable(tool):
        name = getattr(tool, "__name__", None)
        return name if isinstance(name, str) else None
    return None


def check_meta_names(tools: Iterable[Any]) -> None:
    """Refuse an agent's own tool named like one of ctxplugin's meta-tools or view lookups: the
    model could not tell the two apart (nothing is hidden silently; the agent renames its tool).

    Raises:
        InvalidInputError: a tool so named that ctxplugin did not build.
    """
    for tool in tools:
        name = tool_name(tool)
        if name is not None and name in RESERVED_TOOL_NAMES and not is_meta_tool(tool):
            raise InvalidInputError(
                f"a tool of the agent is named {name!r}, the name of ctxplugin's {RESERVED_TOOL_NAMES[name]}; "
                f"the model could not tell the two apart. Rename your tool "
                f"(@tool(\"my_{name}\") or tool.name = \"my_{name}\"); ctxplugin uses the name {name} itself."
            )


_SCHEMA_KEYS = ("function", "parameters", "input_schema")


def provider_tool(tool: Any) -> bool:
    """Whether ``tool`` is a provider's own tool, bound as given and never listed or stubbed:
    a dict without a name (``{"type": "web_search_preview"}``), or one whose ``type`` is not
    ``function`` and that has no JSON schema of its own (Anthropic's ``{"type":
    "web_search_20250305", "name": "web_search"}``, ``bash_20250124``, OpenAI's custom tools)."""
    if not isinstance(tool, dict):
        return False
    if tool_name(tool) is None:
        return True
    kind = tool.get("type")
    return isinstance(kind, str) and kind != "function" and not any(k in tool for k in _SCHEMA_KEYS)


def _as_base_tool(func: Callable[..., Any]) -> BaseTool:
    description = (func.__doc__ or "").strip() or func.__name__
    try:
        return StructuredTool.from_function(func, description=description)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"tool function {func.__name__!r} cannot be described as a tool: {exc}") from exc


def _describe(tool: Any) -> tuple[dict[str, Any], str, Checker]:
    """OpenAI schema, description and argument checker of one tool."""
    if callable(tool) and not isinstance(tool, (BaseTool, dict)):
        tool = _as_base_tool(tool)
    try:
        schema = convert_to_openai_tool(tool)
    except Exception as exc:  # langchain raises several types for unreadable tools
        raise InvalidInputError(
            f"cannot read a tool schema from {type(tool).__name__} {tool_name(tool) or ''!s}: {exc}"
        ) from exc
    fn = schema.get("function", {})
    description = str(fn.get("description") or "")
    if isinstance(tool, BaseTool):
        return schema, description, checker_for(tool.tool_call_schema)
    return schema, description, checker_for(fn.get("parameters"))


def _source(tool: Any) -> Any:
    """What the schema of ``tool`` is read from, to notice a tool edited in place: a dict
    itself; a ``BaseTool``'s name, description and ``args_schema`` (a class, or an MCP server's
    JSON schema dict); nothing for a function."""
    if isinstance(tool, dict):
        return tool
    if isinstance(tool, BaseTool):
        return (tool.name, tool.description, tool.args_schema)
    return None


def _content_key(tool: Any) -> tuple[Any, ...] | None:
    """:func:`_source` of ``tool`` as a key tools built alike for each request share (an ``args_schema``
    class by identity, with the tool's class and extras); None for a function or what JSON cannot hold."""
    source = _source(tool)
    try:
        if isinstance(source, dict):
            return ("dict", json.dumps(source, sort_keys=True))
        if isinstance(source, tuple):
            name, description, schema = source
            shape = json.dumps(schema, sort_keys=True) if isinstance(schema, dict) else schema
            return (type(tool), name, description, json.dumps(getattr(tool, "extras", None), sort_keys=True), shape)
    except (TypeError, ValueError):
        return None
    return None


def tool_list(tools: object) -> list[Any]:
    """``tools`` as a list (None is no tools).

    Raises:
        InvalidInputError: ``tools`` is one tool (or a string) rather than a list of them.
    """
    if tools is None:
        return []
    if isinstance(tools, Scope):  # ``prepare(messages, scope)``: a model iterates as (field, value) pairs
        raise InvalidInputError("tools= takes a list of tools, got Scope; pass it as scope=... (the second parameter is tools)")
    if isinstance(tools, (str, bytes, dict, BaseTool)) or callable(tools) or not isinstance(tools, Iterable):
        raise InvalidInputError(f"tools= takes a list of tools, got {type(tools).__name__}; wrap one tool in a list")
    return list(tools)


class ToolRegistry:
    """Schemas of every tool an engine has seen, by name, with versions.

    Thread-safe; one per engine, shared by all its sessions. Registering the same object
    again is cheap (cached by identity), so hosts may pass their tool list on every call.

    Args:
        counter: counts the tokens of each schema.
        binding: ``tools.binding`` of the engine (``"loaded"``, ``"stubs"`` or ``"auto"``).
        max_loaded, pinned: ``tools.max_loaded`` and ``tools.pinned``: which tools a ``load_tools``
            answer may say stay bound (None: no limit).
    """

    def __init__(self, counter: TokenCounter, *, binding: Literal["auto", "loaded", "stubs"] = "loaded",
                 max_loaded: int | None = None, pinned: Iterable[str] = ()) -> None:
        self.counter = counter
        self._lock = threading.Lock()
        self._current: dict[str, ToolEntry] = {}
        self._versions: dict[str, OrderedDict[str, ToolEntry]] = {}
        self._next_version: dict[str, int] = {}
        # id(tool) -> (tool, what its schema was read from, entry); holding the tool keeps its id unique
        self._by_identity: OrderedDict[int, tuple[Any, Any, ToolEntry]] = OrderedDict()
        # what a schema is made from -> its entry: tools built anew per call are not held by identity
        self._by_content: LRU[tuple[Any, ...], ToolEntry] = LRU(_IDENTITY_CACHE)
        self._meta: BaseTool | None = None
        self._memo: OrderedDict[Any, Any] = OrderedDict()
        # with "stubs" and "auto", the names some plan bound as stubs: load_tools answers for
        # those with their parameters (they are bound already)
        self.binding, self.max_loaded, self.pinned = binding, max_loaded, frozenset(pinned)
        self._stubbed: set[str] = set()
        # per scope, the tools each agent's latest call was planned with: its load_tools answers from them
        self.offered = OfferedTools()

    def register(self, tool: Any) -> ToolEntry:
        """Add a tool (or find it) and return its current entry.

        Raises:
            InvalidInputError: ``tool`` is neither a ``BaseTool``, a function nor a tool dict,
                it has no name, or its schema nests deeper than ``MAX_JSON_DEPTH``.
        """
        if not isinstance(tool, (BaseTool, dict)) and not callable(tool):
            raise InvalidInputError(
                f"a tool must be a BaseTool, a function or an OpenAI-format dict, got {type(tool).__name__}"
            )
        with self._lock:
            known = self._known(tool)
        if known is not None:
            return known
        if isinstance(tool, dict) and nesting_exceeds(tool, MAX_JSON_DEPTH):
            raise InvalidInputError(
                f"tool {tool_name(tool)!r:.80} has a schema nested deeper than "
                f"{MAX_JSON_DEPTH} levels; no model reads such a schema, and ctxplugin does not walk it"
            )
        content = _content_key(tool)
        if content is not None:
            with self._lock:
                entry = self._by_content.hit(content)
                if entry is not None and entry.name in self._versions and self._versions[entry.name].get(entry.hash) is entry:
                    self._current[entry.name] = entry
                    return entry
        schema, description, check = _describe(tool)
        name = schema.get("function", {}).get("name")
        if not isinstance(name, str) or not name:
            raise InvalidInputError(f"tool {tool!r:.80} has no name; only named function tools can be registered")
        digest = schema_hash(schema)
        tokens = count_tool_schemas([schema], self.counter)
        with self._lock:
            versions = self._versions.setdefault(name, OrderedDict())
            entry = versions.get(digest)
            if entry is None:
                version = self._next_version.get(name, 1)
                self._next_version[name] = version + 1
                entry = ToolEntry(name=name, schema=schema, hash=digest, tokens=tokens, version=version,
                                  description=description, check=check)
                versions[digest] = entry
                while len(versions) > _VERSIONS_KEPT:
                    versions.popitem(last=False)
            else:
                versions.move_to_end(digest)
            self._current[name] = entry
            key = id(tool)
            self._by_identity[key] = (tool, copy.deepcopy(_source(tool)), entry)
            self._by_identity.move_to_end(key)
            while len(self._by_identity) > _IDENTITY_CACHE:
                self._by_identity.popitem(last=False)
            if content is not None:
                self._by_content.put(content, entry)
        return entry

    def register_all(self, tools: Iterable[Any]) -> list[ToolEntry]:
        """:meth:`register` each tool, in order (tools seen before cost one lookup each)."""
        tools = list(tools)
        with self._lock:
            found = [self._known(t) for t in tools]
        return [entry if entry is not None else self.register(t) for t, entry in zip(tools, found, strict=True)]

    def _known(self, tool: Any) -> ToolEntry | None:
        """The entry of an already registered object (caller holds the lock)."""
        key = id(tool)
        hit = self._by_identity.get(key)
        # a tool may be edited in place between calls: compare what its schema is read from
        if hit is None or hit[0] is not tool or hit[1] != _source(tool):
            return None
        self._by_identity.move_to_end(key)
        self._current[hit[2].name] = hit[2]
        return hit[2]

    def get(self, name: str) -> ToolEntry | None:
        """The current entry of ``name`` (the schema most recently registered under it)."""
        with self._lock:
            return self._current.get(name)

    def versions(self, name: str) -> list[ToolEntry]:
        """Known versions of ``name``, oldest first (the last few are kept)."""
        with self._lock:
            return sorted(self._versions.get(name, {}).values(), key=lambda e: e.version)

    def names(self) -> list[str]:
        """Every registered tool name, sorted."""
        with self._lock:
            return sorted(self._current)

    def __contains__(self, name: object) -> bool:
        with self._lock:
            return name in self._current

    def __len__(self) -> int:
        with self._lock:
            return len(self._current)

    def memo(self, key: Any, make: Callable[[], T]) -> T:
        """A value derived from registered schemas (a directory text, a token count), computed
        once per ``key``; ``key`` must name every input of ``make``."""
        with self._lock:
            if key in self._memo:
                self._memo.move_to_end(key)
                return self._memo[key]  # type: ignore[no-any-return]
        value = make()
        with self._lock:
            self._memo[key] = value
            while len(self._memo) > _MEMO_SIZE:
                self._memo.popitem(last=False)
        return value

    @property
    def stubs(self) -> bool:
        """Whether tools may be bound as stubs (``tools.binding`` is ``"stubs"`` or ``"auto"``)."""
        return self.binding != "loaded"

    @staticmethod
    def stub(entry: ToolEntry) -> dict[str, Any]:
        """``entry`` as a stub to bind: its name, arguments left open (any object). What it does
        is in the directory; its parameters come from ``load_tools``. An equal dict every call."""
        return {
            "type": "function",
            # "properties" present, even empty: some providers reject an object schema without it
            "function": {
                "name": entry.name,
                "parameters": {"type": "object", "properties": {}, "additionalProperties": True},
            },
        }

    def mark_stubbed(self, names: Iterable[str]) -> None:
        """Record that these tools were bound as stubs."""
        fresh = [n for n in names if n not in self._stubbed]
        if fresh:
            with self._lock:
                self._stubbed.update(fresh)

    def is_stubbed(self, name: str) -> bool:
        """Whether ``name`` was bound as a stub (so its parameters are not bound with it)."""
        return name in self._stubbed

    def meta_tool(self) -> BaseTool:
        """This registry's ``load_tools`` tool (built once)."""
        with self._lock:
            meta = self._meta
        if meta is None:
            meta = make_load_tools_tool(self)
            with self._lock:
                self._meta = self._meta or meta
                meta = self._meta
        return meta

