"""Configuration errors a user can act on.

pydantic reports a bad value by its field path (``budget.total``); a user who set
``CTXPLUGIN_BUDGET__TOTAL`` should read that name, the value they gave and what is allowed.
This module turns a ``ValidationError`` into that text, and finds ``CTXPLUGIN_*`` environment
variables that set nothing (``CTXPLUGIN_BUDGET_TOTAL``, one underscore short of a nested
setting) so they do not go unnoticed.
"""

from __future__ import annotations

import difflib
import json
import re
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, SecretStr, ValidationError

from ctxplugin.errors import ConfigError

PREFIX = "CTXPLUGIN_"
DELIMITER = "__"

NOT_SETTINGS_PREFIXES = ("CTXPLUGIN_TEST_",)
"""Variables under these prefixes belong to the test suite, not to :class:`ContextConfig`."""

NOT_SETTINGS = frozenset({"CTXPLUGIN_MODEL_DIR", "CTXPLUGIN_DATA", "CTXPLUGIN_GOLDEN"})
"""Variables read outside :class:`ContextConfig`: where the minilm weights are unpacked
(:mod:`ctxplugin.facts.sentence`), and where and how the test suite replays recordings."""

_VALUE_ERROR = "Value error, "


def _section(annotation: Any) -> type[BaseModel] | None:
    """The model class a field holds (``X`` or ``X | None``), if any."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        models = [a for a in typing.get_args(annotation) if isinstance(a, type) and issubclass(a, BaseModel)]
        return models[0] if len(models) == 1 else None
    return None


def _holds_secret(annotation: Any) -> bool:
    """Whether a field's type is, or holds, a ``SecretStr`` (``dict[str, SecretStr]``)."""
    return annotation is SecretStr or any(_holds_secret(a) for a in typing.get_args(annotation))


def _paths(model: type[BaseModel], parent: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], type[BaseModel] | None]]:
    for name, field in model.model_fields.items():
        path = (*parent, name)
        section = _section(field.annotation)
        yield path, section
        if section is not None:
            yield from _paths(section, path)


def env_name(path: tuple[str, ...]) -> str:
    """The environment variable that sets the field at ``path``."""
    return PREFIX + DELIMITER.join(path).upper()


def env_names(root: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """Every variable that sets something, mapped to the field path it sets."""
    return {env_name(path): path for path, _ in _paths(root)}


def share_without_window(name: str, value: float, model: str | None) -> str:
    """The error of a budget section given as a share of the context window when no window is
    known: what to set, and why the model's name (``model``, when set) gave none."""
    named = f"model={model!r}" if model else "The model setting"
    return (
        f"budget.{name}={value} is a share of the model's context window, but no window is known. "
        "Set budget.context_window to the model's input window in tokens (budget={'context_window': "
        f"128000}}, or {env_name(('budget', 'context_window'))}=128000), or pass context_window= to "
        f"prepare(); or give budget.{name} in tokens (a number above 1). "
        f"{named} gives no window: it only picks the tokenizer, and ctxplugin does not look a window "
        "up by model name (only create_agent's middleware reads one, from a chat model whose "
        "profile declares max_input_tokens)."
    )


def not_bool(value: object) -> object:
    """``value`` for a budget, refused when it is a bool (which would read as 1, a 100% share)."""
    if isinstance(value, bool):
        raise ConfigError("must be a number: a token count above 1, or a share of the context window in (0, 1]")
    return value


def sections_over_total(budget: Any, names: Sequence[str]) -> str | None:
    """What to warn of when a section of ``budget`` (a ``BudgetConfig``; its sections ``names``)
    is set above its total, where that is known without a window given per call (the total caps
    the section)."""
    if not budget.context_window and not all(v is None or v > 1 for v in (budget.total, *(getattr(budget, n) for n in names))):
        return None
    resolved = budget.resolve()
    over = [name for name in names if resolved[name] > resolved["total"]]
    if not over:
        return None
    said = ", ".join(f"budget.{name}={getattr(budget, name):g}" for name in over)
    return (
        f"{said} {'is' if len(over) == 1 else 'are'} more than budget.total={budget.total:g} "
        f"({resolved['total']} tokens): a section takes at most the total, which caps it; "
        "lower the section or raise the total"
    )


def _squashed(name: str) -> str:
    return name.replace("_", "")


def unknown_variables(root: type[BaseModel], environ: Mapping[str, str]) -> list[str]:
    """One sentence per ``CTXPLUGIN_*`` variable that sets nothing, naming the likely intended
    spelling."""
    known = env_names(root)
    # an unknown name inside a section fails validation (extra settings are forbidden); one
    # inside a mapping (CTXPLUGIN_CHROMA_HEADERS__NAME) is a key of it
    sections = tuple(
        env_name(path) + DELIMITER for path, section in _paths(root) if section is not None or _is_mapping(root, path)
    )
    mappings = tuple(env_name(path) + DELIMITER for path, _ in _paths(root) if _is_mapping(root, path))
    squashed = {_squashed(name): name for name in known}
    out = []
    for name in sorted(environ):
        upper = name.upper()
        mapping = next((m for m in mappings if upper.startswith(m)), None)
        if mapping is not None and "_" in upper[len(mapping) :]:
            # a variable's name has no hyphen: the key it sets keeps the underscores
            key = name[len(mapping) :].lower()
            out.append(
                f"environment variable {name} sets the key {key!r} of {mapping[: -len(DELIMITER)]}, underscores kept; "
                f"for {key.replace('_', '-')!r} set {mapping[: -len(DELIMITER)]} as JSON, e.g. "
                f"{mapping[: -len(DELIMITER)]}='{{\"{key.replace('_', '-')}\": \"...\"}}'"
            )
            continue
        if (
            not upper.startswith(PREFIX)
            or upper in known
            or upper in NOT_SETTINGS
            or upper.startswith((*NOT_SETTINGS_PREFIXES, *sections))
        ):
            continue
        guess = squashed.get(_squashed(upper)) or next(iter(difflib.get_close_matches(upper, known, n=1, cutoff=0.8)), None)
        hint = f"did you mean {guess}?" if guess else ""
        if not guess or (DELIMITER in guess and DELIMITER not in upper):
            hint += f"{' ' if hint else ''}nested settings are joined with a double underscore, e.g. {env_name(('budget', 'total'))}"
        out.append(f"environment variable {name} sets no ctxplugin setting and is ignored; {hint}")
    return out


def _annotation(root: type[BaseModel], path: tuple[str | int, ...]) -> Any:
    """The type of the field at ``path`` (None when there is no such field)."""
    model = _model_at(root, path[:-1])
    field = model.model_fields.get(str(path[-1])) if model is not None and path else None
    return None if field is None else field.annotation


def _is_mapping(root: type[BaseModel], path: tuple[str, ...]) -> bool:
    return typing.get_origin(_annotation(root, path)) is dict


def _takes_json(root: type[BaseModel], path: tuple[str, ...]) -> bool:
    """Whether the field at ``path`` is a section, a list or a mapping, which a variable gives
    as JSON."""
    annotation = _annotation(root, path)
    return _section(annotation) is not None or typing.get_origin(annotation) in (list, dict)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def settings_error(message: str, *, root: type[BaseModel], environ: Mapping[str, str]) -> str:
    """pydantic-settings' message for a variable it cannot parse, naming the variable: the
    section's own (``CTXPLUGIN_BUDGET``) or a list inside it (``CTXPLUGIN_TOOLS__PINNED``)."""
    match = re.search(r'field "(\w+)"', message)
    if match is None:
        return message
    name = env_name((match.group(1),))
    paths = env_names(root)
    unread = [
        (variable, paths[variable.upper()])
        for variable in sorted(environ)
        if variable.upper() in paths
        and paths[variable.upper()][0] == match.group(1)
        and _takes_json(root, paths[variable.upper()])
        and not _is_json(environ[variable])
    ]
    variable, path = unread[0] if unread else (name, (match.group(1),))
    example = "{...}" if _model_at(root, path) is not None or _is_mapping(root, path) else "[...]"
    return (
        f"environment variable {variable} cannot be read: a section, a list or a mapping set from the "
        f"environment takes JSON, e.g. {variable}='{example}' ({message})"
    )


def _given(values: Mapping[str, Any], path: tuple[str | int, ...]) -> bool:
    """Whether the field at ``path`` (or a section above it) was passed in code."""
    current: Any = values
    for part in path:
        if isinstance(current, BaseModel):
            current = current.__dict__
        if not isinstance(current, Mapping) or part not in current:
            return False
        current = current[part]
    return True


def _from_env(path: tuple[str, ...], values: Mapping[str, Any], environ: Mapping[str, str]) -> str | None:
    """The variable that supplied the value at ``path``, when the environment did."""
    if not path or _given(values, path):
        return None
    upper = {k.upper(): k for k in environ}
    for n in range(len(path), 0, -1):  # the most specific variable wins, as in pydantic-settings
        name = upper.get(env_name(path[:n]))
        if name is not None:
            return name
    return None


def _allowed(error: Mapping[str, Any], model: type[BaseModel] | None, leaf: str) -> str:
    message = str(error["msg"])
    if error["type"] == "extra_forbidden":
        fields = list(model.model_fields) if model is not None else []
        close = difflib.get_close_matches(leaf, fields, n=1)
        hint = f"did you mean {close[0]!r}? " if close else ""
        return f"is not a setting; {hint}the settings here are {', '.join(fields)}"
    if message.startswith(_VALUE_ERROR):
        return message[len(_VALUE_ERROR):]
    if message.startswith("Input should"):
        return "should" + message[len("Input should"):]
    return message[:1].lower() + message[1:]


def _model_at(root: type[BaseModel], path: tuple[str | int, ...]) -> type[BaseModel] | None:
    model: type[BaseModel] | None = root
    for part in path:
        if model is None or not isinstance(part, str) or part not in model.model_fields:
            return None
        model = _section(model.model_fields[part].annotation)
    return model


def describe(
    exc: ValidationError,
    *,
    root: type[BaseModel],
    prefix: tuple[str, ...] = (),
    values: Mapping[str, Any] | None = None,
    environ: Mapping[str, str] | None = None,
) -> str:
    """What is wrong, in the names the user set, and what is allowed.

    Args:
        exc: pydantic's error for ``root``.
        root: the model that failed (``ContextConfig`` or one of its sections).
        prefix: the field path of ``root`` inside ``ContextConfig`` (``("budget",)``).
        values: what the code passed, to tell code from environment apart.
        environ: the environment the settings were read from (``None``: values came from code).
    """
    lines = []
    for error in exc.errors():
        loc = tuple(error["loc"])
        path = (*prefix, *(str(p) for p in loc))
        dotted = ".".join(path) or "the configuration"
        where = None
        if environ is not None and all(isinstance(p, str) for p in loc):
            where = _from_env(tuple(str(p) for p in loc), values or {}, environ)
        model = _model_at(root, loc[:-1]) if error["type"] == "extra_forbidden" else None
        allowed = _allowed(error, model, str(loc[-1]) if loc else "")
        given = error.get("input")
        if loc and _holds_secret(_annotation(root, loc[:1])):  # its value is never shown
            subject = f"environment variable {where} (read as {dotted})" if where is not None else dotted
        elif where is not None and environ is not None:
            subject = f"environment variable {where}={environ[where]!r} (read as {dotted})"
        elif error["type"] == "extra_forbidden" or isinstance(given, (dict, BaseModel)):
            below = sorted(k for k in environ or () if k.upper().startswith(env_name(path) + DELIMITER))
            subject = dotted + (f" (environment variables {', '.join(below)})" if below else "")
        else:
            subject = f"{dotted}={given!r}"
        lines.append(f"{subject}: {allowed}")
    head = "invalid ctxplugin setting" if len(lines) == 1 else f"{len(lines)} invalid ctxplugin settings"
    return f"{head}: " + "; ".join(lines)


class Translated:
    """Mixed in before pydantic's base: ``model_validate``, ``model_validate_json`` and
    ``model_validate_strings`` raise the :class:`ConfigError` the constructor raises (its
    message, pydantic's ``ValidationError`` as its cause), not a ``ValidationError``. A model
    holding a config as a field validates it as pydantic validates any field."""

    if not TYPE_CHECKING:  # type checkers keep pydantic's signatures

        @classmethod
        def model_validate(cls, *args, **kwargs):
            return _translated(cls, super().model_validate, args, kwargs)

        @classmethod
        def model_validate_json(cls, *args, **kwargs):
            return _translated(cls, super().model_validate_json, args, kwargs)

        @classmethod
        def model_validate_strings(cls, *args, **kwargs):
            return _translated(cls, super().model_validate_strings, args, kwargs)


def _translated(cls: Any, validate: Any, args: Any, kwargs: Any) -> Any:
    try:
        return validate(*args, **kwargs)
    except ValidationError as exc:
        errors = exc.errors()
        own = errors[0].get("ctx", {}).get("error") if len(errors) == 1 and not errors[0]["loc"] else None
        if isinstance(own, ConfigError) and own.__cause__ is not None:
            # the constructor's, which pydantic calls to validate and wraps: raised as it is
            raise own from own.__cause__
        raise ConfigError(describe(exc, root=cls, prefix=getattr(cls, "_path", ()))) from exc
