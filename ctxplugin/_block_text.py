"""What a provider's non-text content block costs, read as the parts a token count can use.

Providers put much more than text and images in a message's content: Anthropic's ``thinking``
and ``redacted_thinking``, ``tool_use`` blocks beside the message's tool calls, server tools
(``server_tool_use`` with its ``web_search_tool_result``, ``web_fetch_tool_result``, code
execution results), ``search_result`` and ``document`` blocks; OpenAI Responses items
(``reasoning`` with encrypted content, ``function_call``, ``web_search_call``,
``image_generation_call``...); LangChain's standard blocks (``tool_call``, ``server_tool_call``,
``non_standard``); Gemini's ``executable_code``. Such a block is counted by the words it holds,
not as an image:

- media (images, audio, video, files, a PDF ``document``, a generated image) cost a flat
  estimate (:data:`ctxplugin.tokens.IMAGE_TOKENS`) whatever their base64 weighs;
- a tool call block whose id is one of the message's tool calls is the call itself, already
  counted with the call (langchain-anthropic and langchain-openai send the call once);
- opaque strings (signatures, encrypted reasoning or redacted thinking, base64 data, encrypted
  citation indexes) are never counted as text: they are not read by the model as tokens of
  text, and a megabyte of them would otherwise count as a megabyte of text;
- every other string in the block (thinking, a search result's text and URL, a code
  execution's output, a server tool's input) is counted as text.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

MEDIA_TYPES = frozenset(
    (
        "image",
        "image_url",
        "input_image",
        "audio",
        "input_audio",
        "video",
        "file",
        "input_file",
        "media",
        "image_generation_call",
    )
)
"""Block types whose payload is media, counted at a flat estimate."""

CALL_TYPES = frozenset(("tool_use", "function_call", "tool_call", "custom_tool_call"))
"""Block types that repeat one of the message's tool calls (matched by id)."""

OPAQUE_KEYS = frozenset(
    ("signature", "encrypted_content", "encrypted_index", "thought_signature", "base64")
)
"""Keys whose value is never text the model reads."""

_OPAQUE = re.compile(r"[A-Za-z0-9+/=_-]{80,}")
"""A long run of base64 (or URL-safe base64) characters alone: a payload, not words."""


def is_media_block(block: Any) -> bool:
    """A block whose payload is media: an image, audio, video or file in any LangChain or provider
    shape, a ``document`` whose source is not text (a PDF), a generated image."""
    if not isinstance(block, dict):
        return False
    kind = block.get("type")
    if kind in MEDIA_TYPES:
        return True
    if kind == "document":
        source = block.get("source")
        return not (isinstance(source, dict) and source.get("type") in ("text", "content"))
    return False


def is_opaque(key: object, value: str) -> bool:
    """Whether ``value`` (under ``key``) is a payload, not text: a signature, encrypted content,
    or a long run of base64 characters."""
    return key in OPAQUE_KEYS or _OPAQUE.fullmatch(value) is not None


def readable_parts(block: Any, skip: frozenset[str] = frozenset()) -> Iterator[str]:
    """The strings of ``block`` a model reads as text, depth first; opaque ones left out, and
    so are the values of keys in ``skip`` at any depth."""
    stack: list[tuple[object, Any]] = [(None, block)]
    while stack:
        key, value = stack.pop()
        if isinstance(value, str):
            if value and not is_opaque(key, value):
                yield value
        elif isinstance(value, dict):
            stack.extend(
                reversed(
                    [(k, v) for k, v in value.items() if k not in OPAQUE_KEYS and k not in skip]
                )
            )
        elif isinstance(value, (list, tuple)):
            stack.extend(reversed([(key, v) for v in value]))


def other_blocks(
    content: str | Sequence[Any], call_ids: frozenset[str] = frozenset()
) -> tuple[str, int, int]:
    """The non-text blocks of a message content as a count sees them: the text they hold (one
    string), how many are media, and how many other blocks add their framing.

    Text blocks (strings, blocks with a ``text`` string) are left out: they are the content's
    text. A call block whose id is in ``call_ids`` adds nothing."""
    if isinstance(content, str):
        return "", 0, 0
    texts: list[str] = []
    media = framed = 0
    for block in content:
        if not isinstance(block, dict) or isinstance(block.get("text"), str):
            continue
        if is_media_block(block):
            media += 1
            continue
        if block.get("type") in CALL_TYPES and (
            block.get("id") in call_ids or block.get("call_id") in call_ids
        ):
            continue
        framed += 1
        texts.extend(readable_parts(block))
    return "\n".join(texts), media, framed


_FRAME_KEYS = frozenset(
    ("type", "id", "tool_use_id", "tool_call_id", "call_id", "status", "index", "caller")
)
"""Keys that frame a block (its kind, ids, state) rather than say what a tool found."""

_CALL_ITEMS = {
    "web_search_call": "action",
    "file_search_call": "queries",
    "code_interpreter_call": "code",
    "computer_call": "action",
    "mcp_call": "arguments",
}
"""OpenAI Responses items of built-in tools (call and result in one block): where the call's
input is; the rest of the item is what the tool gave back."""


def _found(value: Any) -> str:
    """The text a tool's result holds: its readable strings, without the block framing."""
    return "\n".join(readable_parts(value, _FRAME_KEYS))


def server_tools(content: str | Sequence[Any]) -> Iterator[tuple[str, str, Any]]:
    """The provider-side tools a message's content shows, in order: ``("call", name, input)``
    for each call and ``("result", name, text)`` for what each gave back (its readable text).

    Read from Anthropic's ``server_tool_use`` / ``mcp_tool_use`` and the ``*_tool_result`` block
    that answers it, LangChain's standard ``server_tool_call`` / ``server_tool_result``, OpenAI
    Responses built-in tool items (``web_search_call``, ``file_search_call``,
    ``code_interpreter_call``, ``computer_call``, ``mcp_call``) and Gemini's ``executable_code`` /
    ``code_execution_result``. These run at the provider: no tool message carries their output."""
    if isinstance(content, str):
        return
    names: dict[str, str] = {}
    for block in content:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind in ("server_tool_use", "mcp_tool_use", "server_tool_call"):
            name = str(block.get("name") or kind)
            names[str(block.get("id"))] = name
            yield "call", name, block.get("input", block.get("args"))
        elif kind == "server_tool_result" or (
            isinstance(kind, str) and kind.endswith("_tool_result") and kind != "tool_result"
        ):
            called = block.get("tool_use_id", block.get("tool_call_id"))
            name = names.get(str(called)) or str(kind).removesuffix("_tool_result")
            yield "result", name, _found(block.get("content", block.get("output")))
        elif kind in _CALL_ITEMS:
            name = str(block.get("name") or kind.removesuffix("_call"))
            key = _CALL_ITEMS[kind]
            asked, found = block.get(key), {k: v for k, v in block.items() if k not in (key, "name", "server_label")}
            if isinstance(asked, dict) and "sources" in asked:
                # a web search's action holds the pages it found beside its query: they are found
                asked, found = {k: v for k, v in asked.items() if k != "sources"}, {**found, "sources": asked["sources"]}
            yield "call", name, asked
            yield "result", name, _found(found)
        elif kind == "executable_code":
            yield "call", "code_execution", {"code": block.get("executable_code")}
        elif kind == "code_execution_result":
            yield "result", "code_execution", _found(block.get("code_execution_result"))


__all__ = [
    "CALL_TYPES",
    "MEDIA_TYPES",
    "OPAQUE_KEYS",
    "is_media_block",
    "is_opaque",
    "other_blocks",
    "readable_parts",
    "server_tools",
]
