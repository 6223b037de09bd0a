"""Test doubles for users' tests and ours: a scripted offline chat model and in-memory engines,
and readers of a prepared view (its facts block, its context notes and the values they list, its
tool directory, the conversation without them).

Example:
    >>> from langchain_core.messages import AIMessage
    >>> from ctxplugin.testing import ScriptedChatModel, tool_call
    >>> model = ScriptedChatModel(script=[
    ...     AIMessage(content="", tool_calls=[tool_call("search", {"q": "flights"})]),
    ...     AIMessage(content="Booked."),
    ... ])
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolCall
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

from ctxplugin._layout import context_notes, conversation_messages, facts_block, tool_directory
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import ContextConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts import Fact, FactQuery, FactsLedger, MemoryFactStore
from ctxplugin.history.omission import note_values
from ctxplugin.scope import Scope

_ids = itertools.count(1)
_process = {"token": secrets.token_hex(4)}
"""Names this process's reply and tool-call ids apart from another's (renewed in a forked child),
so two processes continuing one checkpointed thread never give two replies one message id, nor two
tool calls one call id."""
os.register_at_fork(after_in_child=lambda: _process.update(token=secrets.token_hex(4)))

Step = AIMessage | Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage]
"""A scripted reply: a fixed ``AIMessage``, or a function of (messages sent, tool schemas bound)."""


def tool_call(name: str, args: dict[str, Any], call_id: str | None = None) -> ToolCall:
    """A tool call for a scripted reply (a fresh id unless one is given)."""
    return ToolCall(name=name, args=args, id=call_id or f"call_{_process['token']}_{next(_ids)}",
                    type="tool_call")


def web_fetch_turn(url: str, page: str, *, text: str, use_id: str) -> AIMessage:
    """An assistant turn in which Anthropic's own ``web_fetch`` tool read ``page`` at ``url``
    (server tool blocks: no tool call of the agent's, no tool message), then said ``text``."""
    found = {"type": "web_fetch_result", "url": url,
             "content": {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": page}}}
    return AIMessage([
        {"type": "server_tool_use", "id": use_id, "name": "web_fetch", "input": {"url": url}},
        {"type": "web_fetch_tool_result", "tool_use_id": use_id, "content": found},
        {"type": "text", "text": text},
    ])


@dataclass(frozen=True)
class RecordedCall:
    """What the model was sent on one call."""

    messages: list[BaseMessage]
    tools: list[dict[str, Any]]

    @property
    def tool_names(self) -> list[str]:
        return [t["function"]["name"] for t in self.tools]


class ScriptedChatModel(BaseChatModel):
    """An offline chat model that replies from a script and records every request.

    Tool calls in scripted replies are real ``tool_calls`` that LangChain and LangGraph execute.
    ``bind_tools`` records the schemas bound for each call. When the script runs out the model
    answers ``default`` (or raises if ``default`` is None).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    script: list[Any] = Field(default_factory=list)
    default: str | None = "Done."
    _position: int = PrivateAttr(default=0)
    _calls: list[RecordedCall] = PrivateAttr(default_factory=list)
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    shared: Any = None
    model_name: str | None = None
    """A name that tells scripted models apart, as a provider model's ``model_name`` does."""

    @property
    def _llm_type(self) -> str:
        return "ctxplugin-scripted"

    @property
    def calls(self) -> list[RecordedCall]:
        """Every request so far (shared across ``bind_tools`` copies)."""
        root = self.shared or self
        return list(root._calls)

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        schemas = [convert_to_openai_tool(t) for t in tools]
        return self.model_copy(update={"bound_tools": schemas, "shared": self.shared or self})

    def _next(self, messages: list[BaseMessage]) -> AIMessage:
        root: ScriptedChatModel = self.shared or self
        with root._lock:
            root._calls.append(RecordedCall(messages=list(messages), tools=list(self.bound_tools)))
            position = root._position
            root._position += 1
        if position < len(root.script):
            step = root.script[position]
            reply = step(list(messages), list(self.bound_tools)) if callable(step) else step
            if not isinstance(reply, AIMessage):
                raise InvalidInputError(f"script step {position} returned {type(reply).__name__}, not AIMessage")
            return reply.model_copy(deep=True)
        if root.default is None:
            raise InvalidInputError(f"ScriptedChatModel script exhausted after {len(root.script)} replies")
        return AIMessage(content=root.default)

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        reply = self._next(messages)
        if reply.id is None:
            reply = reply.model_copy(update={"id": f"scripted-{_process['token']}-{next(_ids)}"})
        return ChatResult(generations=[ChatGeneration(message=reply)])


def logical_clock(start: datetime | None = None, step: timedelta = timedelta(seconds=1)) -> Callable[[], datetime]:
    """A clock that moves ``step`` on every reading from ``start`` (2026-01-01 UTC by default):
    facts written and ranked by it get the same recency on every run, so a replay's figures do
    not depend on how fast the machine is."""
    ticks = itertools.count()
    origin = start or datetime(2026, 1, 1, tzinfo=UTC)
    return lambda: origin + step * next(ticks)


def memory_engine(config: ContextConfig | None = None, *, clock: Callable[[], datetime] | None = None) -> Any:
    """A ``ContextEngine`` on in-memory stores (nothing touches the disk); ``clock`` is the facts
    ledger's (the wall clock by default, :func:`logical_clock` for reproducible replays)."""
    from ctxplugin.engine import ContextEngine

    config = config or ContextConfig()
    ledger = FactsLedger(MemoryFactStore(), config.facts, clock=clock)
    return ContextEngine(config=config, cas=MemoryCASStore(), facts=ledger)


def chat(
    engine: Any,
    turns: Sequence[str],
    *,
    scope: Any,
    system: str,
    reply: Callable[[int, str], str] = lambda index, _: f"Reply {index}.",
) -> tuple[list[BaseMessage], Any]:
    """Play ``turns`` as the user's messages of one chat: before each reply the engine prepares
    the conversation so far. Messages get ids ``h<i>`` (user) and ``a<i>`` (assistant, whose
    text is ``reply(i, turn)``). Returns the conversation and the last ``PreparedContext``."""
    history: list[BaseMessage] = [SystemMessage(system)]
    prepared = None
    for index, turn in enumerate(turns):
        history.append(HumanMessage(turn, id=f"h{index}"))
        prepared = engine.prepare(history, scope=scope)
        history.append(AIMessage(reply(index, turn), id=f"a{index}"))
    return history, prepared


class RequiredOnlyFactStore:
    """A fact store with only the methods the ``FactStore`` protocol requires (``add``,
    ``update``, ``get``, ``find``, ``search``), kept in a :class:`MemoryFactStore`: a user's store
    written before the optional ones (``withdraw``, revision counts, batched writes), for tests
    of what the engine does without them."""

    def __init__(self) -> None:
        self.inner = MemoryFactStore()

    def add(self, facts: Sequence[Fact]) -> None:
        self.inner.add(facts)

    def update(self, facts: Sequence[Fact]) -> None:
        self.inner.update(facts)

    def get(self, ids: Sequence[str], *, reader: Scope) -> list[Fact]:
        return self.inner.get(ids, reader=reader)

    def find(self, query: FactQuery, *, limit: int | None = None) -> list[Fact]:
        return self.inner.find(query, limit=limit)

    def search(self, text: str, query: FactQuery, *, n: int) -> list[tuple[Fact, float]]:
        return self.inner.search(text, query, n=n)


__all__ = [
    "MemoryCASStore",
    "MemoryFactStore",
    "RecordedCall",
    "RequiredOnlyFactStore",
    "ScriptedChatModel",
    "Step",
    "chat",
    "context_notes",
    "conversation_messages",
    "facts_block",
    "logical_clock",
    "memory_engine",
    "note_values",
    "tool_call",
    "tool_directory",
    "web_fetch_turn",
]
