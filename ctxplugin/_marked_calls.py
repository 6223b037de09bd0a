"""Prompt-cache marks on a model call ctxplugin makes itself, or a user's model step.

``ContextMiddleware`` marks the request it hands ``create_agent``; the LangGraph hooks'
``model(llm)`` / ``bind`` / ``model_node`` and LCEL's ``engine.as_model`` bind and call the
model themselves, so the marks go in front of the bound model: :func:`with_cache_marks` marks
each message list it is given and asks for the request's end. Nothing is marked after it there,
so a Claude request also carries the task's mark (four in all).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableBinding, RunnableConfig, RunnableLambda
from pydantic import Field

from ctxplugin._bedrock_points import place_points, takes_cache_points
from ctxplugin._cache_points import place_marks, takes_cache_marks


def mark_request(
    model: object, view: Sequence[BaseMessage], tools: Sequence[Any], settings: Mapping[str, Any], *, spare: bool = True
) -> tuple[list[BaseMessage], dict[str, Any]] | None:
    """The view and call settings with prompt-cache marks for ``model`` (a Claude model, through
    ``ChatAnthropic`` or Bedrock Converse); None when nothing is to change. ``spare`` leaves one
    mark for a caching middleware that may come after (see :func:`ctxplugin._cache_points.place_marks`)."""
    if takes_cache_points(model):
        return place_points(model, view, tools, settings)
    return place_marks(model, view, tools, settings, spare=spare)


def takes_marks(model: object) -> bool:
    """Whether ctxplugin marks a request for ``model`` (possibly bound)."""
    return takes_cache_marks(model) or takes_cache_points(model)


def with_cache_marks(model: Runnable[Any, Any], tools: Sequence[Any] = ()) -> Runnable[Any, Any]:
    """``model`` (a chat model, possibly with ``tools`` bound), taking a message list whose
    stable ends (the header, the last context note, the task) are marked for the provider's
    prompt cache, and asking the provider to mark the request's end; ``model`` itself for a
    model that caches by itself (OpenAI, Gemini) or could not be marked.

    For a model step after :meth:`~ctxplugin.ContextEngine.prepare` (or
    ``engine.as_runnable()``), with a Claude model through ``ChatAnthropic`` or
    ``ChatBedrockConverse``::

        chain = prompt | engine.as_runnable() | with_cache_marks(llm)

    Texts are not changed; assistant turns and thinking blocks are never marked; a request
    that already marks a message is sent as it is. Give ``tools`` when they are bound: marks
    they carry count against the four a request may hold.
    """
    if not takes_marks(model):
        return model
    if isinstance(model, (BaseChatModel, RunnableBinding)):
        return MarkedBinding.over(model, tools)

    def plan(value: Any) -> tuple[Any, Runnable[Any, Any]]:
        messages = value.to_messages() if isinstance(value, PromptValue) else value
        if not isinstance(messages, list) or not all(isinstance(m, BaseMessage) for m in messages):
            return value, model
        placed = mark_request(model, messages, tools, {}, spare=False)
        if placed is None:
            return value, model
        view, settings = placed
        return view, model.bind(**settings) if settings else model

    def run(value: Any, config: RunnableConfig) -> Any:
        view, target = plan(value)
        return target.invoke(view, config)

    async def arun(value: Any, config: RunnableConfig) -> Any:
        view, target = plan(value)
        return await target.ainvoke(view, config)

    return RunnableLambda(run, afunc=arun, name="ctxplugin_cache_marks")


class MarkedBinding(RunnableBinding[Any, Any]):  # type: ignore[no-redef]  # pydantic's plugin: field "kwargs" vs **kwargs
    """A chat model with its bound arguments, marking each message list it is sent (see
    :func:`with_cache_marks`). A binding rather than a step before the model: hosts that take
    the model back out of what they are given (``create_react_agent``'s structured response
    unwraps one ``RunnableBinding`` to its chat model) find it."""

    marked_tools: list[Any] = Field(default_factory=list)
    """The tools bound (their marks count against the four a request may carry)."""

    @classmethod
    def over(cls, model: BaseChatModel | RunnableBinding[Any, Any], tools: Sequence[Any]) -> MarkedBinding:
        if isinstance(model, RunnableBinding):
            return cls(bound=model.bound, kwargs=model.kwargs, config=model.config, config_factories=model.config_factories,
                       custom_input_type=model.custom_input_type, custom_output_type=model.custom_output_type,
                       marked_tools=list(tools))
        return cls(bound=model, kwargs={}, marked_tools=list(tools))

    def _marked(self, value: Any) -> tuple[Any, dict[str, Any]]:
        messages = value.to_messages() if isinstance(value, PromptValue) else value
        if not isinstance(messages, list) or not all(isinstance(m, BaseMessage) for m in messages):
            return value, {}
        placed = mark_request(self, messages, self.marked_tools, {}, spare=False)
        return (value, {}) if placed is None else placed

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None) -> Any:
        view, settings = self._marked(input)
        return super().invoke(view, config, **{**settings, **kwargs})

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None) -> Any:
        view, settings = self._marked(input)
        return await super().ainvoke(view, config, **{**settings, **kwargs})

    def stream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None) -> Iterator[Any]:
        view, settings = self._marked(input)
        yield from super().stream(view, config, **{**settings, **kwargs})

    async def astream(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any | None) -> AsyncIterator[Any]:
        view, settings = self._marked(input)
        async for chunk in super().astream(view, config, **{**settings, **kwargs}):
            yield chunk

    # RunnableBinding hands these straight to the chat model, past the marking above; Runnable's
    # own versions go through invoke/ainvoke/stream/astream, so each request is marked on its own
    # (its marks and settings depend on its messages).
    def batch(self, inputs: list[Any], config: RunnableConfig | list[RunnableConfig] | None = None, *,
              return_exceptions: bool = False, **kwargs: Any | None) -> list[Any]:
        return Runnable.batch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    async def abatch(self, inputs: list[Any], config: RunnableConfig | list[RunnableConfig] | None = None, *,
                     return_exceptions: bool = False, **kwargs: Any | None) -> list[Any]:
        return await Runnable.abatch(self, inputs, config, return_exceptions=return_exceptions, **kwargs)

    def batch_as_completed(self, inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None = None, *,
                           return_exceptions: bool = False, **kwargs: Any | None) -> Iterator[tuple[int, Any]]:
        yield from Runnable.batch_as_completed(self, inputs, config, return_exceptions=return_exceptions, **kwargs)  # type: ignore[call-overload]  # a plain bool, both overloads

    async def abatch_as_completed(self, inputs: Sequence[Any], config: RunnableConfig | Sequence[RunnableConfig] | None = None, *,
                                  return_exceptions: bool = False, **kwargs: Any | None) -> AsyncIterator[tuple[int, Any]]:
        async for item in Runnable.abatch_as_completed(self, inputs, config, return_exceptions=return_exceptions, **kwargs):  # type: ignore[call-overload]
            yield item

    def transform(self, input: Iterator[Any], config: RunnableConfig | None = None, **kwargs: Any) -> Iterator[Any]:
        yield from Runnable.transform(self, input, config, **kwargs)

    async def atransform(self, input: AsyncIterator[Any], config: RunnableConfig | None = None, **kwargs: Any) -> AsyncIterator[Any]:
        async for chunk in Runnable.atransform(self, input, config, **kwargs):
            yield chunk

    def stream_events(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        view, settings = self._marked(input)
        return super().stream_events(view, config, **{**settings, **kwargs})

    def astream_events(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        view, settings = self._marked(input)
        return super().astream_events(view, config, **{**settings, **kwargs})


__all__ = ["MarkedBinding", "mark_request", "takes_marks", "with_cache_marks"]
