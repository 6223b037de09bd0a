"""ctxplugin for LangGraph's ``create_react_agent`` and for custom ``StateGraph``s.

``create_react_agent``::

    hooks = ContextHooks(engine, tools, prompt="You are a travel assistant.")
    agent = create_react_agent(hooks.model(llm), hooks.tool_node(),
                               pre_model_hook=hooks.pre_model_hook, checkpointer=saver)

``pre_model_hook`` returns the prepared view as ``llm_input_messages`` (the state keeps every
message); ``model(llm)`` binds, per call, the tools the view needs (names-only directory plus
loaded schemas); ``tool_node()`` is a ``ToolNode`` over the agent's tools and ctxplugin's
meta-tools whose outputs are captured into the CAS.

A custom ``StateGraph`` uses the same pieces: :meth:`ContextHooks.prepare_node` before the
model node (or :meth:`ContextHooks.model_node` in place of it), and :meth:`ContextHooks.tool_node`
or ``ToolNode(hooks.tools, wrap_tool_call=hooks.wrap_tool_call, awrap_tool_call=hooks.awrap_tool_call)``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, SystemMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin._model_kind import with_tools
from ctxplugin._names import is_meta_tool
from ctxplugin._one_system import guard_one_system
from ctxplugin._run_scope import using
from ctxplugin._runnables import PlannedViews
from ctxplugin._thinking import guard_thinking
from ctxplugin._tool_images import guard_tool_images
from ctxplugin.errors import InvalidInputError
from ctxplugin.langchain import make_meta_tools, with_cache_marks
from ctxplugin.tools import check_meta_names, takes_stubs, tool_list
from ctxplugin_langgraph._annotations import scrubbed_messages, without_stale
from ctxplugin_langgraph._answers import AnswerHandoff, PreparedCall, answered
from ctxplugin_langgraph._capture import after_tool, checked_engine, offered_to, precheck
from ctxplugin_langgraph._run_again import RunAgain
from ctxplugin_langgraph._scope import ScopeRule, ScopeSpec
from ctxplugin_langgraph._scope import request_messages as _request_messages


def state_messages(state: Any) -> list[BaseMessage]:
    """The ``messages`` of a LangGraph state (a dict or an object with ``.messages``)."""
    if isinstance(state, dict):
        if "messages" not in state:
            raise InvalidInputError(f"the graph state has no 'messages' key (keys: {sorted(state)})")
        return list(state["messages"])
    messages = getattr(state, "messages", None)
    if messages is None:
        raise InvalidInputError(f"the graph state ({type(state).__name__}) has no 'messages' field")
    return list(messages)


def _scrubbed(state: Any) -> dict[str, Any]:
    """The state update that saves each tool output masked since capture without what its
    annotation kept of the unmasked content (see :func:`~ctxplugin.cas.scrubbed`; the same
    message ids, so ``add_messages`` replaces them); empty when there is none. ``prepare``,
    which made the view beside it, revoked the unmasked original already. The hooks have no
    step after the model: the update goes out with the view (or the reply), before the
    checkpoint that would otherwise save the unmasked copy again."""
    return scrubbed_messages(state) or {}


class ContextHooks:
    """The hooks, model callable and tool node that add ctxplugin to a LangGraph agent.

    Args:
        engine: the shared :class:`~ctxplugin.ContextEngine`.
        tools: the agent's tools (ctxplugin's ``expand_ref`` and ``load_tools`` are added; given
            here too, they are bound once).
        prompt: the agent's system prompt. Give it here rather than to ``create_react_agent``
            so it heads the prepared view and counts against the header budget.
        keep_originals: the state keeps the full tool output with its ref (default) or only
            the compact form.
        scope: a fixed :class:`~ctxplugin.Scope` or a function of the run's config; by default
            the run's ``configurable.thread_id``.
        namespace: give this agent its own session on the thread (``"<thread_id>/<namespace>"``):
            in a multi-agent graph sharing one engine, its refs and facts stay its own. A thread
            id or namespace holding ``/`` or ``%`` is escaped first
            (:func:`ctxplugin.scope.session_part`: ``/`` → ``%2F``, ``%`` → ``%25``), so no
            thread id names the session of another thread's namespaced agent; a fixed
            ``scope``'s session id is escaped the same way before the namespace is added.

    Raises:
        InvalidInputError: ``engine`` is not a :class:`~ctxplugin.ContextEngine`; ``tools`` is
            one tool rather than a list; ``scope`` or ``namespace`` is not one of the forms
            above; or a tool of the agent is named
            ``expand_ref`` or ``load_tools`` (rename it: the model could not tell it from ctxplugin's).
    """

    def __init__(
        self,
        engine: ContextEngine,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        prompt: str | SystemMessage | None = None,
        keep_originals: bool = True,
        scope: ScopeSpec = None,
        namespace: str | None = None,
    ) -> None:
        from langchain_core.tools import tool as to_tool

        self.engine = checked_engine(engine, "ContextHooks")
        self.scope_rule = ScopeRule(scope, namespace)
        given = [t if isinstance(t, BaseTool) else to_tool(t) for t in tool_list(tools)]
        check_meta_names(given)
        self.user_tools: list[BaseTool] = [t for t in given if not is_meta_tool(t)]  # the hooks add their own
        self.tools: list[BaseTool] = [*self.user_tools, *make_meta_tools(engine, scope=self.scope_rule.in_tool)]
        # known before the first model call of the process: a tool step resumed after a restart
        # runs load_tools before any view is prepared, and it answers from the registry then
        self.engine.registry.register_all(self.user_tools)
        self.prompt = SystemMessage(content=prompt) if isinstance(prompt, str) else prompt
        self.keep_originals = keep_originals
        # set by model(llm): a model that cannot be bound stubs gets every schema, and the
        # views prepared for it say so (no directory)
        self._own_schemas = False
        self._answers = AnswerHandoff(engine)  # pre_model_hook -> model callable, for the answer cache
        self._run_again = RunAgain.of(self.engine)  # the outputs captured, for a call run again before the state held one
        self._planned = PlannedViews()  # the model step binds what the view was planned and budgeted with

    def scope(self, config: RunnableConfig | None = None, messages: Sequence[BaseMessage] | None = None) -> Scope:
        """The scope of a call (fixed, computed from the config, or the thread id; without a
        thread id, the run's own, found from its state's ``messages``)."""
        return self.scope_rule(config, messages)

    # -- model side -----------------------------------------------------------------
    def _head(self, messages: list[BaseMessage]) -> list[BaseMessage]:
        return without_stale([self.prompt, *messages] if self.prompt is not None else messages)

    def prepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedContext:
        """The prepared view of a state (the prompt, then the state's messages)."""
        messages = state_messages(state)
        prepared = self.engine.prepare(self._head(messages), tools=self.tools, scope=self.scope(config, messages),
                                       strict_tools=self._own_schemas)
        self._planned.keep(prepared)
        return prepared

    async def aprepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedContext:
        """Async :meth:`prepare`, in a worker thread (it reads the whole conversation)."""
        return await asyncio.to_thread(self.prepare, state, config)

    def _call(self, state: Any, config: RunnableConfig | None) -> PreparedCall:
        messages = state_messages(state)
        full, scope = self._head(messages), self.scope(config, messages)
        prepared = self.engine.prepare(full, tools=self.tools, scope=scope, strict_tools=self._own_schemas)
        self._planned.keep(prepared)
        return PreparedCall(full, prepared, scope, self.tools)

    def _step(self, state: Any, config: RunnableConfig | None) -> tuple[PreparedCall, dict[str, Any]]:
        """The prepared call, and the state update of the outputs masked since capture (see
        :func:`_scrubbed`): both read every message of the state."""
        return self._call(state, config), _scrubbed(state)

    async def _astep(self, state: Any, config: RunnableConfig | None) -> tuple[PreparedCall, dict[str, Any]]:
        return await asyncio.to_thread(self._step, state, config)

    @property
    def pre_model_hook(self) -> Runnable[Any, dict[str, Any]]:
        """For ``create_react_agent(pre_model_hook=...)``: returns ``{"llm_input_messages": view}``.

        The state's ``messages`` are not changed (only the model call sees the view), except
        that a tool output masked since capture is saved without its unmasked compact form
        (see :func:`_scrubbed`).
        """
        return self.prepare_node("llm_input_messages")

    def bind(self, llm: BaseChatModel, messages: Sequence[BaseMessage]) -> Runnable[Any, Any]:
        """``llm`` with the tools a call on ``messages`` needs bound (lazy schemas; for a view
        these hooks prepared, the tools it was planned with: no ``expand_ref`` while it shows
        nothing for it to read). For a model
        that cannot take images, files or audio in tool results (``ChatOpenAI`` on Chat
        Completions), those blocks of tool results in what it is sent are replaced by a line
        naming each one. A
        Claude model's requests (``ChatAnthropic``, or ``ChatBedrockConverse``) are marked for
        its prompt cache (:func:`ctxplugin.langchain.with_cache_marks`; ``prompt_cache_marks=False``
        turns it off): a custom model node that calls ``hooks.bind(llm, view).invoke(view)``
        gets them too."""
        tools = self.engine.bound_tools(messages, self.tools, strict_tools=not takes_stubs(llm))
        tools = self._planned.bound(messages, tools)
        bound = with_tools(llm, tools) if tools else llm  # a chat without tools binds none, as without ctxplugin
        if self.engine.config.prompt_cache_marks:
            bound = with_cache_marks(bound, tools)
        return guard_one_system(guard_thinking(guard_tool_images(bound, llm, tools), llm), llm)

    def model(self, llm: BaseChatModel) -> Callable[[Any, Any], Runnable[Any, Any]]:
        """A model callable for ``create_react_agent`` that binds the tools this call needs.

        With ``pre_model_hook`` set, ``create_react_agent`` hands it the state whose
        ``messages`` are already the prepared view, so the tools follow what the model sees.
        With the answer cache on, a cached answer is returned instead of calling ``llm``.
        A model that cannot be bound stubs (Gemini, see :func:`~ctxplugin.tools.takes_stubs`)
        is bound every tool with its own schema, and the views these hooks prepare from then
        on show no tool directory.
        """
        self._own_schemas = self._own_schemas or not takes_stubs(llm)

        def select(state: Any, runtime: Any) -> Runnable[Any, Any]:
            view = state_messages(state)
            return self._answers.model(self.bind(llm, view), view, self.scope, llm)

        return select

    def prepare_node(self, output_key: str = "llm_input_messages") -> Runnable[Any, dict[str, Any]]:
        """A node for a custom ``StateGraph``, placed before the model node: writes the
        prepared view under ``output_key``.

        Add that key to your state schema without a reducer (``llm_input_messages:
        list[AnyMessage]``) and have the model node send it instead of ``messages``. Tool
        outputs masked in the state since capture are returned under ``messages``, scrubbed
        (see :func:`_scrubbed`).
        """

        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            call, saved = self._step(state, config)
            self._answers.keep(call)
            return {output_key: call.prepared.messages, **saved}

        async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
            call, saved = await self._astep(state, config)
            self._answers.keep(call)
            return {output_key: call.prepared.messages, **saved}

        return RunnableLambda(run, afunc=arun, name="ctxplugin_prepare")

    def model_node(self, llm: BaseChatModel) -> Runnable[Any, dict[str, Any]]:
        """A complete model node for a custom ``StateGraph``: prepares the view, binds the
        tools it needs, calls ``llm`` and returns ``{"messages": [reply]}``. Nothing else is
        written to the state. With the answer cache on, a cached answer replaces the call."""

        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            call, saved = self._step(state, config)
            view = call.prepared.messages
            reply = answered(self.engine, self.bind(llm, view), call, llm).invoke(view, config)
            return {"messages": [*saved.get("messages", ()), reply]}

        async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
            call, saved = await self._astep(state, config)
            view = call.prepared.messages
            reply = await answered(self.engine, self.bind(llm, view), call, llm).ainvoke(view, config)
            return {"messages": [*saved.get("messages", ()), reply]}

        return RunnableLambda(run, afunc=arun, name="ctxplugin_model")

    # -- tool side ------------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """For ``ToolNode(..., wrap_tool_call=...)``: run the tool, store its output, and
        return what the state keeps. Errors raised by the tool propagate unchanged (the
        node's ``handle_tool_errors`` decides); nothing is stored for them."""
        self.engine.check_open()
        scope = self.scope(getattr(request.runtime, "config", None), _request_messages(request))
        offered = offered_to(self.engine, scope, self.tools)
        early = precheck(self.engine, request, offered, scope)
        if early is not None:
            return early
        run = self._run_again.begin()
        with using(scope):  # the meta-tools find the run's scope without a thread id
            result = handler(request)
        return after_tool(
            self.engine, result, request, scope, keep_originals=self.keep_originals, offered=offered, run=run
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """For ``ToolNode(..., awrap_tool_call=...)``."""
        self.engine.check_open()
        scope = self.scope(getattr(request.runtime, "config", None), _request_messages(request))
        offered = offered_to(self.engine, scope, self.tools)
        early = precheck(self.engine, request, offered, scope)
        if early is not None:
            return early
        run = self._run_again.begin()
        with using(scope):
            result = await handler(request)
        return await asyncio.to_thread(
            after_tool, self.engine, result, request, scope, keep_originals=self.keep_originals, offered=offered,
            run=run,
        )

    def tool_node(self, **kwargs: Any) -> ToolNode:
        """A ``ToolNode`` over the agent's tools and the meta-tools, with capture wired in."""
        return ToolNode(self.tools, wrap_tool_call=self.wrap_tool_call, awrap_tool_call=self.awrap_tool_call, **kwargs)
