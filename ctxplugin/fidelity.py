"""Which exact values of the conversation a prepared view no longer shows.

Savings alone do not say whether a view still serves the agent. Every call, the account of the
view checks the values the conversation *used* — what the user wrote and what the assistant
passed as tool-call arguments (ids, paths, numbers, quoted values, code names; see
:func:`ctxplugin.history.identifiers.identifiers`) — against the view:

- **shown**: the value occurs in the view as a whole token;
- **behind a ref**: it does not, but it occurs in a tool output whose ref the view shows, so one
  ``expand_ref`` call brings it back;
- **left**: neither. These are what the report counts as values that left the view.

Values only a tool output or the assistant's prose holds are not counted: an output holds
thousands and most are never used, and prose repeats what it read; what the conversation acted
on is what the next step is likely to need. The leading system messages are never compressed
and are left out.

What one message holds is read once (see :mod:`ctxplugin._message_values`). :func:`value_fidelity`
checks one call from scratch; :class:`ctxplugin._fidelity_sessions.SessionFidelity`, which the
account stage uses, gives the same results call after call at the cost of what each call brings
that is new.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._message_values import SCAN_CHARS, read
from ctxplugin.history.identifiers import identifiers, occurs
from ctxplugin.report import ContextReport
from ctxplugin.scope import logged_id

logger = logging.getLogger("ctxplugin")


@dataclass(frozen=True)
class Fidelity:
    """What a view kept of the values its conversation used.

    Attributes:
        used: distinct values the user wrote or the assistant passed in tool-call arguments
            (leading system messages aside).
        shown: how many of them the view shows.
        behind_refs: values not shown but one ``expand_ref`` away (in a stored output whose ref
            the view shows), in first-seen order.
        left: values neither shown nor behind a shown ref, in first-seen order.
        left_from_user: the part of ``left`` that the user wrote.
    """

    used: int
    shown: int
    behind_refs: tuple[str, ...] = ()
    left: tuple[str, ...] = ()
    left_from_user: tuple[str, ...] = ()


def behind_texts(fidelity: Fidelity, texts: Iterable[str]) -> Fidelity:
    """``fidelity`` with the values left that one of ``texts`` holds counted behind refs: the
    whole text of a user message the budget cut, stored behind the ref its cut shows."""
    left = fidelity.left
    if not left:
        return fidelity
    held: set[str] = set()
    for text in texts:
        held.update(identifiers(text[:SCAN_CHARS]))
    if held.isdisjoint(left):  # (in C: as a rule there are no texts, and the values left are many)
        return fidelity
    behind = [v for v in left if v in held]
    if not behind:
        return fidelity
    return replace(
        fidelity,
        behind_refs=(*fidelity.behind_refs, *behind),
        left=tuple(v for v in left if v not in held),
        left_from_user=tuple(v for v in fidelity.left_from_user if v not in held),
    )


def _refs_shown(stored: Mapping[str, str], view_text: str) -> set[str]:
    """Tool-call ids whose output is stored behind a ref that ``view_text`` shows."""
    return {call_id for call_id, ref in stored.items() if ref in view_text}


def value_fidelity(
    history: Sequence[BaseMessage],
    view: Sequence[BaseMessage],
    stored: Mapping[str, str] | None = None,
) -> Fidelity:
    """Check the values ``history`` used against the prepared ``view``.

    Args:
        history: the conversation as the host passed it.
        view: the messages the model is sent.
        stored: the ref of each tool output stored behind one, by tool-call id; without it no
            value counts as behind a ref.

    Returns:
        The counts and, for values not shown, which are behind a ref and which left.
    """
    start = 0
    while start < len(history) and isinstance(history[start], SystemMessage):
        start += 1
    used: dict[str, bool] = {}  # value -> whether the user wrote it
    for message in history[start:]:
        if isinstance(message, (HumanMessage, AIMessage)):
            from_user = isinstance(message, HumanMessage)
            for value in read(message).used:
                if value not in used:
                    used[value] = from_user
                elif from_user:
                    used[value] = True
    if not used:
        return Fidelity(used=0, shown=0)
    in_view: set[str] = set()
    for message in view:
        in_view.update(read(message).shown)
    missing = [v for v in used if v not in in_view]
    view_text = "\n".join(read(m).text for m in view) if missing else ""
    missing = [v for v in missing if not occurs(v, view_text)]
    behind: list[str] = []
    left: list[str] = []
    if missing:
        with_ref = _refs_shown(stored or {}, view_text)
        outputs = [
            set(read(m).shown)
            for m in history[start:]
            if isinstance(m, ToolMessage) and m.tool_call_id in with_ref
        ]
        for value in missing:
            (behind if any(value in s for s in outputs) else left).append(value)
    return Fidelity(
        used=len(used),
        shown=len(used) - len(missing),
        behind_refs=tuple(behind),
        left=tuple(left),
        left_from_user=tuple(v for v in left if used[v]),
    )


def describe(fidelity: Fidelity, *, limit: int = 20) -> str:
    """One line for a debug log: the counts and the first ``limit`` values that left."""
    shown = ", ".join(json.dumps(v) for v in fidelity.left[:limit])
    more = f" (+{len(fidelity.left) - limit} more)" if len(fidelity.left) > limit else ""
    return (
        f"{fidelity.shown} of {fidelity.used} values shown, {len(fidelity.behind_refs)} behind refs, "
        f"{len(fidelity.left)} left the view{': ' + shown + more if shown else ''}"
    )


def record(
    report: ContextReport,
    history: Sequence[BaseMessage],
    view: Sequence[BaseMessage],
    stored: Mapping[str, str] | None = None,
) -> Fidelity:
    """Check ``view`` against ``history`` (see :func:`value_fidelity`) and write the result
    into ``report`` (see :func:`write`)."""
    fidelity = value_fidelity(history, view, stored)
    write(report, fidelity)
    return fidelity


def write(report: ContextReport, fidelity: Fidelity) -> None:
    """Write ``fidelity`` into ``report``.

    Values the user wrote that left the view also get a warning, so that nothing the user
    stated leaves silently; every value that left is logged at DEBUG level."""
    report.values_used = fidelity.used
    report.values_shown = fidelity.shown
    report.values_behind_refs = len(fidelity.behind_refs)
    report.values_left = list(fidelity.left)
    report.values_left_from_user = list(fidelity.left_from_user)
    if fidelity.left_from_user:
        count = len(fidelity.left_from_user)
        report.warnings.append(
            f"{count} value{'s' if count != 1 else ''} the user wrote left the view "
            f"(report.values_left_from_user lists {'them' if count != 1 else 'it'})"
        )
    if fidelity.left and logger.isEnabledFor(logging.DEBUG):
        logger.debug("ctxplugin.fidelity session=%s %s", logged_id(report.session_id), describe(fidelity))


__all__ = ["Fidelity", "behind_texts", "describe", "record", "value_fidelity", "write"]
