"""A tool call run again before its first output reached the state.

A ``ToolNode`` runs the parallel calls of one model step as one node. When one of them asks a
human (``interrupt()``), or fails with a retry policy on the node, the node's writes are dropped
and, on ``Command(resume=...)`` or the retry, every call of the node runs again: a sibling that
already returned was captured, and read for facts, from an output the state never holds. When
its second output differs (a live quote, a timestamp), the facts read from the first would stay
current beside those of the output the conversation shows. This module remembers, per engine,
scope and tool call id, the output of the latest run of the call captured in this process
(runs ordered as they begin; an agent built anew for the resume, on the same engine, finds it),
and withdraws the facts of every other output of the same call (same tool, same arguments)
when the state the call runs on holds no result for it. A call id a host gives again to a later
call is not taken for a run again: its first result is in the state, or its arguments differ
(one whose result the host removed from the state meanwhile is). After a restart the earlier
output is not known here, and its facts stay.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

from langchain_core.messages import BaseMessage, ToolMessage
from langgraph.prebuilt.tool_node import ToolCallRequest

from ctxplugin import ContextEngine, Scope
from ctxplugin.errors import StoreError
from ctxplugin.facts.model import output_digest
from ctxplugin.tokens import content_text
from ctxplugin_langgraph._scope import request_messages

_LIMIT = 4096
"""Calls remembered at most (the oldest are forgotten: a run again of one of them withdraws nothing)."""

log = logging.getLogger("ctxplugin")

_OF_ENGINE: weakref.WeakKeyDictionary[ContextEngine, RunAgain] = weakref.WeakKeyDictionary()
_OF_ENGINE_LOCK = threading.Lock()


class RunAgain:
    """The output captured last for each recent tool call, to withdraw the facts of an output a
    run of the call again replaced before the state held it (thread-safe, bounded)."""

    def __init__(self) -> None:
        self._last: OrderedDict[tuple[str, str], tuple[str, str, int]] = OrderedDict()
        self._lock = threading.Lock()
        self._runs = itertools.count()

    @staticmethod
    def of(engine: ContextEngine) -> RunAgain:
        """The record of ``engine``'s captures, shared by every adapter built on it."""
        with _OF_ENGINE_LOCK:
            found = _OF_ENGINE.get(engine)
            if found is None:
                found = _OF_ENGINE[engine] = RunAgain()
            return found

    def begin(self) -> ToolRun:
        """A tool call about to run: runs are ordered as they begin, not as their capture ends
        (the first run's capture may end after the second's, when the node it ran in was
        interrupted and resumed at once)."""
        with self._lock:
            return ToolRun(self, next(self._runs))

    def _captured(self, engine: ContextEngine, request: ToolCallRequest, output: ToolMessage, scope: Scope, run: int) -> None:
        call = request.tool_call
        call_id = call.get("id")
        if not call_id or not (engine.config.facts.enabled and engine.config.facts.extract):
            return
        key = (scope.key(), call_id)
        asked = _asked(call["name"], call.get("args", {}))
        digest = output_digest(content_text(output.content))
        with self._lock:
            before = self._last.get(key)
            newest = before is None or before[2] < run
            if newest:
                self._last[key] = (asked, digest, run)
                self._last.move_to_end(key)
                while len(self._last) > _LIMIT:
                    self._last.popitem(last=False)
        if before is None or before[0] != asked or before[1] == digest:
            return
        if _answered(request_messages(request), call_id):
            return
        try:  # the facts of every output of the call but the latest run's go
            engine.facts.withdraw({call_id: (digest if newest else before[1],)}, scope=scope)
        except StoreError as exc:
            log.warning("facts of a tool output run again were not withdrawn: %s", exc)


@dataclass(frozen=True, slots=True)
class ToolRun:
    """One run of a tool call, numbered as it began (see :meth:`RunAgain.begin`)."""

    record: RunAgain
    number: int

    def captured(self, engine: ContextEngine, request: ToolCallRequest, output: ToolMessage, scope: Scope) -> None:
        """Note that ``output`` (what was read for facts) answers ``request``'s call; when an
        earlier or later run of the same call (same tool, same arguments) gave another output
        and the state holds no result of the call, withdraw in ``scope`` the facts of every
        output but the latest run's. A failing store is logged, never raised."""
        self.record._captured(engine, request, output, scope, self.number)


def _asked(name: str, args: object) -> str:
    return json.dumps([name, args], sort_keys=True, default=str, ensure_ascii=False)


def _answered(messages: Sequence[BaseMessage] | None, call_id: str) -> bool:
    """Whether the state holds a result of ``call_id`` (unknown state: taken as yes)."""
    if messages is None:
        return True
    return any(isinstance(m, ToolMessage) and m.tool_call_id == call_id for m in messages)


__all__ = ["RunAgain", "ToolRun"]
