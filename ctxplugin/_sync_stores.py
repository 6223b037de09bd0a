"""The stores ctxplugin calls are called without ``await``: one whose methods are coroutine
functions (``AsyncPostgresCASStore``) would hand back coroutines never awaited — nothing stored,
refs shown to the model for outputs that were never kept — so it is refused where it is given."""

from __future__ import annotations

import inspect
from collections.abc import Iterable
from typing import TypeVar

from ctxplugin.errors import InvalidInputError

T = TypeVar("T")


def async_methods(store: object, names: Iterable[str] | None = None) -> list[str]:
    """The public methods of ``store`` (or those of ``names``) that are coroutine functions."""
    wanted = names if names is not None else (n for n in dir(type(store)) if not n.startswith("_"))
    return [name for name in wanted if inspect.iscoroutinefunction(getattr(store, name, None))]


def sync_store(store: T, given_as: str) -> T:
    """``store``, when its methods are plain functions.

    Raises:
        InvalidInputError: one of them is async (the message names it and ``given_as``).
    """
    found = async_methods(store)
    if found:
        raise InvalidInputError(
            f"{given_as} takes a store with sync methods; {type(store).__name__}.{found[0]} is async (an async store is "
            "for code that awaits its calls itself: give the engine the sync store of the same server)"
        )
    return store


__all__ = ["async_methods", "sync_store"]
