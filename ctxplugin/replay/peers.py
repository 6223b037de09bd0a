"""The strategies a replay compares: what each would have sent the model for one call.

- ``full``: the whole history and every tool schema, as the recorded agent sent it.
- ``trim_messages``: langchain-core's ``trim_messages`` (strategy ``last``,
  ``start_on=("human", "ai")``, ``include_system=True``, ``allow_partial=False``) to ctxplugin's
  total budget minus the tool schemas it must still send, so both are held to the same total;
  counted with the same tokenizer as everything else. The kept window starts on a human or an AI
  message, so a tool loop, whose only human message is the task, keeps its latest whole steps
  (each kept tool call with its result, never a leading tool result) instead of dropping
  everything after the task once the run outgrows the budget.
- ``context_editing``: LangChain's ``ContextEditingMiddleware`` with its default
  ``ClearToolUsesEdit`` (clear all but the latest tool results once the history passes the
  trigger). As in the middleware, the edit sees the messages without the system prompt and
  counts them with ``count_tokens_approximately``; it works on a copy, so each call starts from
  the agent's full history again. Needs the ``langchain`` package.
- ``ctxplugin``: ``engine.prepare`` with the recorded tools plus ctxplugin's meta-tools
  (``expand_ref``, ``load_tools``), as the host integrations bind them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from langchain_core.messages import BaseMessage, trim_messages
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin.engine import ContextEngine
from ctxplugin.errors import MissingDependencyError
from ctxplugin.replay.metrics import Meter, leading_system_count, tools_tokens
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope

StrategyName = Literal["full", "trim_messages", "context_editing", "ctxplugin"]
STRATEGIES: tuple[StrategyName, ...] = ("full", "trim_messages", "context_editing", "ctxplugin")


@dataclass(frozen=True)
class View:
    """What one strategy sends for one call."""

    messages: Sequence[BaseMessage]
    tools: Sequence[dict[str, Any]]
    report: ContextReport | None = None


class Strategy(Protocol):
    """Builds the view of one call from the history the agent held."""

    name: StrategyName

    def view(self, history: Sequence[BaseMessage]) -> View:
        """The messages and tool schemas this strategy would send."""
        ...


class FullHistory:
    """Everything, every call."""

    name: StrategyName = "full"

    def __init__(self, tools: Sequence[dict[str, Any]]) -> None:
        self.tools = list(tools)

    def view(self, history: Sequence[BaseMessage]) -> View:
        return View(messages=history, tools=self.tools)


class TrimMessages:
    """``trim_messages`` to a token budget shared with the tool schemas."""

    name: StrategyName = "trim_messages"

    def __init__(self, tools: Sequence[dict[str, Any]], total: int, meter: Meter) -> None:
        self.tools = list(tools)
        self.max_tokens = max(0, total - tools_tokens(self.tools, meter.counter))
        self.meter = meter

    def view(self, history: Sequence[BaseMessage]) -> View:
        kept = trim_messages(
            list(history),
            max_tokens=self.max_tokens,
            token_counter=self.meter.count,
            strategy="last",
            start_on=("human", "ai"),
            include_system=True,
            allow_partial=False,
        )
        return View(messages=kept, tools=self.tools)


@dataclass(frozen=True)
class ClearToolUsesSettings:
    """Overrides of ``ClearToolUsesEdit``'s defaults (None keeps the library's value)."""

    trigger: int | None = None
    keep: int | None = None

    def resolved(self) -> dict[str, int]:
        """The trigger and keep values in effect (the library defaults unless overridden)."""
        edit_class = _clear_tool_uses_class()
        default = edit_class()
        return {
            "trigger": self.trigger if self.trigger is not None else int(default.trigger),
            "keep": self.keep if self.keep is not None else int(default.keep),
        }


def _clear_tool_uses_class() -> Any:
    try:
        from langchain.agents.middleware.context_editing import ClearToolUsesEdit
    except ImportError as exc:
        raise MissingDependencyError(
            "the context_editing peer replays LangChain's ContextEditingMiddleware: "
            "pip install langchain"
        ) from exc
    return ClearToolUsesEdit


def context_editing_available() -> bool:
    """Whether ``langchain`` (for the ``context_editing`` peer) is installed."""
    try:
        _clear_tool_uses_class()
    except MissingDependencyError:
        return False
    return True


class ContextEditing:
    """LangChain's clear-tool-uses context edit, applied per call as its middleware does."""

    name: StrategyName = "context_editing"

    def __init__(self, tools: Sequence[dict[str, Any]], settings: ClearToolUsesSettings) -> None:
        from langchain_core.messages.utils import count_tokens_approximately

        self.tools = list(tools)
        self.edit = _clear_tool_uses_class()(**settings.resolved())
        self._count: Callable[[Sequence[BaseMessage]], int] = count_tokens_approximately

    def view(self, history: Sequence[BaseMessage]) -> View:
        head = leading_system_count(history)
        # The edit replaces list items with copies and never changes a message in place, so a
        # shallow copy protects the history as the middleware's deepcopy does.
        body = list(history[head:])
        self.edit.apply(body, count_tokens=self._count)
        return View(messages=[*history[:head], *body], tools=self.tools)


class Ctxplugin:
    """``engine.prepare`` on the history, one engine and session per conversation."""

    name: StrategyName = "ctxplugin"

    def __init__(self, engine: ContextEngine, tools: Sequence[dict[str, Any]], scope: Scope) -> None:
        self.engine = engine
        self.scope = scope
        self.tools: list[Any] = [*tools, *engine.tools_for_model()]
        # Keyed by object id; the entry holds the tool itself so the id cannot be reused.
        self._schemas: dict[int, tuple[Any, dict[str, Any]]] = {}

    def _schema(self, tool: Any) -> dict[str, Any]:
        if isinstance(tool, dict):
            return tool
        entry = self._schemas.get(id(tool))
        if entry is None:
            entry = (tool, convert_to_openai_tool(tool))
            self._schemas[id(tool)] = entry
        return entry[1]

    def view(self, history: Sequence[BaseMessage]) -> View:
        prepared = self.engine.prepare(history, tools=self.tools, scope=self.scope)
        schemas = [self._schema(t) for t in prepared.tools]
        return View(messages=prepared.messages, tools=schemas, report=prepared.report)
