"""langchain-core adapters: a Runnable, a chat message history, meta-tools, a callback handler.

- :class:`PrepareRunnable` (``engine.as_runnable()``): ``messages -> prepared view`` in an LCEL pipe.
- :class:`ContextModel` (``engine.as_model(llm)``): ``messages -> reply``: prepare, the answer
  cache and tool binding around a chat model, at the end of an LCEL pipe.
- :class:`ContextChatHistory` (``engine.history(session_id)``): for ``RunnableWithMessageHistory``;
  stores the whole conversation, returns the prepared view.
- :func:`make_meta_tools`: the ``expand_ref`` and ``load_tools`` tools a host registers.
- :class:`ContextCallbackHandler`: pass in ``callbacks=[...]`` to collect every call's report.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import (
    AsyncCallbackManagerForChainRun,
    BaseCallbackHandler,
    CallbackManagerForChainRun,
)
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from langchain_core.runnables.config import patch_config
from langchain_core.tools import BaseTool, StructuredTool
from pydantic import BaseModel, Field

from ctxplugin._events import emit
from ctxplugin._message_store import MessageStore, store_for
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._names import (
    CACHE_LOOKUP_EVENT,
    CAPTURE_EVENT,
    EXPAND_EVENT,
    EXPAND_REF_NAME,
    REPORT_EVENT,
)
from ctxplugin._run_scope import resolve as resolve_scope
from ctxplugin.errors import CtxpluginError, InvalidInputError
from ctxplugin.report import ContextReport, RunSummary
from ctxplugin.scope import Scope

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine, PreparedContext

logger = logging.getLogger("ctxplugin")

ScopeResolver = Callable[[RunnableConfig | None], Scope]
"""Maps a run's config to the scope of a call (default: the thread id, else a scope of the run's own)."""



def as_messages(value: Any) -> list[BaseMessage]:
    """The message list in what an LCEL step receives: a ``PromptValue``, a list of messages
    (or message-likes such as ``("user", "hi")``), or a dict with a ``"messages"`` key.

    Raises:
        InvalidInputError: anything else.
    """
    if isinstance(value, PromptValue):
        return list(value.to_messages())
    if isinstance(value, dict):
        if "messages" not in value:
            raise InvalidInputError(
                f"the prepare step got a dict without a 'messages' key (keys: {sorted(value)}); "
                "pipe it after a chat prompt or pass a list of messages"
            )
        value = value["messages"]
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidInputError(
            f"the prepare step takes a list of messages, a prompt value or {{'messages': [...]}}, "
            f"got {type(value).__name__}"
        )
    try:
        return convert_to_messages(value)
    except (ValueError, TypeError, NotImplementedError) as exc:
        raise InvalidInputError(f"the prepare step could not read these messages: {exc}") from exc


class PrepareRunnable(RunnableSerializable[Any, list[BaseMessage]]):
    """``messages -> prepared view``; put it in an LCEL pipe before the model.

        chain = prompt | engine.as_runnable() | model
        chain.invoke({...}, {"configurable": {"thread_id": "t1"}})

    The scope comes from ``config["configurable"]["thread_id"]`` (plus optional ``user_id``,
    ``workspace_id``, ``tenant_id``) or ``configurable["ctxplugin_scope"]``; without either, a
    conversation gets a scope of its own (``run-…``, from its first message) and a warning is
    logged once: nothing is shared between conversations unless asked for. ``tools``, when given, are planned like an agent's (tool directory, lazy
    schemas); bind :meth:`bound_tools` to the model yourself.
    """

    engine: Any
    tools: list[Any] = Field(default_factory=list)

    def __init__(self, engine: ContextEngine, tools: Sequence[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(engine=engine, tools=list(tools or []), **kwargs)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")

    def _run(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> list[BaseMessage]:
        messages = as_messages(input)
        prepared = self.engine.prepare(messages, tools=self.tools, scope=resolve_scope(config, messages))
        return list(prepared.messages)

    async def _arun(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        messages = as_messages(input)
        prepared = await self.engine.aprepare(messages, tools=self.tools, scope=resolve_scope(config, messages))
        return list(prepared.messages)

    def bound_tools(self, messages: Sequence[BaseMessage]) -> list[Any]:
        """The tools to bind for a call on ``messages`` (see ``ContextEngine.bound_tools``)."""
        return list(self.engine.bound_tools(messages, self.tools))


@dataclass(frozen=True)
class PreparedCall:
    """What a model step needs to consult the answer cache: the call as ``prepare`` saw it."""

    full: list[BaseMessage]
    prepared: PreparedContext
    scope: Scope
    tools: Sequence[Any]


def answered(engine: ContextEngine, bound: Runnable[Any, Any], call: PreparedCall, model: Any) -> Runnable[Any, Any]:
    """``bound`` behind the answer cache: a cached answer when there is one, else the model's
    reply, cached when it is final. ``bound`` itself when the cache is off."""
    if engine.cache is None:
        return bound

    def run(input: Any, config: RunnableConfig) -> Any:
        kwargs: dict[str, Any] = {"tools": call.tools, "scope": call.scope, "model": model}
        cached = engine.cached_answer(call.full, call.prepared, **kwargs)
        if cached is not None:
            return cached
        reply = bound.invoke(input, config)
        if isinstance(reply, AIMessage):
            engine.remember_answer(call.full, call.prepared, reply, **kwargs)
        return reply

    async def arun(input: Any, config: RunnableConfig) -> Any:
        kwargs: dict[str, Any] = {"tools": call.tools, "scope": call.scope, "model": model}
        cached = await engine.acached_answer(call.full, call.prepared, **kwargs)
        if cached is not None:
            return cached
        reply = await bound.ainvoke(input, config)
        if isinstance(reply, AIMessage):
            await engine.aremember_answer(call.full, call.prepared, reply, **kwargs)
        return reply

    return RunnableLambda(run, afunc=arun, name="ctxplugin_answer_cache")


class ContextModel(RunnableSerializable[Any, BaseMessage]):
    """``messages -> the model's reply`` with ctxplugin in between; the end of an LCEL pipe.

        chain = prompt | engine.as_model(llm, tools=tools)
        reply = chain.invoke({...}, {"configurable": {"thread_id": "t1"}})

    Each call prepares the view (as :class:`PrepareRunnable` does), answers from the answer
    cache when it is on and holds an answer for this call (the model is not called), else binds
    the tools the plan chose (``prepared.tools``; none when no ``tools`` are given) and calls
    the model on the view; a final answer is then cached (through :func:`answered`, as the
    LangGraph hooks do). The model's run is nested in this step's, so tracing shows both. The reply's tool calls are yours to run, as in any chain.
    """

    engine: Any
    model: Any
    tools: list[Any] = Field(default_factory=list)

    def __init__(self, engine: ContextEngine, model: Any, tools: Sequence[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(engine=engine, model=model, tools=list(tools or []), **kwargs)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> BaseMessage:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> BaseMessage:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")

    def _step(self, messages: list[BaseMessage], prepared: PreparedContext, scope: Scope) -> Runnable[Any, Any]:
        """The model, with the planned tools bound, behind the answer cache."""
        tools = list(prepared.tools)
        bound = self.model.bind_tools(tools) if tools else self.model
        return answered(self.engine, bound, PreparedCall(messages, prepared, scope, self.tools), self.model)

    def _run(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> BaseMessage:
        messages = as_messages(input)
        scope = resolve_scope(config, messages)
        prepared = self.engine.prepare(messages, tools=self.tools, scope=scope)
        reply: BaseMessage = self._step(messages, prepared, scope).invoke(
            list(prepared.messages), patch_config(config, callbacks=run_manager.get_child())
        )
        return reply

    async def _arun(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> BaseMessage:
        messages = as_messages(input)
        scope = resolve_scope(config, messages)
        prepared = await self.engine.aprepare(messages, tools=self.tools, scope=scope)
        reply: BaseMessage = await self._step(messages, prepared, scope).ainvoke(
            list(prepared.messages), patch_config(config, callbacks=run_manager.get_child())
        )
        return reply


class ContextChatHistory(BaseChatMessageHistory):
    """Chat history for ``RunnableWithMessageHistory``: keeps every message, returns the view.

    ``messages`` is the prepared view (what the chain sends to the model); ``full_messages``
    is the whole conversation. Tool results are captured into the CAS as they are added: the
    history keeps the original, annotated with its ref, and every view shows the compact form.

    The conversation lives in the engine's message store, not on this object, so a new history
    object for the same session (``RunnableWithMessageHistory`` asks for one per call) sees it:
    in a SQLite file under an embedded engine's path (it survives restarts), in memory
    otherwise.
    """

    def __init__(self, engine: ContextEngine, scope: Scope, store: MessageStore | None = None) -> None:
        self.engine = engine
        self.scope = scope
        self.store = store if store is not None else store_for(engine)
        self._key = scope.key()
        self._view: tuple[int, list[BaseMessage]] | None = None
        self._lock = threading.Lock()

    @property
    def full_messages(self) -> list[BaseMessage]:
        """Every message of the conversation, as added (tool outputs annotated with refs)."""
        return self.store.load(self._key)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        """The prepared view of the conversation (empty for a new session)."""
        full = self.full_messages
        if not full:
            return []
        with self._lock:
            # RunnableWithMessageHistory reads this twice per call and slices its input by the
            # length it saw first; the same view for the same conversation keeps that exact.
            if self._view is not None and self._view[0] == len(full):
                return list(self._view[1])
        view = list(self.engine.prepare(full, scope=self.scope).messages)
        with self._lock:
            self._view = (len(full), view)
        return list(view)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append messages; tool outputs are stored in the CAS first."""
        kept = [self._capture(m) if isinstance(m, ToolMessage) else m for m in messages]
        self.store.append(self._key, kept)
        with self._lock:
            self._view = None

    def _capture(self, message: ToolMessage) -> BaseMessage:
        if annotation(message).get("ref"):
            return message
        compact = self.engine.capture_tool_result(message, scope=self.scope)
        meta = compact.additional_kwargs.get(META_KEY)
        if meta is None:
            return message
        return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: meta}})

    def clear(self) -> None:
        """Forget this session's conversation (stored tool outputs stay in the CAS)."""
        self.store.clear(self._key)
        with self._lock:
            self._view = None


EXPAND_REF_DESCRIPTION = (
    "Read a stored tool output by its ref_id. Optional: fields (JSON paths), offset/limit (lines or"
    " items), pattern (keep matching lines or items; a regular expression if regex is true)."
)


class ExpandRefArgs(BaseModel):
    """Arguments of ``expand_ref``; the tool's description says what each option does."""

    ref_id: str
    fields: list[str] = Field(default_factory=list)
    offset: int = 0
    limit: int = 0
    pattern: str = ""
    regex: bool = False


def make_expand_ref_tool(engine: ContextEngine, scope: ScopeResolver | None = None) -> BaseTool:
    """The ``expand_ref`` tool the model calls to read stored tool outputs.

    Args:
        engine: the engine whose CAS holds the outputs.
        scope: how to find the caller's scope from the run's config; by default
            ``configurable.thread_id``. Hosts that give an agent its own scope pass theirs.
    """
    from ctxplugin.cas import expand_for_model

    resolve = scope or resolve_scope

    def expand_ref(
        ref_id: str,
        fields: list[str] | None = None,
        offset: int = 0,
        limit: int = 0,
        pattern: str = "",
        regex: bool = False,
        config: RunnableConfig = None,  # type: ignore[assignment]  # injected by LangChain
    ) -> str:
        call_scope = resolve(config)
        text = expand_for_model(
            engine.cas,
            ref_id,
            call_scope,
            max_tokens=engine.config.cas.expand_max_tokens,
            counter=engine.counter,
            fields=fields or None,
            offset=offset,
            limit=limit or None,
            pattern=pattern or None,
            regex=regex,
        )
        emit(EXPAND_EVENT, {"ref_id": ref_id, "session_id": call_scope.session_id})
        return text

    return _ExpandRefTool.from_function(
        expand_ref, name=EXPAND_REF_NAME, description=EXPAND_REF_DESCRIPTION, args_schema=ExpandRefArgs
    )


def _sent_schema(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as a model is shown it: types and required names only. Titles,
    defaults and per-argument descriptions are dropped (the tool's description covers them),
    since the schema goes out with every model call."""
    schema = model.model_json_schema()
    properties = {
        name: {key: value for key, value in prop.items() if key not in ("title", "default", "description")}
        for name, prop in schema["properties"].items()
    }
    return {"type": "object", "properties": properties, "required": schema.get("required", [])}


class _ExpandRefTool(StructuredTool):
    """``expand_ref`` as a structured tool whose arguments are validated by
    :class:`ExpandRefArgs` but sent to the model as :func:`_sent_schema` of it."""

    @property
    def tool_call_schema(self) -> dict[str, Any]:
        return _sent_schema(ExpandRefArgs)


def make_meta_tools(engine: ContextEngine, scope: ScopeResolver | None = None) -> list[BaseTool]:
    """``expand_ref`` and ``load_tools``, for registering with a host's tool node."""
    from ctxplugin.tools import make_load_tools_tool

    return [make_expand_ref_tool(engine, scope), make_load_tools_tool(engine.registry)]


class ContextCallbackHandler(BaseCallbackHandler):
    """Collects ctxplugin's per-call reports over runs: savings to date, refs, cache hits.

    Pass it in ``callbacks=[...]`` of any run (an agent's ``invoke``/``stream``, a chain, a
    ``RunnableWithMessageHistory``); read :attr:`summary` (a :class:`RunSummary`),
    :attr:`reports` and :attr:`captures` afterwards, or :meth:`describe` for one line. It is
    safe to share between threads and tasks; it also logs one line per prepared call at INFO.

    Example:
        >>> handler = ContextCallbackHandler()
        >>> handler.describe()
        '0 model calls: 0 -> 0 input tokens (0% saved), 0 refs created, 0 tool outputs captured, 0 expands, 0 cache hits'
    """

    def __init__(self, engine: ContextEngine | None = None) -> None:
        self.engine = engine
        self.summary = RunSummary()
        self.reports: list[ContextReport] = []
        self.captures: list[dict[str, Any]] = []
        self.expanded: list[str] = []
        self._refs: set[tuple[str, str]] = set()  # (session, ref): a ref made twice counts once
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
                self._refs.update((data.session_id, ref) for ref in data.refs_created)
            logger.info(
                "ctxplugin: session %s: %d -> %d tokens (%.0f%% saved), %d refs, %d facts",
                data.session_id, data.tokens_before, data.tokens_after, 100 * data.reduction,
                len(data.refs_used), len(data.facts),
            )
        elif name == CAPTURE_EVENT and isinstance(data, dict):
            with self._lock:
                self.summary.captures += 1
                self.captures.append(data)
                key = (str(data.get("session_id", "")), str(data.get("ref_id") or ""))
                if key[1] and key not in self._refs:
                    self._refs.add(key)
                    self.summary.refs_created += 1
        elif name == EXPAND_EVENT and isinstance(data, dict):
            with self._lock:
                self.expanded.append(str(data.get("ref_id", "")))
        elif name == CACHE_LOOKUP_EVENT:
            with self._lock:
                self.summary.cache_lookups += 1
                # a call's report event comes before its lookup, so hits are counted here
                if isinstance(data, dict) and data.get("hit"):
                    self.summary.cache_hits += 1

    def sessions(self) -> set[str]:
        """Session ids of the prepared calls seen so far."""
        with self._lock:
            return {r.session_id for r in self.reports}

    def describe(self) -> str:
        """Savings to date in one line."""
        with self._lock:
            s = self.summary
            return (
                f"{s.calls} model calls: {s.tokens_before:,} -> {s.tokens_after:,} input tokens "
                f"({s.reduction:.0%} saved), {s.refs_created} refs created, {s.captures} tool outputs "
                f"captured, {len(self.expanded)} expands, {s.cache_hits} cache hits"
            )


def is_compact(message: BaseMessage) -> bool:
    """Whether a tool message carries a ctxplugin ref."""
    return isinstance(message, ToolMessage) and bool(annotation(message).get("ref"))


__all__ = [
    "CAPTURE_EVENT",
    "EXPAND_EVENT",
    "REPORT_EVENT",
    "ContextCallbackHandler",
    "ContextChatHistory",
    "ContextModel",
    "CtxpluginError",
    "PrepareRunnable",
    "PreparedCall",
    "ScopeResolver",
    "answered",
    "as_messages",
    "is_compact",
    "make_expand_ref_tool",
    "make_meta_tools",
]
