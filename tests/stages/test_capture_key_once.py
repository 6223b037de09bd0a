"""A new tool output is read once for its place in the capture memo: its content (for a list
of blocks, their text as Python writes it, as long as the output) is not written out twice
on the call that stores it."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="key-once")


class Block(dict[str, Any]):
    """A text block that counts how many times it is written out with ``repr``."""

    written = 0

    def __repr__(self) -> str:
        Block.written += 1
        return super().__repr__()


def output_in_blocks(call: str) -> ToolMessage:
    rows = "\n".join(f"line {i} of the {call} log, status=ok" for i in range(300))
    message = ToolMessage(content=[], tool_call_id=call, name="logs")
    message.content = [Block(type="text", text=rows)]  # set after validation, which copies blocks
    return message


def test_a_new_output_in_blocks_is_written_out_once_as_it_is_stored() -> None:
    engine = memory_engine(ContextConfig(mode="compact"))
    messages: list[BaseMessage] = [HumanMessage("Read the logs")]
    for call in ("c1", "c2"):
        messages += [
            AIMessage("", tool_calls=[{"name": "logs", "args": {}, "id": call}]),
            output_in_blocks(call),
        ]
        Block.written = 0
        report = engine.prepare(messages, scope=SCOPE).report
        assert len(report.refs_created) == 1, "stored"
        assert Block.written == 1
