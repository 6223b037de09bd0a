"""Claude with extended thinking, and a view that ends with a lookup's result.

With thinking on, Anthropic takes a request that ends with a tool result only when the
assistant turn that made the call starts with its signed thinking block. ctxplugin's lookups
(the facts block and context notes, see :mod:`ctxplugin._layout`) have none, and a view ends
with one in a single case: a conversation with no assistant turn to put it before, such as a
thread's first call whose facts block holds lines read from tool outputs. Nor has the stand-in
call ``orphan_tool_results="pair"`` puts before a result whose call is gone, or that came after
the user wrote again: a conversation that ends with such a result ends with that call. For such
a model those trailing lookups and stand-in calls (with their results) are left out of that
request; the next call has a place for them, before the assistant's answer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable

from ctxplugin._layout import is_synthetic
from ctxplugin._messages import STAND_IN, annotation
from ctxplugin._model_kind import before_model, bound_arguments, model_classes

# (module, class) of the chat models that call Anthropic's Messages API or Bedrock's Converse
# API; subclasses count (their MRO names one of these).
_ANTHROPIC = frozenset((("langchain_anthropic.chat_models", "ChatAnthropic"),))
_CONVERSE = frozenset((("langchain_aws.chat_models.bedrock_converse", "ChatBedrockConverse"),))


def _enabled(value: object) -> bool:
    return isinstance(value, Mapping) and value.get("type") in ("enabled", "adaptive")


def thinks(model: object, settings: Mapping[str, Any] | None = None) -> bool:
    """Whether ``model`` (with the arguments bound to it and the call ``settings``) is Claude
    with extended thinking on: ``thinking={"type": "enabled", ...}`` on a ``ChatAnthropic``, or
    in a ``ChatBedrockConverse``'s ``additional_model_request_fields``. Any other model, or a
    wrapper that hides which model it is, does not."""
    model, bound = bound_arguments(model)
    given = {**bound, **(settings or {})}
    kinds = set(model_classes(model))
    if kinds & _ANTHROPIC:
        return _enabled(given["thinking"] if "thinking" in given else getattr(model, "thinking", None))
    if kinds & _CONVERSE:
        fields = given.get("additional_model_request_fields", getattr(model, "additional_model_request_fields", None))
        return isinstance(fields, Mapping) and _enabled(fields.get("thinking"))
    return False


def without_trailing_lookups(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` without the lookups, and the stand-in calls with their results, that end
    them (the same list when none do)."""
    end = len(messages)
    while end:
        if is_synthetic(messages[end - 1]):
            end -= 1
            continue
        start = end
        while start and isinstance(messages[start - 1], ToolMessage):
            start -= 1
        if start == end or not start or not _stand_in(messages[start - 1], messages[start:end]):
            break
        end = start - 1
    return list(messages[:end]) if end < len(messages) and end else list(messages)


def _stand_in(message: BaseMessage, results: Sequence[BaseMessage]) -> bool:
    """Whether ``message`` is a stand-in call that ``results`` (tool results) answer."""
    if not isinstance(message, AIMessage) or annotation(message).get("repaired") != STAND_IN:
        return False
    called = {call["id"] for call in message.tool_calls}
    return all(isinstance(r, ToolMessage) and r.tool_call_id in called for r in results)


def guard_thinking(bound: Runnable[Any, Any], model: object) -> Runnable[Any, Any]:
    """``bound`` (``model`` with its tools bound), taking a message list whose trailing lookups
    are left out first when ``model`` is Claude with extended thinking on; ``bound`` itself
    otherwise."""
    return before_model(bound, without_trailing_lookups, "ctxplugin_thinking") if thinks(model) else bound


__all__ = ["guard_thinking", "thinks", "without_trailing_lookups"]
