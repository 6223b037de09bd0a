"""What to bind for one model call: the directory decision and the loaded set.

Which tools are loaded is read from the conversation itself: every ``load_tools`` request and
every direct call of a tool in the AI messages counts as a use, and the ``max_loaded`` most
recently used tools stay bound. The plan is therefore a pure function of (tools, messages,
config): deterministic, and the same after a restart. The engine's tool stage keeps each
session's uses folded in (:class:`ToolUses`), so that a call reads only its new messages.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin._names import LOAD_TOOLS_NAME
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.config import ToolsConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import TokenCounter, count_tool_schemas
from ctxplugin.tools.directory import (
    DIRECTORY_TITLE,
    STUBS_TITLE,
    render_directory,
)
from ctxplugin.tools.offered import ToolSet
from ctxplugin.tools.registry import ToolEntry, ToolRegistry, provider_tool
from ctxplugin.tools.resolve import requested_names as requested_names
from ctxplugin.tools.resolve import split_names, string_names


@dataclass
class ToolPlan:
    """The tool side of one prepared call.

    Attributes:
        bound: what to bind: every tool when the directory is inactive; otherwise the pinned
            tools, the ``load_tools`` meta-tool and the loaded tools, in a stable order.
        active: whether the names-only directory is used for this call.
        loaded: tools bound because the conversation asked for them (most recent last use
            kept; pinned tools are not listed).
        pinned: pinned tools present in this call's tool set.
        schema_tokens_full: tokens of every tool schema (what sending all would cost).
        schema_tokens_sent: tokens of the schemas in ``bound``, the meta-tool included.
        directory_text: the directory for the system header ("" when inactive).
        directory_tokens: tokens of ``directory_text``.
        offered: the agent's own tools as registered, and whether they were bound as stubs:
            what its ``load_tools`` answers from.
    """

    bound: list[Any]
    active: bool = False
    loaded: list[str] = field(default_factory=list)
    pinned: list[str] = field(default_factory=list)
    schema_tokens_full: int = 0
    schema_tokens_sent: int = 0
    directory_text: str = ""
    directory_tokens: int = 0
    offered: ToolSet = field(default_factory=ToolSet)


def used_tools(messages: Iterable[BaseMessage], known: set[str], limit: int) -> list[str]:
    """The ``limit`` most recently used tools among ``known``, in the order they were
    first used (so the bound list only grows at its end until something is evicted).

    A use is a ``load_tools`` request naming the tool, or a direct call to it.
    """
    uses = ToolUses()
    for message in messages:
        uses.take(message)
    return uses.ranked(known, limit)


class ToolUses:
    """:func:`used_tools` of a conversation that grows, folded message by message: a call reads
    only the messages added since the previous one (the earlier ones the same objects, holding
    the same content; else it reads them all again), and only when :meth:`recent` is asked (an
    agent without a tool directory never asks). Not locked: one caller at a time."""

    def __init__(self) -> None:
        self.seen = Prefix()
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.tick = 0
        self.phrases: dict[str, list[int]] = {}  # one string naming several words: its first and last use
        self._pending: tuple[Sequence[BaseMessage], Stamp | None] | None = None

    def update(self, messages: Sequence[BaseMessage], stamp: Stamp | None = None) -> None:
        """Take ``messages`` (stamped ``stamp``, when known) as the conversation now."""
        self._pending = (messages, stamp)

    def _fold(self, messages: Sequence[BaseMessage], stamp: Stamp | None) -> None:
        if self.seen.changed(messages, stamp) != []:
            self.seen.clear()
            self.first, self.last, self.tick, self.phrases = {}, {}, 0, {}
        for message in messages[len(self.seen) :]:
            self.take(message)
        self.seen.extend(messages[len(self.seen) :], stamp)

    def take(self, message: BaseMessage) -> None:
        """Count the uses ``message`` makes (an AI message's calls and ``load_tools`` requests)."""
        if not isinstance(message, AIMessage):
            return
        for call in message.tool_calls:
            args = call.get("args")
            phrase = args.get("names") if call["name"] == LOAD_TOOLS_NAME and isinstance(args, dict) else None
            if isinstance(phrase, str) and (words := split_names(phrase)) != [phrase.strip()]:
                # a tool's whole name ("has space") or the names it lists: :meth:`ranked` knows the tools
                self.phrases.setdefault(phrase.strip(), [self.tick + 1, 0])[1] = self.tick + 1
                self.tick += max(1, len(words))  # each word its own tick, as when it is read as names
                continue
            names = requested_names(args) if call["name"] == LOAD_TOOLS_NAME else [call["name"]]
            for name in names:  # every name ticks: the order among the known ones is the same
                self.tick += 1
                self.first.setdefault(name, self.tick)
                self.last[name] = self.tick

    def ranked(self, known: set[str], limit: int) -> list[str]:
        """The ``limit`` most recently used of ``known`` among the uses counted, in the order they
        were first used."""
        first, last = dict(self.first), dict(self.last)
        for phrase, (start, end) in self.phrases.items():
            for i, name in enumerate(string_names(phrase, known)):
                first[name] = min(first.get(name, start + i), start + i)
                last[name] = max(last.get(name, end + i), end + i)
        recent = sorted((n for n in last if n in known), key=last.__getitem__, reverse=True)[:limit]
        return sorted(recent, key=first.__getitem__)

    def recent(self, known: set[str], limit: int) -> list[str]:
        """:func:`used_tools` of the conversation last given to :meth:`update`."""
        if self._pending is not None:
            self._fold(*self._pending)
            self._pending = None
        return self.ranked(known, limit)


def deferred(tool: Any) -> bool:
    """Whether ``tool`` is deferred behind the provider's own tool search (Anthropic's and
    OpenAI's ``defer_loading``, which LangChain's ``ProviderToolSearchMiddleware`` sets in a
    tool's ``extras``): the provider loads its schema when the model searches for it."""
    extras = tool if isinstance(tool, dict) else getattr(tool, "extras", None)
    return isinstance(extras, dict) and extras.get("defer_loading") is True


def _active(config: ToolsConfig, count: int, tokens: int) -> bool:
    if count == 0 or config.directory == "never":
        return False
    if config.directory == "always":
        return True
    return count >= config.min_tools or tokens >= config.min_schema_tokens


def _meta_tokens(registry: ToolRegistry, counter: TokenCounter) -> int:
    meta = registry.meta_tool()
    return registry.memo(("meta-tokens", id(meta), counter.name),
                         lambda: count_tool_schemas([convert_to_openai_tool(meta)], counter))


def _stub_tokens(entries: list[ToolEntry], registry: ToolRegistry, counter: TokenCounter) -> int:
    key = ("stub-tokens", counter.name, tuple(e.name for e in entries))
    return registry.memo(key, lambda: count_tool_schemas([registry.stub(e) for e in entries], counter))


def _directory(entries: Sequence[ToolEntry], config: ToolsConfig, registry: ToolRegistry,
               counter: TokenCounter, title: str = DIRECTORY_TITLE) -> tuple[str, int]:
    key = ("directory", counter.name, config.intent_chars, config.directory_max_tokens, title,
           tuple(sorted((e.name, e.hash) for e in entries)))

    def make() -> tuple[str, int]:
        text = render_directory(entries, intent_chars=config.intent_chars,
                                max_tokens=config.directory_max_tokens, counter=counter, title=title)
        return text, counter.count(text)

    return registry.memo(key, make)


def plan_tools(
    user_tools: Sequence[Any],
    body: Sequence[BaseMessage],
    *,
    config: ToolsConfig,
    counter: TokenCounter,
    registry: ToolRegistry,
    uses: ToolUses | None = None,
    strict: bool = False,
) -> ToolPlan:
    """Decide what to bind for a call on ``body`` given the agent's tools.

    Args:
        user_tools: the agent's tools, without ctxplugin's meta-tools.
        body: the conversation (system header excluded is fine; it is not read).
        config: directory settings.
        counter: counts directory and meta-tool tokens.
        registry: the engine's schema registry (every tool is registered on the way).
        uses: the tool uses of ``body``, folded in already (see :class:`ToolUses`); read from
            ``body`` when None.
        strict: the host binds the tools strictly (OpenAI's ``strict=True``), which closes
            every schema: a stub could then be called with no arguments at all, so where stubs
            would be bound every tool is bound with its own schema instead (no directory).

    A tool set holding a tool deferred to the provider's tool search (:func:`deferred`) is
    bound as given, without a directory.

    Raises:
        InvalidInputError: two tools share a name, or a tool cannot be read.
    """
    named: list[tuple[Any, ToolEntry]] = []
    unnamed: list[Any] = []  # provider built-ins ({"type": "web_search"}): always bound as given
    seen: set[str] = set()
    functions: list[Any] = []
    for tool in user_tools:
        if provider_tool(tool):
            unnamed.append(tool)
        else:
            functions.append(tool)
    for tool, entry in zip(functions, registry.register_all(functions), strict=True):
        if entry.name in seen:
            raise InvalidInputError(f"two tools are named {entry.name!r}; tool names must be unique")
        seen.add(entry.name)
        named.append((tool, entry))
    unnamed_tokens = count_tool_schemas(unnamed, counter)
    full = sum(e.tokens for _, e in named) + unnamed_tokens
    # tools deferred to the provider's tool search are loaded lazily by the provider already:
    # a stub or a directory in their place would hide them from its search
    if not _active(config, len(named), full) or any(deferred(t) for t in functions):
        return ToolPlan(bound=list(user_tools), schema_tokens_full=full, schema_tokens_sent=full,
                        offered=ToolSet.of(e for _, e in named))
    pinned_set = set(config.pinned)
    pinned = [(t, e) for t, e in named if e.name in pinned_set]
    by_name = {e.name: (t, e) for t, e in named}
    known = set(by_name) - pinned_set
    loaded = used_tools(body, known, config.max_loaded) if uses is None else uses.recent(known, config.max_loaded)
    meta = registry.meta_tool()
    stubbed = [e for _, e in named if e.name not in pinned_set]
    stub_tokens = _stub_tokens(stubbed, registry, counter) if config.binding != "loaded" else 0
    stubs = config.binding == "stubs" or (config.binding == "auto" and stub_tokens <= config.directory_max_tokens)
    if stubs and strict:
        return ToolPlan(bound=list(user_tools), schema_tokens_full=full, schema_tokens_sent=full,
                        offered=ToolSet.of(e for _, e in named))
    if stubs:
        registry.mark_stubbed(e.name for e in stubbed)
        bound = [t for t, _ in pinned] + [meta] + [registry.stub(e) for e in stubbed] + unnamed
        sent = (sum(e.tokens for _, e in pinned) + stub_tokens
                + _meta_tokens(registry, counter) + unnamed_tokens)
        text, text_tokens = _directory([e for _, e in named], config, registry, counter, STUBS_TITLE)
    else:
        bound = [t for t, _ in pinned] + [meta] + [by_name[n][0] for n in loaded] + unnamed
        sent = (sum(e.tokens for _, e in pinned) + sum(by_name[n][1].tokens for n in loaded)
                + _meta_tokens(registry, counter) + unnamed_tokens)
        text, text_tokens = _directory([e for _, e in named], config, registry, counter)
    return ToolPlan(
        bound=bound,
        active=True,
        loaded=loaded,
        pinned=[e.name for _, e in pinned],
        schema_tokens_full=full,
        schema_tokens_sent=sent,
        directory_text=text,
        directory_tokens=text_tokens,
        offered=ToolSet.of((e for _, e in named), (e.name for e in stubbed) if stubs else ()),
    )
