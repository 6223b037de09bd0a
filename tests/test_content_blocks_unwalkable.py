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
