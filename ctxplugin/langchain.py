"""langchain-core adapters: a Runnable, a chat message history, meta-tools, a callback handler."""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableSerializable
from langchain_core.tools import BaseTool, StructuredTool

from ctxplugin.errors import CtxpluginError
from ctxplugin.report import ContextReport, RunSummary
from ctxplugin.scope import Scope, scope_from_config

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine

logger = logging.getLogger("ctxplugin")

REPORT_EVENT = "ctxplugin.report"
CAPTURE_EVENT = "ctxplugin.capture"
from ctxplugin.engine import EXPAND_REF_NAME  # noqa: E402


def emit(name: str, data: dict[str, Any]) -> None:
    """Dispatch a custom callback event when running inside a LangChain run; else do nothing."""
    from langchain_core.runnables.config import var_child_runnable_config

    config = var_child_runnable_config.get()
    if not config or not config.get("callbacks"):
        return
    from langchain_core.callbacks.manager import dispatch_custom_event

    try:
        dispatch_custom_event(name, data)
    except RuntimeError:  # no parent run: nothing to report to
        return


class PrepareRunnable(RunnableSerializable[Sequence[BaseMessage], list[BaseMessage]]):
    """``messages -> prepared view``; put it in an LCEL pipe before the model.

    The scope comes from ``config["configurable"]["thread_id"]`` (plus optional ``user_id``,
    ``workspace_id``, ``tenant_id``).
    """

    engine: Any

    def __init__(self, engine: ContextEngine, **kwargs: Any) -> None:
        super().__init__(engine=engine, **kwargs)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")

    def _messages(self, input: Any) -> list[BaseMessage]:
        if hasattr(input, "to_messages"):
            return list(input.to_messages())
        if isinstance(input, dict) and "messages" in input:
            return list(input["messages"])
        return list(input)

    def _run(self, input: Any, config: RunnableConfig) -> list[BaseMessage]:
        prepared = self.engine.prepare(self._messages(input), scope=scope_from_config(config))
        return list(prepared.messages)

    async def _arun(self, input: Any, config: RunnableConfig) -> list[BaseMessage]:
        prepared = await self.engine.aprepare(self._messages(input), scope=scope_from_config(config))
        return list(prepared.messages)


class ContextChatHistory(BaseChatMessageHistory):
    """Chat history for ``RunnableWithMessageHistory``: keeps every message, returns the view.

    ``messages`` is the prepared view (what the chain sends to the model); ``full_messages``
    is the whole conversation. Tool results added here are captured into the CAS first.
    """

    def __init__(self, engine: ContextEngine, scope: Scope) -> None:
        self.engine = engine
        self.scope = scope
        self._full: list[BaseMessage] = []
        self._lock = threading.Lock()

    @property
    def full_messages(self) -> list[BaseMessage]:
        with self._lock:
            return list(self._full)

    @property  # type: ignore[override]
    def messages(self) -> list[BaseMessage]:
        full = self.full_messages
        if not full:
            return []
        return list(self.engine.prepare(full, scope=self.scope).messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        with self._lock:
            self._full.extend(messages)

    def clear(self) -> None:
        with self._lock:
            self._full.clear()


def make_expand_ref_tool(engine: ContextEngine) -> BaseTool:
    """The ``expand_ref`` tool the model calls to read stored tool outputs."""
    from ctxplugin.cas import expand_for_model

    def expand_ref(
        ref_id: str,
        fields: list[str] | None = None,
        offset: int = 0,
        limit: int | None = None,
        pattern: str | None = None,
        regex: bool = False,
        config: RunnableConfig | None = None,
    ) -> str:
        """Read a stored tool output by its ref (e.g. 'ref:bash:0123abcd4567ef89').

        Args:
            ref_id: the ref shown next to a tool output summary.
            fields: JSON paths to return, e.g. ["reservations[0].flight_number"].
            offset: first array item or line to return.
            limit: how many items or lines to return.
            pattern: keep only lines (or array items) containing this text.
            regex: treat pattern as a regular expression.
        """
        scope = scope_from_config(config)
        text = expand_for_model(
            engine.cas,
            ref_id,
            scope,
            max_tokens=engine.config.cas.expand_max_tokens,
            counter=engine.counter,
            fields=fields,
            offset=offset,
            limit=limit,
            pattern=pattern,
            regex=regex,
        )
        emit("ctxplugin.expand", {"ref_id": ref_id, "session_id": scope.session_id})
        return text

    return StructuredTool.from_function(expand_ref, name=EXPAND_REF_NAME)


def make_meta_tools(engine: ContextEngine) -> list[BaseTool]:
    """``expand_ref`` and ``load_tools``, for registering with a host's tool node."""
    from ctxplugin.tools import make_load_tools_tool

    return [make_expand_ref_tool(engine), make_load_tools_tool(engine.registry)]


class ContextCallbackHandler(BaseCallbackHandler):
    """Accumulates ctxplugin's per-call reports over a run: savings to date, refs, cache hits.

    Pass it in ``callbacks=[...]``; read :attr:`summary` (a :class:`RunSummary`) or
    :attr:`reports` afterwards. It also logs one line per prepared call at INFO.
    """

    def __init__(self, engine: ContextEngine | None = None) -> None:
        self.engine = engine
        self.summary = RunSummary()
        self.reports: list[ContextReport] = []
        self._lock = threading.Lock()

    def on_custom_event(
        self,
        name: str,
        data: Any,
        *,
        run_id: UUID,
        tags: list[str] | None = None,
        metadata: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if name == REPORT_EVENT and isinstance(data, ContextReport):
            with self._lock:
                self.reports.append(data)
                self.summary.add(data)
            logger.info(
                "ctxplugin: session %s: %d -> %d tokens (%.0f%% saved), %d refs, %d facts",
                data.session_id, data.tokens_before, data.tokens_after, 100 * data.reduction,
                len(data.refs_used), len(data.facts),
            )
        elif name == CAPTURE_EVENT:
            with self._lock:
                self.summary.captures += 1
        elif name == "ctxplugin.cache_lookup":
            with self._lock:
                self.summary.cache_lookups += 1


def is_compact(message: BaseMessage) -> bool:
    """Whether a tool message carries a ctxplugin ref."""
    from ctxplugin._messages import annotation

    return isinstance(message, ToolMessage) and bool(annotation(message).get("ref"))


__all__ = [
    "ContextCallbackHandler",
    "ContextChatHistory",
    "CtxpluginError",
    "PrepareRunnable",
    "make_expand_ref_tool",
    "make_meta_tools",
]
