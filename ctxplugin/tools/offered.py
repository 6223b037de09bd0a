"""The tools each agent was offered: what ``load_tools`` and the argument check answer from.

One engine (and its one :class:`~ctxplugin.tools.ToolRegistry`) serves every agent of a
process, and the registry knows every tool of all of them, by name, with the schema registered
last. An agent's ``load_tools`` must answer from that agent's own tools: a tool of another agent
is not bound for it, and a tool of the same name may take other arguments. So the tool stage
records, per scope, the tools each call was planned with (:class:`ToolSet`), and under the
``load_tools`` tool the host passed, so that two agents on one scope (a supervisor and a worker
on one thread without namespaces) are told apart too.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ctxplugin._lru import LRU

if TYPE_CHECKING:  # the registry holds an OfferedTools: only the entry's type is needed here
    from ctxplugin.tools.registry import ToolEntry

SCOPES_KEPT = 1024
"""Scopes whose latest tool set is kept (the least recently planned first out)."""


@dataclass(frozen=True, slots=True)
class ToolSet:
    """The agent's own tools of one planned call.

    Attributes:
        entries: each tool's registered entry (the schema of the agent's own tool), by name.
        stubbed: the names of those bound as stubs (their parameters are read with ``load_tools``).
    """

    entries: Mapping[str, ToolEntry] = field(default_factory=lambda: MappingProxyType({}))
    stubbed: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[ToolEntry], stubbed: Iterable[str] = ()) -> ToolSet:
        """A tool set of ``entries`` (by their names), ``stubbed`` bound as stubs."""
        return cls(MappingProxyType({e.name: e for e in entries}), frozenset(stubbed))

    def get(self, name: str) -> ToolEntry | None:
        """The agent's tool named ``name``, or ``None`` when it has none."""
        return self.entries.get(name)

    def names(self) -> list[str]:
        """The agent's tool names, sorted."""
        return sorted(self.entries)

    def is_stubbed(self, name: str) -> bool:
        """Whether ``name`` is one of these tools, bound as a stub."""
        return name in self.stubbed


class OfferedTools:
    """The tool set of the latest call planned, per scope key and per host ``load_tools`` tool.

    Thread-safe and bounded; one per registry."""

    def __init__(self, size: int = SCOPES_KEPT) -> None:
        self._lock = threading.Lock()
        # (scope key, id of the host's load_tools) -> (that tool, kept so the id stays its own; tool set)
        self._by_host: LRU[tuple[str, int], tuple[Any, ToolSet]] = LRU(size * 2)
        self._latest: LRU[str, ToolSet] = LRU(size)

    def put(self, scope_key: str, tools: ToolSet, host: Any = None) -> None:
        """Record ``tools`` as what a call of ``scope_key`` was planned with; ``host``: the
        ``load_tools`` tool the host passed with them, if any."""
        with self._lock:
            self._latest.put(scope_key, tools)
            if host is not None:
                self._by_host.put((scope_key, id(host)), (host, tools))

    def find(self, scope_key: str, host: Any = None) -> ToolSet | None:
        """The tools ``host``'s latest call in ``scope_key`` was planned with; else those of the
        scope's latest call (a host that binds one ``load_tools`` and runs another); ``None``
        when no call of the scope was planned in this process."""
        with self._lock:
            if host is not None:
                hit = self._by_host.hit((scope_key, id(host)))
                if hit is not None and hit[0] is host:
                    return hit[1]
            return self._latest.hit(scope_key)


__all__ = ["SCOPES_KEPT", "OfferedTools", "ToolSet"]
