"""Which scope a call of a LangGraph host runs in."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeAlias

from langchain_core.runnables import RunnableConfig

from ctxplugin import Scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import scope_from_config

ScopeSpec: TypeAlias = Scope | Callable[[RunnableConfig | None], Scope] | None
"""A fixed :class:`~ctxplugin.Scope`, a function of the run's config, or ``None`` for the
run's ``configurable.thread_id`` (plus ``user_id``/``workspace_id``/``tenant_id``)."""


def running_config() -> RunnableConfig | None:
    """The config of the running LangGraph node, or ``None`` outside a graph run."""
    from langgraph.config import get_config

    try:
        return get_config()
    except RuntimeError:
        return None


class ScopeRule:
    """Resolves a :data:`ScopeSpec`, then applies a per-agent namespace.

    A namespace gives one agent of a multi-agent graph its own session on the shared thread
    (``"<thread_id>/<namespace>"``): its refs and facts are invisible to the other agents even
    though they run on the same thread and share one engine.
    """

    def __init__(self, spec: ScopeSpec = None, namespace: str | None = None) -> None:
        if spec is not None and not isinstance(spec, Scope) and not callable(spec):
            raise InvalidInputError(
                f"scope must be a Scope, a function of the run's config, or None; got {type(spec).__name__}"
            )
        if namespace is not None and not namespace.strip():
            raise InvalidInputError("namespace must be a non-empty string (or None)")
        self.spec = spec
        self.namespace = namespace

    def __call__(self, config: RunnableConfig | None = None) -> Scope:
        """The scope of a call; ``config`` defaults to the running graph's config."""
        if isinstance(self.spec, Scope):
            scope = self.spec
        else:
            config = config if config is not None else running_config()
            scope = self.spec(config) if self.spec is not None else scope_from_config(config)
        if self.namespace:
            scope = scope.model_copy(update={"session_id": f"{scope.session_id}/{self.namespace}"})
        return scope
