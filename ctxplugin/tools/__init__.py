"""Names-only tool directory with lazy schema loading.

Above a configurable number of tools (or schema tokens) the model no longer receives every
tool schema on every call. The stable system header lists each tool's name and one-line
intent; the model calls ``load_tools`` with the names it needs, and from the next call on
those tools are bound with their real schemas. A direct call to a tool that is not loaded
runs when its arguments are valid, and otherwise gets the schema back to retry.

- :class:`ToolRegistry`: schema, hash, token count and version of every tool seen.
- :func:`plan_tools`: what to bind for one call (the engine's tool stage).
- :func:`resolve_call`: whether a tool call may run (hosts call it before running a tool).
- :func:`make_load_tools_tool`: the ``load_tools`` meta-tool.
- :class:`ToolSet`: the tools one agent's call was planned with (``registry.offered``, per
  scope): what that agent's ``load_tools`` and argument checks answer from.
"""

from __future__ import annotations

from ctxplugin._names import LOAD_TOOLS_NAME
from ctxplugin.tools.directory import (
    DIRECTORY_TITLE,
    STUBS_TITLE,
    render_directory,
)
from ctxplugin.tools.models import takes_stubs
from ctxplugin.tools.offered import OfferedTools, ToolSet
from ctxplugin.tools.plan import ToolPlan, ToolUses, plan_tools, requested_names, used_tools
from ctxplugin.tools.registry import (
    ToolEntry,
    ToolRegistry,
    check_meta_names,
    one_line_intent,
    schema_hash,
    tool_list,
    tool_name,
)
from ctxplugin.tools.resolve import (
    Resolution,
    close_matches,
    make_load_tools_tool,
    resolve_call,
    signature,
)

__all__ = [
    "DIRECTORY_TITLE",
    "LOAD_TOOLS_NAME",
    "STUBS_TITLE",
    "OfferedTools",
    "Resolution",
    "ToolEntry",
    "ToolPlan",
    "ToolRegistry",
    "ToolSet",
    "ToolUses",
    "check_meta_names",
    "close_matches",
    "make_load_tools_tool",
    "one_line_intent",
    "plan_tools",
    "render_directory",
    "requested_names",
    "resolve_call",
    "schema_hash",
    "signature",
    "takes_stubs",
    "tool_list",
    "tool_name",
    "used_tools",
]
