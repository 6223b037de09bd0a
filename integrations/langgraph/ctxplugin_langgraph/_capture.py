"""Tool-call handling shared by every LangGraph host: pre-checks for unloaded tools and
capture of tool outputs into the CAS; and the check of the engine an adapter is given."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import ToolMessage
from langchain_core.tools import BaseTool
from langgraph.prebuilt.tool_node import INVALID_TOOL_NAME_ERROR_TEMPLATE, ToolCallRequest
from langgraph.types import Command

from ctxplugin import ContextEngine, Scope
from ctxplugin._messages import META_KEY
from ctxplugin._names import EXPAND_REF_NAME, LOAD_TOOLS_NAME, META_TOOL_NAMES
from ctxplugin._run_scope import active, resolve
from ctxplugin.cas import withheld
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import scope_from_config
from ctxplugin.tools import check_meta_names, resolve_call
from ctxplugin.tools.offered import ToolSet
from ctxplugin_langgraph._annotations import stamp
from ctxplugin_langgraph._run_again import ToolRun
from ctxplugin_langgraph._scope import request_messages

META_TOOLS = META_TOOL_NAMES


def checked_engine(engine: object, adapter: str) -> ContextEngine:
    """``engine``, when it is a :class:`~ctxplugin.ContextEngine`.

    Raises:
        InvalidInputError: it is anything else (a path, ``None``, the class itself).
    """
    if not isinstance(engine, ContextEngine):
        raise InvalidInputError(
            f"{adapter} takes a ContextEngine, got {type(engine).__name__} ({engine!r:.60}); "
            'build one with ContextEngine.embedded(path=".ctxplugin") (or ctxplugin.connect()) '
            "and pass it"
        )
    return engine


def current_scope(default_session: str | None = None) -> Scope:
    """The scope of the running LangGraph call.

    In a tool that :class:`ContextMiddleware` or :class:`ContextHooks` runs, the agent's own
    scope (its fixed scope, scope function or namespace applied): the scope its refs and facts
    are stored in. Elsewhere the one ``configurable.thread_id`` names; without a thread id,
    ``default_session`` when given (sharing it is then asked for), else the run's own scope (see
    :mod:`ctxplugin._run_scope`)."""
    agent_scope = active()
    if agent_scope is not None:
        return agent_scope
    try:
        from langgraph.config import get_config

        config: Any = get_config()
    except RuntimeError:  # called outside a graph run
        config = None
    if default_session is not None:
        return scope_from_config(config, default_session)
    return resolve(config)


def offered_to(engine: ContextEngine, scope: Scope, meta_tools: Sequence[BaseTool]) -> ToolSet | None:
    """The tools the agent whose meta-tools are ``meta_tools`` was last offered in ``scope``
    (``None`` before its first model call in this process)."""
    host = next((t for t in meta_tools if t.name == LOAD_TOOLS_NAME), None)
    return engine.registry.offered.find(scope.key(), host)


def precheck(
    engine: ContextEngine, request: ToolCallRequest, offered: ToolSet | None = None, scope: Scope | None = None
) -> ToolMessage | None:
    """An answer for calls that must not run yet (invalid arguments for a tool whose schema
    the model never loaded); ``None`` when the call should run. ``offered``: the calling
    agent's tools (see :func:`offered_to`), so that what the answer says of the tool is true of
    this agent, not of another one sharing the engine.

    Arguments are checked against the schema of the tool the host will run (``request.tool``),
    so a call the tool would reject gets its schema back instead of a bare validation error.
    A call without a host tool goes on to the host: a middleware inside this one may run it.
    With ``tools.directory="never"`` nothing is checked: every call runs as without ctxplugin.

    Raises:
        InvalidInputError: the tool to run is the agent's own, named like a meta-tool.
        EngineClosedError: the engine was closed: the tool does not run, since its output
            could not be stored.
    """
    engine.check_open()
    call = request.tool_call
    if request.tool is not None:
        check_meta_names([request.tool])
    if call["name"] == EXPAND_REF_NAME:
        return _withheld_answer(engine, request, scope)
    if call["name"] in META_TOOLS or engine.config.tools.directory == "never":
        return None
    if not isinstance(request.tool, BaseTool):
        # no tool of the host's yet: a middleware inside this one may add it (LangChain's dynamic
        # tools), else the host answers the name, and :func:`after_tool` words that answer
        return None
    resolution = resolve_call(call["name"], call.get("args", {}), engine.registry, tool=request.tool, offered=offered)
    if resolution.kind == "run":
        return None
    return ToolMessage(content=resolution.message, tool_call_id=call["id"] or "", name=call["name"], status="error")


def _withheld_answer(engine: ContextEngine, request: ToolCallRequest, scope: Scope | None) -> ToolMessage | None:
    """The answer to an ``expand_ref`` call for a ref whose output was rewritten in the
    conversation after it was stored, taking part of it away (see
    :func:`~ctxplugin.cas.withheld`); ``None`` for any other call. A tool message marked with
    the ref of another call's output withholds nothing (see ``engine.marks``)."""
    call = request.tool_call
    ref_id = call.get("args", {}).get("ref_id")
    messages = request_messages(request)
    if messages and scope is not None:
        messages = list(engine.marks.without_foreign(messages, scope, log=False)[0])
    if not isinstance(ref_id, str) or not messages or not withheld(ref_id, messages):
        return None
    return ToolMessage(
        content=(
            f"expand_ref: {ref_id} is withheld: its output was rewritten in this conversation after it "
            "was stored (part of it masked or removed), so only what the conversation shows of it may be read."
        ),
        tool_call_id=call["id"] or "",
        name=call["name"],
        status="error",
    )


def _unknown_answer(
    engine: ContextEngine, request: ToolCallRequest, result: ToolMessage | Command[Any], offered: ToolSet | None
) -> ToolMessage | None:
    """ctxplugin's answer to a name no tool has, in place of the ``ToolNode``'s (``"Error: x is
    not a valid tool, try one of [...]"``, which lists every tool's name, hundreds of them with
    a large tool set): up to three close matches among the agent's own tools (``offered``) and
    how to load a tool. ``None`` when ``result`` is anything else, or the name is a tool the
    agent has (or, its tools unknown, one the registry knows: another agent's)."""
    call = request.tool_call
    if request.tool is not None or not isinstance(result, ToolMessage) or result.status != "error":
        return None
    if engine.config.tools.directory == "never" or call["name"] in META_TOOLS:
        return None
    host_says = INVALID_TOOL_NAME_ERROR_TEMPLATE.split("{available_tools}", 1)[0].format(requested_tool=call["name"])
    if not isinstance(result.content, str) or not result.content.startswith(host_says):
        return None
    resolution = resolve_call(call["name"], call.get("args", {}), engine.registry, offered=offered)
    if resolution.kind != "unknown":
        return None
    return result.model_copy(update={"content": resolution.message})


def after_tool(
    engine: ContextEngine,
    result: ToolMessage | Command[Any],
    request: ToolCallRequest,
    scope: Scope,
    *,
    keep_originals: bool,
    offered: ToolSet | None = None,
    run: ToolRun | None = None,
) -> ToolMessage | Command[Any]:
    """Store a tool output; return what the state keeps (original + annotation, or compact).

    A ``Command`` from a tool has the ``ToolMessage`` answering this call in its update
    captured the same way; anything else passes through. The host's answer to a name no tool
    has becomes ctxplugin's, with close matches among ``offered``, the agent's own tools (not
    stored: it is not a tool's output). ``run``: this run of the call, begun before the tool
    ran, which withdraws the facts of another run's output of the call when the state held
    neither (see :mod:`ctxplugin_langgraph._run_again`).
    """

    def keep(message: ToolMessage) -> ToolMessage:
        kept, read = _keep(engine, message, scope, keep_originals)
        if run is not None:
            run.captured(engine, request, read, scope)
        return kept

    if request.tool_call["name"] in META_TOOLS:
        return result
    unknown = _unknown_answer(engine, request, result, offered)
    if unknown is not None:
        return unknown
    if isinstance(result, ToolMessage):
        return keep(result)
    update = result.update
    if isinstance(update, dict) and isinstance(update.get("messages"), list):
        call_id = request.tool_call["id"]
        messages = [
            keep(m) if isinstance(m, ToolMessage) and m.tool_call_id == call_id else m
            for m in update["messages"]
        ]
        return dataclasses.replace(result, update={**update, "messages": messages})
    return result


_EDIT_NOTE = re.compile(r"\A.*? Executed instead: [^\n]* with arguments [^\n]*\.\n\nTool response:(?=\n)", re.S)
"""What LangChain's ``HumanInTheLoopMiddleware`` puts before the result of a call a reviewer
edited (its ``edit_notice``, then the call that ran instead), when it runs inside this
middleware."""


def _keep(engine: ContextEngine, result: ToolMessage, scope: Scope, keep_originals: bool) -> tuple[ToolMessage, ToolMessage]:
    """What the state keeps of ``result``, and the output that was read for facts."""
    note = _EDIT_NOTE.match(result.content) if isinstance(result.content, str) else None
    if note is not None:
        noted = _keep_noted(engine, result, note.group(0), scope, keep_originals)
        if noted is not None:
            return noted
    compact, _ = engine.capture_with_report(result, scope)
    if not keep_originals:
        return compact, result
    meta = compact.additional_kwargs.get("ctxplugin")
    return (result if meta is None else stamp(result, meta)), result


def _keep_noted(
    engine: ContextEngine, result: ToolMessage, lead: str, scope: Scope, keep_originals: bool
) -> tuple[ToolMessage, ToolMessage] | None:
    """An edited call's result: the output after the note stored and summarized by its own
    shape, the note kept whole before the summary (it names the call that ran), and that output
    (what was read for facts). ``None`` when the output passes through (the message is then
    captured as it is)."""
    output = result.model_copy(update={"content": str(result.content)[len(lead) + 1 :]})
    compact, _ = engine.capture_with_report(output, scope)
    meta = compact.additional_kwargs.get(META_KEY)
    if meta is None or not isinstance(compact.content, str):
        return None
    shown = f"{lead}\n{compact.content}"
    if not keep_originals:
        kwargs = {**compact.additional_kwargs, META_KEY: {**meta, "compact": shown}}
        return compact.model_copy(update={"content": shown, "additional_kwargs": kwargs}), output
    return stamp(result, {**meta, "lead": lead, "compact": shown}), output
