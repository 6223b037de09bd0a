"""The meta-tools a host registers beside the agent's own: ``expand_ref`` (read a stored tool
output back) and ``load_tools`` (load schemas from the tool directory).

They take the engine as an argument and never import it; :mod:`ctxplugin.langchain` is their
public home. :func:`read_ref` is ``engine.expand_ref``: a read of a ref, by the model's tool or
by the agent's own code, is one ``ctxplugin.expand`` event either way.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.runnables import RunnableConfig
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field, field_validator

from ctxplugin._events import emit
from ctxplugin._names import EXPAND_EVENT, EXPAND_REF_NAME, META_TOOL_MARK, READ_KEY
from ctxplugin._run_scope import resolve as resolve_scope
from ctxplugin._untrusted import ref_as_written
from ctxplugin.cas import CASStore, expand
from ctxplugin.cas.expand import read_for_model
from ctxplugin.scope import Scope, scope_resolver
from ctxplugin.tools import make_load_tools_tool

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine

ScopeResolver = Callable[[RunnableConfig | None], Scope]
"""Maps a run's config to the scope of a call (default: the thread id, else a scope of the run's own)."""


EXPAND_REF_DESCRIPTION = (
    "Read a stored tool output by ref_id; optionally fields (JSON paths), offset/limit (lines or"
    " items), pattern to match (regex if regex)."
)


class ExpandRefArgs(BaseModel):
    """Arguments of ``expand_ref``; the tool's description says what each option does."""

    ref_id: str
    fields: list[str] = Field(default_factory=list)
    offset: int = 0
    limit: int = 0
    pattern: str = ""
    regex: bool = False

    @field_validator("fields", "offset", "limit", "pattern", "regex", mode="before")
    @classmethod
    def _null_is_left_out(cls, value: Any, info: Any) -> Any:
        """Models often send ``null`` for an option they do not use, and one path as a string
        (``load_tools`` takes both too): read them as the option left out and a one-path list.
        The schema sent to the model does not change."""
        if value is None:
            return [] if info.field_name == "fields" else cls.model_fields[info.field_name].default
        if info.field_name == "fields" and isinstance(value, str):
            return [value]
        return value


def make_expand_ref_tool(engine: ContextEngine, scope: ScopeResolver | Scope | None = None) -> BaseTool:
    """The ``expand_ref`` tool the model calls to read stored tool outputs.

    Args:
        engine: the engine whose CAS holds the outputs.
        scope: how to find the caller's scope from the run's config (or one fixed
            :class:`Scope`); by default ``configurable.thread_id``. Hosts that give an agent its
            own scope pass theirs.

    Raises:
        InvalidInputError: ``scope`` is neither a Scope nor a function.
    """
    resolve = scope_resolver(scope, "make_expand_ref_tool(scope=...)") or resolve_scope

    def expand_ref(
        ref_id: str,
        fields: list[str] | None = None,
        offset: int = 0,
        limit: int = 0,
        pattern: str = "",
        regex: bool = False,
        config: RunnableConfig = None,  # type: ignore[assignment]  # injected by LangChain
    ) -> tuple[str | list[Any], dict[str, bool]]:
        engine.check_open()  # a host running the tool after close() is told so, not the model
        call_scope = resolve(config)
        # a list is content blocks (an output with images): LangChain makes it the tool
        # message's content as is, so the model sees the images
        content, read = read_for_model(
            engine.cas,
            ref_id,
            call_scope,
            max_tokens=engine.config.cas.expand_max_tokens,
            counter=engine.counter,
            fields=fields or None,
            offset=offset,
            limit=limit or None,
            pattern=pattern or None,
            regex=regex,
        )
        if read:  # an answer saying why the ref could not be read is no expand, as engine.expand_ref's error is none
            _expanded(ref_as_written(ref_id), call_scope)  # the ref read, not the text around it
        # the content goes to the model; the artifact, kept by the host, says whether it is a read
        return content, {READ_KEY: read}

    # the schema sent is made now, with the tool (pydantic takes a millisecond): a host makes the
    # tool before its first model call, which would otherwise pay for it
    _made_schema(ExpandRefArgs)
    return _ExpandRefTool.from_function(
        expand_ref, name=EXPAND_REF_NAME, description=EXPAND_REF_DESCRIPTION, args_schema=ExpandRefArgs,
        metadata={META_TOOL_MARK: True}, response_format="content_and_artifact",
    )


def read_ref(
    cas: CASStore,
    ref_id: str,
    scope: Scope,
    *,
    fields: str | Sequence[str] | None,
    offset: int,
    limit: int | None,
    pattern: str | None,
    regex: bool,
) -> str:
    """:func:`~ctxplugin.cas.expand` (``fields`` may be one path, as a string), reported to the
    run's callback handlers as the ``expand_ref`` tool's reads are: once, when it read the ref.

    Raises:
        RefNotFoundError: unknown, expired, or not readable from ``scope`` (no event).
        StoreError: the store failed (no event).
    """
    paths = [fields] if isinstance(fields, str) else list(fields) if fields else None
    text = expand(cas, ref_id, scope, fields=paths, offset=offset, limit=limit, pattern=pattern, regex=regex)
    _expanded(ref_id, scope)
    return text


def _expanded(ref_id: str, scope: Scope) -> None:
    """The ``ctxplugin.expand`` event of one read of ``ref_id``, whoever read it."""
    emit(EXPAND_EVENT, {"ref_id": ref_id, "session_id": scope.session_id})


def _sent_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as a model is shown it: types and required names only. Titles,
    defaults and per-argument descriptions are dropped (the tool's description covers them),
    since the schema goes out with every model call. Made once per model (a host binds the
    tool on every call); each caller gets its own copy."""
    return copy.deepcopy(_made_schema(model))


@functools.lru_cache(maxsize=8)
def _made_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    properties = {
        name: {key: value for key, value in prop.items() if key not in ("title", "default", "description")}
        for name, prop in schema["properties"].items()
    }
    return {"type": "object", "properties": properties, "required": schema.get("required", [])}


class _ExpandRefTool(StructuredTool):
    """``expand_ref`` as a structured tool whose arguments are validated by
    :class:`ExpandRefArgs` but sent to the model as :func:`_sent_schema` of it."""

    @property
    def tool_call_schema(self) -> dict[str, Any]:
        return _sent_schema(ExpandRefArgs)


def make_meta_tools(engine: ContextEngine, scope: ScopeResolver | None = None) -> list[BaseTool]:
    """``expand_ref`` and ``load_tools``, for registering with a host's tool node."""
    return [make_expand_ref_tool(engine, scope), make_load_tools_tool(engine.registry, scope or resolve_scope)]


__all__ = ["EXPAND_REF_DESCRIPTION", "ExpandRefArgs", "ScopeResolver", "make_expand_ref_tool", "make_meta_tools", "read_ref"]
