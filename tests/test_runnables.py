"""The views planned without ``expand_ref`` (``ctxplugin._runnables.PlannedViews``): a view is
found by its length and two of its messages, and told apart from every other by all of them."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any, overload

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._runnables import PlannedViews
from ctxplugin.stages.view import PreparedContext
from ctxplugin.testing import memory_engine

ENGINE = memory_engine(ContextConfig(mode="whole"))
TOOLS: list[Any] = ENGINE.tools_for_model()  # expand_ref among them


def names(tools: list[Any]) -> list[str]:
    return sorted(t.name for t in tools)


class Counted(Sequence[BaseMessage]):
    """A message list that counts how many of its items are read."""

    def __init__(self, messages: list[BaseMessage]) -> None:
        self.messages = messages
        self.reads = 0

    def __len__(self) -> int:
        return len(self.messages)

    @overload
    def __getitem__(self, index: int) -> BaseMessage: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[BaseMessage]: ...
    def __getitem__(self, index: int | slice) -> BaseMessage | Sequence[BaseMessage]:
        self.reads += 1
        return self.messages[index]


def planned(messages: list[BaseMessage], session: str) -> PreparedContext:
    """A view prepared for ``messages`` in the whole mode: as it was, without ``expand_ref``."""
    prepared: PreparedContext = ENGINE.prepare(messages, tools=TOOLS, scope=Scope(session_id=session))
    assert "expand_ref" not in names(prepared.tools)
    return prepared


def chat(n: int, tag: str) -> list[BaseMessage]:
    return [HumanMessage(f"{tag}: question {i}") if i % 2 == 0 else AIMessage(f"{tag}: answer {i}") for i in range(n)]


def test_a_conversation_never_prepared_is_looked_up_by_its_length_and_two_of_its_messages() -> None:
    views = PlannedViews()
    views.keep(planned(chat(9, "kept"), "kept"))
    other = Counted(chat(501, "other"))
    assert names(views.bound(other, TOOLS)) == names(TOOLS)
    assert other.reads <= 2, "the 501 messages are not read one by one"


def test_views_alike_at_their_end_and_middle_are_told_apart_by_every_message() -> None:
    views = PlannedViews()
    kept = planned(chat(9, "kept"), "kept")
    views.keep(kept)
    # as long, with the same last and middle message objects, another message elsewhere
    alike = list(kept.messages)
    alike[1] = HumanMessage("a message of another conversation")
    assert len(alike) // 2 > 1, "the message replaced is neither the middle one nor the last"
    assert names(views.bound(alike, TOOLS)) == names(TOOLS)
    assert "expand_ref" not in names(views.bound(list(kept.messages), TOOLS))
    # the alike view planned with expand_ref does not displace the kept one, nor the reverse
    views.keep(dataclasses.replace(kept, messages=alike, tools=TOOLS))
    assert "expand_ref" not in names(views.bound(kept.messages, TOOLS))
    views.keep(dataclasses.replace(kept, messages=alike, tools=[]))
    assert "expand_ref" not in names(views.bound(alike, TOOLS))
    views.keep(dataclasses.replace(kept, tools=TOOLS))  # the first view planned again, with it
    assert names(views.bound(kept.messages, TOOLS)) == names(TOOLS)
    assert "expand_ref" not in names(views.bound(alike, TOOLS))


def test_a_view_changed_after_it_was_kept_is_not_the_view_planned() -> None:
    views = PlannedViews()
    kept = planned(chat(9, "kept"), "kept")
    views.keep(kept)
    kept.messages[1] = HumanMessage("put in by the host afterwards")
    assert names(views.bound(kept.messages, TOOLS)) == names(TOOLS)
