"""Whether ``create_agent`` will bind a call's tools strictly.

A strict binding closes every tool schema (``additionalProperties: false``, every property
required): a stub, whose arguments are left open, could then only be called with ``{}`` — and
the OpenAI SDK refuses a structured-output request whose tools are not all strict. The
middleware asks for the tools' own schemas on such calls (``prepare(..., strict_tools=True)``).

``create_agent`` binds strictly when the call's ``model_settings`` say ``strict=True``, and for
an OpenAI-compatible model (``ChatOpenAI``, ``AzureChatOpenAI``, ``ChatDeepSeek``, ``ChatXAI``:
subclasses of ``BaseChatOpenAI``) on the Chat Completions API whenever its structured output is
the provider's (``ProviderStrategy``, or a bare schema that it resolves to one).
"""

from __future__ import annotations

import importlib
from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain.agents.structured_output import ProviderStrategy, ToolStrategy

from ctxplugin.tools import takes_stubs


def needs_own_schemas(request: ModelRequest) -> bool:
    """Whether every tool of ``request`` must be bound with its own schema rather than as a
    stub: the call binds them strictly (:func:`binds_strictly`), or its model cannot be sent an
    open object (Gemini, see :func:`~ctxplugin.tools.takes_stubs`). The same on every call of
    an agent."""
    return binds_strictly(request) or not takes_stubs(request.model)


def binds_strictly(request: ModelRequest) -> bool:
    """Whether the tools of ``request`` will be bound with ``strict=True``. The answer depends
    only on the agent's model, response format and settings, so it is the same on every call
    of an agent: its tool list stays byte-stable."""
    if request.model_settings.get("strict") is True:
        return True
    response_format = request.response_format
    if response_format is None or isinstance(response_format, ToolStrategy):
        return False
    if not _openai_chat_completions(request.model):
        return False
    return isinstance(response_format, ProviderStrategy) or _provider_strategy(request)


def _openai_chat_completions(model: Any) -> bool:
    """An OpenAI-compatible chat model not set to the Responses API (which takes non-strict
    tools beside a response format, so ``create_agent`` leaves them so)."""
    try:
        base = importlib.import_module("langchain_openai.chat_models.base").BaseChatOpenAI
    except (ImportError, AttributeError):
        return False
    return isinstance(model, base) and not getattr(model, "use_responses_api", False)


def _provider_strategy(request: ModelRequest) -> bool:
    """Whether ``create_agent`` resolves the request's bare schema (or ``AutoStrategy``) to the
    provider's structured output for this model: its own rule when it has one under the name
    it has had since langchain 1.0; otherwise yes, since assuming a strict binding costs
    tokens where assuming the opposite would break every tool call."""
    factory = importlib.import_module("langchain.agents.factory")
    supports = getattr(factory, "_supports_provider_strategy", None)
    if supports is None:
        return True
    try:
        return bool(supports(request.model, tools=request.tools))
    except TypeError:  # a changed signature
        return True
