"""Fit: the sections assembled into the messages sent, within every budget.

Compression already aimed at the room the history has; this stage enforces the budgets on
what is left (dropping the oldest exchanges, shrinking tool results, as
:func:`~ctxplugin.budget.enforce` orders it), places the facts block and counts each section.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._layout import calls_tools, is_condensed, is_note, lookup_fits
from ctxplugin._lru import RECENT_MESSAGES, PerMessage
from ctxplugin._message_values import refs_in
from ctxplugin._messages import annotation
from ctxplugin._unique_calls import unique_call_ids
from ctxplugin.budget import Parts, enforce, section_tokens, total_tokens
from ctxplugin.config import FactsConfig
from ctxplugin.errors import StoreError
from ctxplugin.facts.render import TOOL_GROUP
from ctxplugin.history import without_tool_values
from ctxplugin.stages._attachments import UNSTORED, Attachments, dropped_attachments
from ctxplugin.stages._unbound import unoffered, unoffered_note, unshrunk
from ctxplugin.stages._unstored_notes import unpromised_dropped
from ctxplugin.stages.memos import CaptureMemo
from ctxplugin.stages.view import CallView, Fitted, reads_nothing
from ctxplugin.tokens import TokenCounter, content_text

FACTS_TITLE = "Known facts (current; newer facts replace older ones):"


@dataclass(frozen=True, slots=True)
class FitBudget:
    """Assemble the view within the budgets; fill ``fitted``.

    Attributes:
        facts: the facts settings (where the block goes).
        counter: counts the sections.
        block_size: ``history.block_size``: exchanges are dropped in blocks of this many.
        note_tokens: ``history.digest_tokens``: the note for dropped exchanges lists their
            values within this many tokens.
        captures: where a user's message the last resort cuts is stored whole, so that its
            cut names a ref (None when the CAS is off: the cut names none).
        attachments: where a user's attachments are stored once the budget drops their message,
            so that the note standing for the drop names them and their ref (None: not named).
        hold_prompt: the last resort never cuts the host's system prompt (the total is the
            default or yields to the prompt, see ``budget.elastic``: nobody asked for a cap).
    """

    name: ClassVar[str] = "budget"
    facts: FactsConfig
    counter: TokenCounter
    block_size: int
    note_tokens: int = 0
    captures: CaptureMemo | None = None
    attachments: Attachments | None = None
    hold_prompt: bool = False

    def apply(self, view: CallView) -> CallView:
        # without a bound tool or a tool call of its own, the request has no tool list, which
        # Bedrock needs for the lookup pairs: notes and facts then go after the header. The
        # conversation as received counts: compression may have condensed every tool call into
        # notes, which then hold what tools returned and must stay in the tool role
        called = calls_tools(view.original)
        # ``expand_ref`` alone makes a tool list only for facts read from tool outputs (they name
        # refs, and speak as lookups): a chat without tools of its own is otherwise bound it only
        # when its view shows a ref (below)
        expand = next((t for t in view.tools if t is view.expand_ref), None)
        lookups = any(t is not expand for t in view.tools) or called or (expand is not None and any(f.from_tool for f in view.facts))
        parts = Parts(
            header=view.system,
            history=list(view.history),
            facts_title=FACTS_TITLE,
            tools_title=TOOL_GROUP,
            facts=view.facts,
            tools_tokens=view.tool_tokens,
            facts_anchor=view.facts_anchor,
            facts_placement=self.facts.placement,
            lookups=lookups,
        )
        refs: dict[str, bool] = {}  # stored by this call's cuts -> whether newly
        texts: dict[str, str] = {}  # the text each of them stores
        failed: list[str] = []
        captures = self.captures

        def keep(text: str) -> str | None:
            if captures is None or failed:
                return None
            try:
                ref, created = captures.stored_text(text, view.scope)
            except StoreError as exc:
                failed.append(str(exc))
                return None
            refs[ref] = refs.get(ref, False) or created
            texts[ref] = text
            return ref

        outcome = enforce(
            parts, dict(view.budgets), self.counter, block_size=self.block_size, note_tokens=self.note_tokens, keep=keep,
            hold_prompt=self.hold_prompt,
        )
        parts = outcome.parts
        noted = None
        if self.attachments is not None:
            history, noted = dropped_attachments(view.history, parts.history, self.attachments, view.scope, dict(view.stored_texts))
            parts = replace(parts, history=history)
            for ref in noted.used:
                refs[ref] = refs.get(ref, False) or ref in noted.created
            texts.update(noted.texts)
        if view.unstored:
            parts = replace(parts, history=unpromised_dropped(view.history, parts.history, view.unstored))
        if any(line.from_tool for line in parts.facts) and not (
            lookups and lookup_fits(parts.history)
        ):
            # no place for a lookup (no user turn or tool result to follow, or no tool list): the
            # block would be a system message, and text a tool returned never speaks there; it
            # waits for the next call
            parts = replace(parts, facts=tuple(line for line in parts.facts if not line.from_tool))
        if (
            called
            and not lookup_fits(parts.history)
            and any(is_condensed(m) for m in parts.history)
        ):
            # the same for the notes of condensed exchanges, which list what tools returned (a
            # history of assistant messages only, with no user turn or tool result to follow)
            parts = replace(parts, history=[m for m in parts.history if not is_condensed(m)])
        if "notes" in parts.layout().extra_kinds:
            # notes in a system message (a chat whose provider's own tools fetched pages, with no
            # tool list) list nothing those tools found: a fetched page never speaks there
            parts = replace(parts, history=_untooled(parts.history))
        messages = parts.layout().messages(parts.header)
        if expand is not None and not lookups and reads_nothing(messages):
            parts = replace(parts, tools_tokens=parts.tools_tokens - view.expand_ref_tokens)
            view = view.override(tools=tuple(t for t in view.tools if t is not expand), tool_tokens=parts.tools_tokens)
            expand = None
        if expand is None and view.expand_ref is not None:
            # expand_ref taken out (here or by the room stage): the view never tells the model to
            # call it. A host that gave none may bind it itself (an LCEL step, a chat history):
            # its view keeps the hints
            history = [_unoffered(m) for m in parts.history]
            if any(a is not b for a, b in zip(history, parts.history, strict=True)):
                parts = replace(parts, history=history)
                messages = parts.layout().messages(parts.header)
        within = outcome.within and total_tokens(parts, self.counter) <= view.budgets["total"]
        fitted = Fitted(
            messages=tuple(unique_call_ids(messages)),  # a call id a model gave twice is sent once
            sections=section_tokens(parts, self.counter),
            within_budget=within,
            dropped_exchanges=parts.dropped_exchanges,
            facts=parts.facts,
        )
        view = view.override(fitted=fitted).warn(*outcome.warnings)
        if noted is not None and noted.failed is not None:
            view = (view.degraded if noted.fresh else view.warn)(f"{UNSTORED}: {noted.failed}")
        if failed:
            view = view.degraded(f"CAS unavailable; a user message cut to fit the budget is not stored, its cut part is not readable: {failed[0]}")
        # the refs of outputs the history condensed or the budget dropped are used only where a
        # note still names them
        named = frozenset().union(*map(_named_refs, messages)) if view.refs_used else frozenset()
        used = tuple(r for r in view.refs_used if r in named)
        shown = [ref for ref in refs if any(ref in content_text(m.content) for m in messages)]
        kept = {r: t for r, t in view.stored_texts.items() if r in named}  # a condensed user attachment's, still named
        if not shown:
            if len(kept) != len(view.stored_texts):
                view = view.override(stored_texts=kept)
            return view.override(refs_used=used) if len(used) != len(view.refs_used) else view
        return view.override(refs_created=(*view.refs_created, *(r for r in shown if refs[r] and r not in view.refs_created)),
                             refs_used=tuple(dict.fromkeys((*used, *shown))), stored_texts={**kept, **{r: texts[r] for r in shown}})


_NAMED: PerMessage[frozenset[str]] = PerMessage(RECENT_MESSAGES)


def _named_refs(message: BaseMessage) -> frozenset[str]:
    """The refs ``message``'s text names (memoised: a view's messages are mostly last call's)."""
    found = _NAMED.get(message)
    if found is None:
        found = refs_in(content_text(message.content))
        _NAMED.put(message, found)
    return found


def _untooled(history: list[BaseMessage]) -> list[BaseMessage]:
    out: list[BaseMessage] = []
    for message in history:
        text = content_text(message.content)
        bare = without_tool_values(text) if is_note(message) and isinstance(message.content, str) else text
        if bare is not None:
            out.append(message if bare == text else message.model_copy(update={"content": bare}))
    return out


def _unoffered(message: BaseMessage) -> BaseMessage:
    if not isinstance(message.content, str) or "expand_ref" not in message.content:
        return message
    text = message.content
    if isinstance(message, ToolMessage):
        # a stored output reduced to its first line: its ref alone
        text = unshrunk(text, ref=annotation(message).get("ref"))
    bare = unoffered_note(text) if is_note(message) else unoffered(text)
    return message if bare == message.content else message.model_copy(update={"content": bare})


__all__ = ["FACTS_TITLE", "FitBudget"]
