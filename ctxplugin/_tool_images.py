"""Images, files and audio in tool results, for a model whose API refuses them there.

OpenAI's Chat Completions API takes images, files and audio in user messages only ("Image URLs
are only allowed for messages with role 'user'"; a tool message holds text parts only), though
langchain-openai's request builder sends a tool message's image, file and audio blocks as they
are: one screenshot or PDF in the view would fail every later call of the thread. For such a
model each media block of a tool result is replaced, in the view only, by a line naming it and
the ref its output is stored under. The tool's output stays a tool result (moved into a user
message it would speak as the user); the state and the store keep the block.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.runnables import Runnable

from ctxplugin._block_text import is_media_block
from ctxplugin._messages import annotation
from ctxplugin._model_kind import before_model, bound_arguments, model_classes
from ctxplugin._names import EXPAND_REF_NAME

MEDIA_NOT_SHOWN = (
    "[{noun} {index} of this tool result not shown: this model cannot take {nouns} in tool results, "
    "so expand_ref cannot show it either{where}]"
)

# what a media block is called in the line that stands for it (singular, plural), by type
_NOUNS = {"audio": ("audio clip", "audio clips"), "input_audio": ("audio clip", "audio clips"), "video": ("video", "videos")}
_IMAGE, _FILE = ("image", "images"), ("file", "files")


def _noun(block: dict[str, Any]) -> tuple[str, str]:
    kind = str(block.get("type", ""))
    return _IMAGE if kind.startswith("image") or kind == "input_image" else _NOUNS.get(kind, _FILE)

# (module, class) of the chat models that call OpenAI's Chat Completions API unless told to
# use the Responses API; subclasses count (their MRO names one of these).
_CHAT_COMPLETIONS = frozenset(
    (("langchain_openai.chat_models.base", "ChatOpenAI"), ("langchain_openai.chat_models.azure", "AzureChatOpenAI"))
)


def takes_tool_images(model: object, tools: Sequence[Any] = (), settings: Mapping[str, Any] | None = None) -> bool:
    """Whether ``model`` can be sent images inside tool results.

    False only for a langchain-openai ``ChatOpenAI`` / ``AzureChatOpenAI`` that will call the
    Chat Completions API with these ``tools`` and call ``settings`` (extra call keywords, such
    as ``create_agent``'s ``model_settings``): the model decides that itself, from
    ``use_responses_api``, ``output_version="responses/v1"``, Responses-only parameters and
    built-in tools, and it is asked the same way. Every other model (or a wrapper that hides
    which model it is) is left as it is.
    """
    model, bound_kwargs = bound_arguments(model)
    if not any(kind in _CHAT_COMPLETIONS for kind in model_classes(model)):
        return True
    payload: dict[str, Any] = {**_default_params(model), **bound_kwargs, **(settings or {})}
    # as bind_tools sends them: a dict as given (a built-in tool keeps its own type), any other
    # tool (a BaseTool, a function) as a function tool
    given = [dict(t) if isinstance(t, Mapping) else {"type": "function"} for t in tools]
    payload["tools"] = [*payload.get("tools", []), *given]
    decide = getattr(model, "_use_responses_api", None)
    if callable(decide):
        return bool(decide(payload))
    return getattr(model, "use_responses_api", None) is True or getattr(model, "output_version", None) == "responses/v1"


def _default_params(model: object) -> dict[str, Any]:
    try:
        params = getattr(model, "_default_params", None)
    except (AttributeError, TypeError, ValueError):
        return {}
    return dict(params) if isinstance(params, Mapping) else {}


def without_tool_images(messages: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``messages`` with every media block of a tool result (an image, a file such as a PDF,
    audio, video) replaced by a text line naming it (and the ref its output is stored under,
    when there is one). Other messages, and tool results without media, are the very same
    objects."""
    reads = {
        str(call["id"]): str(call["args"].get("ref_id"))
        for message in messages if isinstance(message, AIMessage)
        for call in message.tool_calls
        if call["name"] == EXPAND_REF_NAME and isinstance(call.get("args"), dict) and call["args"].get("ref_id")
    }
    out: list[BaseMessage] = []
    for message in messages:
        if isinstance(message, ToolMessage) and isinstance(message.content, list) and any(map(is_media_block, message.content)):
            ref = annotation(message).get("ref") or reads.get(message.tool_call_id)
            where = f"; the tool's output is stored as {ref}" if isinstance(ref, str) and ref else ""
            content: list[str | dict[Any, Any]] = []
            counts: dict[str, int] = {}
            for block in message.content:
                if isinstance(block, dict) and is_media_block(block):
                    noun, nouns = _noun(block)
                    counts[noun] = counts.get(noun, 0) + 1
                    content.append({"type": "text", "text": MEDIA_NOT_SHOWN.format(noun=noun, index=counts[noun], nouns=nouns, where=where)})
                else:
                    content.append(block)
            message = message.model_copy(update={"content": content})
        out.append(message)
    return out


def guard_tool_images(bound: Runnable[Any, Any], model: object, tools: Sequence[Any] = ()) -> Runnable[Any, Any]:
    """``bound`` (``model`` with ``tools`` bound), taking a message list whose tool results'
    media blocks are replaced first when ``model`` cannot take them there; ``bound`` itself otherwise."""
    return bound if takes_tool_images(model, tools) else before_model(bound, without_tool_images, "ctxplugin_tool_images")


__all__ = ["MEDIA_NOT_SHOWN", "guard_tool_images", "takes_tool_images", "without_tool_images"]
