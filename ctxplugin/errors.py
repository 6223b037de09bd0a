"""The ctxplugin error tree.

Every error raised on purpose by ctxplugin derives from :class:`CtxpluginError` and also from
the built-in exception that fits, so ``except ValueError`` keeps working for bad input.
"""

from __future__ import annotations


class CtxpluginError(Exception):
    """Root of every error ctxplugin raises on purpose."""


class InvalidInputError(CtxpluginError, ValueError):
    """The caller passed something ctxplugin cannot use (the message says what)."""


class EngineClosedError(InvalidInputError):
    """The engine was closed (``close()``, or the end of its ``with`` block) and is used again:
    its stores and threads are released. Build a new engine; ``close()`` itself may be repeated."""


class ConfigError(CtxpluginError, ValueError):
    """A configuration value is invalid."""


class ConfigWarning(UserWarning):
    """A configuration that is valid but probably not what was meant (an environment variable
    that sets nothing, for instance)."""


class StoreError(CtxpluginError, RuntimeError):
    """A backing store (SQLite, Chroma, Postgres) failed."""


class StoreUnavailableError(StoreError):
    """A backing store cannot be reached right now."""


class StoreBusyError(StoreUnavailableError):
    """The store answered, but another writer held what this call needed for longer than the
    wait allowed (a lock); the server itself is fine, so no circuit opens."""


class StoreInUseError(StoreError):
    """An embedded store directory is open in another process; embedded Chroma serves one
    process (the message names the server setting to use instead)."""


class RefNotFoundError(CtxpluginError, KeyError):
    """No content is stored under this ref, or it expired."""

    def __str__(self) -> str:  # KeyError quotes its message; keep it readable
        return str(self.args[0]) if self.args else "ref not found"


class AccessDeniedError(CtxpluginError, PermissionError):
    """The item exists but the given scope may not read it."""


class MissingDependencyError(CtxpluginError, ImportError):
    """An optional dependency is not installed (the message names the install command)."""
