"""The per-call view every stage of ``prepare`` takes and returns, and what ``prepare`` returns.

A :class:`CallView` starts as the call's input (messages, tools, scope, budgets resolved once)
and each stage returns a new one with its part filled in (:meth:`CallView.override`, which is
``dataclasses.replace``); nothing of it is shared between calls. The report is built from the
last view by the account stage, so no stage writes to a report.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.tools import BaseTool

from ctxplugin._layout import calls_tools
from ctxplugin._message_values import REF_SHAPE
from ctxplugin._prefix import Stamp
from ctxplugin.budget import FactLine
from ctxplugin.history import HistoryBudget
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope, logged_id
from ctxplugin.tokens import content_text
from ctxplugin.tools import ToolPlan

logger = logging.getLogger("ctxplugin")

ToolLike = BaseTool | dict[str, Any]
"""A tool as ``prepare`` binds it: a ``BaseTool`` or an OpenAI-format dict."""

SESSIONS_TRACKED = 1024
"""Sessions whose state each stage keeps between calls (the least recently seen first out): an
evicted session's next call reads its conversation afresh."""


@dataclass(frozen=True, slots=True)
class Room:
    """The room the history has in this call (set by the room stage).

    Attributes:
        outside: tokens of the header and the tool schemas as first chosen.
        total: tokens left for the history beside ``outside`` and the facts budget.
        budget: the limits compression aims for.
        whole: whether the conversation is sent as it is (``history.compress="over_budget"``
            and it fits): no ref, no summary, no note.
        history_tokens: tokens of the history as validated (``original``), tool results included.
        tool_result_tokens: the part of them in tool results.
    """

    outside: int
    total: int
    budget: HistoryBudget
    whole: bool = False
    history_tokens: int = 0
    tool_result_tokens: int = 0


@dataclass(frozen=True, slots=True)
class Fitted:
    """The view as assembled within the budgets (set by the fit stage).

    Attributes:
        messages: what the model is sent: header, facts block and history in place.
        sections: tokens per section of ``messages`` (and of the bound tool schemas).
        within_budget: whether the view is within the total budget (a section over its own budget
            shows in the report's ``sections``, not here).
        dropped_exchanges: exchanges the fit stage dropped on top of compression's.
        facts: the facts lines left in the view.
    """

    messages: tuple[BaseMessage, ...]
    sections: Mapping[str, int]
    within_budget: bool
    dropped_exchanges: int = 0
    facts: tuple[FactLine, ...] = ()


@dataclass(frozen=True)
class CallView:
    """One call's view on its way through the stages.

    Attributes:
        scope: whose call it is.
        received: the messages as the agent holds them (never changed).
        tools_given: the agent's tools as passed to ``prepare``.
        strict_tools: the host binds the tools strictly (``prepare``'s ``strict_tools``).
        budgets: section budgets in tokens, resolved once for this call.
        started: ``time.perf_counter()`` when the call began.
        header: the leading system messages as received (validate).
        original: the conversation after validation, before any stage changed it (validate).
        history: the conversation as the view will show it.
        received_stamp, original_stamp, history_stamp: what ``received``, ``original`` and
            ``history`` are as sequences (validate; see
            :class:`~ctxplugin._prefix.Stamp`): a stage that keeps per-session state tells from
            them whether the sequence only grew since it last saw it. A stage that changes
            ``history`` without stamping it leaves ``history_stamp`` None.
        refs_expanded: refs the model read back with ``expand_ref`` (validate).
        withheld: refs of tool outputs new in this call that their host masked after capture
            (validate; see :func:`~ctxplugin.cas.masked_refs`): revoked from the CAS (refs).
        system: the header to send: the host's system messages as given, then the tool
            directory in a system message of its own when it is active (tools).
        plan: the tool plan of this call (tools).
        tools: what to bind (tools; the room stage may take ``expand_ref`` out).
        expand_ref: the host's ``expand_ref`` tool when it was given (tools).
        expand_ref_tokens: tokens of its schema (tools).
        tool_tokens: tokens of the schemas bound (tools, room).
        room: the room the history has (room).
        refs_created: refs stored for the first time by this call (refs).
        refs_used: refs the view shows, each once in the order first shown (refs, fit).
        stored: the ref of each tool output shown as a summary, by tool-call id (refs).
        unstored: the tool-call ids of the outputs the CAS could not store in this call, which
            pass through whole with no ref (refs).
        stored_texts: the text behind each ref the view shows of a user message cut to fit the
            budget (fit).
        facts: the facts lines chosen for the view (facts, shown).
        facts_extracted: facts written from messages read for the first time (facts).
        outdated_marked: messages marked as stating something no longer current (facts).
        unmarked: ``history`` as it was before those marks (facts); context notes are written
            from it, so a mark on an old message does not rewrite the notes.
        compressed: messages whose content compression trimmed or gisted (history).
        omitted: exchanges compression condensed into notes (history).
        facts_anchor: the message the facts block is placed before (history).
        fitted: the assembled view (fit).
        text_outputs: a text-mode conversation's messages as received, the indexes of its
            command outputs, read as tool results in between, and the call id of the output it
            ends with (text_mode, text_view).
        warnings: what was skipped or changed, in the order it happened.
        timings: milliseconds per stage so far.
        report: the account of the call (account).
    """

    scope: Scope
    received: Sequence[BaseMessage]
    tools_given: tuple[Any, ...]
    budgets: Mapping[str, int]
    started: float
    strict_tools: bool = False
    header: tuple[SystemMessage, ...] = ()
    original: tuple[BaseMessage, ...] = ()
    history: tuple[BaseMessage, ...] = ()
    received_stamp: Stamp | None = None
    original_stamp: Stamp | None = None
    history_stamp: Stamp | None = None
    refs_expanded: tuple[str, ...] = ()
    withheld: tuple[str, ...] = ()
    system: tuple[SystemMessage, ...] = ()
    plan: ToolPlan | None = None
    tools: tuple[Any, ...] = ()
    expand_ref: Any = None
    expand_ref_tokens: int = 0
    tool_tokens: int = 0
    room: Room | None = None
    refs_created: tuple[str, ...] = ()
    stored: Mapping[str, str] = field(default_factory=dict)
    unstored: tuple[str, ...] = ()
    stored_texts: Mapping[str, str] = field(default_factory=dict)
    refs_used: tuple[str, ...] = ()
    facts: tuple[FactLine, ...] = ()
    facts_extracted: int = 0
    outdated_marked: int = 0
    unmarked: tuple[BaseMessage, ...] | None = None
    compressed: int = 0
    omitted: int = 0
    facts_anchor: BaseMessage | None = None
    fitted: Fitted | None = None
    text_outputs: tuple[Sequence[BaseMessage], tuple[int, ...], str | None] | None = None
    warnings: tuple[str, ...] = ()
    timings: Mapping[str, float] = field(default_factory=dict)
    report: ContextReport | None = None

    def override(self, **changes: Any) -> CallView:
        """A copy of this view with ``changes`` applied (a new ``history`` unstamped unless
        ``history_stamp`` is given with it).

        Raises:
            TypeError: a name in ``changes`` is not a field of the view.
        """
        if "history" in changes and "history_stamp" not in changes:
            changes["history_stamp"] = None
        unknown = changes.keys() - _FIELD_SET
        if unknown:
            raise TypeError(f"CallView has no field {', '.join(sorted(unknown))}")
        # the fields as a dict, as dataclasses.replace would set them but without its checks or
        # its call of __init__: a stage makes a few of these per call
        new = object.__new__(CallView)
        fields = new.__dict__
        fields.update(self.__dict__)
        fields.update(changes)
        return new

    def warn(self, *texts: str) -> CallView:
        """This view with ``texts`` added to its warnings."""
        return self.override(warnings=(*self.warnings, *texts)) if texts else self

    def degraded(self, text: str) -> CallView:
        """This view with a skipped step recorded: a store failed and the original passed
        through (see :func:`log_degraded`)."""
        return self.warn(log_degraded(self.scope, text))


_FIELD_SET = frozenset(f.name for f in dataclasses.fields(CallView))


@dataclass
class PreparedContext:
    """What the model should see for one call.

    Attributes:
        messages: header (the host's system messages as given, then the tool directory in a
            system message of its own), facts block and compressed history.
        tools: tools to bind for this call (meta-tools plus loaded schemas, or all tools).
        report: what was done, with token counts per section and timings.
    """

    messages: list[BaseMessage]
    tools: list[ToolLike]
    report: ContextReport

    @property
    def system_message(self) -> SystemMessage | None:
        """The view's first message when it is a system message: the host's system prompt as
        given (or, without one, the tool directory); the rest of the header, the tool
        directory among it, starts :attr:`conversation`."""
        first = self.messages[0] if self.messages else None
        return first if isinstance(first, SystemMessage) else None

    @property
    def conversation(self) -> list[BaseMessage]:
        """The view without :attr:`system_message` (for hosts that pass it separately): the
        system messages after it (the tool directory) come first."""
        return self.messages[1:] if self.system_message is not None else list(self.messages)



class Stage(Protocol):
    """One step of ``prepare``: takes the view and returns a new one.

    A stage's fields are its settings and the services it may use; it never reaches into
    another stage and never writes to a report."""

    @property
    def name(self) -> str:
        """The stage's name in ``report.timings_ms``."""
        ...

    def apply(self, view: CallView) -> CallView:
        """The view with this stage's work done."""
        ...


def log_degraded(scope: Scope, text: str) -> str:
    """Log a skipped step at WARNING, with the session in ``extra`` (whole; the message shows a
    long one shortened, :func:`~ctxplugin.scope.logged_id`), and return ``text`` for
    the report: the one place where a store failure is absorbed (the original passes through
    and the report says what was skipped)."""
    logger.warning("%s (session %s)", text, logged_id(scope.session_id), extra={"ctxplugin_session": scope.session_id})
    return text


def reads_nothing(messages: Sequence[BaseMessage]) -> bool:
    """Whether ``messages`` (a view) call no tool, a lookup included, and show no ref: an agent
    without tools of its own has nothing there for ``expand_ref`` to read, so it is not bound
    (a model that cannot bind tools then answers as it did without ctxplugin)."""
    return not calls_tools(messages) and not any(REF_SHAPE.search(content_text(m.content)) for m in messages)


def tool_label(tool: Any) -> str:
    """The name a report shows for ``tool`` (``"?"`` when it has none)."""
    if isinstance(tool, BaseTool):
        return tool.name
    if isinstance(tool, dict):
        fn = tool.get("function")
        if isinstance(fn, dict) and "name" in fn:
            return str(fn["name"])
        return str(tool.get("name", "?"))
    return str(getattr(tool, "__name__", getattr(tool, "name", "?")))


__all__ = ["SESSIONS_TRACKED", "CallView", "Fitted", "PreparedContext", "Room", "Stage", "ToolLike", "log_degraded", "reads_nothing", "tool_label"]
