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

from ctxplugin._names import RESERVED_TOOL_NAMES, is_meta_tool
from ctxplugin.errors import InvalidInputError
from ctxplugin.tools import check_meta_names, tool_name


class _CheckedModelRequest(ModelRequest[Any]):
    """A model request whose ``override(tools=...)`` refuses a tool named like a meta-tool
    that ctxplugin did not build; the requests made from it are checked the same way."""

    def override(self, **overrides: Any) -> ModelRequest[Any]:
        if "tools" in overrides:
            check_meta_names(overrides["tools"])
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
