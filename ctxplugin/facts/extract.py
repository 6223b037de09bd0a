"""Fact extractors: what they return (:class:`FactDraft`) and how a user's extractor plugs in.

An extractor takes one message and returns drafts. The built-in
:class:`~ctxplugin.facts.rules.RuleExtractor` uses no model. A model-backed extractor can be a
sync or async function, or a LangChain ``Runnable``, returning drafts, dicts, strings (one fact
per line, or a JSON list), or a chat message whose content is such text;
:func:`as_extractor` normalises all of them in one place.

Example:
    >>> def my_extractor(message):
    ...     return [{"text": "Budget is 50k", "key": "budget", "kind": "constraint"}]
    >>> extract = as_extractor(my_extractor)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeAlias

from langchain_core.messages import BaseMessage
from langchain_core.runnables import Runnable

from ctxplugin._untrusted import load_json
from ctxplugin.errors import ConfigError, InvalidInputError
from ctxplugin.facts.model import (
    FACT_KINDS,
    FACT_SCOPES,
    Authority,
    FactKind,
    FactScope,
    MemoryType,
)
from ctxplugin.scope import Visibility
from ctxplugin.tokens import content_text


@dataclass(frozen=True)
class FactDraft:
    """A fact an extractor proposes; the ledger decides ids, supersession and provenance.

    Attributes:
        text: the statement (at most 500 characters).
        key: semantic key; facts with the same key supersede each other.
        kind: decision, entity, task, metric, link, preference, constraint or fact.
        tags: topic tags and identifiers.
        importance: 0–1.
        scope: global, session, task, draft or hypothetical.
        replaces: text of an old value this one corrects ("use X instead of Y": ``Y``); the ledger
            supersedes the current fact that states it when ``key`` is unknown.
        authority, memory_type, visibility: ``None`` lets the ledger choose from the source.
        revises: the statement refers back to what was said: ``"latest"``, a new value alone
            ("make that the 24th") for the latest statement holding a value of its type;
            ``"earlier"``, an earlier value brought back ("never mind, keep the original");
            ``"adopted"``, a hypothetical or a draft just said taken up ("OK, let's do that");
            ``"withdrawn"``, what the user said about a subject taken back ("forget what I said
            about the budget"): the subject is ``key``'s words, or else the one the text names,
            and the draft states nothing itself. The ledger finds what it revises (see :mod:`ctxplugin.facts._revisions`); when
            nothing fits, the draft is written as it is.
        record: one record of a structured tool output (a JSON object) without a key: the
            output of the same call made again (same tool, same arguments) replaces it when it
            does not state it again.
    """

    text: str
    key: str | None = None
    kind: FactKind = "fact"
    tags: tuple[str, ...] = ()
    importance: float = 0.5
    scope: FactScope = "global"
    scope_id: str | None = None
    replaces: str | None = None
    constraint_type: str | None = None
    depends_on: tuple[str, ...] = ()
    authority: Authority | None = None
    memory_type: MemoryType | None = None
    visibility: Visibility | None = None
    source_ref: str | None = field(default=None, compare=False)
    revises: Literal["latest", "earlier", "adopted", "withdrawn"] | None = None
    # left out of the repr and of comparisons, as source_ref is: which drafts are records is said
    # by where they come from (a JSON object), not by what they state, and the recorded readings
    # of the rules hold their reprs
    record: bool = field(default=False, repr=False, compare=False)


DraftLike: TypeAlias = FactDraft | dict[str, Any] | str
Extractor: TypeAlias = Callable[[BaseMessage], list[FactDraft]]
"""A normalised extractor: one message in, drafts out (synchronous)."""
ExtractorLike: TypeAlias = (
    Callable[[BaseMessage], Iterable[DraftLike] | DraftLike | None]
    | Callable[[BaseMessage], Awaitable[Iterable[DraftLike] | DraftLike | None]]
    | Runnable[Any, Any]
)

_DRAFT_FIELDS = {f.name for f in fields(FactDraft)}


def as_extractor(extractor: ExtractorLike) -> Extractor:
    """Normalise a user's extractor (sync/async callable or ``Runnable``) to an :data:`Extractor`.

    Raises:
        ConfigError: ``extractor`` is neither callable nor a ``Runnable``.
    """
    if isinstance(extractor, Runnable):
        runnable = extractor
        return lambda message: coerce_drafts(runnable.invoke(message))
    if not callable(extractor):
        raise ConfigError(f"a fact extractor must be a callable or a Runnable, got {type(extractor).__name__}")
    function = extractor

    def run(message: BaseMessage) -> list[FactDraft]:
        return coerce_drafts(_resolve(function(message)))

    return run


def combine(*extractors: ExtractorLike) -> Extractor:
    """One extractor running several in turn (e.g. the rules, then a model)."""
    normalised = [as_extractor(e) for e in extractors]

    def run(message: BaseMessage) -> list[FactDraft]:
        out: list[FactDraft] = []
        for extract in normalised:
            out.extend(extract(message))
        return out

    return run


def coerce_drafts(result: Any) -> list[FactDraft]:
    """Drafts from whatever an extractor returned.

    Raises:
        InvalidInputError: an item cannot be read as a fact (the message says which).
    """
    if result is None:
        return []
    if isinstance(result, BaseMessage):
        result = content_text(result.content)
    if isinstance(result, (FactDraft, dict)):
        return [_draft(result)]
    if isinstance(result, str):
        stripped = result.strip()
        if stripped.startswith("["):
            try:
                parsed = load_json(stripped)
            except ValueError:  # not JSON, or past the safe limits: read as lines
                pass
            else:
                return coerce_drafts(parsed)
        lines = (line.strip().lstrip("-*•").strip() for line in stripped.splitlines())
        return [FactDraft(text=line) for line in lines if line]
    if isinstance(result, Iterable):
        out: list[FactDraft] = []
        for item in result:
            if isinstance(item, str):
                if item.strip():
                    out.append(FactDraft(text=item.strip()))
            else:
                out.append(_draft(item))
        return out
    raise InvalidInputError(f"a fact extractor returned {type(result).__name__}; return drafts, dicts or strings")


def _draft(item: Any) -> FactDraft:
    if isinstance(item, FactDraft):
        return item
    if not isinstance(item, dict):
        raise InvalidInputError(f"a fact extractor returned an item of type {type(item).__name__}")
    unknown = set(item) - _DRAFT_FIELDS
    if unknown:
        raise InvalidInputError(f"a fact draft has unknown fields {sorted(unknown)}; known: {sorted(_DRAFT_FIELDS)}")
    if not isinstance(item.get("text"), str):
        raise InvalidInputError("a fact draft needs a 'text' string")
    if item.get("kind", "fact") not in FACT_KINDS:
        raise InvalidInputError(f"fact kind must be one of {FACT_KINDS}, got {item.get('kind')!r}")
    if item.get("scope", "global") not in FACT_SCOPES:
        raise InvalidInputError(f"fact scope must be one of {FACT_SCOPES}, got {item.get('scope')!r}")
    if item.get("revises") not in (None, "latest", "earlier", "adopted", "withdrawn"):
        raise InvalidInputError(
            f"fact draft field 'revises' must be 'latest', 'earlier', 'adopted', 'withdrawn' or None, got {item.get('revises')!r}"
        )
    if not isinstance(item.get("record", False), bool):
        raise InvalidInputError(f"fact draft field 'record' must be true or false, got {item.get('record')!r}")
    values = dict(item)
    for name in ("tags", "depends_on"):
        if name in values:
            values[name] = _strings(values[name], name)
    return FactDraft(**values)


def _strings(value: Any, name: str) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    if isinstance(value, Sequence):
        return tuple(str(v) for v in value)
    raise InvalidInputError(f"fact draft field {name!r} must be a list of strings")


def _resolve(value: Any) -> Any:
    """Await ``value`` if it is awaitable, from sync code, with or without a running loop."""
    if not inspect.isawaitable(value):
        return value

    async def wait() -> Any:
        return await value

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(wait())
    # Called from inside a running loop (sync code in async code): run it on its own loop.
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, wait()).result()


__all__ = ["DraftLike", "Extractor", "ExtractorLike", "FactDraft", "as_extractor", "coerce_drafts", "combine"]
