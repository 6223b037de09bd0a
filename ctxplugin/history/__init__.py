"""Progressive compression of history by age (placeholder pending the full implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage

from ctxplugin.config import HistoryConfig
from ctxplugin.tokens import TokenCounter


@dataclass
class HistoryView:
    messages: list[BaseMessage]
    compressed_count: int = 0


def compress_history(body: Sequence[BaseMessage], *, config: HistoryConfig, counter: TokenCounter) -> HistoryView:
    return HistoryView(messages=list(body))
