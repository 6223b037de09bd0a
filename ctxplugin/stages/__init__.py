"""The stages of ``prepare``, each a small object with one job, over one per-call view.

A stage's fields are its settings and the services it may use; :meth:`apply` takes a
:class:`CallView` and returns a new one. :func:`pipeline` wires them in order for an engine:

``text_mode → validate → tools → room → refs → facts → history → shown → fit → text_view → account``

Beside them, :class:`Capture` stores a tool output as it arrives and :class:`Answers` puts the
answer cache around a model call; they share the memos of :mod:`ctxplugin.stages.memos` with
the stages. See ``docs/architecture.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_core.messages import BaseMessage

from ctxplugin import _tracing
from ctxplugin._modes import total_not_set
from ctxplugin.config import ContextConfig
from ctxplugin.facts import FactsLedger
from ctxplugin.history import BackgroundSummarizer
from ctxplugin.history.identifiers import warm as warm_identifiers
from ctxplugin.scope import Scope
from ctxplugin.stages._attachments import Attachments
from ctxplugin.stages.account import Account
from ctxplugin.stages.answers import Answers
from ctxplugin.stages.capture import Capture
from ctxplugin.stages.facts import ChooseFacts
from ctxplugin.stages.fit import FitBudget
from ctxplugin.stages.history import CompressHistory
from ctxplugin.stages.memos import CaptureMemo, ReadMemo
from ctxplugin.stages.refs import StoreRefs
from ctxplugin.stages.room import FindRoom
from ctxplugin.stages.shown import SkipShown
from ctxplugin.stages.text_mode import ReadCommands, WriteCommands
from ctxplugin.stages.tools import ToolChoice, Tools, choose_tools
from ctxplugin.stages.validate import Validate
from ctxplugin.stages.view import (
    CallView,
    Fitted,
    PreparedContext,
    Room,
    Stage,
    ToolLike,
    log_degraded,
)
from ctxplugin.tokens import TokenCounter
from ctxplugin.tools import ToolRegistry


def pipeline(
    config: ContextConfig,
    *,
    counter: TokenCounter,
    registry: ToolRegistry,
    ledger: FactsLedger,
    summarizer: BackgroundSummarizer | None,
    captures: CaptureMemo,
    reads: ReadMemo,
    facts_lines: int,
    note: str | None = None,
    forget_said: Callable[[Sequence[BaseMessage], Scope, Sequence[int]], None] | None = None,
) -> tuple[Stage, ...]:
    """The stages of ``prepare`` for ``config``, in order; a section that is off has no stage.

    Args:
        facts_lines: tokens the facts block may take.
        note: a warning every report carries (how tokens are counted, when not exactly).
        forget_said: forgets what the messages at the indexes given stated as the user (see
            :class:`ReadCommands`).
    """
    # what every process pays once is paid as the engine is built, not by its first call
    _tracing.warm()
    warm_identifiers()
    attachments = Attachments(captures, enabled=config.cas.enabled)  # shared: stored once, by either stage
    stages: list[Stage] = [
        ReadCommands(forget_said=forget_said),
        Validate(orphans=config.orphan_tool_results, owners=captures.owners),
        Tools(config=config.tools, counter=counter, registry=registry),
        FindRoom(history=config.history, facts=config.facts, counter=counter, elastic=config.budget.elastic),
        StoreRefs(enabled=config.cas.enabled, captures=captures),
    ]
    if config.facts.enabled:
        stages.append(ChooseFacts(config.facts, config.history, ledger, counter, reads, facts_lines))
    if config.history.enabled:
        stages.append(CompressHistory(config=config.history, counter=counter, summarizer=summarizer, attachments=attachments))
    if config.facts.enabled and config.facts.skip_shown:
        stages.append(SkipShown())
    stages.append(FitBudget(facts=config.facts, counter=counter, block_size=config.history.block_size, note_tokens=config.history.digest_tokens,
                            captures=captures if config.cas.enabled else None, attachments=attachments,
                            hold_prompt=total_not_set(config)))
    stages.append(WriteCommands(counter=counter))
    stages.append(Account(counter=counter, note=note))
    return tuple(stages)


__all__ = [
    "Account",
    "Answers",
    "CallView",
    "Capture",
    "CaptureMemo",
    "ChooseFacts",
    "CompressHistory",
    "FindRoom",
    "FitBudget",
    "Fitted",
    "PreparedContext",
    "ReadCommands",
    "ReadMemo",
    "Room",
    "SkipShown",
    "Stage",
    "StoreRefs",
    "ToolChoice",
    "ToolLike",
    "Tools",
    "Validate",
    "WriteCommands",
    "choose_tools",
    "log_degraded",
    "pipeline",
]
