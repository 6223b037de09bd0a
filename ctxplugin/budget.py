"""Section budgets: fit the assembled view into its token budget.

Trimming order when over budget: oldest history first (whole exchanges, in
blocks so that consecutive calls keep a common prefix; the history stage's context notes only
after every other exchange that may go, as they stand for many in few tokens), then the least
relevant facts, then stale tool summaries (reduced to their ref line), and when even that
cannot fit, the minimum viable context: system essentials, the current user message
and the last assistant turn. The total is never exceeded: as a last resort texts are cut at
head and tail.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._cut import Keep, cut_call_args, cut_content, text_share, uncut_tokens
from ctxplugin._droppable import drop_order as _drop_order
from ctxplugin._droppable import pinned_spans
from ctxplugin._layout import (
    Layout,
    Placement,
    header_cut,
    is_directory,
    is_note,
    is_user_turn,
    lay_out,
    synthetic_kind,
)
from ctxplugin._messages import META_KEY, exchange_spans
from ctxplugin._shrunk import fewest_shrunk
from ctxplugin.history._turns import without_exchanges
from ctxplugin.history.omission import OMITTED_NOTE, dropped_note, omitted_note
from ctxplugin.tokens import TokenCounter, content_text, count_message, count_messages


@dataclass(frozen=True)
class FactLine:
    """One fact line of the facts block, with its score (higher is more relevant)."""

    text: str
    score: float
    fact_id: str
    key: str | None = None
    source_ref: str | None = None
    """The message id, tool call id or CAS ref the fact was read from, when known."""
    statement: str = ""
    """The fact's own text, without the kind and key prefix of ``text``."""
    kind: str = ""
    """The fact's kind (``entity``, ``fact``, ``constraint``, ...), when known."""
    from_tool: bool = False
    """Read from a tool output (data, never instruction: never shown in a system message)."""
    tracked: bool = False
    """State a caller wrote under a key: when the view states it word for word, its key is
    still named (see :func:`~ctxplugin.stages.shown.not_shown`)."""
    stated: bool = False
    """The system prompt or the task states the fact word for word."""
    also: tuple[tuple[str, str | None], ...] = ()
    """Ids and keys of the further facts a line naming several keys stands for."""


@dataclass(frozen=True)
class Parts:
    """The sections of a view before final assembly."""

    header: tuple[SystemMessage, ...]
    """The host's system messages as sent, then the tool directory in its own (each cut only by
    the last resort): what ctxplugin adds is laid out in the body (see :meth:`layout`)."""
    history: list[BaseMessage]
    facts_title: str = ""
    tools_title: str = ""
    """The heading the facts read from tool outputs stand under, after the others (it says
    once that they are data, for all of them)."""
    facts: tuple[FactLine, ...] = ()
    tools_tokens: int = 0
    dropped_exchanges: int = 0
    facts_anchor: BaseMessage | None = None
    facts_placement: Placement = "tail"
    lookups: bool = True
    """Whether notes and the facts block may be lookup pairs (see :func:`ctxplugin._layout.lay_out`)."""

    def layout(self) -> Layout:
        """The history with the context notes and the facts block placed (see
        :mod:`ctxplugin._layout`). Laid out once per parts (they are frozen): the budget
        stage and the report measure the same parts several times."""
        made = self.__dict__.get("_layout")
        if made is None:
            tools = any(line.from_tool for line in self.facts)
            made = lay_out(
                self.history, self.facts_text(), self.facts_placement, self.facts_anchor,
                facts_from_tools=tools, lookups=self.lookups,
            )
            object.__setattr__(self, "_layout", made)  # a memo, not a field: equality and replace() ignore it
        return made

    def facts_text(self) -> str:
        if not self.facts:
            return ""
        stated = [f"- {f.text}" for f in self.facts if not f.from_tool]
        read = [f"- {f.text}" for f in self.facts if f.from_tool]
        heading = [self.tools_title] if read and self.tools_title else []
        return "\n".join([self.facts_title, *stated, *heading, *read])


def section_tokens(parts: Parts, counter: TokenCounter) -> dict[str, int]:
    """Tokens per section as the view is laid out: header, history (messages other than tool
    results, and the context notes), summaries (tool results), facts (the facts block with the
    lookup that shows it), tools (bound schemas). Counted once per parts and counter."""
    memo = parts.__dict__.get("_sections")
    if memo is not None and memo[0] is counter:
        return dict(memo[1])
    sections = _section_tokens(parts, counter)
    object.__setattr__(parts, "_sections", (counter, sections))
    return dict(sections)


def _section_tokens(parts: Parts, counter: TokenCounter) -> dict[str, int]:
    layout = parts.layout()
    history = summaries = facts = 0
    for message in layout.body:
        tokens = count_message(message, counter)
        kind = synthetic_kind(message)
        if kind == "facts":
            facts += tokens
        elif kind == "notes" or not isinstance(message, ToolMessage):
            history += tokens
        else:
            summaries += tokens
    for message, kind in zip(layout.header_extra, layout.extra_kinds, strict=True):
        if kind == "facts":
            facts += count_message(message, counter)
        else:
            history += count_message(message, counter)
    return {
        "header": sum(count_message(m, counter) for m in parts.header),
        "history": history,
        "summaries": summaries,
        "facts": facts,
        "tools": parts.tools_tokens,
    }


def total_tokens(parts: Parts, counter: TokenCounter) -> int:
    """Tokens of the whole request the parts make."""
    return sum(section_tokens(parts, counter).values())


def drop_exchanges(parts: Parts, spans: list[tuple[int, int]], dropped: set[int], note: str = OMITTED_NOTE) -> Parts:
    """Drop the exchanges of ``spans`` (those of ``parts.history``) numbered in ``dropped``; a
    note (a ``HumanMessage``, ``note``) stands where the first of them was, and a short user
    turn for a user's reply dropped between two kept assistant turns (see
    :func:`~ctxplugin.history._turns.without_exchanges`). The note is in the history, not the
    header: the header starts every cached prefix and must not change when drops come and go."""
    if not dropped:
        return parts
    history = without_exchanges(parts.history, spans, dropped, omitted_marker(note))
    total = parts.dropped_exchanges + len(dropped)
    return replace(parts, history=history, dropped_exchanges=total)


def drop_listing(
    parts: Parts, spans: list[tuple[int, int]], dropped: set[int], budgets: dict[str, int], counter: TokenCounter, note_tokens: int
) -> Parts:
    """:func:`drop_exchanges` with a note listing the values of the dropped exchanges within ``note_tokens``
    and the room left after the drop (:func:`~ctxplugin.history.omission.dropped_note`)."""
    plain = drop_exchanges(parts, spans, dropped)
    if not dropped or note_tokens <= 0:
        return plain
    sections = section_tokens(plain, counter)
    spare = budgets["history"] - sections["history"]  # a history the drop leaves over its budget does not bind
    slack = min(budgets["total"] - sum(sections.values()), spare if spare >= 0 else 1 << 30)
    room = min(note_tokens, count_message(omitted_marker(), counter) + slack)
    known = "\n".join(content_text(m.content) for m in parts.history[: spans[min(dropped)][0]])
    gone = [parts.history[s:e] for i, (s, e) in enumerate(spans) if i in dropped]
    listed = drop_exchanges(parts, spans, dropped, dropped_note(gone, known, room, counter)[0])
    # no place for a lookup: the note would speak in a system message, so it lists no tool's text
    return listed if not listed.layout().header_extra else drop_exchanges(
        parts, spans, dropped, dropped_note(gone, known, room, counter, tool_values=False)[0])


def omitted_marker(text: str = OMITTED_NOTE) -> HumanMessage:
    """The note standing for exchanges the budget dropped (the same text for the same drop)."""
    return HumanMessage(content=text, additional_kwargs={META_KEY: {"omitted": True}})


def minimum_viable(parts: Parts, total: int, counter: TokenCounter, keep: Keep | None = None, *, hold_prompt: bool = False) -> Parts:
    """System essentials, the task, the current user message, the last assistant turn and
    pinned messages, cut to fit. A user's message is cut with ``keep`` (see :func:`ctxplugin._cut.cut_text`):
    what the user wrote stays readable behind a ref. With ``hold_prompt`` (a total nobody set)
    the host's system prompt is never cut: the rest is, and the view may stay over the total.

    The task (the first human message) stays: it is what the rest answers, and providers
    (Anthropic, Google, Bedrock) refuse a conversation whose first turn is not the user's —
    which the last assistant turn alone would be when users' turns are tool observations.
    """
    history = parts.history
    spans = exchange_spans(history)
    humans = [i for i, m in enumerate(history) if is_user_turn(m)]
    last_ai_span = next(
        ((s, e) for s, e in reversed(spans) if isinstance(history[s], AIMessage)), None
    )
    chosen: set[int] = set()
    if humans:
        chosen.update((humans[0], humans[-1]))
    if last_ai_span is not None:
        chosen.update(range(*last_ai_span))
    if spans:  # the exchange the model is answering now must stay whole
        chosen.update(range(*spans[-1]))
    pinned = pinned_spans(history, spans)  # kept too, cut like the rest (a user's behind a ref)
    for number in pinned:
        chosen.update(range(*spans[number]))
    order = sorted(chosen)
    keep_messages = [history[i] for i in order]
    kept_spans = sum(1 for start, _ in spans if start in chosen)
    dropped = parts.dropped_exchanges + len(spans) - kept_spans
    if dropped:
        # the note stands after the task, where the dropped exchanges were, and is laid out as
        # the other notes are: never merged into the host's system prompt
        note = omitted_note([m for i, m in enumerate(history) if i not in chosen], keep_messages)
        if pinned and kept_spans < len(spans):  # a kept pinned answer may need a user turn before the next one
            keep_messages = without_exchanges(history, spans, {n for n, (s, _) in enumerate(spans) if s not in chosen}, omitted_marker(note))
        else:
            keep_messages.insert(1 if humans and order[0] == humans[0] else 0, omitted_marker(note))
    # the user's current message is what the view answers: the others are cut first, and it
    # is cut too only when it takes more than half of the total
    current = next(k for k, m in enumerate(keep_messages) if m is history[humans[-1]]) if humans else None
    slim = replace(parts, history=keep_messages, facts=(), dropped_exchanges=dropped)
    # Share what is left fairly: every text above a common cap is cut to it (water filling),
    # so the system essentials, the question and the last answer all keep their heads.
    for _ in range(8):
        over = total_tokens(slim, counter) - total
        if over <= 0:
            break
        header, lead = slim.header, len(slim.header)
        whole = [count_message(m, counter) for m in (*header, *slim.history)]
        held = {k for k in range(lead) if hold_prompt and not is_directory(header[k])}
        if current is not None and whole[current + lead] <= total // 2:
            held.add(current + lead)
        fixed, cap = text_share(whole, [uncut_tokens(m, counter) for m in (*header, *slim.history)], held, over)
        sizes = [size - f for size, f in zip(whole, fixed, strict=True)]
        if any(size > cap and k not in held for k, size in enumerate(sizes[:lead])):
            slim = replace(slim, header=tuple(
                m.model_copy(update={"content": cut_content(m.content, max(8, cap - 8) + fixed[k], counter)}) if size > cap and k not in held else m
                for k, (m, size) in enumerate(zip(header, sizes, strict=False))
            ))
        history_copy = list(slim.history)
        for index, size in enumerate(sizes[lead:]):
            if size > cap and size > 12 and index + lead not in held and not is_note(keep_messages[index]):
                # the text is cut; an image, a thinking block (its signature) or a tool_use stays whole
                # from the message as it came, never a cut of a cut: one marker, one ref
                message = keep_messages[index]
                user = keep if is_user_turn(message) else None
                content = cut_content(message.content, max(8, cap - 8) + fixed[index + lead], counter, user)
                if isinstance(message, AIMessage) and isinstance(message.content, list) and isinstance(content, str):
                    # a list stays one: a Responses API turn's reasoning is read beside a list only
                    content = [{"type": "text", "text": content}]
                cut = message.model_copy(update={"content": content})
                if isinstance(cut, AIMessage) and cut.tool_calls:  # and the text of its calls' arguments
                    cut = cut_call_args(cut, max(8, cap - 8) + fixed[index + lead], counter)
                history_copy[index] = cut
        slim = replace(slim, history=history_copy)
    return slim


def _exchanges_to_drop(
    parts: Parts, spans: list[tuple[int, int]], order: list[int], budgets: dict[str, int], counter: TokenCounter
) -> int:
    """How many exchanges of ``order`` (see :func:`_drop_order`), in that order, must go for
    history, summaries and total to fit: running sums count each message once, and the view a
    drop the sums say fits is counted whole, with the note and stand-in turns it adds (what
    they added last time is added to the sums: a view is counted whole a few times, not per drop)."""
    sections = section_tokens(parts, counter)
    history, summaries = sections["history"], sections["summaries"]
    total, added = sum(sections.values()), 0
    for needed, i in enumerate(order):
        if history + added <= budgets["history"] and summaries <= budgets["summaries"] and total + added <= budgets["total"]:
            # the note and the stand-in turns the drop adds count too, as they are laid out
            left = section_tokens(drop_exchanges(parts, spans, set(order[:needed])), counter)
            if left["history"] <= budgets["history"] and sum(left.values()) <= budgets["total"]:
                return needed
            added = max(left["history"] - history, sum(left.values()) - total)
        s, e = spans[i]
        for message in parts.history[s:e]:
            tokens = count_message(message, counter)
            if isinstance(message, ToolMessage):
                summaries -= tokens
            else:
                history -= tokens
            total -= tokens
    return len(order)


@dataclass
class BudgetOutcome:
    parts: Parts
    warnings: list[str]
    within: bool


def enforce(
    parts: Parts, budgets: dict[str, int], counter: TokenCounter, *, block_size: int, note_tokens: int = 0, keep: Keep | None = None,
    hold_prompt: bool = False,
) -> BudgetOutcome:
    """Fit ``parts`` into ``budgets`` (in the module docstring's order); a note for dropped exchanges lists their values within ``note_tokens``;
    a user's message the last resort cuts is given to ``keep``, and ``hold_prompt`` keeps the system prompt whole (see :func:`minimum_viable`)."""
    warnings: list[str] = []
    initial = parts
    sections = section_tokens(parts, counter)
    header = f"header is {sections['header']} tokens, over its budget of {budgets['header']}; "
    if sections["header"] > budgets["header"]:
        warnings.append(header + "the system prompt is never rewritten")

    def history_over(p: Parts) -> bool:
        s = section_tokens(p, counter)
        return s["history"] > budgets["history"] or s["summaries"] > budgets["summaries"]

    def total_over(p: Parts) -> bool:
        return total_tokens(p, counter) > budgets["total"]

    # 1. oldest history, whole exchanges in blocks
    if history_over(parts) or total_over(parts):
        spans = exchange_spans(parts.history)
        order, plain = _drop_order(parts.history, spans)
        needed = _exchanges_to_drop(parts, spans, order, budgets, counter)
        # in whole blocks, but a block is made of exchanges: rounding up never takes a note
        blocks = min(plain, math.ceil(needed / block_size) * block_size) if needed <= plain else needed
        parts = drop_listing(parts, spans, set(order[:blocks]), budgets, counter, note_tokens)
    # 2. least relevant facts
    while parts.facts and total_over(parts):
        drop = min(parts.facts, key=lambda f: f.score)
        parts = replace(parts, facts=tuple(f for f in parts.facts if f is not drop))
    # 3. stale summaries down to their ref line
    if total_over(parts):
        fixed = parts
        parts = replace(parts, history=fewest_shrunk(
            parts.history, counter, lambda history: total_tokens(replace(fixed, history=history), counter) - budgets["total"]))
    # 4. minimum viable context
    within = True
    if total_over(parts):
        # from the untrimmed parts: step 1 may have dropped the last assistant turn
        parts = minimum_viable(initial, budgets["total"], counter, keep, hold_prompt=hold_prompt)
        if cut := header_cut(initial.header, parts.header):  # said whether the header was over its own budget or not
            over = bool(warnings) and warnings[0].startswith(header)
            warnings[: int(over)] = [header + cut if over else cut]  # in place of "never rewritten", when said
        warnings.append(
            f"context trimmed to the minimum viable view (system essentials, the task, current user message, "
            f"last assistant turn) to fit the total budget of {budgets['total']} tokens"
        )
        if total_over(parts):
            within = False
            warnings.append(
                f"the view is {total_tokens(parts, counter)} tokens, over the total budget of "
                f"{budgets['total']}: bound tool schemas alone take {parts.tools_tokens}, and blocks that cannot "
                f"be cut (images, thinking, tool_use{', the system prompt under a total not set' if hold_prompt else ''}) are kept whole"
            )
    return BudgetOutcome(parts=parts, warnings=warnings, within=within)


def model_context_window(model: object) -> int | None:
    """The input window a LangChain chat model declares in its profile (``max_input_tokens``),
    to resolve budgets given as shares; None when the model has no profile."""
    profile = getattr(model, "profile", None)
    value = profile.get("max_input_tokens") if isinstance(profile, dict) else None
    return value if isinstance(value, int) and value > 0 else None


__all__ = ["BudgetOutcome", "FactLine", "Parts", "count_messages", "enforce", "model_context_window", "section_tokens", "total_tokens"]
