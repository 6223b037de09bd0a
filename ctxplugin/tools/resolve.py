"""Tool calls against the registry: run, answer with the schema, or name close matches; and
the ``load_tools`` meta-tool."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Container, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, Protocol

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, model_validator

from ctxplugin._graphemes import head
from ctxplugin._names import LOAD_TOOLS_NAME, META_TOOL_MARK
from ctxplugin.scope import Scope, scope_resolver

if TYPE_CHECKING:  # the registry builds its load_tools tool here: only its type is needed
    from ctxplugin.tools.offered import ToolSet
    from ctxplugin.tools.registry import ToolEntry, ToolRegistry

_MATCHES = 3
_MISSING_LISTED = 20  # unknown names answered one by one; past it, counted (a model may list thousands)
_NAME_CHARS = 128
"""The longest name a reply repeats back (providers cap tool names at 64 to 128 characters)."""
_SIGNATURE_CHARS = 240
_NAME_SPLIT = re.compile(r"[\s,;]+")


def split_names(text: str) -> list[str]:
    """Tool names a model wrote as one string (``"a, b"``, ``"a b"``) rather than a list."""
    return [name for name in _NAME_SPLIT.split(text) if name]


def string_names(text: str, known: Container[str] = ()) -> list[str]:
    """The tools one string of ``load_tools`` names: the tool of ``known`` whose whole name it is
    (``"has space"``: a name may hold spaces or commas), else the names it lists (:func:`split_names`)."""
    return [text.strip()] if text.strip() in known else split_names(text)


class LoadToolsArgs(BaseModel):
    """Arguments of ``load_tools``: a list of names, or one string of them (models write
    ``names="get_user_details"`` often enough; the next call binds them either way)."""

    model_config = {"title": LOAD_TOOLS_NAME}

    names: list[str] = Field(description='exact tool names from the directory, e.g. ["get_user_details"].')

    @model_validator(mode="before")
    @classmethod
    def _names(cls, value: object) -> dict[str, object]:
        # whatever the model sent is answered as a tool result, never a validation error from
        # inside the tool: names left out, null or of another type are no names, which the
        # tool answers with what to write
        return {"names": requested_names(value)}


def requested_names(args: Any, known: Container[str] = ()) -> list[str]:
    """Tool names in the arguments of a ``load_tools`` call (a list, or one string of
    names separated by commas or spaces, unless it is the whole name of a tool of ``known``)."""
    raw = args.get("names") if isinstance(args, dict) else None
    if isinstance(raw, str):
        return string_names(raw, known)
    if isinstance(raw, (list, tuple)):
        return [n.strip() for n in raw if isinstance(n, str) and n.strip()]
    return []


def _args_of(registry: ToolRegistry) -> type[LoadToolsArgs]:
    """:class:`LoadToolsArgs` for ``registry``'s tools: one string that is the whole name of one
    of them (``"has space"``) names that tool, not the words in it."""

    class RegistryArgs(LoadToolsArgs):
        __doc__ = LoadToolsArgs.__doc__

        @model_validator(mode="before")
        @classmethod
        def _names(cls, value: object) -> dict[str, object]:
            return {"names": requested_names(value, registry)}

    return RegistryArgs


@dataclass(frozen=True)
class Resolution:
    """What to do with one tool call.

    Attributes:
        kind: ``"run"`` (arguments valid, or nothing to check them against), ``"schema"``
            (arguments invalid: answer with the schema so the model can retry), or
            ``"unknown"`` (no tool of that name).
        message: the answer for the model when the call must not run.
        errors: what is wrong with the arguments (``"schema"``).
        matches: registered names close to the one called (``"unknown"``).
    """

    kind: Literal["run", "schema", "unknown"]
    message: str = ""
    errors: list[str] = field(default_factory=list)
    matches: list[str] = field(default_factory=list)


class ToolSource(Protocol):
    """Where a call's tools are looked up: one agent's :class:`~ctxplugin.tools.offered.ToolSet`,
    or the whole :class:`~ctxplugin.tools.ToolRegistry` when the agent's tools are not known."""

    def get(self, name: str) -> ToolEntry | None: ...

    def names(self) -> list[str]: ...

    def is_stubbed(self, name: str) -> bool: ...


def close_matches(name: str, names: Sequence[str], n: int = _MATCHES) -> list[str]:
    """Up to ``n`` names similar to ``name``, best first (case-insensitive: names that differ
    only by case are all listed, in sorted order)."""
    lowered: dict[str, list[str]] = {}
    for candidate in sorted(set(names)):
        lowered.setdefault(candidate.lower(), []).append(candidate)
    found = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    if not found:  # a shared word: "flights" -> "search_direct_flight"
        words = {w for w in name.lower().replace("-", "_").split("_") if len(w) > 3}
        found = [c for c in sorted(lowered) if any(w.rstrip("s") in c for w in words)][:n]
    return [original for f in found for original in lowered[f]][:n]


def unknown_message(name: str, registry: ToolSource) -> tuple[str, list[str]]:
    """The error for a call to a tool that does not exist, and the close matches it lists."""
    matches = close_matches(name, registry.names())
    if matches:
        hint = "Did you mean: " + ", ".join(matches) + "?"
    else:
        hint = "Use a name from the tool directory."
    return (
        f"Error: there is no tool named {name!r}. {hint} Call tools by their exact names; "
        f"call {LOAD_TOOLS_NAME} first to get the parameters of a tool you have not used yet.",
        matches,
    )


def schema_json(entry: ToolEntry) -> str:
    """The tool's schema as compact JSON (name, description, parameters)."""
    return json.dumps(entry.schema.get("function", entry.schema), separators=(",", ":"), ensure_ascii=False)


def resolve_call(name: str, args: Any, registry: ToolRegistry, *, tool: Any = None, offered: ToolSet | None = None) -> Resolution:
    """Decide whether a tool call may run.

    Args:
        name: the tool the model called.
        args: the arguments it gave.
        registry: the engine's schema registry.
        tool: the tool the host will run, when known; its schema is used (and registered)
            instead of the registry's current version of ``name``.
        offered: the calling agent's tools (``registry.offered.find(scope.key())``), when
            known: without ``tool``, ``name`` is looked up among them rather than among every
            agent's tools, and close matches come from them.

    Returns:
        ``run`` when the arguments validate against the real schema (or there is none to
        check); ``schema`` with the schema and a retry instruction when they do not;
        ``unknown`` with close matches when no tool has that name.
    """
    source: ToolSource = offered if offered is not None else registry
    entry = registry.register(tool) if tool is not None else source.get(name)
    if entry is None:
        message, matches = unknown_message(name, source)
        return Resolution(kind="unknown", message=message, matches=matches)
    errors = entry.check(args)
    if not errors:
        return Resolution(kind="run")
    listed = "\n".join(f"- {line}" for line in errors)
    message = (
        f"Error: the arguments for {name} do not match its schema:\n{listed}\n"
        f"The schema of {name}{'' if source.is_stubbed(name) else ' (bound from your next step on)'}:\n{schema_json(entry)}\n"
        f"Call {name} again with arguments that match it."
    )
    return Resolution(kind="schema", message=message, errors=errors)


def signature(entry: ToolEntry) -> str:
    """A one-line call signature, e.g. ``get_user(user_id: string, verbose?: boolean)``."""
    params = entry.parameters
    props = params.get("properties") if isinstance(params.get("properties"), dict) else {}
    required = set(params.get("required") or [])
    parts = []
    for arg, spec in (props or {}).items():
        parts.append(f"{arg}{'' if arg in required else '?'}: {_type_of(spec)}")
    text = f"{entry.name}({', '.join(parts)})"
    return text if len(text) <= _SIGNATURE_CHARS else head(text, _SIGNATURE_CHARS - 2) + "…)"


def _type_of(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "any"
    if isinstance(spec.get("enum"), list):
        values = [json.dumps(v, ensure_ascii=False) for v in spec["enum"][:4]]
        return "|".join(values) + ("|…" if len(spec["enum"]) > 4 else "")
    kind = spec.get("type")
    if kind == "array":
        return f"{_type_of(spec.get('items'))}[]"
    if isinstance(kind, list):
        return "|".join(str(k) for k in kind)
    if isinstance(kind, str):
        return kind
    for key in ("anyOf", "oneOf"):
        if isinstance(spec.get(key), list):
            return "|".join(_type_of(s) for s in spec[key])
    return "object" if "properties" in spec else "any"


def _past_max_loaded(registry: ToolRegistry, requested: Sequence[str], loaded: dict[str, str]) -> list[str]:
    """The names of ``loaded`` that one request naming more than ``tools.max_loaded`` tools leaves
    unbound: the next call binds the most recently named (pinned tools take no slot)."""
    limit = registry.max_loaded
    last = {name: i for i, name in enumerate(requested)}
    counted = sorted((n for n in loaded if n not in registry.pinned), key=last.__getitem__, reverse=True)
    return [] if limit is None else [n for n in loaded if n in counted[limit:]]


def make_load_tools_tool(registry: ToolRegistry, scope: Callable[[RunnableConfig | None], Scope] | Scope | None = None) -> BaseTool:
    """The ``load_tools`` meta-tool over ``registry``.

    It changes nothing itself: the next model call binds the tools it named because the call
    is in the conversation. Its answer confirms each name with a compact signature and lists
    close matches for names that do not exist.

    Args:
        registry: the engine's schema registry.
        scope: how to find the caller's scope from the run's config (a host's scope rule), or
            one fixed :class:`Scope`; anything else raises ``InvalidInputError``.
            With it, the answer comes from the tools the calling agent's latest call in that
            scope was planned with (``registry.offered``): another agent's tool is not one of
            its tools, and a tool of the same name is answered with the caller's schema. Without it, or
            before any call of the scope was planned in this process, from every tool the
            registry knows.
    """

    resolve = scope_resolver(scope, "make_load_tools_tool(scope=...)")

    def load_tools(names: list[str] | None = None, config: RunnableConfig = None) -> str:  # type: ignore[assignment]  # injected by LangChain
        wanted = list(dict.fromkeys(n.strip() for n in names or () if isinstance(n, str) and n.strip()))
        if not wanted:
            return f"Give the exact names of the tools you need, e.g. {LOAD_TOOLS_NAME}(names=[\"tool_name\"])."
        offered = registry.offered.find(resolve(config).key(), meta) if resolve is not None else None
        source: ToolSource = offered if offered is not None else registry
        stubbed: list[str] = []
        loaded: dict[str, str] = {}
        missing: list[str] = []
        unlisted = 0
        for name in wanted:
            entry = source.get(name)
            if entry is None and len(missing) >= _MISSING_LISTED:
                unlisted += 1
            elif entry is None:  # a name longer than any tool's is cut and matched to none
                matches = close_matches(name, source.names()) if len(name) <= _NAME_CHARS else []
                shown = name if len(name) <= _NAME_CHARS else f"{name[:_NAME_CHARS]}… ({len(name):,} characters)"
                missing.append(f"- {shown}: no such tool" + (f"; did you mean {', '.join(matches)}?" if matches else ""))
            elif source.is_stubbed(name):
                stubbed.append(f"- {schema_json(entry)}")
            else:
                loaded[name] = f"- {signature(entry)}"
        unbound = _past_max_loaded(registry, [n.strip() for n in names or () if isinstance(n, str)], loaded)
        out = []
        if stubbed:
            out.append("Parameters of these tools (JSON schema); they are bound, call them with arguments that match:")
            out.extend(stubbed)
        pinned = [line for name, line in loaded.items() if name in registry.pinned]
        if pinned:
            out.append("Already bound with their full schemas (always), call them with arguments that match:")
            out.extend(pinned)
        if len(loaded) > len(unbound) + len(pinned):
            out.append("Loaded; these tools are bound with their full schemas from your next step on:")
            out.extend(line for name, line in loaded.items() if name not in unbound and name not in registry.pinned)
        if unbound:
            out.append(f"Not bound (at most {registry.max_loaded} loaded tools stay bound, the most recently used); "
                       "call these directly with arguments that match, or load them again when you need them:")
            out.extend(loaded[name] for name in unbound)
        if missing:
            out.append("Not loaded:")
            out.extend(missing)
        if unlisted:
            out.append(f"… and {unlisted} more names that are not tools; use names from the tool directory.")
        return "\n".join(out)

    meta = StructuredTool.from_function(
        load_tools,
        name=LOAD_TOOLS_NAME,
        description="Load tools from the tool directory: their full schemas are bound from your next step on, so you can call them.",
        args_schema=_args_of(registry),
        metadata={META_TOOL_MARK: True},
    )
    if registry.binding == "stubs":  # the tools are bound as stubs already; loading only reads their parameters
        meta.description = "Read the parameters (JSON schema) of tools before you call them for the first time."
    elif registry.binding == "auto":  # stubs or loaded schemas, depending on the tool set
        meta.description = "Get the parameters of tools from the tool directory before you call them for the first time."
    return meta
