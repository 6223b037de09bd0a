"""Tools: what to bind for the call, and the tool directory in the header.

The agent's own tools go through :func:`~ctxplugin.tools.plan_tools` (names-only directory,
lazy schemas); ctxplugin's meta-tools, when the host passes them, are bound as the host built
them. :func:`choose_tools` is the one place this split is made: ``prepare`` and
``ContextEngine.bound_tools`` both use it.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from langchain_core.messages import BaseMessage, SystemMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin._lru import LRU
from ctxplugin._messages import META_KEY
from ctxplugin._names import EXPAND_REF_NAME, LOAD_TOOLS_NAME, META_TOOL_NAMES
from ctxplugin.config import ToolsConfig
from ctxplugin.stages.view import SESSIONS_TRACKED, CallView, reads_nothing, tool_label
from ctxplugin.tokens import TokenCounter, count_tool_schemas
from ctxplugin.tools import (
    ToolPlan,
    ToolRegistry,
    ToolUses,
    check_meta_names,
    close_matches,
    plan_tools,
)

HEADERS_KEPT = SESSIONS_TRACKED + 256
"""System messages (the host's, and tool directories) kept by the tool stage, by what they
say: one per session tracked (a system message kept in a graph's state carries an id of its
thread's, so each thread's is a message of its own), and the prompts and directories agents
share. A prompt written anew for every call (a date in it) gains nothing from being kept."""
SCHEMAS_KEPT = 64
"""``expand_ref`` tools whose schema tokens are kept: one per host object (a middleware or hooks
built per request makes its own), so the memo must forget old ones."""

Said = tuple[bool, str, str, str, str]
"""What a system message says, as the header memo keys it: whether its content is a list of
blocks, that content (the blocks as JSON: a text that reads like them is still a text), name,
id, and additional keywords with response metadata (JSON)."""


def _extra(kwargs: dict[str, Any], metadata: dict[str, Any]) -> str:
    return json.dumps([kwargs, metadata], sort_keys=True, default=repr) if kwargs or metadata else ""


def _said(message: SystemMessage) -> Said:
    text = isinstance(message.content, str)
    content = message.content if isinstance(message.content, str) else json.dumps(message.content, sort_keys=True, default=repr)
    return not text, content, message.name or "", message.id or "", _extra(message.additional_kwargs, message.response_metadata)


_DIRECTORY_MARK = {META_KEY: {"tool_directory": True}}
_DIRECTORY_EXTRA = _extra(_DIRECTORY_MARK, {})


def directory_message(text: str) -> SystemMessage:
    """The system message that shows the tool directory, right after the host's system prompt."""
    return SystemMessage(content=text, additional_kwargs={META_KEY: {"tool_directory": True}})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The tools of one call.

    Attributes:
        plan: the plan for the agent's own tools.
        bound: what to bind: the plan's tools (meta-tools as the host gave them), then
            ``expand_ref`` when the host gave it.
        expand_ref: the host's ``expand_ref`` tool, or None.
    """

    plan: ToolPlan
    bound: tuple[Any, ...]
    expand_ref: Any = None

    def for_view(self, view: Sequence[BaseMessage]) -> list[Any]:
        """What to bind for a call on a prepared ``view``: :attr:`bound`, or nothing when
        ``expand_ref`` is all it holds and the view gives it nothing to read (as ``prepare`` binds)."""
        if self.bound == (self.expand_ref,) and reads_nothing(view):
            return []
        return list(self.bound)


def _unknown_pinned(pinned: Sequence[str], tools: Sequence[Any]) -> list[str]:
    """A warning for each ``tools.pinned`` name no tool of the call has: such a name pins
    nothing, and a misspelt one would leave its tool unbound until loaded."""
    if not pinned:  # the default: nothing to look up on the call's path
        return []
    names = sorted({label for t in tools if (label := tool_label(t))})
    warnings = []
    for name in pinned:
        if name not in names:
            close = close_matches(name, names, n=1)  # as load_tools suggests a name
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            warnings.append(f"tools.pinned names {name!r}, which no tool of this call is called: it pins nothing{hint}")
    return warnings


def choose_tools(
    tools: Sequence[Any],
    history: Sequence[BaseMessage],
    *,
    config: ToolsConfig,
    counter: TokenCounter,
    registry: ToolRegistry,
    uses: ToolUses | None = None,
    strict: bool = False,
) -> ToolChoice:
    """The tools to bind for a call on ``history`` (the conversation without its header);
    ``uses``: its tool uses, folded in already (read from ``history`` when None); ``strict``:
    the host binds them strictly, so no stubs (see :func:`~ctxplugin.tools.plan_tools`).

    Raises:
        InvalidInputError: a tool of the agent's is named like a meta-tool, two tools share a
            name, or a tool cannot be read.
    """
    check_meta_names(tools)
    meta = {tool_label(t): t for t in tools if tool_label(t) in META_TOOL_NAMES}
    user_tools = [t for t in tools if tool_label(t) not in META_TOOL_NAMES]
    plan = plan_tools(user_tools, history, config=config, counter=counter, registry=registry, uses=uses, strict=strict)
    bound = [meta.get(tool_label(t), t) for t in plan.bound]
    expand_ref = meta.get(EXPAND_REF_NAME)
    if expand_ref is not None:
        bound.append(expand_ref)
    return ToolChoice(plan=plan, bound=tuple(bound), expand_ref=expand_ref)


@dataclass(frozen=True, slots=True)
class Tools:
    """Plan the tools; fill ``plan``, ``tools``, ``tool_tokens`` and ``system`` (the header:
    the host's system messages, then the tool directory in its own).

    Attributes:
        config: the tool settings.
        counter: counts schema tokens.
        registry: the engine's schema registry.
    """

    name: ClassVar[str] = "tools"
    config: ToolsConfig
    counter: TokenCounter
    registry: ToolRegistry
    _schema_tokens: LRU[int, tuple[Any, int]] = field(default_factory=lambda: LRU(SCHEMAS_KEPT))
    _headers: LRU[Said, SystemMessage] = field(default_factory=lambda: LRU(HEADERS_KEPT))
    _lock: threading.Lock = field(default_factory=threading.Lock)
    # per session: the tools its conversation used, folded in as it grows
    _uses: LRU[str, ToolUses] = field(default_factory=lambda: LRU(SESSIONS_TRACKED))

    def __post_init__(self) -> None:
        # the first schema converted loads LangChain's tool classes: as the engine is built, not
        # in its first call
        convert_to_openai_tool({"type": "function", "function": {"name": "warm", "parameters": {"type": "object", "properties": {}}}})

    def apply(self, view: CallView) -> CallView:
        key = view.scope.key()
        with self._lock:
            uses = self._uses.pop(key, None)  # claimed while this call runs, as every stage's state
        uses = uses or ToolUses()
        uses.update(view.history, view.history_stamp)
        choice = choose_tools(
            view.tools_given, view.history, config=self.config, counter=self.counter, registry=self.registry, uses=uses,
            strict=view.strict_tools,
        )
        with self._lock:
            self._uses.put(key, uses)
        plan = choice.plan
        # what this agent's load_tools answers from: its own tools, not every agent's
        host = next((t for t in view.tools_given if tool_label(t) == LOAD_TOOLS_NAME), None)
        self.registry.offered.put(key, plan.offered, host)
        expand_tokens = self.schema_tokens(choice.expand_ref) if choice.expand_ref is not None else 0
        # omitted history is announced by notes in the history, never here: the header starts
        # every cached prefix
        system = self.header(view.header, plan.directory_text)
        return view.override(
            plan=plan,
            tools=choice.bound,
            expand_ref=choice.expand_ref,
            expand_ref_tokens=expand_tokens,
            tool_tokens=plan.schema_tokens_sent + expand_tokens,
            system=system,
        ).warn(*(_unknown_pinned(self.config.pinned, view.tools_given) if plan.active else ()))

    def header(self, parts: Sequence[SystemMessage], directory: str) -> tuple[SystemMessage, ...]:
        """The header to send: the host's system messages as it gave them (content, name, id
        and keywords unchanged), then the tool directory in a system message of its own when it
        is active. Each is the same message object from call to call while it says the same
        (a host may build its system message anew for every call), so that everything memoised
        per message object after this stage holds; the host's is a copy, which a change the
        host later makes to its own message in place does not reach."""
        header = [self._kept(_said(part), part) for part in parts]
        if directory:
            header.append(self._kept((False, directory, "", "", _DIRECTORY_EXTRA), None))
        return tuple(header)

    def _kept(self, key: Said, given: SystemMessage | None) -> SystemMessage:
        """The message kept for ``key``: a copy of ``given``, or the directory ``key`` names
        (``given`` None); made again when the one kept says something else since (written
        over downstream)."""
        with self._lock:
            hit = self._headers.hit(key)
        if hit is not None and _said(hit) == key:
            return hit
        message = given.model_copy(deep=True) if given is not None else directory_message(key[1])
        with self._lock:
            self._headers.put(key, message)
        return message

    def schema_tokens(self, tool: Any) -> int:
        """Tokens of one tool's schema as sent, memoised per tool object (meta-tools are built
        once per host and passed on every call)."""
        with self._lock:
            hit = self._schema_tokens.hit(id(tool))
        if hit is not None and hit[0] is tool:
            return hit[1]
        tokens = count_tool_schemas([convert_to_openai_tool(tool)], self.counter)
        with self._lock:
            self._schema_tokens.put(id(tool), (tool, tokens))  # the tool is kept, so its id stays its own
        return tokens


__all__ = ["ToolChoice", "Tools", "choose_tools"]
