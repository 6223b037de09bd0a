"""A token counter given to the engine, in the form the stages use (:class:`~ctxplugin.tokens.TokenCounter`).

A counter may be given as an object with ``count(text)`` and a ``name``, a plain function
``str -> int``, or a tiktoken ``Encoding``. Counts are remembered per counter name across
engines (notes, message counts), so a name made here also tells apart two functions that share
one (two lambdas).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import TiktokenCounter, TokenCounter


class FunctionCounter:
    """A :class:`~ctxplugin.tokens.TokenCounter` counting with a function ``str -> int``."""

    def __init__(self, count: Callable[[str], Any], name: str) -> None:
        self._count = count
        self.name = name

    def count(self, text: str) -> int:
        return int(self._count(text)) if text else 0


def _own_name(value: object) -> str:
    kind = value if callable(value) and hasattr(value, "__qualname__") else type(value)
    return f"{getattr(kind, '__module__', '')}.{getattr(kind, '__qualname__', type(value).__name__)}#{id(value):x}"


def as_counter(counter: object) -> TokenCounter:
    """``counter`` as a :class:`~ctxplugin.tokens.TokenCounter`.

    Raises:
        InvalidInputError: ``counter`` counts nothing (no ``count`` method, no ``encode``, not callable).
    """
    if isinstance(counter, str | bytes):  # a str has a count method, which counts substrings
        raise InvalidInputError(
            f"counter={counter!r} is a name, not a counter: choose the encoding with ContextConfig(encoding={counter!r}) "
            "(or model=...), or give a function text -> int"
        )
    count, name = getattr(counter, "count", None), getattr(counter, "name", None)
    if callable(count):
        return counter if isinstance(name, str) and name else FunctionCounter(count, _own_name(counter))  # type: ignore[return-value]
    if callable(getattr(counter, "encode", None)) and isinstance(name, str):
        return TiktokenCounter(counter, name)
    if callable(counter):
        return FunctionCounter(counter, _own_name(counter))
    raise InvalidInputError(
        f"counter={counter!r} cannot count tokens: give an object with count(text) -> int (and a name), "
        "a function text -> int, or a tiktoken Encoding"
    )


__all__ = ["FunctionCounter", "as_counter"]
