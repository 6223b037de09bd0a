"""The tool calls of one reader's conversation, indexed by call id as messages arrive, so the
facts stage can tell the ledger which call each tool output answered (see
:mod:`ctxplugin.facts._polls`) without reading the history again."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin.facts._polls import call_identity

PENDING = 256
"""Calls awaiting their output that are remembered (the oldest go first)."""


class Calls:
    """What each tool call not answered yet asks for (by call id), and the calls answered by
    the messages read last, in order, as ``(call id, identity)``."""

    __slots__ = ("answered", "pending")

    def __init__(self) -> None:
        self.pending: dict[str, str] = {}
        self.answered: list[tuple[str, str]] = []

    def extend(self, messages: Sequence[BaseMessage]) -> None:
        """Read the messages past those read so far."""
        self.answered = []
        for message in messages:
            if isinstance(message, AIMessage):
                for call in message.tool_calls:
                    if call.get("id"):
                        self.pending[str(call["id"])] = call_identity(call["name"], call.get("args", {}))
                while len(self.pending) > PENDING:
                    del self.pending[next(iter(self.pending))]
            elif isinstance(message, ToolMessage):
                identity = self.pending.pop(message.tool_call_id, None)
                if identity is not None:
                    self.answered.append((message.tool_call_id, identity))


__all__ = ["Calls"]
