"""The answer cache keys a call by the endpoint serving the model: the same model name behind two
endpoints (OpenAI and a local vLLM speaking its API, two Ollama hosts, two Bedrock regions) gives
two answers, never one the other cached. The key holds where the endpoint is, never a secret:
credentials in the URL and API keys are left out."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import HumanMessage, SystemMessage

from ctxplugin import Scope
from ctxplugin.cache import call_context
from ctxplugin.cache.settings import call_settings
from ctxplugin.report import ContextReport
from ctxplugin.testing import memory_engine

ASKED = [SystemMessage(content="Be brief."), HumanMessage(content="What is the refund policy?")]
ENGINE = memory_engine()


def signature(model: object) -> str:
    call = call_context(ASKED, ContextReport(session_id="s"), tools=[], scope=Scope(session_id="s"), model=model,
                        mode="session", registry=ENGINE.registry, ledger=None)
    assert call is not None
    return call.signature


def openai(url: str, key: str) -> BaseChatModel:
    from langchain_openai import ChatOpenAI
    return ChatOpenAI(model="llama-3-70b", base_url=url, api_key=key)


def azure(url: str, key: str) -> BaseChatModel:
    from langchain_openai import AzureChatOpenAI
    return AzureChatOpenAI(azure_deployment="gpt-4o", azure_endpoint=url, api_key=key, api_version="2024-10-21")


def anthropic(url: str, key: str) -> BaseChatModel:
    from langchain_anthropic import ChatAnthropic
    return ChatAnthropic(model="claude-sonnet-4-5", base_url=url, api_key=key)


def ollama(url: str, key: str) -> BaseChatModel:
    from langchain_ollama import ChatOllama
    return ChatOllama(model="llama3", base_url=url, client_kwargs={"headers": {"Authorization": key}})


def mistral(url: str, key: str) -> BaseChatModel:
    from langchain_mistralai import ChatMistralAI
    return ChatMistralAI(model_name="mistral-small", endpoint=url, api_key=key)


def gemini(url: str, key: str) -> BaseChatModel:
    from langchain_google_genai import ChatGoogleGenerativeAI
    return ChatGoogleGenerativeAI(model="gemini-2.5-flash", base_url=url, api_key=key)


def bedrock(url: str, key: str) -> BaseChatModel:
    from langchain_aws import ChatBedrockConverse
    return ChatBedrockConverse(model_id="anthropic.claude-3-haiku", endpoint_url=url, region_name="us-east-1",
                               aws_access_key_id=key, aws_secret_access_key=key)


PROVIDERS: dict[str, Callable[[str, str], BaseChatModel]] = {
    "openai": openai, "azure": azure, "anthropic": anthropic, "ollama": ollama, "mistral": mistral,
    "gemini": gemini, "bedrock": bedrock,
}


@pytest.mark.parametrize("make", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_one_model_name_behind_two_endpoints_gets_two_keys(make: Callable[[str, str], Any]) -> None:
    here, there = make("http://10.0.0.5:8000/v1", "key-1"), make("https://api.example.com/v1", "key-1")
    assert signature(here) != signature(there)


@pytest.mark.parametrize("make", PROVIDERS.values(), ids=PROVIDERS.keys())
def test_the_key_holds_no_secret_and_another_api_key_keeps_it(make: Callable[[str, str], Any]) -> None:
    model = make("https://user:s3cret-pass@api.example.com/v1/?api-key=s3cret-query", "sk-s3cret-key")
    assert "s3cret" not in call_settings(model)
    assert "api.example.com" in call_settings(model)
    assert signature(model) == signature(make("https://api.example.com/v1", "sk-another-key"))


def test_bedrock_regions_are_two_endpoints() -> None:
    from langchain_aws import ChatBedrockConverse

    def in_region(region: str) -> BaseChatModel:
        return ChatBedrockConverse(model_id="anthropic.claude-3-haiku", region_name=region)

    assert signature(in_region("us-east-1")) != signature(in_region("eu-west-3"))


def test_a_model_on_its_default_endpoint_keeps_its_key(monkeypatch: pytest.MonkeyPatch) -> None:
    from langchain_openai import ChatOpenAI

    monkeypatch.delenv("OPENAI_API_BASE", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    assert "endpoint" not in call_settings(ChatOpenAI(model="gpt-4o", api_key="sk-1"))


DEFAULTS: dict[str, tuple[Callable[[str, str], BaseChatModel], str]] = {
    "openai": (openai, "https://api.openai.com/v1"),
    "anthropic": (anthropic, "https://api.anthropic.com"),
    "mistral": (mistral, "https://api.mistral.ai/v1"),
}


@pytest.mark.parametrize(("make", "default"), DEFAULTS.values(), ids=DEFAULTS.keys())
def test_a_model_on_its_providers_own_endpoint_keeps_the_key_it_had(make: Callable[[str, str], Any], default: str,
                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_BASE", "OPENAI_BASE_URL", "ANTHROPIC_API_URL", "ANTHROPIC_BASE_URL", "MISTRAL_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    model = make(default + "/", "sk-1")  # named, with a trailing slash: the provider's own endpoint all the same
    assert "endpoint" not in call_settings(model)
    assert signature(model) != signature(make("https://proxy.example.com/v1", "sk-1"))
