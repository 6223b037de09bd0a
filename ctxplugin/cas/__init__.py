"""Content-addressable store for tool outputs (placeholder pending the full implementation)."""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from ctxplugin.config import CASConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.scope import Scope
from ctxplugin.tokens import TokenCounter, content_text


@dataclass(frozen=True)
class Captured:
    text: str
    ref_id: str | None
    passthrough: bool
    created: bool
    original_tokens: int
    compact_tokens: int


class CASStore(Protocol):
    def put(self, ref_id: str, content: str, scope: Scope) -> bool: ...
    def get(self, ref_id: str, scope: Scope) -> str: ...


class MemoryCASStore:
    def __init__(self) -> None:
        self._items: dict[str, tuple[str, Scope]] = {}
        self._lock = threading.Lock()

    def put(self, ref_id: str, content: str, scope: Scope) -> bool:
        with self._lock:
            created = ref_id not in self._items
            self._items.setdefault(ref_id, (content, scope))
            return created

    def get(self, ref_id: str, scope: Scope) -> str:
        with self._lock:
            item = self._items.get(ref_id)
        if item is None or not scope.can_read(item[1]):
            raise RefNotFoundError(f"no stored output {ref_id!r} readable from this scope")
        return item[0]


class SQLiteCASStore(MemoryCASStore):
    def __init__(self, path: str | Path) -> None:
        super().__init__()
        self.path = Path(path)


def capture(content: Any, *, store: CASStore, scope: Scope, config: CASConfig, counter: TokenCounter, tool_name: str | None) -> Captured:
    text = content_text(content)
    tokens = counter.count(text)
    if tokens <= config.passthrough_tokens:
        return Captured(text, None, True, False, tokens, tokens)
    ref = f"ref:{tool_name or 'tool'}:{hashlib.sha256(text.encode()).hexdigest()[:16]}"
    created = store.put(ref, text, scope)
    compact = f"{text[:200]} … [{ref}; call expand_ref for the full output]"
    return Captured(compact, ref, False, created, tokens, counter.count(compact))


def expand(store: CASStore, ref_id: str, scope: Scope, **options: Any) -> str:
    return store.get(ref_id, scope)


def expand_for_model(store: CASStore, ref_id: str, scope: Scope, *, max_tokens: int, counter: TokenCounter, **options: Any) -> str:
    return store.get(ref_id, scope)
