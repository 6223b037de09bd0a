"""Names shared by the engine, its stages and the host adapters: the meta-tools ctxplugin adds
to an agent, the custom events it dispatches, and the tool-call id a call or result is given when it may not keep its own.
A leaf module: it imports nothing of ours."""

from __future__ import annotations

import hashlib
from collections.abc import Callable

EXPAND_REF_NAME = "expand_ref"
"""The meta-tool that reads a stored tool output back by its ref."""
UNREAD_LEAD = f"{EXPAND_REF_NAME}: "
"""How its answer begins when it read nothing (an unknown or malformed ref, a store failure)."""
READ_KEY = "ctxplugin_read"
"""The key of its tool message's artifact that says whether it read the ref (``True``/``False``)."""


def read_nothing(content: object, artifact: object) -> bool:
    """Whether an ``expand_ref`` answer (its tool message's ``content`` and ``artifact``) read
    nothing: as the artifact says, which the tool sets (an output read may begin as an answer
    that read nothing does); else, a host that kept no artifact, whether it begins so."""
    said = artifact.get(READ_KEY) if isinstance(artifact, dict) else None
    if isinstance(said, bool):
        return not said
    return isinstance(content, str) and content.startswith(UNREAD_LEAD)


LOAD_TOOLS_NAME = "load_tools"
"""The meta-tool that loads the schemas of tools listed in the tool directory."""

META_TOOL_NAMES = frozenset({EXPAND_REF_NAME, LOAD_TOOLS_NAME})
"""ctxplugin's own tools: their results are never stored, read for facts or cached on."""

FACTS_LOOKUP_NAME = "known_facts"
"""The lookup whose result shows the facts block in a view (a tool the model is never given)."""

NOTES_LOOKUP_NAME = "context_notes"
"""The lookup whose result shows a context note in a view (a tool the model is never given)."""

RESERVED_TOOL_NAMES = {
    EXPAND_REF_NAME: "meta-tool that reads stored tool outputs back by their ref",
    LOAD_TOOLS_NAME: "meta-tool that loads tool schemas from the tool directory",
    FACTS_LOOKUP_NAME: "lookup that shows the facts block in the view (never bound)",
    NOTES_LOOKUP_NAME: "lookup that shows context notes in the view (never bound)",
}
"""Names an agent's own tool may not take, each with what ctxplugin uses it for (see
:func:`ctxplugin.tools.check_meta_names`)."""

META_TOOL_MARK = "ctxplugin_meta_tool"
"""The ``metadata`` key set on the meta-tools ctxplugin builds: it tells them apart from an
agent's own tool of the same name, which is refused (see :func:`ctxplugin.tools.check_meta_names`)."""


def is_meta_tool(tool: object) -> bool:
    """Whether ``tool`` is one of the meta-tools ctxplugin built (not just named like one)."""
    metadata = getattr(tool, "metadata", None)
    return isinstance(metadata, dict) and metadata.get(META_TOOL_MARK) is True

CALL_ID_CHARS = 40
"""The longest tool-call id every provider takes (OpenAI's limit)."""


def own_call_id(call_id: str, suffix: str, taken: Callable[[str], bool]) -> str:
    """An id of its own for a call or result that may not keep ``call_id`` (providers refuse two
    calls with one id): ``<call_id>_<suffix>``, or ``<suffix>_<digest of call_id>`` when that is
    longer than :data:`CALL_ID_CHARS`; never one ``taken`` says is in use."""
    base = f"{call_id}_{suffix}"
    if len(base) > CALL_ID_CHARS - 4:  # room for a suffix ("_12") should the id be taken
        base = f"{suffix}_{hashlib.sha1(call_id.encode('utf-8', 'surrogatepass')).hexdigest()}"[: CALL_ID_CHARS - 4]
    candidate, n = base, 0
    while taken(candidate):
        n += 1
        candidate = f"{base}_{n}"
    return candidate


REPORT_EVENT = "ctxplugin.report"
CAPTURE_EVENT = "ctxplugin.capture"
EXPAND_EVENT = "ctxplugin.expand"
CACHE_LOOKUP_EVENT = "ctxplugin.cache_lookup"

__all__ = [
    "CACHE_LOOKUP_EVENT",
    "CALL_ID_CHARS",
    "CAPTURE_EVENT",
    "EXPAND_EVENT",
    "EXPAND_REF_NAME",
    "FACTS_LOOKUP_NAME",
    "LOAD_TOOLS_NAME",
    "META_TOOL_MARK",
    "META_TOOL_NAMES",
    "NOTES_LOOKUP_NAME",
    "READ_KEY",
    "REPORT_EVENT",
    "RESERVED_TOOL_NAMES",
    "UNREAD_LEAD",
    "is_meta_tool",
    "own_call_id",
    "read_nothing",
]
