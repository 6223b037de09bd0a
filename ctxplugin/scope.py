"""Scopes: who may see a stored item.

A :class:`Scope` names the caller (tenant / workspace / user / session). Every stored item
records the scope it was written from and a :data:`Visibility` saying how widely it is shared.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from ctxplugin.errors import InvalidInputError

Visibility = Literal["session", "user", "workspace", "tenant"]
"""How widely a stored item is shared: its own session only (default), every session of the
same user, of the same workspace, or the whole tenant."""

VISIBILITIES: tuple[Visibility, ...] = ("session", "user", "workspace", "tenant")

_NONE_PART = "!"  # never produced by quote(): it percent-encodes every character but A-Z a-z 0-9 _ . - ~


def scope_key(*parts: str | None) -> str:
    """The one encoding of a sequence of scope parts into a store key; injective for any strings.

    Each part is percent-encoded as UTF-8 (lone surrogates kept), ``None`` becomes ``!`` and the
    parts are joined with ``,``. Neither ``,`` nor ``!`` nor ``|`` survives in an encoded part, so
    distinct sequences (of any length from one up) give distinct keys, ``None`` and ``""`` differ, and a key
    never equals a key of the pipe-joined form of earlier versions (which always holds a ``|``).
    Keys are plain ASCII: safe as SQLite, Postgres and Chroma values and in filters.

    ``scope_key("s", "acme", "a|b")`` is ``"s,acme,a%7Cb"``.

    Raises:
        InvalidInputError: no parts (the empty key would equal the key of one ``""``).
    """
    if not parts:
        raise InvalidInputError("scope_key() needs at least one part")
    return ",".join(_NONE_PART if part is None else quote(part, safe="", errors="surrogatepass") for part in parts)


def scope_key_parts(key: str) -> tuple[str | None, ...]:
    """The parts :func:`scope_key` encoded into ``key``: ``scope_key(*scope_key_parts(k)) == k``
    for every key it made, and ``scope_key_parts(scope_key(*parts)) == parts``.

    Stores that keep a scope's ids in columns which cannot hold every string (Postgres text
    takes neither NUL nor lone surrogates) read the exact ids back from the key.
    """
    return tuple(None if part == _NONE_PART else unquote(part, errors="surrogatepass") for part in key.split(","))


def legacy_scope_key(*parts: str | None) -> str | None:
    """The pipe-joined key earlier versions wrote, when it names exactly these parts.

    The old form joined parts with ``|`` and wrote ``None`` as ``""``, so it is ambiguous when a
    part holds a ``|`` or is ``""``; then None is returned and old rows are not read through
    it. Only migrations and read-both lookups use it.
    """
    if any(part is not None and (part == "" or "|" in part) for part in parts):
        return None
    return "|".join(part or "" for part in parts)


class Scope(BaseModel):
    """Isolation key for every read and write.

    ``Scope(session_id=...)`` alone is valid; LangGraph's ``thread_id`` maps to ``session_id``.
    ``roles`` name the reader's roles (``"manager"``): facts restricted to a role are shown only
    to readers that have it. Roles do not change where items are stored (:meth:`key`).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_id: str
    user_id: str | None = None
    workspace_id: str | None = None
    tenant_id: str | None = None
    roles: tuple[str, ...] = ()

    if not TYPE_CHECKING:  # type checkers keep the typed signature of the fields

        def __init__(self, /, **data: Any) -> None:
            try:
                super().__init__(**data)
            except ValidationError as exc:  # pydantic wraps even the InvalidInputError raised below
                problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
                raise InvalidInputError(f"invalid Scope: {problems}") from exc

    @field_validator("session_id")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value or not value.strip():
            raise InvalidInputError("Scope.session_id must be a non-empty string")
        return value

    @field_validator("roles", mode="before")
    @classmethod
    def _roles(cls, value: object) -> object:
        if isinstance(value, str):
            value = (value,)
        if isinstance(value, (list, tuple, set, frozenset)):
            return tuple(sorted({str(r).strip().lower() for r in value if str(r).strip()}))
        return value

    def key(self) -> str:
        """A stable string identifying this exact scope (for logs, store and cache keys).

        Distinct scopes always have distinct keys, whatever their ids hold (see :func:`scope_key`).
        """
        return _scope_key(self.tenant_id, self.workspace_id, self.user_id, self.session_id)

    def legacy_key(self) -> str | None:
        """The key earlier versions gave this scope when that key was unambiguous, else None
        (see :func:`legacy_scope_key`); for migrations of stored data."""
        return legacy_scope_key(self.tenant_id, self.workspace_id, self.user_id, self.session_id)

    def can_read(self, owner: Scope, visibility: Visibility = "session") -> bool:
        """Whether this scope may read an item written by ``owner`` with ``visibility``.

        Tenants never mix. Within a tenant, ``session`` items need the same session (and the
        same user and the same workspace when both name one: a thread id reused by another
        user or in another workspace names another session), ``user`` items the same user,
        ``workspace`` items the same workspace; ``tenant`` items are readable by the whole
        tenant.
        """
        if self.tenant_id != owner.tenant_id:
            return False
        if visibility == "session":
            if self.session_id != owner.session_id:
                return False
            if owner.workspace_id and self.workspace_id and owner.workspace_id != self.workspace_id:
                return False
            return not (owner.user_id and self.user_id and owner.user_id != self.user_id)
        if visibility == "user":
            return owner.user_id is not None and self.user_id == owner.user_id
        if visibility == "workspace":
            return owner.workspace_id is not None and self.workspace_id == owner.workspace_id
        return True

    def filters(self) -> dict[str, str | None]:
        """Column values of this scope, as stored next to items."""
        return {
            "tenant_id": self.tenant_id,
            "workspace_id": self.workspace_id,
            "user_id": self.user_id,
            "session_id": self.session_id,
        }


def session_part(value: str) -> str:
    """``value`` as one part of a session id: ``%`` written ``%25`` and ``/`` written ``%2F``;
    an id holding neither is returned unchanged (the session ids of ordinary threads — UUIDs,
    plain names — stay what they always were, and so does the data stored under them).

    Session ids are made from a thread id ``t`` alone, ``session_part(t)``, or with a namespace
    ``n``, ``session_part(t) + "/" + session_part(n)`` (:func:`namespaced`). No two pairs
    ``(t, n or None)`` give one session id, whatever the strings hold:

    - ``session_part`` is injective: an id it changes held ``/`` or ``%`` and comes out holding
      ``%``, an id it keeps holds no ``%``; changed ids decode back (``%2F`` → ``/``, then
      ``%25`` → ``%``).
    - A session id of a thread alone holds no raw ``/``; a namespaced one holds exactly one,
      which splits it back into its two escaped parts.

    ``session_part("a/b")`` is ``"a%2Fb"``, which is not ``"a/b"``, the session of thread ``"a"``
    with namespace ``"b"``.

    A blank id (only spaces: a thread LangGraph keeps, which a Scope refuses as a session id) is
    percent-encoded whole (``" "`` is ``"%20"``); no id of the other two kinds comes out so, since
    a ``%`` the first rule writes is followed by ``25`` or ``2F``, and spaces by neither.
    """
    if not value.strip():
        return quote(value, safe="", errors="surrogatepass")
    if "/" not in value and "%" not in value:
        return value
    return value.replace("%", "%25").replace("/", "%2F")


LOGGED_ID_CHARS = 80
"""An id longer than this is shortened in warnings and log messages (see :func:`logged_id`)."""


def logged_id(value: str) -> str:
    """``value`` (a session or scope id) as warnings and log messages show it: whole up to
    :data:`LOGGED_ID_CHARS` characters, else its first 64, an ellipsis and 12 hex digits of the
    SHA-256 of the whole, so a thread id of thousands of characters does not make every line
    that long and two long ids that start alike are still told apart. A control character, line
    separator or lone surrogate in it is escaped (``\\n``), with the digest added, so that an id
    cannot break a log line in two or forge one, and cannot fail the handler writing it. Only for
    text a person reads: keys, stored data and reports keep the id whole."""
    unsafe = _UNSAFE.search(value) is not None
    if len(value) <= LOGGED_ID_CHARS and not unsafe:
        return value
    shown = value if len(value) <= LOGGED_ID_CHARS else value[:64]
    if unsafe:
        shown = _UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), shown)
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{shown}…{digest}"


_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")


def namespaced(scope: Scope, namespace: str | None) -> Scope:
    """``scope`` with ``namespace`` applied to its session: ``session_part(session) + "/" +
    session_part(namespace)``; ``scope`` itself when ``namespace`` is None."""
    if namespace is None:
        return scope
    return scope.model_copy(update={"session_id": f"{session_part(scope.session_id)}/{session_part(namespace)}"})


def configured_scope(configurable: dict[str, object]) -> Scope | None:
    """The :class:`Scope` a run's ``configurable`` gives as ``ctxplugin_scope`` (None when unset).

    Raises:
        InvalidInputError: ``ctxplugin_scope`` is set to something else (a session id, a dict):
            ignored, the run would get a scope of its own and nothing would carry over.
    """
    value = configurable.get("ctxplugin_scope")
    if value is None or isinstance(value, Scope):
        return value
    raise InvalidInputError(
        f"configurable.ctxplugin_scope takes a Scope, got {type(value).__name__} ({value!r:.60}); "
        "pass Scope(session_id=...), or the ids themselves as configurable.thread_id (and user_id, "
        "workspace_id, tenant_id): a config sent as JSON, to a deployed graph, can carry only those"
    )


def scope_from_config(config: object | None, default_session: str = "default", *, namespace: str | None = None) -> Scope:
    """Build a scope from a LangChain ``RunnableConfig`` (``configurable.thread_id``).

    The session id is the thread id through :func:`session_part` (a thread id holding ``/`` or
    ``%`` is escaped, others are kept), with ``namespace`` applied by :func:`namespaced`. A
    :class:`Scope` given as ``configurable.ctxplugin_scope`` and ``default_session`` are the
    caller's own ids: kept as given unless a namespace applies. Optional ``user_id``,
    ``workspace_id``, ``tenant_id`` and ``roles`` (a list of role names) are read from
    ``configurable`` too.
    """
    configurable: dict[str, object] = {}
    if isinstance(config, dict):
        raw = config.get("configurable")
        if isinstance(raw, dict):
            configurable = raw
    scope_value = configured_scope(configurable)
    if scope_value is not None:
        return namespaced(scope_value, namespace)
    thread = configurable.get("thread_id")
    session = default_session
    if thread not in (None, ""):
        # escaped before the Scope is made: a blank thread id is a session id once escaped
        session = session_part(str(thread))
        if namespace is not None:
            session, namespace = f"{session}/{session_part(namespace)}", None

    def opt(name: str) -> str | None:
        value = configurable.get(name)
        return None if value in (None, "") else str(value)

    scope = Scope(
        session_id=session,
        user_id=opt("user_id"),
        workspace_id=opt("workspace_id"),
        tenant_id=opt("tenant_id"),
        roles=_roles_of(configurable.get("roles")),
    )
    return namespaced(scope, namespace)


def scope_resolver(scope: object, what: str) -> Callable[[Any], Scope] | None:
    """``scope`` as a function of a run's config: a fixed :class:`Scope` always answers itself,
    a function is taken as it is, None stays None.

    Raises:
        InvalidInputError: ``scope`` is none of these (said when the tool is made, not when the
            model first calls it).
    """
    if scope is None:
        return None
    if isinstance(scope, Scope):
        return lambda _config: scope
    if callable(scope):
        return scope
    raise InvalidInputError(
        f"{what} takes a Scope or a function from a run's config to a Scope (or None), got {type(scope).__name__}"
    )


def _roles_of(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(str(v) for v in value)
    return ()


@lru_cache(maxsize=4096)
def _scope_key(*parts: str | None) -> str:
    # asked for on every step of every call: encoded once per scope (bounded)
    return scope_key(*parts)
