"""Names shared by the engine, its stages and the host adapters: the meta-tools ctxplugin adds
to an agent and the custom events it dispatches. A leaf module: it imports nothing of ours."""

from __future__ import annotations

EXPAND_REF_NAME = "expand_ref"
"""The meta-tool that reads a stored tool output back by its ref."""

LOAD_TOOLS_NAME = "load_tools"
"""The meta-tool that loads the schemas of tools listed in the tool directory."""

META_TOOL_NAMES = frozenset({EXPAND_REF_NAME, LOAD_TOOLS_NAME})
"""ctxplugin's own tools: their results are never stored, read for facts or cached on."""

META_TOOL_MARK = "ctxplugin_meta_tool"
"""The ``metadata`` key set on the meta-tools ctxplugin builds: it tells them apart from an
agent's own tool of the same name, which is refused (see :func:`ctxplugin.tools.check_meta_names`)."""


def is_meta_tool(tool: object) -> bool:
    """Whether ``tool`` is one of the meta-tools ctxplugin built (not just named like one)."""
    metadata = getattr(tool, "metadata", None)
    return isinstance(metadata, dict) and metadata.get(META_TOOL_MARK) is True

REPORT_EVENT = "ctxplugin.report"
CAPTURE_EVENT = "ctxplugin.capture"
EXPAND_EVENT = "ctxplugin.expand"
CACHE_LOOKUP_EVENT = "ctxplugin.cache_lookup"

__all__ = [
    "CACHE_LOOKUP_EVENT",
    "CAPTURE_EVENT",
    "EXPAND_EVENT",
    "EXPAND_REF_NAME",
    "LOAD_TOOLS_NAME",
    "META_TOOL_MARK",
    "META_TOOL_NAMES",
    "REPORT_EVENT",
    "is_meta_tool",
]
