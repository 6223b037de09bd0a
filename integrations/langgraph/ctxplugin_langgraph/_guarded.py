"""The requests ``ContextMiddleware`` hands to the middleware inside it.

A middleware inside may add a tool at runtime (LangChain's dynamic tools:
``request.override(tools=...)`` in ``wrap_model_call``, ``request.override(tool=...)`` in
``wrap_tool_call``), after ctxplugin checked the agent's tools. One named like a meta-tool would
be shown to the model beside ctxplugin's (two tools of one name, which providers refuse), or run
for the model's calls of ctxplugin's while its output is taken for a meta-tool's. These requests
check a tool as it is added: before the model is shown it, before it runs. ctxplugin's own tools
are told apart by their mark (:data:`~ctxplugin._names.META_TOOL_MARK`), not by their name.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain.agents.middleware.types import ToolCallRequest
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin._names import RESERVED_TOOL_NAMES, is_meta_tool
from ctxplugin.errors import InvalidInputError
from ctxplugin.tools import check_meta_names, tool_name


class _CheckedModelRequest(ModelRequest[Any]):
    """A model request whose ``override(tools=...)`` refuses a tool named like a meta-tool
    that ctxplugin did not build (ctxplugin's own in another form aside), or two of one such
    name; the requests made from it are checked the same way."""

    def override(self, **overrides: Any) -> ModelRequest[Any]:
        if "tools" in overrides:
            check_meta_names(t for t in overrides["tools"] if not _sent_as_given(t, self.tools))
            names = [n for n in map(tool_name, overrides["tools"]) if n in RESERVED_TOOL_NAMES]
            twice = next((n for n in names if names.count(n) > 1), None)
            if twice is not None:  # ctxplugin's tool beside a copy of it: providers refuse two of one name
                raise InvalidInputError(
                    f"a middleware inside ContextMiddleware sends the model two tools named {twice!r}; "
                    "send ctxplugin's tool once (replace it in request.tools rather than add a copy)."
                )
        return super().override(**overrides)


class _CheckedToolRequest(ToolCallRequest):
    """A tool-call request whose ``override(tool=...)`` refuses to run, for a call of a
    meta-tool, a tool ctxplugin did not build (or one of the agent's named like a meta-tool)."""

    def override(self, **overrides: Any) -> ToolCallRequest:
        tool = overrides.get("tool", self.tool)
        call = overrides.get("tool_call", self.tool_call)
        if tool is not None and "tool" in overrides:
            check_meta_names([tool])
            name = call["name"]
            if name in RESERVED_TOOL_NAMES and not is_meta_tool(tool):
                raise InvalidInputError(
                    f"a middleware inside ContextMiddleware runs the tool {tool_name(tool)!r} for a call of "
                    f"{name!r}, ctxplugin's {RESERVED_TOOL_NAMES[name]}; the model called ctxplugin's tool. "
                    "Give the middleware's tool a name of its own and run it only for calls of that name."
                )
        return super().override(**overrides)


def _sent_as_given(tool: Any, given: list[Any]) -> bool:
    """Whether ``tool``, named like a meta-tool, is a tool of the request sent in another form:
    ctxplugin's ``expand_ref`` as Anthropic's dict with a prompt-cache mark (the tools of the
    request ContextMiddleware hands on passed its check, so a tool of theirs is ctxplugin's).
    The model calls it as the tool it is, so it is not refused as one of the agent's."""
    name = tool_name(tool)
    if name not in RESERVED_TOOL_NAMES or is_meta_tool(tool):
        return False
    schema = _schema(tool)
    return schema is not None and any(tool_name(g) == name and _schema(g) == schema for g in given)


def _schema(tool: Any) -> tuple[Any, Any] | None:
    """The description and parameters the model is shown for ``tool``, in whatever form it is
    given (a marked dict's ``cache_control`` aside); None for one that has none to read."""
    try:
        fn = convert_to_openai_tool(tool).get("function", {})
    except (TypeError, ValueError):  # no schema to read: refused by its name
        return None
    return fn.get("description"), fn.get("parameters")


def checked_model_request(request: ModelRequest[Any]) -> ModelRequest[Any]:
    """``request`` as a :class:`_CheckedModelRequest` (the same fields)."""
    return _CheckedModelRequest(**_fields(request))


def checked_tool_request(request: ToolCallRequest) -> ToolCallRequest:
    """``request`` as a :class:`_CheckedToolRequest` (the same fields)."""
    return _CheckedToolRequest(**_fields(request))


def _fields(request: Any) -> dict[str, Any]:
    # what dataclasses.replace passes on: the fields the constructor takes
    return {f.name: getattr(request, f.name) for f in dataclasses.fields(request) if f.init}


__all__ = ["checked_model_request", "checked_tool_request"]
