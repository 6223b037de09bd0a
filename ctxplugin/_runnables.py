"""langchain-core Runnables over an engine: ``messages -> prepared view`` and
``messages -> reply``, and the answer cache around a model step.

They take the engine as an argument and never import it (the engine builds them in
``as_runnable`` and ``as_model``); :mod:`ctxplugin.langchain` is their public home.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from operator import is_
from typing import TYPE_CHECKING, Any

from langchain_core.callbacks import AsyncCallbackManagerForChainRun, CallbackManagerForChainRun
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, convert_to_messages
from langchain_core.prompt_values import PromptValue
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda, RunnableSerializable
from langchain_core.runnables.config import patch_config
from pydantic import Field, PrivateAttr

from ctxplugin._lru import LRU
from ctxplugin._marked_calls import with_cache_marks
from ctxplugin._model_kind import with_tools
from ctxplugin._names import EXPAND_REF_NAME, is_meta_tool
from ctxplugin._one_system import guard_one_system
from ctxplugin._run_scope import resolve as resolve_scope
from ctxplugin._thinking import guard_thinking
from ctxplugin._tool_images import guard_tool_images
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import Scope
from ctxplugin.tokens import content_text
from ctxplugin.tools.models import takes_stubs

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine, PreparedContext


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


class PlannedViews:
    """The views ``prepare`` planned without ``expand_ref`` (nothing in them for it to read: a
    conversation the whole mode sends as it was), told by their message objects, so that a step
    that binds tools apart from preparing (:meth:`ContextEngine.bound_tools`) binds what the view
    was planned and budgeted with. Two conversations served at once may end with one message
    object (a host appending the same one to both): a view is found by its length and the
    objects at its end and middle, then told by every message it holds, in order (one pass
    comparing identities, on a hit only), so neither takes the other's place. Bounded and
    thread-safe."""

    def __init__(self, size: int = 256) -> None:
        # views alike in length, last and middle message share a key (each view holds its
        # messages, so the ids in use stay theirs)
        self._views: LRU[tuple[int, int, int], list[tuple[BaseMessage, ...]]] = LRU(size)
        self._lock = threading.Lock()

    def keep(self, prepared: PreparedContext) -> None:
        """Note whether ``prepared`` was planned without ``expand_ref``."""
        view = prepared.messages
        if not view:
            return
        key = _view_key(view)
        planned = not any(_is_expand_ref(t) for t in prepared.tools)
        kept = tuple(view) if planned else ()  # as it was planned, should the list change later
        with self._lock:
            alike = [v for v in self._views.pop(key, None) or () if not _same(v, view)]
            if planned:
                alike = [*alike[-(_ALIKE - 1) :], kept]
            if alike:
                self._views.put(key, alike)

    def bound(self, messages: Sequence[BaseMessage], tools: list[Any]) -> list[Any]:
        """``tools`` without ``expand_ref`` when ``messages`` is a view kept without it."""
        if not messages:
            return tools
        with self._lock:
            alike = self._views.get(_view_key(messages))
            planned = alike is not None and any(_same(v, messages) for v in alike)
        if not planned:
            return tools
        return [t for t in tools if not _is_expand_ref(t)]


_ALIKE = 4  # views kept under one key: more than two alike at once is already rare


def _view_key(messages: Sequence[BaseMessage]) -> tuple[int, int, int]:
    return len(messages), id(messages[-1]), id(messages[len(messages) // 2])


def _same(kept: tuple[BaseMessage, ...], messages: Sequence[BaseMessage]) -> bool:
    """Whether ``messages`` holds the very messages of ``kept``, in order."""
    return len(kept) == len(messages) and all(map(is_, kept, messages))


def _is_expand_ref(tool: Any) -> bool:
    return is_meta_tool(tool) and getattr(tool, "name", None) == EXPAND_REF_NAME


class PrepareRunnable(RunnableSerializable[Any, list[BaseMessage]]):
    """``messages -> prepared view``; put it in an LCEL pipe before the model.

        chain = prompt | engine.as_runnable() | model
        chain.invoke({...}, {"configurable": {"thread_id": "t1"}})

    The scope comes from ``config["configurable"]["thread_id"]`` (plus optional ``user_id``,
    ``workspace_id``, ``tenant_id``) or ``configurable["ctxplugin_scope"]``; without either, a
    conversation gets a scope of its own (``run-…``, from its first message and its id; new on each
    call when it has no id) and a warning is
    logged once: nothing is shared between conversations unless asked for. ``tools``, when given, are planned like an agent's (tool directory, lazy
    schemas); bind :meth:`bound_tools` to the model yourself.
    """

    engine: Any
    tools: list[Any] = Field(default_factory=list)
    _planned: PlannedViews = PrivateAttr(default_factory=PlannedViews)

    def __init__(self, engine: ContextEngine, tools: Sequence[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(engine=engine, tools=list(tools or []), **kwargs)

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return self._call_with_config(self._run, input, config, run_type="chain")

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> list[BaseMessage]:
        return await self._acall_with_config(self._arun, input, config, run_type="chain")

    def _run(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> list[BaseMessage]:
        messages = as_messages(input)
        prepared = self.engine.prepare(messages, tools=self.tools, scope=resolve_scope(config, messages))
        self._planned.keep(prepared)
        return list(prepared.messages)

    async def _arun(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> list[BaseMessage]:
        messages = as_messages(input)
        prepared = await self.engine.aprepare(messages, tools=self.tools, scope=resolve_scope(config, messages))
        self._planned.keep(prepared)
        return list(prepared.messages)

    def bound_tools(self, messages: Sequence[BaseMessage]) -> list[Any]:
        """The tools to bind for a call on ``messages`` (see ``ContextEngine.bound_tools``); for a
        view this step prepared, the tools it was planned with."""
        return self._planned.bound(messages, list(self.engine.bound_tools(messages, self.tools)))


@dataclass(frozen=True)
class PreparedCall:
    """What a model step needs to consult the answer cache: the call as ``prepare`` saw it."""

    full: list[BaseMessage]
    prepared: PreparedContext
    scope: Scope
    tools: Sequence[Any]


def _asked(call: PreparedCall, input: Any) -> Sequence[BaseMessage]:
    """The conversation the cache keys a call by: ``call.full``, headed by the system messages
    the host put before the view on the way to the model (``create_react_agent(prompt=...)``
    with ``pre_model_hook``), which the view does not hold. Two agents that differ only by
    such a prompt are asked in different contexts and must not be served each other's answers."""
    sent = input.to_messages() if isinstance(input, PromptValue) else input
    if not isinstance(sent, (list, tuple)):
        return call.full
    shown = {content_text(m.content) for m in [*call.prepared.messages, *call.full] if isinstance(m, SystemMessage)}
    added = [m for m in sent if isinstance(m, SystemMessage) and content_text(m.content) not in shown]
    return [*added, *call.full] if added else call.full


def answered(engine: ContextEngine, bound: Runnable[Any, Any], call: PreparedCall, model: Any) -> Runnable[Any, Any]:
    """``bound`` behind the answer cache: a cached answer when there is one, else the model's
    reply, cached when it is final. ``bound`` itself when the cache is off."""
    if engine.cache is None:
        return bound

    def run(input: Any, config: RunnableConfig) -> Any:
        kwargs: dict[str, Any] = {"tools": call.tools, "scope": call.scope, "model": model}
        full = _asked(call, input)
        cached = engine.cached_answer(full, call.prepared, **kwargs)
        if cached is not None:
            return cached
        reply = bound.invoke(input, config)
        if isinstance(reply, AIMessage):
            engine.remember_answer(full, call.prepared, reply, **kwargs)
        return reply

    async def arun(input: Any, config: RunnableConfig) -> Any:
        kwargs: dict[str, Any] = {"tools": call.tools, "scope": call.scope, "model": model}
        full = _asked(call, input)
        cached = await engine.acached_answer(full, call.prepared, **kwargs)
        if cached is not None:
            return cached
        reply = await bound.ainvoke(input, config)
        if isinstance(reply, AIMessage):
            await engine.aremember_answer(full, call.prepared, reply, **kwargs)
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
    For a model that cannot take images, files or audio in tool results (``ChatOpenAI`` on Chat
    Completions), those blocks of tool results in the view are replaced by a line naming each
    one and its ref.
    A model that cannot be bound stubs (Gemini, see :func:`~ctxplugin.tools.takes_stubs`) is
    bound every tool with its own schema. A Claude model's request (``ChatAnthropic``, or
    ``ChatBedrockConverse``) is marked for its prompt cache, see :func:`with_cache_marks`
    (``prompt_cache_marks=False`` turns it off).
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
        bound = with_tools(self.model, tools) if tools else self.model
        if self.engine.config.prompt_cache_marks:
            bound = with_cache_marks(bound, tools)
        bound = guard_one_system(guard_thinking(guard_tool_images(bound, self.model, tools), self.model), self.model)
        return answered(self.engine, bound, PreparedCall(messages, prepared, scope, self.tools), self.model)

    def _run(self, input: Any, run_manager: CallbackManagerForChainRun, config: RunnableConfig) -> BaseMessage:
        messages = as_messages(input)
        scope = resolve_scope(config, messages)
        prepared = self.engine.prepare(messages, tools=self.tools, scope=scope, strict_tools=not takes_stubs(self.model))
        reply: BaseMessage = self._step(messages, prepared, scope).invoke(
            list(prepared.messages), patch_config(config, callbacks=run_manager.get_child())
        )
        return reply

    async def _arun(
        self, input: Any, run_manager: AsyncCallbackManagerForChainRun, config: RunnableConfig
    ) -> BaseMessage:
        messages = as_messages(input)
        scope = resolve_scope(config, messages)
        prepared = await self.engine.aprepare(
            messages, tools=self.tools, scope=scope, strict_tools=not takes_stubs(self.model)
        )
        reply: BaseMessage = await self._step(messages, prepared, scope).ainvoke(
            list(prepared.messages), patch_config(config, callbacks=run_manager.get_child())
        )
        return reply


__all__ = ["ContextModel", "PrepareRunnable", "PreparedCall", "answered", "as_messages"]
