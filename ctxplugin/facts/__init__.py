"""Facts ledger (placeholder pending the full implementation)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langchain_core.messages import BaseMessage

from ctxplugin.config import FactsConfig
from ctxplugin.scope import Scope


@dataclass
class Fact:
    id: str
    text: str
    key: str | None = None
    kind: str = "fact"


@dataclass
class ScoredFact:
    fact: Fact
    score: float


class MemoryFactStore:
    pass


class ChromaFactStore(MemoryFactStore):
    @classmethod
    def persistent(cls, path: str | Path, *, config: FactsConfig) -> ChromaFactStore:
        return cls()


class FactsLedger:
    def __init__(self, store: Any, config: FactsConfig) -> None:
        self.store = store
        self.config = config

    def ingest(self, messages: Sequence[BaseMessage], *, scope: Scope) -> list[Fact]:
        return []

    def search(self, query: str, *, scope: Scope, k: int = 12) -> list[ScoredFact]:
        return []


def mark_outdated(body: list[BaseMessage], *, ledger: FactsLedger, scope: Scope) -> tuple[list[BaseMessage], int]:
    return body, 0
