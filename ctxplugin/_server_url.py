"""What a Chroma server URL may be: ``http(s)://[user:password@]host[:port]``, and the headers and
timeout of a client of it, checked before any server is connected to. A user and password in the
URL are sent as an ``Authorization: Basic`` header and never shown (:func:`shown_url`)."""

from __future__ import annotations

import base64
import math
import re
from collections.abc import Mapping
from urllib.parse import unquote, urlsplit, urlunsplit

from ctxplugin._secret_headers import header_problem
from ctxplugin.errors import ConfigError


def check_server_url(url: str, name: str = "Chroma server URL") -> None:
    """Raise :class:`ConfigError` unless ``url`` is ``http(s)://[user:password@]host[:port]``; the
    message calls it ``name`` and never shows the password. A path, query or fragment is refused rather than dropped: the client
    would send every request to the host's root, not under the path (a server behind a proxy
    at a prefix). A port that is no number from 1 to 65535 (``:99999``, ``:abc``, one followed
    by a space copied with it) is refused too, rather than failing where the client is built."""
    parts = urlsplit(url)
    shown = shown_url(url)
    try:
        port = parts.port
    except ValueError:  # not a number, or out of range
        port = 0
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(f"{name} must look like http://host:port, got {shown!r}")
    if port == 0:
        raise ConfigError(f"{name} must look like http://host:port, with a port from 1 to 65535, got {shown!r}")
    if parts.path not in ("", "/") or parts.query or parts.fragment:
        raise ConfigError(f"{name} must look like http://host:port, with no path, query or fragment, got {shown!r}")


def shown_url(url: str) -> str:
    """``url`` as errors, reprs and logs may show it: a password in it replaced by ``***`` (the
    user name kept). Everything between ``//`` and the last ``@`` counts as the user and password,
    even where a URL parser would read a path or query (a password holding a raw ``/``): a URL
    refused for its shape is shown too."""
    head, slashes, rest = url.partition("//")
    userinfo, at, host = rest.rpartition("@")
    if not slashes or not at or ":" not in userinfo:
        return url
    return f"{head}//{userinfo.partition(':')[0]}:***@{host}"


_DSN_PASSWORD = re.compile(r"""(\b(?:ssl)?password\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&]*)""", re.IGNORECASE)


def shown_dsn(dsn: str) -> str:
    """A Postgres DSN as reprs and logs may show it: the password of its URL form
    (``postgresql://user:***@host/db``), and a ``password=`` or ``sslpassword=`` (the client key's)
    keyword or query parameter, as ``***``."""
    return _DSN_PASSWORD.sub(lambda m: m.group(1) + "***", shown_url(dsn))


SECRET_FIELDS = {"chroma_url": shown_url, "postgres_dsn": shown_dsn}
"""The settings holding a password, and how each is shown."""


def with_credentials(url: str, headers: dict[str, str] | None) -> tuple[str, dict[str, str] | None]:
    """``url`` without the user and password it holds, and ``headers`` with them added as an
    ``Authorization: Basic`` header (percent-escapes in them decoded), as a browser or ``curl``
    sends them; both as given when the URL holds none. ``headers`` itself is not changed.

    Raises:
        ConfigError: the URL holds credentials and ``headers`` has an ``Authorization`` header
            too (which one to send would be a guess), or the user name holds a ``:``, which Basic
            authentication cannot carry. The message never shows the password."""
    parts = urlsplit(url)
    if not parts.username and not parts.password:
        return url, headers
    if any(name.lower() == "authorization" for name in headers or {}):
        raise ConfigError(
            f"the Chroma server URL {shown_url(url)!r} holds a user and password, sent as an Authorization "
            "header, and an Authorization header is given too (chroma_headers): keep one of them"
        )
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    if ":" in user:
        raise ConfigError(f"the user name in the Chroma server URL {shown_url(url)!r} holds a ':', which Basic authentication cannot send")
    token = base64.b64encode(f"{user}:{password}".encode()).decode("ascii")
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare, {**(headers or {}), "Authorization": f"Basic {token}"}


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


def client_settings(url: str, headers: dict[str, str] | None, timeout: object) -> tuple[str, dict[str, str] | None]:
    """The URL and headers a client of the Chroma server at ``url`` is built with, checked first
    (:func:`check_server_url`, :func:`check_headers`, :func:`check_timeout`): the URL without
    its user and password, which ``headers`` then carry (:func:`with_credentials`).

    Raises:
        ConfigError: one of those checks fails; no message shows the password or a header's value."""
    check_server_url(url)
    check_headers(headers)
    check_timeout(timeout)
    return with_credentials(url, headers)


__all__ = ["check_headers", "check_server_url", "check_timeout", "client_settings", "shown_url", "with_credentials"]
