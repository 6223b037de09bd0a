"""One prepared view of a recorded conversation, for ``ctxplugin inspect``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, messages_to_dict
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ctxplugin.engine import ContextEngine
from ctxplugin.errors import InvalidInputError
from ctxplugin.replay.loaders import Conversation, LoadedFile
from ctxplugin.replay.metrics import (
    Meter,
    action_identifiers,
    leading_system_count,
    occurs,
    tools_tokens,
)
from ctxplugin.replay.peers import Ctxplugin, View
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope
from ctxplugin.tokens import args_json, content_text


@dataclass
class Inspected:
    """The view ctxplugin prepared for one call, and what the model did next."""

    file: str
    conversation: str
    call: int
    calls: int
    message_index: int
    view: View
    report: ContextReport
    action: AIMessage
    visible: list[str]
    missing: list[str]
    meter: Meter

    def to_json(self) -> dict[str, Any]:
        """JSON form (messages as ``messages_to_dict``)."""
        return {
            "file": self.file,
            "conversation": self.conversation,
            "session_id": self.conversation,
            "call": self.call,
            "calls": self.calls,
            "message_index": self.message_index,
            "report": self.report.model_dump(mode="json"),
            "messages": messages_to_dict(list(self.view.messages)),
            "tools": [t.get("function", {}).get("name", t.get("name")) for t in self.view.tools],
            "tool_schema_tokens": tools_tokens(self.view.tools, self.meter.counter),
            "next_action": messages_to_dict([self.action])[0],
            "identifiers": {"visible": self.visible, "missing": self.missing},
        }


def select(loaded: LoadedFile, conversation: str | None) -> Conversation:
    """A conversation of a file by id or 0-based position (the first when None).

    Raises:
        InvalidInputError: no such conversation (the message lists what there is).
    """
    convs = loaded.conversations
    if not convs:
        raise InvalidInputError(f"{loaded.path}: no conversation could be read ({'; '.join(loaded.errors)})")
    if conversation is None:
        return convs[0]
    for conv in convs:
        if conv.id == conversation:
            return conv
    if conversation.lstrip("-").isdigit() and -len(convs) <= int(conversation) < len(convs):
        return convs[int(conversation)]
    for problem in loaded.errors:  # one the file holds but could not read: say why, not that it is absent
        if problem.startswith(f"conversation {conversation}: "):
            raise InvalidInputError(f"{loaded.path}: {problem}")
    names = ", ".join(c.id for c in convs[:5]) + (" …" if len(convs) > 5 else "")
    raise InvalidInputError(f"{loaded.path}: no conversation {conversation!r}; it has {len(convs)} ({names})")


def inspect_call(
    loaded: LoadedFile,
    conversation: Conversation,
    call: int,
    *,
    engine: ContextEngine,
    tools: list[dict[str, Any]],
) -> Inspected:
    """Prepare calls ``0..call`` of ``conversation`` (so per-session state builds up as in a
    replay) and return the last view.

    Raises:
        InvalidInputError: ``call`` is out of range.
    """
    indexes = conversation.call_indexes()
    if not -len(indexes) <= call < len(indexes):
        raise InvalidInputError(
            f"{loaded.path}: conversation {conversation.id} has {len(indexes)} calls (0..{len(indexes) - 1}); got --call {call}"
        )
    position = call % len(indexes)
    strategy = Ctxplugin(engine, tools or list(conversation.tools), Scope(session_id=conversation.id))
    messages = conversation.messages
    view = View(messages=[], tools=[])
    for index in indexes[: position + 1]:
        view = strategy.view(messages[:index])
    target = indexes[position]
    action = messages[target]
    if view.report is None or not isinstance(action, AIMessage):
        raise InvalidInputError(f"{loaded.path}: call {call} produced no report")
    meter = Meter(engine.counter)
    earlier = meter.text(messages[leading_system_count(messages):target])
    seen = meter.text(view.messages)
    eligible = sorted(i for i in action_identifiers(action) if occurs(i, earlier))
    return Inspected(
        file=loaded.path,
        conversation=conversation.id,
        call=position,
        calls=len(indexes),
        message_index=target,
        view=view,
        report=view.report,
        action=action,
        visible=[i for i in eligible if occurs(i, seen)],
        missing=[i for i in eligible if not occurs(i, seen)],
        meter=meter,
    )


def _preview(message: BaseMessage, width: int | None) -> str:
    text = content_text(message.content)
    if isinstance(message, AIMessage) and message.tool_calls:
        calls = "; ".join(f"{c['name']}({args_json(c['args'], sort_keys=False)})" for c in message.tool_calls)
        text = f"{text}\n→ {calls}" if text else f"→ {calls}"
    if width is None:
        return text
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _change(before: int, after: int) -> str:
    """The view's size against the recorded call's: the share saved, or the share it adds (the
    tools ctxplugin binds can outweigh what a short history saves)."""
    if after > before and before:
        return f"{(after - before) / before:.1%} more"
    return f"{(before - after) / before if before else 0.0:.1%} saved"


def render(item: Inspected, *, full: bool = False) -> RenderableType:
    """A rich rendering: summary, sections, refs, facts, tools, warnings, then the messages."""
    report = item.report
    parts: list[RenderableType] = []
    parts.append(
        Text.from_markup(
            f"[bold]{item.file}[/bold] · conversation [bold]{item.conversation}[/bold] · call {item.call} of "
            f"{item.calls} (before message {item.message_index}) · session [bold]{item.conversation}[/bold]"
        )
    )
    summary = Table(show_header=False, box=None, pad_edge=False)
    summary.add_row("tokens", f"{report.tokens_before:,} → {report.tokens_after:,} ({_change(report.tokens_before, report.tokens_after)})")
    summary.add_row("budget", f"{report.budget_total:,}" + ("" if report.within_budget else " [red](over)[/red]") if report.budget_total else "–")
    summary.add_row("messages", f"{report.messages_before} → {report.messages_after}")
    summary.add_row("compressed / dropped", f"{report.compressed_messages} messages / {report.dropped_exchanges} exchanges")
    summary.add_row("unchanged prefix", f"{report.unchanged_prefix_tokens:,} tokens since the previous call")
    summary.add_row("tool schemas sent", f"{tools_tokens(item.view.tools, item.meter.counter):,} tokens")
    parts.append(summary)
    sections = Table(title="sections", title_justify="left")
    for header in ("section", "before", "after", "budget"):
        sections.add_column(header, justify="left" if header == "section" else "right")
    for name, section in report.sections.items():
        sections.add_row(name, f"{section.before:,}", f"{section.after:,}", "–" if section.budget is None else f"{section.budget:,}")
    parts.append(sections)
    parts.append(Text(f"refs created: {', '.join(report.refs_created) or '–'}"))
    parts.append(Text(f"refs in view: {', '.join(report.refs_used) or '–'}"))
    if report.facts:
        facts = Table(title="facts", title_justify="left")
        for header in ("id", "key", "score"):
            facts.add_column(header)
        for fact in report.facts:
            facts.add_row(fact.id, fact.key or "–", f"{fact.score:.3f}")
        parts.append(facts)
    else:
        parts.append(Text(f"facts: – ({report.facts_extracted} extracted this call)"))
    directory = "names-only directory" if report.tools_directory else "full schemas"
    parts.append(Text(f"tools ({directory}): bound {', '.join(report.tools_bound) or '–'}; loaded {', '.join(report.tools_loaded) or '–'}"))
    for warning in report.warnings:
        parts.append(Text(f"warning: {warning}", style="yellow"))
    view = Table(title="prepared messages", title_justify="left", show_lines=full)
    view.add_column("#", justify="right")
    view.add_column("role")
    view.add_column("tokens", justify="right")
    view.add_column("content")
    for number, message in enumerate(item.view.messages):
        view.add_row(str(number), message.type, f"{item.meter.tokens(message):,}", Text(_preview(message, None if full else 160)))
    parts.append(view)
    parts.append(Text(f"next recorded action: {_preview(item.action, None if full else 300)}"))
    parts.append(
        Text(
            f"identifiers it used that appeared earlier: {len(item.visible)} visible"
            + (f", missing: {', '.join(item.missing)}" if item.missing else "")
        )
    )
    return Group(*parts)
