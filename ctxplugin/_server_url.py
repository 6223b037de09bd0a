"""What a Chroma server URL may be: ``http(s)://host[:port]``, and the headers and timeout of a
client of it, checked before any server is connected to."""

from __future__ import annotations

import math
from collections.abc import Mapping
from urllib.parse import urlsplit

from ctxplugin._secret_headers import header_problem
from ctxplugin.errors import ConfigError


def check_server_url(url: str, name: str = "Chroma server URL") -> None:
    """Raise :class:`ConfigError` unless ``url`` is ``http(s)://host[:port]``; the message
    calls it ``name``. A path, query or fragment is refused rather than dropped: the client
    would send every request to the host's root, not under the path (a server behind a proxy
    at a prefix). A port that is no number from 1 to 65535 (``:99999``, ``:abc``, one followed
    by a space copied with it) is refused too, rather than failing where the client is built."""
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = 0
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must look like http://host:port, got {url!r}")
    if port == 0:
        raise ConfigError(f"{name} must look like http://host:port, with a port from 1 to 65535, got {url!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{name} must look like http://host:port, with no path, query or fragment, got {url!r}")


def check_headers(headers: Mapping[str, object] | None) -> None:
    """Raise :class:`ConfigError` when a header of ``headers`` cannot be sent (the check of
    ``chroma_headers``, for a store built by hand); the message never shows a value."""
    for name, value in (headers or {}).items():
        problem = header_problem(name, value)
        if problem is not None:
            raise ConfigError(f"headers: {problem}")


def check_timeout(timeout: object) -> None:
    """Raise :class:`ConfigError` unless ``timeout`` is a number of seconds above 0 and finite (the
    check of ``stores.timeout``, for a store built by hand): 0 read as a server that does not
    answer, and a negative, infinite or NaN one failed on the first request."""
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout < math.inf:
        raise ConfigError(f"timeout must be a number of seconds above 0 and finite, got {timeout!r}")


__all__ = ["check_headers", "check_server_url", "check_timeout"]
