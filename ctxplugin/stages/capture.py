"""Capture: the other way in — a tool output stored as it arrives, before any ``prepare`` (and
the way out: what a conversation its host cleared stated, forgotten).

``capture_tool_result`` returns the compact message for the conversation (summary and ref in
``additional_kwargs["ctxplugin"]``) and reads the full output for facts, once. It shares its
memos with the refs and facts stages, so an output captured here is neither stored nor read
again when it comes back in a history.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage

from ctxplugin import _tracing
from ctxplugin._deadline import step_budget
from ctxplugin._events import emit
from ctxplugin._messages import META_KEY
from ctxplugin._names import CAPTURE_EVENT
from ctxplugin._untrusted import content_problem, parse_once
from ctxplugin.cas import FACTS_UNREAD, compact_content
from ctxplugin.config import ContextConfig
from ctxplugin.errors import InvalidInputError, StoreError
from ctxplugin.facts import FactsLedger
from ctxplugin.report import CaptureReport
from ctxplugin.scope import Scope
from ctxplugin.stages._backlog import held_back
from ctxplugin.stages._mark_owners import FOREIGN_MARK, unmarked
from ctxplugin.stages._seen import as_read
from ctxplugin.stages.memos import CaptureMemo, ReadMemo, fact_source
from ctxplugin.stages.view import log_degraded


@dataclass(frozen=True, slots=True)
class Capture:
    """Store one tool output and read it for facts.

    Attributes:
        config: the engine's configuration (CAS, facts and store timeout settings).
        ledger: the facts ledger.
        captures: compact forms, shared with the refs stage.
        reads: messages already read, shared with the facts stage.
    """

    config: ContextConfig
    ledger: FactsLedger
    captures: CaptureMemo
    reads: ReadMemo

    def __call__(self, tool_message: ToolMessage, scope: Scope) -> tuple[ToolMessage, CaptureReport]:
        """The compact message and what was done.

        Raises:
            InvalidInputError: ``tool_message`` is not a ``ToolMessage``, or its content is
                neither a string nor a list, or blocks no walk can read (nested too deep).
        """
        if not isinstance(tool_message, ToolMessage):
            raise InvalidInputError(
                f"capture_tool_result() takes a ToolMessage, got {type(tool_message).__name__}"
            )
        problem = content_problem("the tool message", tool_message)
        if problem is not None:
            raise InvalidInputError(problem)
        report = CaptureReport(session_id=scope.session_id, tool_call_id=tool_message.tool_call_id)
        foreign = self.captures.owners.foreign(tool_message, scope)
        if foreign is not None:  # a tool's own message marked with another output's ref: plain content
            report.warnings.append(log_degraded(scope, FOREIGN_MARK.format(ref=foreign)))
            tool_message = unmarked(tool_message)
        with step_budget(self.config.stores.timeout), parse_once(), _tracing.child_run(
            "ctxplugin.capture_tool_result",
            inputs={"tool_call_id": tool_message.tool_call_id, "name": tool_message.name or ""},
        ) as run:
            result, shape = self._store(tool_message, scope, report)
            reads_facts = self.config.facts.enabled and self.config.facts.extract and fact_source(tool_message)
            if reads_facts and not self._read(tool_message, scope, report, shape):
                result = _marked_unread(result, shape)
            run.finish(outputs={"ref": report.ref_id or ""}, metadata=report.as_metadata)
        emit(CAPTURE_EVENT, report.model_dump())
        return result, report

    def forget_said(self, messages: Sequence[BaseMessage], scope: Scope, at: Sequence[int] | None = None) -> None:
        """What ``scope``'s user messages among ``messages`` (a whole conversation, from its
        start: one its host cleared) stated is not current any more, and what they replaced by
        key is current again; read again (added back, said again), they are read as new. With
        ``at``, only the messages at those indexes (a text-mode conversation's outputs, read as
        what the user said before it was read in text mode). A failing facts store is logged at
        WARNING: what they stated then stays current. Facts read from its tool outputs stay."""
        if not (self.config.facts.enabled and self.config.facts.extract):
            return
        named = as_read(messages)
        said = [m for m in (named if at is None else [named[i] for i in at]) if isinstance(m, HumanMessage) and fact_source(m)]
        if not said:
            return
        self.reads.forget(said, scope)
        try:
            self.ledger.leave(said, scope=scope)
        except StoreError as exc:
            log_degraded(scope, f"facts store unavailable; what the user messages forgotten stated stays current: {exc}")

    def _store(self, tool_message: ToolMessage, scope: Scope, report: CaptureReport) -> tuple[ToolMessage, str | None]:
        """The message the conversation carries, and the shape its summary took the output for
        (None when it was passed through)."""
        if not self.config.cas.enabled:
            return tool_message, None
        start = time.perf_counter()
        try:
            try:
                captured = self.captures.captured(tool_message, scope)
            finally:
                _timed(report, "store", start)
        except StoreError as exc:
            report.warnings.append(log_degraded(scope, f"CAS unavailable; tool output passed through: {exc}"))
            return tool_message.model_copy(
                update={"additional_kwargs": {**tool_message.additional_kwargs, META_KEY: {"warning": str(exc)}}}
            ), None
        report.original_tokens = captured.original_tokens
        report.compact_tokens = captured.compact_tokens
        if captured.passthrough or not captured.ref_id:
            return tool_message, None
        report.ref_id = captured.ref_id
        report.passthrough = False
        meta = {
            "ref": captured.ref_id,
            "compact": captured.text,
            "original_tokens": captured.original_tokens,
            "compact_tokens": captured.compact_tokens,
        }
        return tool_message.model_copy(
            update={"content": compact_content(captured.text, tool_message.content),
                    "additional_kwargs": {**tool_message.additional_kwargs, META_KEY: meta}}
        ), captured.shape

    def _read(self, tool_message: ToolMessage, scope: Scope, report: CaptureReport, shape: str | None) -> bool:
        """Read the output for facts; False when it was not read (the facts store failed, or
        older messages are owed to the ledger) and a summary stands for the output in the
        conversation (the output is kept here)."""
        start = time.perf_counter()
        # the full output is read, with the ref it is stored under as provenance and the shape
        # its summary found (the rules read no statements from code or a diff)
        note = {"ref": report.ref_id, **({"shape": shape} if shape else {})}
        source = tool_message if report.ref_id is None else tool_message.model_copy(
            update={"additional_kwargs": {**tool_message.additional_kwargs, META_KEY: note}}
        )
        if held_back(self.reads.owed, scope, bool(self.reads.unread.kept(scope))):
            # older messages are owed to the ledger: the facts stage reads this output after them,
            # in conversation order, so that none of them supersedes what this one states (the
            # report's facts_extracted stays 0; the next prepare's report counts what is owed)
            _timed(report, "facts", start)
            if report.ref_id is None:
                return True  # the conversation holds it whole: read from there
            self.reads.unread.keep(source, scope)
            return False
        fresh: list[BaseMessage] = []
        try:
            with self.reads.claim([source], scope) as fresh:
                if fresh:
                    report.facts_extracted = len(self.ledger.ingest(fresh, scope=scope))
                    self.reads.read_outputs(fresh, scope)
        except StoreError as exc:
            report.warnings.append(log_degraded(scope, f"facts store unavailable; extraction skipped: {exc}"))
            if report.ref_id is not None and any(m is source for m in fresh):
                # a summary stands in the history for it: kept whole, to be read on a later call
                self.reads.unread.keep(source, scope)
                return False
        finally:
            _timed(report, "facts", start)
        return True


def _marked_unread(result: ToolMessage, shape: str | None) -> ToolMessage:
    """``result`` with its annotation marked :data:`~ctxplugin.cas.FACTS_UNREAD` (with the shape
    its summary found, for the reading): another process serving the conversation reads the
    output from a state that keeps it whole, as this one reads the copy it keeps."""
    note = {**result.additional_kwargs[META_KEY], FACTS_UNREAD: True, **({"shape": shape} if shape else {})}
    return result.model_copy(update={"additional_kwargs": {**result.additional_kwargs, META_KEY: note}})


def _timed(report: CaptureReport, step: str, start: float) -> None:
    report.timings_ms[step] = report.timings_ms.get(step, 0.0) + (time.perf_counter() - start) * 1000


__all__ = ["Capture"]
