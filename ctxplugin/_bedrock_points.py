"""Cache points for Claude on Bedrock's Converse API (langchain-aws's ``ChatBedrockConverse``).

Bedrock caches a Claude prompt only up to the ``cachePoint`` blocks a request carries, at most
four, and reads the cache at one of them (or up to about 20 blocks before one), as Anthropic
does with ``cache_control``. langchain-aws sends a content block that has no ``type`` as it is,
so ``{"cachePoint": {"type": "default"}}`` after a message's last block asks for one there (a
tool result's is moved after its ``toolResult``); given a request-wide ``cache_control`` it adds
cache points itself, at the end of the system prompt, of the last message and of the tools, never
past four in all, counting the ones already in the request.

So ctxplugin puts cache points after the last context note and the task, and asks for a
request-wide ``cache_control``: langchain-aws then marks the header's end and the request's end.
A model that does not cache on Bedrock (Claude 3 and Claude 3.5 Sonnet) is never marked:
Bedrock refuses a cache point for it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._cache_points import EPHEMERAL, MAX_MARKS, has_mark, requested_control, stable_ends
from ctxplugin._model_kind import model_classes, unbound

_CONVERSE = ("langchain_aws.chat_models.bedrock_converse", "ChatBedrockConverse")

# Claude models Bedrock caches prompts for: 3.7 Sonnet, 3.5 Haiku, and Sonnet, Opus and Haiku
# from 4 on (3.5 Sonnet v2 only for accounts admitted to the preview)
_CACHING_CLAUDE = re.compile(r"anthropic\.claude-(3-7-sonnet|3-5-haiku|(sonnet|opus|haiku)-[4-9])")


def takes_cache_points(model: object) -> bool:
    """Whether ``model`` is a ``ChatBedrockConverse`` (possibly bound) calling a Claude model
    that Bedrock caches prompts for."""
    model = unbound(model)
    if _CONVERSE not in model_classes(model):
        return False
    base = getattr(model, "_get_base_model", None)
    model_id = base() if callable(base) else getattr(model, "model_id", "")
    return isinstance(model_id, str) and _CACHING_CLAUDE.search(model_id.lower()) is not None


def is_cache_point(block: object) -> bool:
    """Whether ``block`` is a Converse ``cachePoint`` block."""
    return isinstance(block, Mapping) and isinstance(block.get("cachePoint"), Mapping)


def point_count(message: BaseMessage) -> int:
    """How many ``cachePoint`` blocks ``message`` carries."""
    content = message.content
    return sum(map(is_cache_point, content)) if isinstance(content, list) else 0


def _merged(view: Sequence[BaseMessage], index: int) -> bool:
    """Whether langchain-aws joins ``view[index]`` with a neighbour (consecutive user or system
    messages become one, their texts joined by a newline): a cache point between them would
    change that text."""
    kind = type(view[index])
    return any(0 <= j < len(view) and type(view[j]) is kind for j in (index - 1, index + 1)) and kind in (HumanMessage, SystemMessage)


def _pointed(message: BaseMessage, point: Mapping[str, Any]) -> BaseMessage | None:
    """A copy of ``message`` with a cache point after its content; None for an assistant turn
    and for a message without text to keep."""
    if isinstance(message, AIMessage) or not isinstance(message, (HumanMessage, ToolMessage)):
        return None
    content = message.content
    if isinstance(content, str):
        if not content.strip():
            return None
        blocks: list[str | dict[str, Any]] = [{"type": "text", "text": content}]
    else:
        blocks = list(content)
        if not blocks:
            return None
    return message.model_copy(update={"content": [*blocks, {"cachePoint": dict(point)}]})


def _system_points(model: object) -> int:
    system = getattr(unbound(model), "system", None)
    return sum(map(is_cache_point, system)) if isinstance(system, list) else 0


def place_points(
    model: object, view: Sequence[BaseMessage], tools: Sequence[Any], settings: Mapping[str, Any]
) -> tuple[list[BaseMessage], dict[str, Any]] | None:
    """``view`` with cache points after its last note and its task, and the call settings with
    a request-wide ``cache_control``, for a Claude model on Bedrock Converse.

    None for another model, and when a message after the system prompt already carries a cache
    point or a ``cache_control``: the host places its own. Two of the four are left for the
    header's and the request's end, which langchain-aws places from the ``cache_control``
    (``BedrockPromptCachingMiddleware``, before or after ``ContextMiddleware``, asks for the same);
    cache points already in the tools or the system prompt count against the four.
    """
    if not takes_cache_points(model) or any(point_count(m) or has_mark(m) for m in view if not isinstance(m, SystemMessage)):
        return None
    requested = requested_control(model, settings)
    control = requested if requested is not None else EPHEMERAL
    point: dict[str, Any] = {"type": "default"}
    ttl = control.get("ttl")
    if isinstance(ttl, str) and ttl != "5m":
        point["ttl"] = ttl
    used = sum(map(is_cache_point, tools)) + _system_points(model) + sum(point_count(m) for m in view)
    room = MAX_MARKS - used - 2
    out = list(view)
    for index in stable_ends(view):
        if room <= 0:
            break
        if isinstance(view[index], SystemMessage) or _merged(view, index):  # the header: langchain-aws marks it
            continue
        changed = _pointed(out[index], point)
        if changed is not None:
            out[index] = changed
            room -= 1
    return out, dict(settings) if requested is not None else {**settings, "cache_control": dict(control)}


__all__ = ["is_cache_point", "place_points", "point_count", "takes_cache_points"]
