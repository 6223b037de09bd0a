"""What a recorded conversation holds once loaded: its messages, and what the provider and the
task recorded beside them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage


@dataclass(frozen=True)
class RecordedUsage:
    """What the provider reported for one recorded call."""

    prompt_tokens: int
    cached_tokens: int


@dataclass(frozen=True)
class ExpectedAction:
    """A ground-truth tool call a recording carries (tau-bench's ``info.task.actions``)."""

    name: str
    kwargs: dict[str, Any]


@dataclass(frozen=True)
class Conversation:
    """One recorded conversation.

    Attributes:
        id: stable name, unique within its file.
        messages: the whole conversation, in order.
        usage: the provider's own figures per call, when the recording has them.
        actions: the task's ground-truth tool calls, when the recording has them.
        tools: the agent's tool schemas (OpenAI format), when the recording has them.
    """

    id: str
    messages: tuple[BaseMessage, ...]
    usage: tuple[RecordedUsage, ...] = ()
    actions: tuple[ExpectedAction, ...] = ()
    tools: tuple[dict[str, Any], ...] = ()

    def call_indexes(self) -> list[int]:
        """Positions of the calls: every assistant message with at least one message before it."""
        return [i for i, m in enumerate(self.messages) if i > 0 and isinstance(m, AIMessage)]


__all__ = ["Conversation", "ExpectedAction", "RecordedUsage"]
