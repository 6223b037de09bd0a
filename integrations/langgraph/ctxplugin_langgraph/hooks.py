"""ctxplugin for LangGraph's ``create_react_agent`` and for custom ``StateGraph``s.

    hooks = ContextHooks(engine, tools)
    agent = create_react_agent(hooks.model(llm), hooks.tool_node(),
                               pre_model_hook=hooks.pre_model_hook, checkpointer=saver)

``pre_model_hook`` returns the prepared view as ``llm_input_messages`` (the state keeps every
message); ``model(llm)`` binds, per call, the tools the view needs (names-only directory plus
loaded schemas); ``tool_node()`` is a ``ToolNode`` over the agent's tools and ctxplugin's
meta-tools whose tool calls are captured into the CAS.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, ToolMessage
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool
from langgraph.prebuilt import ToolNode
from langgraph.prebuilt.tool_node import ToolCallRequest
from langgraph.types import Command

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin.scope import scope_from_config
from ctxplugin_langgraph._capture import after_tool, current_scope, precheck


def _messages(state: Any) -> list[BaseMessage]:
    if isinstance(state, dict):
        return list(state["messages"])
    return list(state.messages)


class ContextHooks:
    """The hooks, model callable and tool node that add ctxplugin to a LangGraph agent.

    Args:
        engine: the shared :class:`~ctxplugin.ContextEngine`.
        tools: the agent's tools (ctxplugin's ``expand_ref`` and ``load_tools`` are added).
        keep_originals: the state keeps the full tool output with its ref (default) or only
            the compact form.
        scope: a fixed scope; by default read from ``configurable.thread_id``. Give each agent
            of a multi-agent graph its own (e.g. ``Scope(session_id=thread, workspace_id="planner")``)
            to keep their refs and facts apart while sharing one engine.
    """

    def __init__(
        self,
        engine: ContextEngine,
        tools: Sequence[BaseTool | Callable[..., Any]],
        *,
        keep_originals: bool = True,
        scope: Scope | Callable[[RunnableConfig | None], Scope] | None = None,
    ) -> None:
        from langchain_core.tools import tool as to_tool

        self.engine = engine
        self.user_tools: list[BaseTool] = [t if isinstance(t, BaseTool) else to_tool(t) for t in tools]
        self.tools: list[BaseTool] = [*self.user_tools, *engine.tools_for_model()]
        self.keep_originals = keep_originals
        self._scope_spec = scope

    def scope(self, config: RunnableConfig | None = None) -> Scope:
        """The scope for a call (fixed, computed from the config, or the thread id)."""
        if isinstance(self._scope_spec, Scope):
            return self._scope_spec
        if callable(self._scope_spec):
            return self._scope_spec(config)
        return scope_from_config(config) if config is not None else current_scope()

    # -- model side -----------------------------------------------------------------
    def prepare(self, state: Any, config: RunnableConfig | None = None) -> PreparedContext:
        """The prepared view for a state (what ``pre_model_hook`` sends)."""
        return self.engine.prepare(_messages(state), tools=self.tools, scope=self.scope(config))

    def _pre(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        return {"llm_input_messages": self.prepare(state, config).messages}

    async def _apre(self, state: Any, config: RunnableConfig) -> dict[str, Any]:
        prepared = await self.engine.aprepare(_messages(state), tools=self.tools, scope=self.scope(config))
        return {"llm_input_messages": prepared.messages}

    @property
    def pre_model_hook(self) -> Runnable[Any, dict[str, Any]]:
        """For ``create_react_agent(pre_model_hook=...)``: returns ``llm_input_messages``."""
        return RunnableLambda(self._pre, afunc=self._apre, name="ctxplugin_pre_model_hook")

    def model(self, llm: BaseChatModel) -> Callable[[Any, Any], Runnable[Any, Any]]:
        """A model callable for ``create_react_agent`` that binds the tools this call needs."""

        def select(state: Any, runtime: Any) -> Runnable[Any, Any]:
            return llm.bind_tools(self.engine.bound_tools(_messages(state), self.tools))

        return select

    # -- tool side ------------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """For ``ToolNode(..., wrap_tool_call=...)``: run, capture, return what the state keeps."""
        early = precheck(self.engine, request)
        if early is not None:
            return early
        scope = self.scope(getattr(request.runtime, "config", None))
        return after_tool(self.engine, handler(request), request, scope, keep_originals=self.keep_originals)

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """For ``ToolNode(..., awrap_tool_call=...)``."""
        early = precheck(self.engine, request)
        if early is not None:
            return early
        scope = self.scope(getattr(request.runtime, "config", None))
        result = await handler(request)
        return await asyncio.to_thread(after_tool, self.engine, result, request, scope, keep_originals=self.keep_originals)

    def tool_node(self, **kwargs: Any) -> ToolNode:
        """A ``ToolNode`` over the agent's tools and the meta-tools, with capture wired in."""
        return ToolNode(self.tools, wrap_tool_call=self.wrap_tool_call, awrap_tool_call=self.awrap_tool_call, **kwargs)

    def prepare_node(self, output_key: str = "llm_input_messages") -> Runnable[Any, dict[str, Any]]:
        """A node for a custom ``StateGraph``, placed before the model node: writes the
        prepared view under ``output_key`` (add that key to your state schema, without a
        reducer, and have the model node read it)."""

        def run(state: Any, config: RunnableConfig) -> dict[str, Any]:
            return {output_key: self.prepare(state, config).messages}

        async def arun(state: Any, config: RunnableConfig) -> dict[str, Any]:
            prepared = await self.engine.aprepare(_messages(state), tools=self.tools, scope=self.scope(config))
            return {output_key: prepared.messages}

        return RunnableLambda(run, afunc=arun, name="ctxplugin_prepare")
