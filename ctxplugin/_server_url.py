"""What a Chroma server URL may be: ``http(s)://host[:port]``, checked before any server is
connected to."""

from __future__ import annotations

from urllib.parse import urlsplit

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


__all__ = ["check_server_url"]
