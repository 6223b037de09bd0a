"""Where a view asks a provider's prompt cache to keep what it has read.

OpenAI and Gemini cache the longest prompt prefix they saw lately by themselves. Anthropic's
Claude (directly, on Bedrock or on Vertex) caches a prompt only up to the blocks a request marks
with ``cache_control``, at most four a request, and a request reads the cache only at one of its
own marks (or up to 20 blocks before one). A request marked only at its end, as a top-level
``cache_control`` marks it, reads nothing once an earlier message changed: each time the tiers
of a ctxplugin view move, the whole call, system prompt and tool list included, is paid again.

The parts of a view that change least are, in order: the header (system prompt and tool
directory, the same for the whole session), the task (the first user message, which the
history never condenses), and the context notes (condensed exchanges, which change only when
a block is condensed, and then mostly by a note added after the last one). A mark at the end of
the last note keeps what the notes hold when the tiers after them move, and a later note added
after it still finds it within the 20 blocks; a mark at the end of the header keeps the system
prompt and the tools when the notes change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable

from ctxplugin._layout import header_length, is_user_turn, synthetic_kind
from ctxplugin._model_kind import model_classes

MAX_MARKS = 4
"""Blocks one Anthropic request may mark with ``cache_control`` (a top-level one included)."""

EPHEMERAL: Mapping[str, str] = {"type": "ephemeral"}
"""Anthropic's cache control with its default lifetime (5 minutes, renewed by each read)."""


def stable_ends(view: Sequence[BaseMessage], *, header_first: bool = False) -> list[int]:
    """Positions in ``view`` (a prepared view: header first) of the messages whose end a prompt
    cache should keep, the most valuable first.

    1. The last context note shown as a lookup result; with none, the task (the user message
       right after the leading system messages): everything before it changes only when a block
       is condensed.
    2. The header's last message (the host's system messages and the tool directory after them
       are sent as one system prompt): the system prompt and the tool directory, which change
       only when the agent's tools do. ``header_first``: its first message instead, the host's
       system prompt (see :func:`place_marks`).
    3. With notes, the task: what it holds is kept when a note before the last is rewritten
       (the header alone is often shorter than the shortest prefix Anthropic caches).

    A position on the view's last message is left out: the request's own end marks it.
    """
    last = len(view) - 1
    ends: list[int] = []
    notes = [i for i, m in enumerate(view) if isinstance(m, ToolMessage) and synthetic_kind(m) == "notes"]
    first = next((i for i, m in enumerate(view) if not isinstance(m, SystemMessage)), None)
    task = first if first is not None and isinstance(view[first], HumanMessage) and is_user_turn(view[first]) else None
    if notes:
        ends.append(notes[-1])
    elif task is not None:
        ends.append(task)
    header = header_length(view)
    if header:
        ends.append(0 if header_first else header - 1)
    if notes and task is not None and task < notes[-1]:
        ends.append(task)
    return [i for i in ends if i < last]


def mark_count(message: BaseMessage) -> int:
    """How many content blocks of ``message`` carry ``cache_control``."""
    content = message.content
    return sum(isinstance(b, dict) and "cache_control" in b for b in content) if isinstance(content, list) else 0


def has_mark(message: BaseMessage) -> bool:
    """Whether a content block of ``message`` carries ``cache_control``."""
    return mark_count(message) > 0


def marked(message: BaseMessage, cache_control: Mapping[str, Any]) -> BaseMessage | None:
    """A copy of ``message`` whose last non-empty text block carries ``cache_control``.

    The text is unchanged: a string content becomes the one text block it stands for. None for
    a message without such a block (an assistant turn, whose blocks may be tool calls or
    thinking, is never marked), and for one already marked."""
    if not isinstance(message, (SystemMessage, HumanMessage, ToolMessage)) or has_mark(message):
        return None
    content = message.content
    if isinstance(content, str):
        if not content:
            return None
        return message.model_copy(update={"content": [{"type": "text", "text": content, "cache_control": dict(cache_control)}]})
    blocks: list[str | dict[str, Any]] = list(content)
    for index in range(len(blocks) - 1, -1, -1):
        block = blocks[index]
        if isinstance(block, str) and block:
            blocks[index] = {"type": "text", "text": block, "cache_control": dict(cache_control)}
            break
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str) and block["text"]:
            blocks[index] = {**block, "cache_control": dict(cache_control)}
            break
    else:
        return None
    return message.model_copy(update={"content": blocks})


def takes_cache_marks(model: object) -> bool:
    """Whether ``model`` is langchain-anthropic's ``ChatAnthropic`` (or a subclass of it, such as
    ``ChatAnthropicBedrock``), possibly bound: a Claude model that caches only where a request
    marks it."""
    return _CHAT_ANTHROPIC in model_classes(model)


_CHAT_ANTHROPIC = ("langchain_anthropic.chat_models", "ChatAnthropic")


def requested_control(model: object, settings: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The request-wide ``cache_control`` the host already asks for (call settings, bound
    keywords or the model's ``model_kwargs``)."""
    found = settings.get("cache_control")
    while found is None and isinstance(getattr(model, "bound", None), Runnable) and isinstance(getattr(model, "kwargs", None), dict):
        found = model.kwargs.get("cache_control")  # type: ignore[attr-defined]
        model = model.bound  # type: ignore[attr-defined]
    if found is None:
        kwargs = getattr(model, "model_kwargs", None)
        found = kwargs.get("cache_control") if isinstance(kwargs, Mapping) else None
    return found if isinstance(found, Mapping) else None


def _tool_marks(tools: Sequence[Any]) -> tuple[int, Mapping[str, Any] | None]:
    """How many of ``tools`` a host marked, and the last mark's ``cache_control``: sent before
    every message, it gives ctxplugin's marks their lifetime (none may outlive an earlier one)."""
    count, last = 0, None
    for tool in tools:
        extras = tool if isinstance(tool, Mapping) else getattr(tool, "extras", None)
        control = extras.get("cache_control") if isinstance(extras, Mapping) else None
        count += int(control is not None)
        last = control if isinstance(control, Mapping) else last
    return count, last


def place_marks(
    model: object, view: Sequence[BaseMessage], tools: Sequence[Any], settings: Mapping[str, Any], *, spare: bool = True
) -> tuple[list[BaseMessage], dict[str, Any]] | None:
    """``view`` with ``cache_control`` on its stable ends, and the call settings with a
    request-wide ``cache_control`` (which marks the request's last block), for a Claude model.

    None (nothing to change) for another model, and when a message after the system prompt
    already carries a mark: the host places its own. Marks a host put on the tools or the
    system prompt (``AnthropicPromptCachingMiddleware`` listed before ``ContextMiddleware``)
    count against the four a request may carry; when the host asked for nothing, one mark is
    left for a caching middleware listed after (it marks the last tool; the system prompt's
    end it marks is the header's, already marked here). ``spare=False`` leaves none: for a
    host whose request nothing marks after ctxplugin (ctxplugin binds and calls the model
    itself), which then also marks the task. Every mark takes the host's request-wide
    ``cache_control`` when there is one, so no mark lives shorter than a later one.

    With a mark left for a caching middleware after this one and a tool directory after the
    host's system prompt, the header's mark goes at the end of the host's system prompt rather
    than the directory's: that middleware marks the system prompt it is given
    (``request.system_message``, the host's), and a mark on the directory as well would make
    five.
    """
    if not takes_cache_marks(model) or any(has_mark(m) for m in view if not isinstance(m, SystemMessage)):
        return None
    requested = requested_control(model, settings)
    tool_marks, tool_control = _tool_marks(tools)
    used = tool_marks + sum(mark_count(m) for m in view)
    control = requested if requested is not None else tool_control or EPHEMERAL
    spared = 0 if requested is not None or used or not spare else 1
    room = MAX_MARKS - used - 1 - spared
    out = list(view)
    for index in stable_ends(view, header_first=bool(spared)):
        if room <= 0:
            break
        mark = marked(out[index], control)
        if mark is not None:
            out[index] = mark
            room -= 1
    return out, dict(settings) if requested is not None else {**settings, "cache_control": dict(control)}
