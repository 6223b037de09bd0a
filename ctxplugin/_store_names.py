"""Names the configuration gives to objects on a server (a Chroma collection, a Postgres schema),
checked when the configuration is built: a name the server refuses, or one that would put
ctxplugin's tables among the server's own, is a ``ConfigError`` then, not a failure of every call."""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator

_COLLECTION = re.compile(r"[a-zA-Z0-9][a-zA-Z0-9._-]{2,62}")
"""What Chroma takes as the start of a collection name (ctxplugin appends ``_<embedding>``)."""

_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
"""A Postgres schema name that never needs quoting rules (lower case)."""


def collection_problem(name: str) -> str | None:
    """Why Chroma would refuse collections named from ``name``, or None."""
    if not _COLLECTION.fullmatch(name):
        return "3 to 63 letters, digits, '.', '_' or '-', starting with a letter or a digit"
    if ".." in name:
        return "Chroma refuses a collection name with two periods in a row ('..')"
    return None


def schema_problem(name: str) -> str | None:
    """Why ``name`` cannot be the schema of ctxplugin's Postgres tables, or None."""
    if not _SCHEMA.fullmatch(name):
        return "lower-case letters, digits and underscores (at most 63), not starting with a digit"
    if name.startswith("pg_") or name == "information_schema":
        return f"{name!r} names a system schema of Postgres (pg_*, information_schema): choose a schema of your own"
    return None


def _collection(name: str) -> str:
    problem = collection_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


def _schema(name: str) -> str:
    problem = schema_problem(name)
    if problem is not None:
        raise ValueError(problem)
    return name


CollectionPrefix = Annotated[str, AfterValidator(_collection)]
SchemaName = Annotated[str, AfterValidator(_schema)]

__all__ = ["CollectionPrefix", "SchemaName", "collection_problem", "schema_problem"]
