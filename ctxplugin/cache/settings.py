"""The call settings a cached answer depends on, besides the model's name.

The same question to the same model name gets another answer at another temperature, with a
lower ``max_tokens``, a forced ``tool_choice`` or a ``response_format``. So the answer cache keys
a call by the model's own parameters (``_identifying_params``: temperature, top_p, max_tokens...)
and the settings bound to it (``model.bind(temperature=0)``, or a ``create_agent`` request's
``model_settings`` and ``tool_choice``, which the middleware binds for the key). Settings that
only change how the answer travels (streaming, timeouts, retries, prompt-cache marks) are left out.

The endpoint serving the model is part of the key too: one model name behind two endpoints (OpenAI
and a local vLLM speaking its API, two Ollama hosts, two Bedrock regions) is two models. Only
where the endpoint is counts: credentials and a query string in its URL, API keys and headers
are left out.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from langchain_core.runnables import RunnableBinding

_TRANSPORT = frozenset({
    "stream", "streaming", "stream_usage", "disable_streaming", "timeout", "request_timeout",
    "default_request_timeout", "max_retries", "callbacks", "verbose", "tags", "metadata", "cache",
    "cache_control", "prompt_cache_key", "user", "ls_structured_output_format",
    "extra_headers", "default_headers", "default_query", "extra_query",
})
"""Settings that do not change the answer (how it travels, how it is traced or billed): request
headers are among them, so a per-request trace id keeps the key and a rotated API key in an
``Authorization`` header is no part of it."""

_ENDPOINTS = (
    "openai_api_base",  # ChatOpenAI, AzureChatOpenAI (base_url=)
    "azure_endpoint",  # AzureChatOpenAI
    "anthropic_api_url",  # ChatAnthropic (base_url=)
    "base_url",  # ChatOllama; ChatGoogleGenerativeAI (a str, or client_options' api_endpoint)
    "endpoint",  # ChatMistralAI (base_url=)
    "endpoint_url",  # ChatBedrock, ChatBedrockConverse
    "region_name",  # ChatBedrock, ChatBedrockConverse: the region's endpoint when none is given
    "location",  # ChatGoogleGenerativeAI on Vertex AI
)
"""Attributes of the providers' chat models that say which endpoint serves the model."""

_OWN = frozenset({"https://api.openai.com/v1", "https://api.anthropic.com", "https://api.mistral.ai/v1"})
"""The providers' own endpoints, as :func:`_where` gives them: a model on one (``ChatAnthropic``
and ``ChatMistralAI`` name theirs by default) keeps the key it had before endpoints counted."""


def unbound(model: Any) -> tuple[Any, dict[str, Any]]:
    """The model under any ``bind`` wrappers, and the settings they bind (outer ones win)."""
    settings: dict[str, Any] = {}
    while isinstance(model, RunnableBinding):
        settings = {**model.kwargs, **settings}
        model = model.bound
    return model, settings


def call_settings(model: Any) -> str:
    """A stable text of ``model``'s answer-changing parameters and bound settings; empty when it
    has none (a string naming a model, or a model without parameters)."""
    model, bound = unbound(model)
    own = getattr(model, "_identifying_params", None)
    merged = {**(own if isinstance(own, dict) and own else _traced(model)), **bound}
    kept = {str(k): _plain(v) for k, v in merged.items() if str(k) not in _TRANSPORT and v is not None}
    where = _endpoint(model)
    if where:
        kept["endpoint"] = where
    return json.dumps(kept, sort_keys=True) if kept else ""


def _endpoint(model: Any) -> dict[str, str]:
    """Where ``model`` is served, by the attributes of :data:`_ENDPOINTS` it sets: URLs without
    their credentials, query or fragment (no secret), regions as given. Empty for a model on its
    provider's own endpoint (``ChatOpenAI()``, ``ChatAnthropic()``), a string, or a test double."""
    found: dict[str, str] = {}
    for name in _ENDPOINTS:
        try:
            value = getattr(model, name, None)
        except Exception:  # a model's own property: where it failed, it names no endpoint
            continue
        if isinstance(value, dict):  # client_options={"api_endpoint": ...}
            value = value.get("api_endpoint")
        if isinstance(value, str) and value.strip() and (where := _where(value.strip())) not in _OWN:
            found[name] = where
    return found


def _where(url: str) -> str:
    """``url`` without what may hold a secret (``user:password@``, ``?api-key=...``), its scheme
    and host in lower case and without a trailing slash; a value that is no URL (a region) as is."""
    parts = urlsplit(url)
    if not parts.scheme or not parts.netloc:
        return url
    host = (parts.hostname or "").lower()
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:  # a port that is no number: the host alone
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path.rstrip("/"), "", ""))


def _traced(model: Any) -> dict[str, Any]:
    """The answer-changing parameters ``model`` gives its traces (``ls_temperature``,
    ``ls_max_tokens``, ``ls_stop``), for a model that names none in ``_identifying_params``
    (ChatOllama, ChatBedrockConverse)."""
    getter = getattr(model, "_get_ls_params", None)
    try:
        traced = getter() if callable(getter) else None
    except Exception:  # a model's own tracing hook: a failure of it changes no answer
        return {}
    if not isinstance(traced, dict):
        return {}
    return {key.removeprefix("ls_"): value for key, value in traced.items() if key in ("ls_temperature", "ls_max_tokens", "ls_stop")}


def _plain(value: Any) -> Any:
    """``value`` as JSON-able data: a class (a response schema) by its qualified name and JSON
    schema, an object of no plain form by its type (never by a ``repr`` holding an address)."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, type):
        schema = getattr(value, "model_json_schema", None)
        return {"class": f"{value.__module__}.{value.__qualname__}", "schema": schema() if callable(schema) else None}
    return {"type": f"{type(value).__module__}.{type(value).__qualname__}"}


__all__ = ["call_settings", "unbound"]
