"""Account: the call's :class:`~ctxplugin.report.ContextReport`, built from the final view.

Tokens per section before and after, refs, facts, tools, timings and warnings all come from
the view the stages returned; this stage also measures the prefix of the view unchanged since
the session's previous call (what a provider's prompt cache can serve).

A host resends its conversation on every call, so what is summed over it (tokens before, the
values it used) is carried per session and brought up to date with what is new since the
previous call (see :mod:`ctxplugin._running`); the history's own tokens are the room stage's.
"""

from __future__ import annotations

import copy
import hashlib
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import is_
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage
from langchain_core.tools import BaseTool

from ctxplugin._fidelity_sessions import SessionFidelity
from ctxplugin._lru import LRU, PerMessage
from ctxplugin._prefix import Prefix
from ctxplugin._running import SessionTallies
from ctxplugin.errors import InvalidInputError
from ctxplugin.fidelity import write as write_fidelity
from ctxplugin.report import ContextReport, FactUse
from ctxplugin.scope import Scope
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView, tool_label
from ctxplugin.tokens import TokenCounter, count_message

_SIGNATURES = 8192
"""Messages whose signature is kept (the oldest first out)."""

_Sig = tuple[str, str | bytes, str | None, str | None, bytes | None]
"""A message's signature (see :func:`_message_sig`)."""

_signatures: PerMessage[_Sig] = PerMessage(_SIGNATURES)

_TOOL_SETS = 8
"""Copies of tool lists kept for sessions to share (the latest first)."""


@dataclass(frozen=True, slots=True)
class Account:
    """Build ``report`` from the view (after the fit stage).

    Attributes:
        counter: counts the received messages.
        note: a warning every report carries (how tokens are counted, when that is not exact).
    """

    name: ClassVar[str] = "account"
    counter: TokenCounter
    note: str | None = None
    _last_view: LRU[str, _Shown] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _received: SessionTallies = field(default_factory=lambda: SessionTallies(SESSIONS_TRACKED))
    _fidelity: SessionFidelity = field(default_factory=lambda: SessionFidelity(SESSIONS_TRACKED))
    _tool_sets: list[list[Any]] = field(default_factory=list)

    def apply(self, view: CallView) -> CallView:
        fitted, plan, room = view.fitted, view.plan, view.room
        if fitted is None or plan is None or room is None:
            raise InvalidInputError(
                "the account stage needs view.plan, view.room and view.fitted: run the tools, room and fit stages first"
            )
        counter = self.counter
        key = view.scope.key()
        received_tokens, _ = self._received.sums(key, view.received, counter, view.received_stamp)
        history_tokens = room.history_tokens - room.tool_result_tokens  # the room stage counted the validated history
        summaries_tokens = room.tool_result_tokens
        report = ContextReport(
            session_id=view.scope.session_id,
            encoding=counter.name,
            tokens_before=received_tokens + plan.schema_tokens_full,
            budget_total=view.budgets["total"],
            within_budget=fitted.within_budget,
            messages_before=len(view.received),
            messages_after=len(fitted.messages),
            refs_created=list(view.refs_created),
            refs_used=list(view.refs_used),
            refs_expanded=list(view.refs_expanded),
            facts=[
                FactUse(id=fact_id, key=key, score=round(f.score, 4))
                for f in fitted.facts
                for fact_id, key in ((f.fact_id, f.key), *f.also)
            ],
            facts_extracted=view.facts_extracted,
            outdated_marked=view.outdated_marked,
            tools_directory=plan.active,
            tools_bound=[tool_label(t) for t in view.tools],
            tools_loaded=list(plan.loaded),
            compressed_messages=view.compressed,
            dropped_exchanges=view.omitted + fitted.dropped_exchanges,
            warnings=[*([self.note] if self.note else []), *view.warnings],
        )
        before = {
            "header": sum(count_message(m, counter) for m in view.header),
            "history": history_tokens,
            "summaries": summaries_tokens,
            "facts": fitted.sections.get("facts", 0),
            "tools": plan.schema_tokens_full,
        }
        for name, tokens in fitted.sections.items():
            section = report.sections[name]
            section.after = tokens
            section.before = before.get(name, section.before)
            if name != "tools":
                section.budget = view.budgets.get(name)
        report.tokens_after = sum(fitted.sections.values())
        report.unchanged_prefix_tokens = self._prefix_tokens(view.scope, fitted.messages, view.tools, fitted.sections.get("tools", 0))
        fidelity_started = time.perf_counter()
        fidelity = self._fidelity.check(key, view.original, fitted.messages, view.stored, view.original_stamp)
        write_fidelity(report, self._fidelity.behind(key, fidelity, tuple(view.stored_texts.values())))
        timings = {**view.timings, "fidelity": (time.perf_counter() - fidelity_started) * 1000}
        report.timings_ms = {**timings, "total": (time.perf_counter() - view.started) * 1000}
        return view.override(report=report)

    def _prefix_tokens(self, scope: Scope, messages: Sequence[BaseMessage], tools: Sequence[Any], tool_tokens: int) -> int:
        """Leading tokens unchanged since this session's previous view: the bound tools'
        ``tool_tokens`` when they are the same, then the messages (none when the tools changed,
        which come first in a request).

        A message is told changed by what the provider is sent for it (see :func:`_message_sig`);
        the very message object shown before is told changed only by its content or tool calls
        (a name, status or keywords set on it in place are not noticed: a host sends such a
        change as another message object)."""
        key = scope.key()
        with self._lock:
            previous = self._last_view.get(key)
        sources = list(map(_tool_source, tools))
        same_tools = previous is not None and _equal(sources, previous.tools)
        kept = previous.kept_by(messages) if previous is not None and same_tools else 0
        if kept and previous is not None:  # the previous view begins this one: only the new messages are read
            sigs = [*previous.sigs, *map(_message_sig, messages[kept:])]
            tokens = [*previous.tokens, *(count_message(m, self.counter) for m in messages[kept:])]
            unchanged = previous.total
        else:
            sigs = list(map(_message_sig, messages))
            tokens = [count_message(m, self.counter) for m in messages]
            unchanged = 0
            if previous is not None and same_tools:
                for sig, size, old_sig in zip(sigs, tokens, previous.sigs, strict=False):
                    if sig != old_sig:
                        break
                    unchanged += size
        shown_tools = previous.tools if previous is not None and same_tools else self._tool_set(sources)
        with self._lock:
            self._last_view.put(key, _Shown(shown_tools, messages, sigs, tokens))
        return tool_tokens + unchanged if previous is not None and same_tools else 0

    def _tool_set(self, sources: list[Any]) -> list[Any]:
        """A copy of ``sources`` (see :func:`_tool_source`), the one another session holds when
        it is equal: sessions served with the same tools hold one copy of them, not one each."""
        with self._lock:
            made = list(self._tool_sets)
        for tools in made:
            if _equal(sources, tools):
                return tools
        tools = _copied(sources)
        with self._lock:
            self._tool_sets.insert(0, tools)
            del self._tool_sets[_TOOL_SETS:]
        return tools


def _calls(message: BaseMessage) -> Any:
    # read from the model's fields: asking a message that has none for the attribute is slow
    return message.__dict__.get("tool_calls")


class _Shown:
    """A session's previous view: its messages as a :class:`~ctxplugin._prefix.Prefix` (each
    with the content it held then), their tool calls, signatures and tokens."""

    __slots__ = ("calls", "seen", "sigs", "tokens", "tools", "total")

    def __init__(self, tools: list[Any], messages: Sequence[BaseMessage], sigs: list[_Sig], tokens: list[int]) -> None:
        self.tools = tools  # what the tools' schemas were made from (see _tool_source), copied
        self.seen = Prefix()
        self.seen.extend(messages)
        self.calls = tuple(map(_calls, messages))
        self.sigs = sigs
        self.tokens = tokens
        self.total = sum(tokens)

    def kept_by(self, messages: Sequence[BaseMessage]) -> int:
        """How many messages ``messages`` begins with that are this view's, the very objects
        holding the very content and tool calls: all of them, or 0."""
        count = len(self.seen)
        if count and self.seen.changed(messages) == [] and all(map(is_, self.calls, map(_calls, messages[:count]))):
            return count
        return 0


_APART = frozenset({"content", "type", "name", "tool_call_id", "id", "response_metadata", "usage_metadata", "artifact"})
"""A message's fields not in the digest of its others: signed apart, or sent to no provider."""


def _message_sig(message: BaseMessage) -> _Sig:
    """What the provider is sent for ``message``, as it is now, memoised by the message object:
    its type, its text (the string itself, which cannot change; other content by a digest of its
    repr), its name and tool call id, and a digest of the repr of its other fields a provider
    reads that are not at their defaults (tool calls, invalid ones, a tool result's status,
    additional keywords such as a reasoning item; None when there is none, as for most
    messages). The text is not digested: a signature is compared with the previous view's only
    when the view does not extend it, and a call that does extend it then reads no new tool
    output to sign it."""
    found = _signatures.get(message)
    if found is not None:
        return found
    fields = message.__dict__
    content = fields["content"]
    others = [(name, value) for name, default in _signed(type(message)) if (value := fields.get(name)) != default]
    sig = (
        message.type,
        content if isinstance(content, str) else _digest(repr(content)),
        fields.get("name"),
        fields.get("tool_call_id"),
        _digest(repr(others)) if others else None,
    )
    _signatures.put(message, sig)
    return sig


def _signed(kind: type[BaseMessage]) -> tuple[tuple[str, Any], ...]:
    """The fields of ``kind`` a signature digests, each with its default (:data:`_REQUIRED` for
    a field without one)."""
    found = _SIGNED.get(kind)
    if found is None:
        found = tuple(
            (name, _REQUIRED if info.is_required() else info.get_default(call_default_factory=True))
            for name, info in kind.model_fields.items()
            if name not in _APART
        )
        if len(_SIGNED) >= 1024:  # classes made on the fly: their fields are cheap to read again
            _SIGNED.clear()
        _SIGNED[kind] = found
    return found


_REQUIRED = object()
_SIGNED: dict[type, tuple[tuple[str, Any], ...]] = {}


def _tool_source(tool: Any) -> Any:
    """What the schema the provider is sent for ``tool`` is made from, in order: a dict itself,
    a ``BaseTool``'s class, name, description, argument schema and extras, a function itself."""
    if isinstance(tool, BaseTool):
        return (type(tool), tool.name, tool.description, tool.args_schema, getattr(tool, "extras", None))
    return tool


def _copied(sources: list[Any]) -> list[Any]:
    """``sources`` as they are now, their dicts copied (a tool edited in place is then told apart)."""
    return [copy.deepcopy(s) if isinstance(s, (dict, tuple)) else s for s in sources]


def _equal(one: list[Any], other: list[Any]) -> bool:
    """Whether the two lists of tool sources are equal (False when a value in them gives no truth
    value for ``==``, an array say: tools that cannot be told the same are taken as others)."""
    try:
        return bool(one == other)
    except (ValueError, TypeError):
        return False


def _digest(text: str) -> bytes:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).digest()


__all__ = ["Account"]
