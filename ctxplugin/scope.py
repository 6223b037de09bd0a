"""Scopes: who may see a stored item.

A :class:`Scope` names the caller (tenant / workspace / user / session). Every stored item
records the scope it was written from and a :data:`Visibility` saying how widely it is shared.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, field_validator

from ctxplugin.errors import InvalidInputError

Visibility = Literal["session", "user", "workspace", "tenant"]
"""How widely a stored item is shared: its own session only (default), every session of the
same user, of the same workspace, or the whole tenant."""

VISIBILITIES: tuple[Visibility, ...] = ("session", "user", "workspace", "tenant")


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
        """A stable string identifying this exact scope (for logs and cache keys)."""
        return "|".join(
            [self.tenant_id or "", self.workspace_id or "", self.user_id or "", self.session_id]
        )

    def can_read(self, owner: Scope, visibility: Visibility = "session") -> bool:
        """Whether this scope may read an item written by ``owner`` with ``visibility``.

        Tenants never mix. Within a tenant, ``session`` items need the same session (and the
        same user when both name one), ``user`` items the same user, ``workspace`` items the
        same workspace; ``tenant`` items are readable by the whole tenant.
        """
        if self.tenant_id != owner.tenant_id:
            return False
        if visibility == "session":
            if self.session_id != owner.session_id:
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


def scope_from_config(config: object | None, default_session: str = "default") -> Scope:
    """Build a scope from a LangChain ``RunnableConfig`` (``configurable.thread_id``).

    Optional ``user_id``, ``workspace_id``, ``tenant_id`` and ``roles`` (a list of role names)
    are read from ``configurable`` too.
    """
    configurable: dict[str, object] = {}
    if isinstance(config, dict):
        raw = config.get("configurable")
        if isinstance(raw, dict):
            configurable = raw
    scope_value = configurable.get("ctxplugin_scope")
    if isinstance(scope_value, Scope):
        return scope_value
    thread = configurable.get("thread_id")
    session = str(thread) if thread not in (None, "") else default_session

    def opt(name: str) -> str | None:
        value = configurable.get(name)
        return None if value in (None, "") else str(value)

    return Scope(
        session_id=session,
        user_id=opt("user_id"),
        workspace_id=opt("workspace_id"),
        tenant_id=opt("tenant_id"),
        roles=_roles_of(configurable.get("roles")),
    )


def _roles_of(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, (list, tuple, set, frozenset)):
        return tuple(str(v) for v in value)
    return ()
