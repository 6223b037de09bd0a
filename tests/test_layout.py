"""Where ctxplugin's notes and facts go in a view (ctxplugin._layout)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._layout import context_notes, lay_out
from ctxplugin._messages import META_KEY


def note(text: str) -> HumanMessage:
    return HumanMessage(text, additional_kwargs={META_KEY: {"condensed": True}})


def exchange(n: int) -> list[BaseMessage]:
    call = {"name": "bash", "args": {"command": f"ls /src/{n}"}, "id": f"c{n}", "type": "tool_call"}
    return [AIMessage("", tool_calls=[call]), ToolMessage(f"file_{n}.py", tool_call_id=f"c{n}")]


def test_each_note_is_its_own_lookup_so_an_older_one_stays_the_same_message() -> None:
    """Block notes are added after the archive note as the history grows: the archive's lookup
    must not change with them, or the prompt cache stops serving everything after the task."""
    task = HumanMessage("Fix the bug in /src/app.py")
    archive = note("[context note: exchanges 1-8 ...: /src/a.py | ERR-4411]")
    block = note("[context note: exchanges 9-10 ...: /src/b.py]")
    before = lay_out([task, archive, *exchange(11), *exchange(12)], "").body
    after = lay_out([task, archive, block, *exchange(12), *exchange(13)], "").body
    assert context_notes(after) == [archive.content, block.content]
    assert [m.model_dump() for m in after[:3]] == [m.model_dump() for m in before[:3]]  # task, archive call, result
    assert after[3].tool_calls[0]["name"] == "context_notes"  # type: ignore[attr-defined]
    assert after[4].content == block.content


def test_facts_come_after_the_first_note_placed_at_the_same_opening() -> None:
    """The archive note, then the facts, then the block notes: a block note added later goes
    after the facts, which stay the same messages."""
    task = HumanMessage("Fix it")
    archive, block = note("[context note: a]"), note("[context note: b]")
    before = lay_out([task, archive, *exchange(1)], "Known facts: x", "head").body
    body = lay_out([task, archive, block, *exchange(1)], "Known facts: x", "head").body
    kinds = [m.additional_kwargs.get(META_KEY, {}).get("synthetic") for m in body if isinstance(m, ToolMessage)]
    assert kinds[:3] == ["notes", "facts", "notes"]
    assert [m.model_dump() for m in body[:5]] == [m.model_dump() for m in before[:5]]  # task, archive, facts
