"""The scope of a host's call when the caller named none: a scope of its own, never a shared one.

A run without ``configurable.thread_id`` (and without an explicit scope) must not see what other
runs stored: two users calling the same agent without a thread id would otherwise share refs and
facts. Such a run gets a scope of its own, ``run-<key>``, where the key is derived from the first
message of its conversation (its id and text): every call of one run — model calls and tool
calls — finds the same scope, and another conversation finds another. LangGraph gives every
message of a new run a fresh id, so two runs never share one there. A first message without an
id gives each call a new scope: nothing tells its conversation from another that opened alike.
Sharing is asked for explicitly: a thread id, a fixed :class:`~ctxplugin.Scope` given to the host adapter, or
``configurable={"ctxplugin_scope": Scope(...)}``.

The first run without a scope logs a warning (once per process) that says how to set one.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar

from langchain_core.messages import BaseMessage, SystemMessage

from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import Scope, configured_scope, namespaced, scope_from_config
from ctxplugin.tokens import content_text

logger = logging.getLogger("ctxplugin")

RUN_PREFIX = "run-"
"""Session ids of scopes made for runs without a scope start with this."""

UNSCOPED_WARNING = (
    "a call without configurable.thread_id or an explicit scope; it gets a scope of its "
    "own and nothing carries over to other runs. Pass config={'configurable': {'thread_id': ...}} "
    "to keep a conversation's facts and refs across runs, or give the host adapter a Scope "
    "(e.g. ContextMiddleware(engine, scope=Scope(session_id=...))) to share them on purpose."
)

_current: ContextVar[Scope | None] = ContextVar("ctxplugin_run_scope", default=None)
_warned = threading.Event()


def has_scope(config: object | None) -> bool:
    """Whether ``config`` names a scope (``configurable.thread_id`` or ``ctxplugin_scope``).

    Raises:
        InvalidInputError: ``ctxplugin_scope`` is set but is not a :class:`Scope`.
    """
    configurable = config.get("configurable") if isinstance(config, dict) else None
    if not isinstance(configurable, dict):
        return False
    return configured_scope(configurable) is not None or configurable.get("thread_id") not in (None, "")


def warn_unscoped() -> None:
    """Log :data:`UNSCOPED_WARNING`, the first time only."""
    if not _warned.is_set():
        _warned.set()
        logger.warning(UNSCOPED_WARNING)


def run_scope(messages: Sequence[BaseMessage] | None = None) -> Scope:
    """A scope of its own for a run without one: from the first message of its conversation
    when given with an id (the same for every call of the run), else the one :func:`using` set,
    else new. A first message without an id (a prompt template's) names no conversation: its
    text alone would give every conversation opening with "hi" one scope, and each would be
    shown what the others said next."""
    first = next((m for m in messages or () if not isinstance(m, SystemMessage)), None)
    if first is not None and first.id:
        seed = f"{first.id}\x00{first.type}\x00{content_text(first.content)}"
        key = hashlib.sha256(seed.encode("utf-8", "surrogatepass")).hexdigest()[:24]
        return Scope(session_id=RUN_PREFIX + key)
    current = _current.get()
    if current is not None:
        return current
    return Scope(session_id=RUN_PREFIX + uuid.uuid4().hex[:24])


def resolve(
    config: object | None, messages: Sequence[BaseMessage] | None = None, namespace: str | None = None,
    run: str | None = None,
) -> Scope:
    """The scope of a call: the one ``config`` names, else a scope of the run's own (with the
    warning, once); ``namespace`` applied (:func:`~ctxplugin.scope.namespaced`). ``run``: the
    session of the run's own scope when the host recorded it as the run began (its first
    message may be gone since: a summary took its place), instead of finding it from
    ``messages``."""
    if has_scope(config):
        return scope_from_config(config, namespace=namespace)
    current = _current.get()
    if current is None:
        warn_unscoped()
        current = Scope(session_id=run) if run else run_scope(messages)
    return namespaced(current, namespace)


def active() -> Scope | None:
    """The scope :func:`using` set for the running call, if any."""
    return _current.get()


@contextmanager
def using(scope: Scope) -> Iterator[None]:
    """Make ``scope`` the scope of calls without one inside the block (a tool a host runs for
    the model finds the run's scope though its config names none)."""
    token = _current.set(scope)
    try:
        yield
    finally:
        _current.reset(token)


DIRECT_SESSION = "default"
"""Session of direct engine calls (``prepare``, ``capture_tool_result``, ``expand_ref``...)
made without a scope outside a host run."""

DIRECT_WARNING = (
    "ContextEngine.%s called without a scope; it uses the shared session 'default', "
    "which every call without a scope sees. Pass scope=Scope(session_id=...) to keep "
    "conversations apart."
)

_direct_warned = threading.Event()


def direct_scope(scope: Scope | None, method: str) -> Scope:
    """The scope of a direct engine call: ``scope``, else the scope of the host run it is made
    in (a tool calling ``engine.expand_ref``), else the shared ``"default"`` session, with a
    warning logged once per process.

    Unlike a host run, a direct call cannot get a scope of its own: a ``capture_tool_result``
    and the ``prepare`` that shows its ref are separate calls that must share one.
    """
    if scope is not None:
        if not isinstance(scope, Scope):
            raise InvalidInputError(f"{method}() takes scope=Scope(session_id=...), got {type(scope).__name__}")
        return scope
    current = _current.get()
    if current is not None:
        return current
    if not _direct_warned.is_set():
        _direct_warned.set()
        logger.warning(DIRECT_WARNING, method)
    return Scope(session_id=DIRECT_SESSION)
