"""``ContextMiddleware`` for LangChain's ``create_agent``.

    agent = create_agent(model, tools, middleware=[ContextMiddleware(engine)], checkpointer=...)

``wrap_model_call`` sends the prepared view to the model; the agent's state is not changed
(the checkpoint keeps every message), except that ``after_model`` drops from an output's
annotation what it kept of content a filter masked since capture. ``wrap_tool_call`` stores each tool output in the CAS;
the state keeps the original output, annotated with its ref and compact form, and every later
view shows the compact form. The middleware registers the ``expand_ref`` and ``load_tools``
tools. LangGraph's ``thread_id`` is the scope's ``session_id``.

With the answer cache on (``CTXPLUGIN_CACHE__ENABLED=true``), ``wrap_model_call`` returns a
cached answer instead of calling the model when the same question was already answered in the
same context, and caches final answers (never ones with tool calls) as the run ends
(``after_agent``), with the content the state kept: after the ``after_model`` hooks, so an
answer a filter masked is cached masked and one it blocked is not cached
(``ctxplugin_langgraph._held_answers``); not for an agent with a ``response_format``, which must
end with a structured response.

When the call's tools will be bound strictly (an OpenAI-compatible model with a
``response_format`` on Chat Completions, or ``model_settings={"strict": True}``), every tool is
bound with its own schema instead of a stub: a strict stub could only be called without arguments.
With a ``ToolStrategy`` response format, the tool messages LangChain writes in answer to the
structured-output call (the structured response, or the validation errors to fix) are marked as
its own answers: no facts are read from them, and an error is a failed call the model reads whole.

The host's system prompt stays ``request.system_message`` as the host gave it; the tool directory,
a system message of its own, starts ``request.messages`` (every provider sends the two as one
system prompt). For ``ChatGoogleGenerativeAI(convert_system_message_to_human=True)``, which reads
only one leading system message, the directory is joined after the prompt
(``ctxplugin._one_system``).

For a model that cannot take images, files or audio in tool results (``ChatOpenAI`` on the Chat
Completions API), those blocks of tool results in the view are replaced by a line naming each one
and its ref.

For a Claude model (langchain-anthropic's ``ChatAnthropic``), which caches a prompt only up to the
places a request marks, the request is marked where the view changes least (the end of the
header, the last context note or the task) and asks Anthropic to mark its end, within the four
marks a request may carry (``ctxplugin._cache_points``; ``prompt_cache_marks=False`` turns it off).
For Claude on Bedrock Converse (``ChatBedrockConverse``) cache points go after the last note and
the task, and langchain-aws adds the header's and the end's (``ctxplugin._bedrock_points``).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import PrivateStateAttr, ToolCallRequest
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langgraph.types import Command

from ctxplugin import ContextEngine, PreparedContext, Scope
from ctxplugin._marked_calls import mark_request
from ctxplugin._one_system import one_system, one_system_only
from ctxplugin._run_scope import using
from ctxplugin._thinking import thinks, without_trailing_lookups
from ctxplugin._tool_images import takes_tool_images, without_tool_images
from ctxplugin.budget import model_context_window
from ctxplugin.langchain import make_meta_tools
from ctxplugin_langgraph._annotations import scrubbed_messages, state_messages, without_stale
from ctxplugin_langgraph._capture import after_tool, checked_engine, offered_to, precheck
from ctxplugin_langgraph._guarded import checked_model_request, checked_tool_request
from ctxplugin_langgraph._held_answers import Held, HeldAnswers
from ctxplugin_langgraph._run_again import RunAgain
from ctxplugin_langgraph._scope import RUN_KEY, ScopeRule, ScopeSpec, request_messages, request_run
from ctxplugin_langgraph._strict import needs_own_schemas
from ctxplugin_langgraph._structured import answered_by_host


class RunState(AgentState[Any]):
    """The agent's state, plus the session of a run without a scope, recorded as it began."""

    ctxplugin_run: NotRequired[Annotated[str, PrivateStateAttr]]


class ContextMiddleware(AgentMiddleware):
    """Adds ctxplugin to a ``create_agent`` agent.

    Args:
        engine: the shared :class:`~ctxplugin.ContextEngine`.
        keep_originals: the state keeps the full tool output (annotated with its ref) when
            True (default); when False the state keeps only the compact message, and the
            original is recoverable from the CAS by its ref.
        scope: a fixed :class:`~ctxplugin.Scope`, or a function of the run's config returning
            one; by default the run's ``configurable.thread_id`` (and ``user_id``, ...).
        attach_report: put the per-call report into the AI message's ``response_metadata``.
        namespace: give this agent its own session on the thread (``"<thread_id>/<namespace>"``)
            so that, in a multi-agent graph sharing one engine, its refs and facts stay its own.
            A thread id or namespace holding ``/`` or ``%`` is escaped first
            (:func:`ctxplugin.scope.session_part`: ``/`` → ``%2F``, ``%`` → ``%25``), so no
            thread id names the session of another thread's namespaced agent; a fixed
            ``scope``'s session id is escaped the same way before the namespace is added.

    Raises:
        InvalidInputError: ``engine`` is not a :class:`~ctxplugin.ContextEngine`, or ``scope``
            or ``namespace`` is not one of the forms above.
    """

    state_schema = RunState

    def __init__(
        self,
        engine: ContextEngine,
        *,
        keep_originals: bool = True,
        scope: ScopeSpec = None,
        attach_report: bool = True,
        namespace: str | None = None,
    ) -> None:
        super().__init__()
        self.engine = checked_engine(engine, "ContextMiddleware")
        self.keep_originals = keep_originals
        self.scope_rule = ScopeRule(scope, namespace)
        self.attach_report = attach_report
        self.tools = make_meta_tools(engine, scope=self.scope_rule.in_tool)
        self._run_again = RunAgain.of(self.engine)  # the outputs captured, for a call run again before the state held one
        self._held = HeldAnswers()  # final answers stored in the answer cache as their run ends

    # -- the run's scope ------------------------------------------------------------
    def before_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Record the scope of a run whose config names none (no thread id): it is found from
        the run's first message, which middleware such as ``SummarizationMiddleware`` may take
        out of the state mid-run; every later call of the run reads it here instead."""
        if RUN_KEY in (state if isinstance(state, dict) else {}):
            return None
        run = self.scope_rule.run_session(state_messages(state))
        return {RUN_KEY: run} if run is not None else None

    async def abefore_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`before_agent`."""
        return self.before_agent(state, runtime)

    # -- model calls --------------------------------------------------------------
    def _scope(self, request: ModelRequest) -> Scope:
        return self.scope_rule(None, request.messages, request_run(request))

    def _tools(self, request: ModelRequest) -> list[Any]:
        """``request.tools`` with this middleware's ``expand_ref`` and ``load_tools`` where an
        earlier middleware left them out (``LLMToolSelectorMiddleware`` narrows the tools to
        the agent's own): the view may show refs and the directory, and ``prepare`` binds each
        meta-tool only when the view needs it."""
        given = {getattr(t, "name", None) for t in request.tools}
        missing = [t for t in self.tools if t.name not in given]
        return [*request.tools, *missing] if missing else list(request.tools)

    def _request_for(self, request: ModelRequest, prepared: PreparedContext) -> ModelRequest:
        tools = list(prepared.tools)
        conversation = prepared.conversation
        if not takes_tool_images(request.model, tools, request.model_settings):
            conversation = without_tool_images(conversation)
        if thinks(request.model, request.model_settings):
            conversation = without_trailing_lookups(conversation)
        view = [prepared.system_message, *conversation] if prepared.system_message is not None else conversation
        if one_system_only(request.model, request.model_settings):
            view = one_system(view)  # the directory joined to the system prompt: the model reads only the first
        settings = dict(request.model_settings)
        if self.engine.config.prompt_cache_marks:
            marks = mark_request(request.model, view, tools, settings)
            if marks is not None:
                view, settings = marks
        head = view[0] if view and isinstance(view[0], SystemMessage) else None
        # checked: a middleware inside may add tools to it, after prepare checked the agent's
        return checked_model_request(request.override(
            system_message=head,
            messages=view[1:] if head is not None else view,  # type: ignore[arg-type]
            tools=tools,
            model_settings=settings,
        ))

    @staticmethod
    def _full(request: ModelRequest) -> list[BaseMessage]:
        head: list[BaseMessage] = [request.system_message] if request.system_message is not None else []
        return without_stale([*head, *request.messages])

    def _prepare(self, request: ModelRequest, scope: Scope, tools: list[Any]) -> tuple[list[BaseMessage], PreparedContext]:
        """The conversation as the state holds it (outputs rewritten since capture marked) and
        its view. Both read the whole conversation, so the async hook runs this in a worker
        thread: a long thread must not hold the event loop."""
        full = self._full(request)
        prepared = self.engine.prepare(full, tools=tools, scope=scope, context_window=model_context_window(request.model),
                                       strict_tools=needs_own_schemas(request))
        return full, prepared

    def _tag(self, response: ModelResponse, prepared: PreparedContext) -> ModelResponse:
        if not self.attach_report:
            return response
        tagged: list[BaseMessage] = []
        for message in response.result:
            if isinstance(message, AIMessage):
                meta = {**message.response_metadata, "ctxplugin": prepared.report.as_metadata()}
                message = message.model_copy(update={"response_metadata": meta})
            tagged.append(message)
        return ModelResponse(result=tagged, structured_response=response.structured_response)

    def _caches(self, request: ModelRequest) -> bool:
        """Whether the answer cache serves and stores this call's answers: not with a
        ``response_format``, whose answer is a structured response a cached message lacks."""
        return self.engine.cache is not None and request.response_format is None

    @staticmethod
    def _keyed_model(request: ModelRequest) -> Any:
        """The model as this call asks it, for the answer cache's key: bound with the request's
        ``model_settings`` and ``tool_choice`` (another temperature is another answer)."""
        settings = dict(request.model_settings)
        if request.tool_choice is not None:
            settings["tool_choice"] = request.tool_choice
        return request.model.bind(**settings) if settings else request.model

    @staticmethod
    def _answer(response: ModelResponse) -> AIMessage | None:
        """The final answer worth caching: a lone AI message, no structured output."""
        if response.structured_response is not None or len(response.result) != 1:
            return None
        message = response.result[0]
        return message if isinstance(message, AIMessage) else None

    def wrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], ModelResponse],
    ) -> ModelResponse:
        """Send the prepared view to the model; returning the model's response unchanged
        (plus the report in ``response_metadata``), or a cached answer without calling the
        model when the answer cache is on and has one. Errors from ``prepare`` on invalid
        messages, and ``EngineClosedError`` once the engine was closed, propagate (the model is
        not called); store failures never do."""
        scope, tools = self._scope(request), self._tools(request)
        full, prepared = self._prepare(request, scope, tools)
        cached = self.engine.cached_answer(full, prepared, tools=tools, scope=scope, model=self._keyed_model(request)) if self._caches(request) else None
        if cached is not None:
            return self._tag(ModelResponse(result=[cached]), prepared)
        response = answered_by_host(handler(self._request_for(request, prepared)))
        answer = self._answer(response) if self._caches(request) else None
        if answer is not None:
            self._hold(answer, functools.partial(self.engine.remember_answer, full, prepared, tools=tools, scope=scope, model=self._keyed_model(request)))
        return self._tag(response, prepared)

    async def awrap_model_call(
        self,
        request: ModelRequest,
        handler: Callable[[ModelRequest], Awaitable[ModelResponse]],
    ) -> ModelResponse:
        """Async :meth:`wrap_model_call`; the view is prepared in a worker thread."""
        scope, tools = self._scope(request), self._tools(request)
        full, prepared = await asyncio.to_thread(self._prepare, request, scope, tools)
        cached = await self.engine.acached_answer(full, prepared, tools=tools, scope=scope, model=self._keyed_model(request)) if self._caches(request) else None
        if cached is not None:
            return self._tag(ModelResponse(result=[cached]), prepared)
        response = answered_by_host(await handler(self._request_for(request, prepared)))
        answer = self._answer(response) if self._caches(request) else None
        if answer is not None:
            self._hold(answer, functools.partial(self.engine.remember_answer, full, prepared, tools=tools, scope=scope, model=self._keyed_model(request)))
        return self._tag(response, prepared)

    def _hold(self, answer: AIMessage, remember: Callable[[AIMessage], object]) -> None:
        """Keep ``answer`` for the answer cache until the run ends (see :meth:`after_agent`). An
        answer without an id is not cached: a chat model gives every reply one, so a middleware
        inside this one wrote it (``ModelRetryMiddleware``'s message when the retries ran out)."""
        if answer.id is not None:
            self._held.hold(answer.id, Held(answer, remember))

    def after_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store the run's final answer in the answer cache as the state kept it: after every
        ``after_model`` hook, so what a filter masked (``PIIMiddleware(..., apply_to_output=True)``)
        is not kept unmasked in the cache store, and an answer a filter blocked is not stored."""
        found = self._held.take(state_messages(state))
        if found is not None:
            held, kept = found
            held.remember(held.as_kept(kept))
        return None

    async def aafter_agent(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_agent` (the store is written in a worker thread)."""
        return await asyncio.to_thread(self.after_agent, state, runtime)

    # -- the saved thread -----------------------------------------------------------
    def after_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Drop from the state what an output's annotation kept of content a filter masked
        since capture (``PIIMiddleware(..., apply_to_tool_results=True)`` masks the content,
        not ``additional_kwargs``, where the compact form made before it may quote what it
        masked): the next checkpoint saves no unmasked copy, and the ref stays withheld. The
        original behind that ref is revoked from the CAS (once; ``prepare`` usually did it
        already), so the store keeps no unmasked copy either."""
        update = scrubbed_messages(state)
        messages = state_messages(state)
        if update is not None and messages is not None:
            self.engine.revoke_masked(messages, self.scope_rule(None, messages, request_run(state)))
        return update

    async def aafter_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Async :meth:`after_model` (a thread seen for the first time by this process is read
        in a worker thread)."""
        return await asyncio.to_thread(self.after_model, state, runtime)

    # -- tool calls ---------------------------------------------------------------
    def wrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]],
    ) -> ToolMessage | Command[Any]:
        """Run the tool, store its output, and return the message the state keeps.

        A call to a tool whose schema was never loaded runs if its arguments are valid;
        otherwise the model gets the schema back and can retry in one round trip. Once the
        engine was closed the tool does not run: ``EngineClosedError`` propagates."""
        self.engine.check_open()
        scope = self.scope_rule(getattr(request.runtime, "config", None), request_messages(request), request_run(request))
        offered = offered_to(self.engine, scope, self.tools)
        early = precheck(self.engine, request, offered, scope)
        if early is not None:
            return early
        run = self._run_again.begin()
        with using(scope):  # the meta-tools find the run's scope without a thread id
            result = handler(checked_tool_request(request))
        return after_tool(
            self.engine, result, request, scope, keep_originals=self.keep_originals, offered=offered, run=run
        )

    async def awrap_tool_call(
        self,
        request: ToolCallRequest,
        handler: Callable[[ToolCallRequest], Awaitable[ToolMessage | Command[Any]]],
    ) -> ToolMessage | Command[Any]:
        """Async :meth:`wrap_tool_call`."""
        self.engine.check_open()
        scope = self.scope_rule(getattr(request.runtime, "config", None), request_messages(request), request_run(request))
        offered = offered_to(self.engine, scope, self.tools)
        early = precheck(self.engine, request, offered, scope)
        if early is not None:
            return early
        run = self._run_again.begin()
        with using(scope):
            result = await handler(checked_tool_request(request))
        return await asyncio.to_thread(
            after_tool, self.engine, result, request, scope, keep_originals=self.keep_originals, offered=offered,
            run=run,
        )
