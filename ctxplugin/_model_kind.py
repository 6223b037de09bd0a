"""Which chat model a host passed, looked through the arguments bound to it.

Several choices depend on the provider behind a model (what its API refuses, how it caches):
each is made on the model's classes, never on an import of the provider's package, so a
package that is not installed costs nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableBinding, RunnableLambda


def bound_arguments(model: object) -> tuple[object, dict[str, Any]]:
    """``model`` without the arguments bound to it (``model.bind(...)``, ``bind_tools``), as
    many times as they were bound, and those arguments (an outer binding's over an inner's)."""
    arguments: dict[str, Any] = {}
    while isinstance(getattr(model, "bound", None), Runnable) and isinstance(getattr(model, "kwargs", None), dict):
        arguments = {**model.kwargs, **arguments}  # type: ignore[attr-defined]
        model = model.bound  # type: ignore[attr-defined]
    return model, arguments


def with_tools(model: Any, tools: Sequence[Any]) -> Runnable[Any, Any]:
    """``model.bind_tools(tools)``, keeping what ``model.bind(...)`` bound over the chat model
    (``max_tokens``, ``stop``, ``cache_control``...) and its config: LangChain's ``bind_tools``
    on such a binding binds the chat model underneath and drops them. The tools bound here
    replace any the binding held; a wrapper other than a plain binding (``with_retry``) is
    left to its own ``bind_tools``."""
    layers: list[RunnableBinding[Any, Any]] = []
    base = model
    while isinstance(base, RunnableBinding) and type(base).__name__ in _PLAIN_BINDINGS and not base.config_factories:
        layers.append(base)
        base = base.bound
    if not layers:
        return model.bind_tools(tools)  # type: ignore[no-any-return]
    out: Runnable[Any, Any] = base.bind_tools(tools)
    for layer in reversed(layers):
        planned = out.kwargs if isinstance(out, RunnableBinding) else {}
        kept = {k: v for k, v in layer.kwargs.items() if k not in planned}
        out = out.bind(**kept) if kept else out
        out = out.with_config(layer.config) if layer.config else out
    return out


_PLAIN_BINDINGS = frozenset({"RunnableBinding", "_ChatModelBinding"})


def unbound(model: object) -> object:
    """``model`` without the arguments bound to it (see :func:`bound_arguments`)."""
    return bound_arguments(model)[0]


def model_classes(model: object) -> Iterator[tuple[str, str]]:
    """``(module, class name)`` of every class of the model under ``model``'s bound arguments,
    its own first: a subclass of a provider's model counts as that model."""
    for cls in type(unbound(model)).__mro__:
        yield cls.__module__, cls.__name__


def before_model(
    bound: Runnable[Any, Any], rewrite: Callable[[Sequence[BaseMessage]], list[BaseMessage]], name: str
) -> Runnable[Any, Any]:
    """``bound`` (a model with its tools bound), taking a message list (or a prompt value) that
    ``rewrite`` changes first for what this model's API refuses; any other input as it is."""

    def run(value: Any) -> Any:
        if isinstance(value, PromptValue):
            value = value.to_messages()
        if isinstance(value, Sequence) and not isinstance(value, str) and all(isinstance(m, BaseMessage) for m in value):
            return rewrite(value)
        return value

    return RunnableLambda(run, name=name) | bound


__all__ = ["before_model", "bound_arguments", "model_classes", "unbound"]
