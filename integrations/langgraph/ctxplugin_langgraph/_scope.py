"""Which scope a call of a LangGraph host runs in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeAlias

from langchain_core.messages import BaseMessage
from langchain_core.runnables import RunnableConfig

from ctxplugin import Scope
from ctxplugin._run_scope import active, has_scope, resolve, run_scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import namespaced, scope_resolver

ScopeSpec: TypeAlias = Scope | Callable[[RunnableConfig | None], Scope] | None
"""A fixed :class:`~ctxplugin.Scope`, a function of the run's config, or ``None`` for the
run's ``configurable.thread_id`` (plus ``user_id``/``workspace_id``/``tenant_id``) — and, without
a thread id, a scope of the run's own: runs share nothing unless asked to."""


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
    (``"<thread_id>/<namespace>"``, each part escaped by :func:`~ctxplugin.scope.session_part`
    when it holds ``/`` or ``%``): its refs and facts are invisible to the other agents even
    though they run on the same thread and share one engine, and no thread id, however it is
    spelled, names the same session.
    """

    def __init__(self, spec: ScopeSpec = None, namespace: str | None = None) -> None:
        scope_resolver(spec, "scope=")  # refuses anything but a Scope, a function or None
        if namespace is not None and not namespace.strip():
            raise InvalidInputError("namespace must be a non-empty string (or None)")
        self.spec = spec
        self.namespace = namespace

    def __call__(
        self, config: RunnableConfig | None = None, messages: Sequence[BaseMessage] | None = None, run: str | None = None
    ) -> Scope:
        """The scope of a call; ``config`` defaults to the running graph's config. Without a
        thread id in it, the run's own scope: ``run``'s session when the host recorded it as the
        run began (see :func:`run_session`), else found from ``messages`` (the run's state) —
        see :mod:`ctxplugin._run_scope`."""
        if isinstance(self.spec, Scope):
            return namespaced(self.spec, self.namespace)
        config = config if config is not None else running_config()
        if self.spec is not None:
            return namespaced(self.spec(config), self.namespace)
        return resolve(config, messages, self.namespace, run)

    def run_session(self, messages: Sequence[BaseMessage] | None) -> str | None:
        """The session of the run's own scope, to record as the run begins, for a run whose
        config names no scope (``None`` otherwise, or inside another agent's tool call, whose
        scope the run takes). Later calls find it recorded: middleware that rewrites the state
        (a summary in place of the first message) does not move the run to another scope."""
        if self.spec is not None or has_scope(running_config()) or active() is not None:
            return None
        return run_scope(messages).session_id

    def in_tool(self, config: RunnableConfig | None = None) -> Scope:
        """The scope of a tool the host's ``wrap_tool_call`` runs (the meta-tools): the scope it
        resolved for the call and set with :func:`~ctxplugin._run_scope.using`, namespace
        applied already; else as :meth:`__call__`. Resolving again would namespace a run
        without a thread id twice (its scope is the one set, to which the namespace would be
        added once more) and miss every ref the agent stored."""
        current = active()
        return current if current is not None else self(config)


RUN_KEY = "ctxplugin_run"
"""The state key where ``ContextMiddleware`` records the session of a run without a scope."""


def request_run(request: Any) -> str | None:
    """The session recorded in the state a call runs on (see :data:`RUN_KEY`)."""
    state = getattr(request, "state", request)
    run = state.get(RUN_KEY) if isinstance(state, dict) else getattr(state, RUN_KEY, None)
    return run if isinstance(run, str) and run else None


def request_messages(request: Any) -> list[BaseMessage] | None:
    """The messages of the state a tool call runs on (``None`` when it has none)."""
    state = getattr(request, "state", None)
    messages = state.get("messages") if isinstance(state, dict) else getattr(state, "messages", None)
    return list(messages) if isinstance(messages, list) else None
