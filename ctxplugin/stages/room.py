"""Room: how many tokens the history may take in this call, and whether it goes as it is.

The header and the bound tool schemas come first and the facts block has its budget; the rest
of the total budget is the history's. With ``history.compress="over_budget"`` a conversation
that fits that room, tool outputs included, is sent unchanged — no ref, no summary, no note — so
every call repeats the previous one's prefix. An agent that has called tools
``history.solo_exchanges`` times in a row with no user message is sent whole only while its tool
outputs also fit ``history.solo_tool_tokens``. ``expand_ref`` is then bound only when the view
shows a ref: an output the host captured before appending it (``capture_tool_result``) shows
its ref and summary, and the model is offered the tool that reads the rest; otherwise it joins
the tools when compression starts, the call that breaks the prefix anyway.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin._messages import annotation
from ctxplugin._names import EXPAND_REF_NAME
from ctxplugin._running import SessionTallies
from ctxplugin.cas.capture import shows_ref
from ctxplugin.config import FactsConfig, HistoryConfig
from ctxplugin.history import HistoryBudget
from ctxplugin.stages.view import CallView, Room
from ctxplugin.tokens import TokenCounter, content_text, count_message


def history_room(
    budgets: Mapping[str, int], outside: int, *, history: HistoryConfig, facts: FactsConfig
) -> tuple[HistoryBudget, int]:
    """The limits compression aims for, and the room the history has beside ``outside``
    tokens of header and tool schemas and the facts budget."""
    room = max(0, budgets["total"] - outside - _facts_budget(budgets, facts))
    aim = history.max_tokens is not None and history.max_tokens < room
    budget = HistoryBudget(
        total=history.max_tokens if aim else room,
        messages=budgets["history"],
        tool_results=budgets["summaries"],
        room=room if aim else None,
    )
    return budget, room


@dataclass(frozen=True, slots=True)
class FindRoom:
    """Fill ``room``; when the conversation goes whole, shows no ref and ``expand_ref`` was
    never called, take ``expand_ref`` out of the tools (a host that keeps the compact form of
    its tool outputs shows their refs from the first).

    Attributes:
        history: the history settings.
        facts: the facts settings (the facts budget is kept free only when facts are shown).
        counter: counts the header and the history.
    """

    name: ClassVar[str] = "room"
    history: HistoryConfig
    facts: FactsConfig
    counter: TokenCounter
    elastic: bool = False
    # the history counted once per message: its tokens, and the model's calls since the user's latest message
    _tallies: SessionTallies = field(default_factory=SessionTallies)

    def apply(self, view: CallView) -> CallView:
        outside = view.tool_tokens + sum(count_message(m, self.counter) for m in view.system)
        if self.elastic:
            view = _grown(view, outside, self.facts)
        budget, room = history_room(view.budgets, outside, history=self.history, facts=self.facts)
        tokens, tool_tokens, calls = self._tallies.counts(view.scope.key(), view.history, self.counter, view.history_stamp)
        whole = False
        if self.history.enabled and self.history.compress == "over_budget":
            results = budget.tool_results
            solo = self.history.solo_exchanges
            if solo is not None and calls >= solo:
                # an agent working alone piles up outputs its next step rarely reads again
                results = min(results, self.history.solo_tool_tokens) if results is not None else self.history.solo_tool_tokens
            as_is = HistoryBudget(total=room, messages=budget.messages, tool_results=results)
            whole = as_is.within(tokens, tool_tokens)
            if results != budget.tool_results and budget.room is None:
                # no aim below the room (max_tokens unset, or not below the room): the history
                # stage compresses to the room, where the outputs must then fit the solo room too
                budget = HistoryBudget(total=budget.total, messages=budget.messages, tool_results=results)
        view = view.override(
            room=Room(outside=outside, total=room, budget=budget, whole=whole, history_tokens=tokens, tool_result_tokens=tool_tokens)
        )
        if whole and view.expand_ref is not None and not _reads_refs(view.history, EXPAND_REF_NAME):
            # nothing in the view is stored behind a ref
            view = view.override(
                tools=tuple(t for t in view.tools if t is not view.expand_ref),
                tool_tokens=view.tool_tokens - view.expand_ref_tokens,
            )
        return view


def _facts_budget(budgets: Mapping[str, int], facts: FactsConfig) -> int:
    """The tokens kept free for the facts block (none when no block is shown)."""
    return budgets["facts"] if facts.enabled and facts.k else 0


def _grown(view: CallView, outside: int, facts: FactsConfig) -> CallView:
    """``view`` with its total raised so that the history keeps half of it, when the system
    prompt and the tool schemas (``outside``) would leave it less: the default total is a
    size for the conversation, and cutting a long system prompt or most of the history to meet
    it would make the agent worse than sending everything."""
    total = view.budgets["total"]
    facts_budget = _facts_budget(view.budgets, facts)
    if total - outside - facts_budget >= total // 2:
        return view
    grown = outside + facts_budget + total // 2
    return view.override(budgets={**view.budgets, "total": grown}).warn(
        f"the system prompt and tool schemas take {outside} tokens of the default total of {total}; "
        f"the total grows to {grown} for this call so the history keeps {total // 2} "
        "(set budget.total to cap it)"
    )


def _reads_refs(messages: Sequence[BaseMessage], name: str) -> bool:
    """Whether a tool result of ``messages`` shows the ref its output is stored under (the host
    keeps the compact form ``capture_tool_result`` returned, not the original with its ref
    noted), or an AI message called the tool ``name``."""
    for m in messages:
        if isinstance(m, ToolMessage):
            ref = annotation(m).get("ref")
            if isinstance(ref, str) and shows_ref(content_text(m.content), ref):  # a str, or the text before kept images
                return True
        elif isinstance(m, AIMessage) and any(call["name"] == name for call in m.tool_calls):
            return True
    return False


__all__ = ["FindRoom", "history_room"]
