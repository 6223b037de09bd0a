"""Headers sent on every request to a server (its token): checked when the configuration is
built, and kept as :class:`~pydantic.SecretStr` so that no ``repr``, dump or error shows them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated

from pydantic import AfterValidator, SecretStr

_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
"""An HTTP header name (RFC 9110 token)."""

_VALUE = re.compile(r"[\t\x20-\x7e]*")
"""What an HTTP client sends as it is: printable ASCII and tabs, no line break."""


def header_problem(name: object, value: object) -> str | None:
    """Why the header ``name: value`` cannot be sent, or None; the message never shows the value."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        return f"{name!r} is not a valid HTTP header name (letters, digits and -, no spaces)"
    if not isinstance(value, str) or not _VALUE.fullmatch(value):
        # the value is a secret: the message names the header, never what it holds
        return f"the value of header {name!r} must be printable ASCII, with no line break"
    return None


def _sendable(headers: dict[str, SecretStr]) -> dict[str, SecretStr]:
    for name, value in headers.items():
        problem = header_problem(name, value.get_secret_value())
        if problem is not None:
            raise ValueError(problem)
    return headers


SecretHeaders = Annotated[dict[str, SecretStr], AfterValidator(_sendable)]
"""Header names to values; the values are secrets."""


def revealed(headers: Mapping[str, SecretStr]) -> dict[str, str] | None:
    """The headers as a client sends them, or None when there are none."""
    return {name: value.get_secret_value() for name, value in headers.items()} or None
