"""Chat recordings that hold one entry per model call: OpenAI Chat Completions request bodies
(``{"model", "messages", "tools", ...}``), as a logging proxy writes them, optionally each
followed by the ``chat.completion`` that answered it; Responses API requests and responses
(:mod:`ctxplugin.replay._responses`); LangGraph thread states and checkpoints, one or a
thread's whole history.

Every request resends the conversation so far, so a body whose messages continue an earlier
body's is a later call of the same conversation, which is read from the longest body. Reading
each body as a conversation of its own would replay the first calls once per later request.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ctxplugin.errors import InvalidInputError
from ctxplugin.replay import _responses
from ctxplugin.replay._conversation import RecordedUsage
from ctxplugin.replay._log_index import PrefixIndex
from ctxplugin.replay._messages import is_openai_message, parse_arguments


@dataclass
class Logged:
    """One conversation of a log: the messages of its longest request (plus the reply that
    answered it, when logged), that request's tools, and the provider's figures per response."""

    id: str | None
    messages: list[Any]
    tools: tuple[dict[str, Any], ...] = ()
    usage: list[RecordedUsage] = field(default_factory=list)
    keys: list[str] = field(default_factory=list)


def is_completion(value: Any) -> bool:
    """Whether ``value`` is a Chat Completions response (``{"object": "chat.completion"}``)."""
    return isinstance(value, dict) and value.get("object") == "chat.completion" and isinstance(value.get("choices"), list)


def group(items: Sequence[Any]) -> list[Logged]:
    """Request bodies (dicts with ``messages``), bare message lists and responses, in log order,
    as conversations: a body or list that continues an earlier one replaces it, and a response
    adds its reply to the conversation of the request before it.

    Raises:
        InvalidInputError: an item that is none of these, or a response with no request before it.
    """
    groups: list[Logged] = []
    unnamed: list[Logged] = []  # the conversations a request may continue, numbered as in `index_`
    index_ = PrefixIndex()
    current: Logged | None = None
    number: int | None = None  # current's number in `unnamed`, when it is one
    repeated = False  # the item before was a call already read, repeated (a retry): so is its response
    for index, item in enumerate(items):
        if repeated:
            repeated = False
            continue
        if is_completion(item) or _responses.is_response(item):
            if current is None:
                raise InvalidInputError(f"item {index} is a response with no request before it")
            _answer(current, item, index)
            if number is not None:
                index_.put(number, current.keys)
            continue
        state = state_messages(item)
        if isinstance(item, list):
            body: dict[str, Any] = {"messages": item}
        elif state is not None:
            body = {"messages": state}
        elif isinstance(item, dict) and isinstance(item.get("messages"), list):
            body = item
        elif _responses.is_request(item):
            body = _responses.body(item, index)
            if "previous_response_id" in body and current is not None:  # only the new items were sent
                new = body["messages"]
                if new and current.messages and message_key(new[0]) == message_key(current.messages[0]):
                    new = new[1:]  # the instructions, which every request repeats
                body["messages"] = [*current.messages, *new]
            body["messages"] = _responses.name_results(body["messages"])
        else:
            raise InvalidInputError(f"item {index} is {_describe(item)}, not a message, a conversation or a request")
        ident = str(body["id"]) if body.get("id") is not None else None
        answered = index + 1 < len(items) and (is_completion(items[index + 1]) or _responses.is_response(items[index + 1]))
        # a call's prompt may change from call to call; rows of a data set (no model, no reply)
        # that differ only in their prompts are conversations of their own
        called = answered or (isinstance(item, dict) and ("model" in item or _responses.is_request(item)))
        keys = prompt_free_keys(body["messages"]) if called else [message_key(m) for m in body["messages"]]
        if ident is None and not answered and index_.begins_one(keys):
            continue  # an earlier state of a conversation already read (a thread's history is newest first)
        if ident is None and answered and index_.begins_one([*keys, *(message_key(m) for m in _replies(items[index + 1], index + 1))]):
            repeated = True  # this call and its reply were read already
            continue
        # an answered request that only begins like an earlier conversation is a call of another
        # run (of the same task): its reply is not the earlier conversation's.
        # A conversation that names itself ({"id", "messages"}, which a request body never
        # carries) is no request: it is never merged.
        number = index_.continued(keys) if ident is None else None
        if number is not None:
            current = unnamed[number]
        else:
            current = Logged(id=ident, messages=[], keys=[])
            groups.append(current)
            if ident is None:
                number = len(unnamed)
                unnamed.append(current)
        current.messages, current.keys = list(body["messages"]), keys
        if number is not None:
            index_.put(number, keys)
        current.tools = request_tools(body.get("tools"), body.get("functions"))
    return groups


def state_messages(value: Any) -> list[Any] | None:
    """The messages of a LangGraph thread state or checkpoint: ``values.messages`` (the server
    API's thread state, each item of a thread's history), ``channel_values.messages`` (a
    checkpoint), or ``checkpoint.channel_values.messages`` (a checkpoint tuple)."""
    for path in (("values",), ("channel_values",), ("checkpoint", "channel_values")):
        node: Any = value
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get("messages"), list):
            messages: list[Any] = node["messages"]
            return messages
    return None


def _replies(response: dict[str, Any], index: int) -> list[Any]:
    if _responses.is_response(response):
        return _responses.output(response, index)
    choices = response["choices"]
    first = choices[0] if choices and isinstance(choices[0], dict) else {}
    if not is_openai_message(first.get("message")):
        raise InvalidInputError(f"item {index} is a chat.completion response without a message in choices[0]")
    return [first["message"]]


def _answer(current: Logged, response: dict[str, Any], index: int) -> None:
    replies = _replies(response, index)
    current.messages = [*current.messages, *replies]
    current.keys = [*current.keys, *(message_key(m) for m in replies)]
    figures = openai_usage(response.get("usage"))
    if figures is not None:
        current.usage.append(figures)


def openai_usage(value: Any) -> RecordedUsage | None:
    """An OpenAI-style ``usage`` as the provider's own figures: ``prompt_tokens``, of which cache
    hits are ``prompt_tokens_details.cached_tokens`` (DeepSeek: ``prompt_cache_hit_tokens``;
    the Responses API: ``input_tokens`` and ``input_tokens_details.cached_tokens``)."""
    if not isinstance(value, dict):
        return None
    responses = "prompt_tokens" not in value  # the Responses API's names
    prompt = value.get("input_tokens" if responses else "prompt_tokens")
    if not isinstance(prompt, int):
        return None
    details = value.get("input_tokens_details" if responses else "prompt_tokens_details")
    cached = value.get("prompt_cache_hit_tokens", details.get("cached_tokens", 0) if isinstance(details, dict) else 0)
    return RecordedUsage(prompt, int(cached or 0))


_PROMPT_KEY = json.dumps(["system"])


def prompt_free_keys(messages: Sequence[Any]) -> list[str]:
    """The keys of a request's messages, each system (or developer) message before the first
    other message keyed by its role alone: a host that puts the date or the time in its system prompt sends a
    new prompt on every call, and those calls are still one conversation (read with the prompt
    of its latest call)."""
    keys = [message_key(m) for m in messages]
    for position, message in enumerate(messages):
        if not (isinstance(message, dict) and (message.get("role") or message.get("type")) in ("system", "developer")):
            break
        keys[position] = _PROMPT_KEY
    return keys


def message_key(message: Any) -> str:
    """What must be equal for two logged messages to be the same message: an OpenAI message by
    role, text, name, tool calls (arguments parsed, so their spacing does not matter), the older
    ``function_call`` and the call it answers; fields a client adds or drops when it echoes a reply back (``refusal:
    null``, ``annotations``) do not count."""
    if is_openai_message(message):
        calls = []
        for call in message.get("tool_calls") or []:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict):
                calls.append([call.get("id"), function.get("name"), parse_arguments(function.get("arguments"))])
            else:
                calls.append([call])
        content = message.get("content") or ""
        fields = [message["role"], content, message.get("name"), calls, message.get("tool_call_id"), message.get("function_call")]
        return json.dumps(fields, sort_keys=True, default=str)
    if isinstance(message, dict):
        return json.dumps({k: v for k, v in message.items() if v is not None}, sort_keys=True, default=str)
    return json.dumps(message, sort_keys=True, default=str)


def request_tools(tools: Any, functions: Any = None) -> tuple[dict[str, Any], ...]:
    """A request's ``tools`` (or the older ``functions``) as OpenAI-format schemas; tools of other
    types, which the provider defines, are left out.

    Raises:
        InvalidInputError: a function tool without a name.
    """
    out: list[dict[str, Any]] = []
    if isinstance(tools, list):
        for index, item in enumerate(tools):
            if not isinstance(item, dict) or item.get("type") != "function":
                continue
            function = item.get("function")
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
                raise InvalidInputError(f"tool {index} of a request is a function without a name")
            out.append({"type": "function", "function": function})
    elif isinstance(functions, list):
        for index, function in enumerate(functions):
            if not isinstance(function, dict) or not isinstance(function.get("name"), str) or not function["name"]:
                raise InvalidInputError(f"function {index} of a request has no name")
            out.append({"type": "function", "function": function})
    return tuple(out)


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:6]}"
    return f"a {type(value).__name__}"


__all__ = ["Logged", "group", "is_completion", "message_key", "openai_usage", "request_tools", "state_messages"]
