"""Content blocks no walk over them can read: objects nested thousands of levels deep (``repr``
and ``json.dumps`` recurse once per level) and integers Python will not write as text. Such a
message gets the same clear ``InvalidInputError`` a tool call with such arguments gets, from
``prepare`` and from the capture, instead of a ``RecursionError`` or a ``ValueError`` from deep
inside a stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin.errors import InvalidInputError

S = Scope(session_id="unwalkable")


def _deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": "order #W1001"}
    for _ in range(levels):
        value = {"k": value}
    return value


BLOCKS: dict[str, list[str | dict[str, Any]]] = {
    "2,000 levels deep": [{"type": "json", "json": _deep(2000)}],
    "an unknown block 2,000 levels deep": [{"type": "text", "text": "the order"}, {"type": "custom", "value": _deep(2000)}],
    "an integer of 5,000 digits": [{"type": "json", "json": {"total": 10**4999}}],
}


@pytest.fixture
def engine(tmp_path: Path) -> Any:
    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    yield engine
    engine.close()


@pytest.mark.parametrize("name", list(BLOCKS))
def test_prepare_refuses_content_blocks_it_cannot_walk_with_a_clear_error(engine: ContextEngine, name: str) -> None:
    call = AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "c1", "type": "tool_call"}], id="a1")
    for messages in (
        [HumanMessage(BLOCKS[name], id="h1")],
        [HumanMessage("find my order", id="h1"), call, ToolMessage(BLOCKS[name], tool_call_id="c1", name="orders", id="t1")],
    ):
        with pytest.raises(InvalidInputError, match=r"message \d+ \(\w+\) has content blocks that"):
            engine.prepare(messages, scope=S)


@pytest.mark.parametrize("name", list(BLOCKS))
def test_the_capture_refuses_them_before_storing_anything(engine: ContextEngine, name: str) -> None:
    with pytest.raises(InvalidInputError, match=r"the tool message \(ToolMessage\) has content blocks that .*as a JSON string"):
        engine.capture_tool_result(ToolMessage(BLOCKS[name], tool_call_id="c1", name="orders"), scope=S)


def test_blocks_nested_as_deep_as_a_model_or_a_tool_writes_are_read(engine: ContextEngine) -> None:
    blocks: list[str | dict[str, Any]] = [{"type": "json", "json": _deep(90)}]
    compact = engine.capture_tool_result(ToolMessage(blocks, tool_call_id="c1", name="orders"), scope=S)
    prepared = engine.prepare([HumanMessage(blocks, id="h1")], scope=S)
    assert compact.tool_call_id == "c1"
    assert prepared.messages[-1].content == blocks


def test_a_tool_use_block_holds_any_arguments_its_tool_call_may_hold(engine: ContextEngine) -> None:
    """An Anthropic reply repeats each call's arguments in its ``tool_use`` block, two levels
    below the content list: arguments as deep as a tool call may hold (100 levels) are read in
    the block too, not refused there."""
    args = _deep(99)  # 100 levels with the leaf's object: the deepest a tool call takes
    reply = AIMessage(
        [{"type": "text", "text": "Looking it up."}, {"type": "tool_use", "id": "c1", "name": "orders", "input": args}],
        tool_calls=[{"name": "orders", "args": args, "id": "c1", "type": "tool_call"}],
        id="a1",
    )
    messages = [HumanMessage("find my order", id="h1"), reply, ToolMessage("order #W1001 shipped", tool_call_id="c1", name="orders", id="t1")]
    view = engine.prepare(messages, scope=S).messages
    assert [m.tool_calls[0]["args"] for m in view if isinstance(m, AIMessage) and m.id == "a1"] == [args]
