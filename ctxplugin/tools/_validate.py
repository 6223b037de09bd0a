"""Argument checks for tool calls: the tool's own pydantic model, or its JSON schema.

A checker returns error lines, empty when the arguments are valid. When a schema cannot be
used for validation (it is malformed, or refers to documents that are not available) the
checker accepts everything: the tool validates its own input when it runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel, ValidationError

logger = logging.getLogger("ctxplugin.tools")

Checker = Callable[[Any], list[str]]
"""Validates a tool call's arguments; returns error lines (empty when valid)."""

MAX_ERRORS = 5


def _accept(args: Any) -> list[str]:
    return []


def _not_object(args: Any) -> list[str]:
    return [] if isinstance(args, Mapping) else [f"arguments must be a JSON object, got {type(args).__name__}"]


def _unexpected(args: Mapping[str, Any], allowed: set[str] | None) -> list[str]:
    """Argument names the schema does not define. Tools usually ignore them, so a call with a
    guessed parameter name would run without the value the model meant to pass."""
    if allowed is None:
        return []
    extra = sorted(k for k in args if k not in allowed)
    if not extra:
        return []
    expected = ", ".join(sorted(allowed)) or "none"
    return [f"{name}: unexpected argument (expected: {expected})" for name in extra[:MAX_ERRORS]]


def _pydantic_checker(model: type[BaseModel]) -> Checker:
    allowed: set[str] | None = None
    if model.model_config.get("extra") != "allow":
        allowed = set(model.model_fields)
        allowed |= {f.alias for f in model.model_fields.values() if f.alias}

    def check(args: Any) -> list[str]:
        if errors := _not_object(args):
            return errors
        lines = _unexpected(args, allowed)
        try:
            model.model_validate(dict(args))
        except ValidationError as exc:
            for error in exc.errors():
                where = ".".join(str(part) for part in error["loc"]) or "(arguments)"
                lines.append(f"{where}: {error['msg']}")
        return lines[:MAX_ERRORS]

    return check


def _json_schema_checker(schema: Mapping[str, Any]) -> Checker:
    import jsonschema  # type: ignore[import-untyped]
    from referencing.exceptions import Unresolvable

    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    try:
        cls.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        logger.info("tool schema is not valid JSON Schema, arguments are not checked: %s", exc.message)
        return _accept
    validator = cls(schema)
    props = schema.get("properties")
    # absent additionalProperties allows anything in JSON Schema; for a tool call it is a slip
    allowed = set(props) if isinstance(props, Mapping) and "additionalProperties" not in schema else None

    def check(args: Any) -> list[str]:
        if errors := _not_object(args):
            return errors
        try:
            found = sorted(validator.iter_errors(dict(args)), key=lambda e: list(e.absolute_path))
        except Unresolvable as exc:
            logger.info("tool schema has an unresolvable $ref, arguments are not checked: %s", exc)
            return []
        lines = _unexpected(args, allowed)
        for error in found:
            where = ".".join(str(part) for part in error.absolute_path) or "(arguments)"
            lines.append(f"{where}: {error.message}")
        return lines[:MAX_ERRORS]

    return check


class _OnFirstUse:
    """Builds a JSON-schema checker when first called: checking a schema costs more than
    registering the tool, and most tools are never called with unchecked arguments."""

    def __init__(self, schema: Mapping[str, Any]) -> None:
        self._schema = schema
        self._check: Checker | None = None

    def __call__(self, args: Any) -> list[str]:
        if self._check is None:  # a race builds it twice, harmlessly
            self._check = _json_schema_checker(self._schema)
        return self._check(args)


def checker_for(schema: Any) -> Checker:
    """A checker for a pydantic model class or a JSON schema dict (anything else: accept)."""
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return _pydantic_checker(schema)
    if isinstance(schema, Mapping) and schema:
        return _OnFirstUse(schema)
    return _not_object
