"""What a context note lists keeps the label of where it came from.

Notes are ctxplugin's own words: a value a tool returned, listed under ``user said`` or
``user mentioned``, would read as something the user stated. Checked with engines on real
stores.
"""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.tokens import content_text

S = Scope(session_id="s1", user_id="u1")
LOOKUP = {
    "type": "function",
    "function": {"name": "lookup", "description": "Look an order up.", "parameters": {
        "type": "object", "properties": {"id": {"type": "string"}}}},
}


def said_lines(view: list[BaseMessage]) -> list[str]:
    """The lines of every message of ``view`` that list what the user said or mentioned."""
    return [
        line
        for message in view
        for line in content_text(message.content).splitlines()
        if line.startswith(("user said:", "user mentioned:"))
    ]


def test_a_note_for_dropped_exchanges_lists_what_tools_returned_under_the_tool(tmp_path: Path) -> None:
    """An agent that works by tool calls, then a long pasted turn: the budget drops old
    exchanges, among them context notes of condensed ones. The note for the drop read each of
    those notes as a user's message and listed its lines, what the lookups returned among
    them, under ``user said``."""
    messages: list[BaseMessage] = [SystemMessage("You are an order desk.")]
    for i in range(10):
        messages += [
            AIMessage("", tool_calls=[{"name": "lookup", "args": {"id": f"W{i}"}, "id": f"c{i}"}]),
            ToolMessage(f"W{i}: status PAGE_SAYS_{i}. " + "row " * 200, tool_call_id=f"c{i}", name="lookup"),
            AIMessage(f"W{i} shipped."),
        ]
    messages.append(HumanMessage("Here is my letter:\n" + "The parcel was late. " * 300))
    engine = ContextEngine.embedded(path=tmp_path, config=ContextConfig(mode="compact", budget={"total": 3000}))
    view = engine.prepare(messages, tools=[LOOKUP], scope=S).messages
    notes = [content_text(m.content) for m in view if content_text(m.content).startswith("[earlier exchanges are not shown, only")]
    assert notes, "the budget dropped exchanges and listed their values"
    assert [line for line in said_lines(view) if "PAGE_SAYS" in line or "context note" in line] == []
    assert any(line.startswith("lookup returned: ") and "PAGE_SAYS_" in line for line in notes[0].splitlines())
