"""The tool directory: one line per tool, in the stable header.

The text depends only on the set of tools (sorted by name), never on the conversation, so the
header stays byte-identical across the calls of a session and keeps the provider's prompt
cache warm. Large tool sets get shorter intents, then names only, to stay within
``ToolsConfig.directory_max_tokens``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ctxplugin._names import LOAD_TOOLS_NAME
from ctxplugin._untrusted import json_text, name_form, one_line
from ctxplugin.tokens import TokenCounter
from ctxplugin.tools.registry import ToolEntry

DIRECTORY_TITLE = (
    "Tool directory. Only some tools are bound with their parameters. To use any other tool, "
    f"call {LOAD_TOOLS_NAME} with the exact names you need; their full schemas are bound from "
    "your next step on. A listed tool may also be called directly: a call with wrong arguments "
    "does not run and returns the tool's schema."
)

STUBS_TITLE = (
    "Tool directory. Every tool below is bound, but without its parameters. Before you call one "
    f"for the first time, call {LOAD_TOOLS_NAME} with its exact name to read its parameters. "
    "A call with wrong arguments does not run and returns the tool's schema."
)
"""The directory's title when the tools are bound as stubs (``tools.binding``)."""

_SHORT_INTENT_CHARS = 40
_SURROGATES = re.compile("[\ud800-\udfff]")


def _shown(name: str) -> str:
    """``name`` as the directory lists it: itself in the form of a tool's name (undecodable
    bytes, lone surrogates, left as given), else quoted as a JSON string on one line. A remote
    MCP server names the tools it serves, and a name holding a line break would write a line of
    its own in this system message."""
    return name if name_form(_SURROGATES.sub("x", name)) else one_line(json_text(name))


def _lines(entries: Sequence[ToolEntry], intent_chars: int) -> list[str]:
    lines = []
    for entry in entries:
        intent = entry.intent(intent_chars)
        name = _shown(entry.name)
        lines.append(f"- {name}: {intent}" if intent else f"- {name}")
    return lines


def render_directory(
    entries: Sequence[ToolEntry],
    *,
    intent_chars: int,
    max_tokens: int,
    counter: TokenCounter,
    title: str = DIRECTORY_TITLE,
) -> str:
    """The directory text for ``entries`` (sorted by name, duplicates by name ignored).

    Tries, in order: intents of up to ``intent_chars`` characters, intents of up to 40, and a
    comma-separated list of names; returns the first that fits ``max_tokens`` (names only
    when none does). ``title`` leads it (``STUBS_TITLE`` when the tools are bound as stubs).
    """
    unique = sorted({e.name: e for e in entries}.values(), key=lambda e: e.name)
    if not unique:
        return ""
    tiers = [intent_chars] if intent_chars <= _SHORT_INTENT_CHARS else [intent_chars, _SHORT_INTENT_CHARS]
    for chars in tiers:
        if chars <= 0:
            break
        text = "\n".join([title, *_lines(unique, chars)])
        if counter.count(text) <= max_tokens:
            return text
    return f"{title}\nTools: " + ", ".join(_shown(e.name) for e in unique)
