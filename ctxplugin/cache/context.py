"""What a model call is asked in, as far as a cached answer is concerned.

A cached answer may serve a call only when nothing it depended on differs. That splits in two:

- the **signature**, which must be identical: the model and its call settings
  (:mod:`ctxplugin.cache.settings`), the system prompt, the agent's tool set (names and
  schemas) and the *earlier* user messages of the conversation, in order, by their
  significant wording (:func:`~ctxplugin.cache.guard.wording`), each with the assistant's reply
  to it (its text and tool calls), and whatever the user messages
  attach besides text (images, documents, files), exactly. Repeating the current question,
  even rephrased, or saying "thanks" does not change it, so asking again still matches.
- the **context**, compared item by item when an entry is checked (see
  :mod:`ctxplugin.cache.answer`): the facts placed in the view (by content, so that the same
  fact extracted in two sessions counts as one; facts read from the conversation's own user
  messages are marked, since the questions already cover them), the tool outputs of the
  conversation (a ref, or a hash of a small output or of one its host replaced after capture,
  so that a replaced output is another output) and the refs the view showed or expanded.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._lru import PerMessage
from ctxplugin._messages import annotation
from ctxplugin._names import META_TOOL_NAMES
from ctxplugin._untrusted import valid_unicode
from ctxplugin.cache.guard import normalize_query, wording
from ctxplugin.cache.settings import call_settings, unbound
from ctxplugin.cas import non_text_blocks
from ctxplugin.cas.annotation import current
from ctxplugin.errors import CtxpluginError
from ctxplugin.facts import Fact, FactsLedger, words
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope, scope_key
from ctxplugin.tokens import args_json, content_text
from ctxplugin.tools import ToolRegistry
from ctxplugin.tools.registry import tool_name

CacheScope = Literal["session", "user", "global"]
_VERSION = "1"
_META_TOOLS = META_TOOL_NAMES
SAID = "said:"
"""Prefix of the content key of a fact read from the conversation's own user messages: it says
nothing the messages do not, so only its supersession matters, not whether a view has it."""


@dataclass(frozen=True)
class CallContext:
    """One model call seen by the answer cache.

    Attributes:
        scope: the caller.
        partition: whose answers it may be served (see :func:`partition`).
        signature: hash of model and call settings, system prompt, tool set and earlier questions.
        query: the latest user message, as asked; ``query_norm`` normalised.
        facts: id -> content key of the facts in the view (``said:`` first for facts read
            from the conversation's own user messages).
        tools: the conversation's tool outputs (refs, or ``tool:<hash>`` of small outputs and of
            outputs replaced after capture).
        refs: refs the view showed or expanded (they must stay readable).
        mode: how widely answers are shared (``config.cache.scope``); an entry serves this call
            only when ``partition(entry.owner, mode)`` is this call's partition.
        failed: a tool call made since the question failed (its message has ``status="error"``):
            an answer given then rests on an outage or a mistake, and is not stored.
    """

    scope: Scope
    partition: str
    signature: str
    query: str
    query_norm: str
    facts: dict[str, str]
    tools: frozenset[str]
    refs: frozenset[str]
    mode: CacheScope = "session"
    failed: bool = False

    @property
    def key(self) -> str:
        """The entry key an answer to this call is stored under."""
        return _digest([self.partition, self.query_norm, self.signature])


def partition(scope: Scope, mode: CacheScope) -> str:
    """Who may share cached answers: one session (default), one user within a workspace (a
    scope without ``user_id`` falls back to its session), or a whole tenant (``global``).
    Tenants are never shared. Distinct sharing groups always have distinct partitions
    (:func:`~ctxplugin.scope.scope_key`)."""
    if mode == "global":
        return scope_key("g", scope.tenant_id)
    if mode == "user" and scope.user_id:
        return scope_key("u", scope.tenant_id, scope.workspace_id, scope.user_id)
    return scope_key("s", scope.tenant_id, scope.workspace_id, scope.user_id, scope.session_id)


def legacy_partition(scope: Scope, mode: CacheScope) -> str:
    """The partition earlier versions stored answers under (pipe-joined, so two scopes could
    share one). Lookups read it too, and serve an entry only when its owner's own
    :func:`partition` is the caller's."""
    tenant = scope.tenant_id or ""
    if mode == "global":
        return f"g|{tenant}"
    if mode == "user" and scope.user_id:
        return f"u|{tenant}|{scope.workspace_id or ''}|{scope.user_id}"
    return f"s|{tenant}|{scope.workspace_id or ''}|{scope.user_id or ''}|{scope.session_id}"


def model_identity(model: Any) -> str:
    """A name for the model answering (a string is taken as is; a bound model by the model it binds)."""
    model = unbound(model)[0]
    if model is None:
        return ""
    if isinstance(model, str):
        return model
    for attr in ("model_name", "model", "model_id", "deployment_name"):
        value = getattr(model, attr, None)
        if isinstance(value, str) and value:
            return f"{type(model).__name__}:{value}"
    llm_type = getattr(model, "_llm_type", None)
    return f"{type(model).__name__}:{llm_type if isinstance(llm_type, str) else ''}"


def call_context(
    messages: Sequence[BaseMessage],
    report: ContextReport,
    *,
    tools: Sequence[Any],
    scope: Scope,
    model: Any,
    mode: CacheScope,
    registry: ToolRegistry,
    ledger: FactsLedger | None,
) -> CallContext | None:
    """The cache's view of a call, or ``None`` when there is no user question to key it by (or
    the question holds undecodable bytes).

    Args:
        messages: the conversation as the host holds it (system prompt first, if any).
        report: the report of the call's prepared view (facts placed, refs used and expanded).
        tools: the agent's tools as given to ``prepare``.
        scope: the caller.
        model: the chat model (or its name).
        mode: ``config.cache.scope``.
        registry: the engine's tool registry (schema hashes are cached there).
        ledger: the facts ledger, to read the content of the facts in the view; ``None`` when
            facts are off.

    Raises:
        StoreError: the facts store failed.
    """
    humans = [content_text(m.content) for m in messages if isinstance(m, HumanMessage)]
    query = humans[-1] if humans else ""
    query_norm = normalize_query(query)
    if not query_norm or valid_unicode(query) is not query:
        # no question, or one holding undecodable bytes (lone surrogates), which no store
        # keeps as text exactly: the call goes to the model uncached
        return None
    # earlier questions by their significant wording: a greeting, a thanks or a rephrased
    # repeat of the current question adds nothing an answer could depend on. In order, each at
    # its last saying: "use Celsius" after "use Fahrenheit" is in force, not the other way round
    asked = " ".join(wording(query))
    earlier = _last_sayings(_turns(messages)[:-1], asked)
    system = [content_text(m.content) for m in messages if isinstance(m, SystemMessage)]
    parts = [
        _VERSION,
        model_identity(model),
        _digest(system),
        _digest(sorted(_tool_hash(t, registry) for t in tools if tool_name(t) not in _META_TOOLS)),
        _digest(earlier),
    ]
    # what the user attached (an image, a PDF, a file) is part of the question: the same words
    # about another invoice are another question (text-only conversations keep their signature)
    attached = [block for m in messages if isinstance(m, HumanMessage) for block in non_text_blocks(m.content)]
    if attached:
        parts.append(_digest([json.dumps(b, sort_keys=True, default=repr) for b in attached]))
    # the model's parameters and bound settings (temperature, max_tokens, tool_choice...): another
    # setting is another answer (a model without any keeps its signature)
    settings = call_settings(model)
    if settings:
        parts.append("settings:" + settings)
    signature = _digest(parts)
    outputs = frozenset(_output_atom(m) for m in messages if isinstance(m, ToolMessage) and m.name not in _META_TOOLS)
    refs = frozenset({*report.refs_used, *report.refs_expanded, *(a for a in outputs if a.startswith("ref:"))})
    facts: dict[str, str] = {}
    ids = [f.id for f in report.facts]
    if ledger is not None and ids:
        said = _said(messages)
        for fact in ledger.store.get(ids, reader=scope):
            content = fact_content(fact.key, fact.text_hash)
            facts[fact.id] = SAID + content if _from(fact, said) else content
    return CallContext(
        scope=scope,
        partition=partition(scope, mode),
        signature=signature,
        query=query,
        query_norm=query_norm,
        facts=facts,
        tools=outputs,
        refs=refs,
        mode=mode,
        failed=_failed_since_asked(messages),
    )


def _failed_since_asked(messages: Sequence[BaseMessage]) -> bool:
    """Whether a tool call after the last user message failed."""
    for message in reversed(messages):
        if isinstance(message, HumanMessage):
            return False
        if isinstance(message, ToolMessage) and message.status == "error":
            return True
    return False


def _turns(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """Per user message: its significant wording, and what the assistant said after it until the
    next user message (its text, normalised, and its calls of the agent's tools), "" if nothing.
    A reply is part of the context a later answer builds on: "double it" after "7" is not
    "double it" after "3"."""
    turns: list[tuple[str, list[str]]] = []
    for message in messages:
        if isinstance(message, HumanMessage):
            turns.append((" ".join(wording(content_text(message.content))), []))
        elif isinstance(message, AIMessage) and turns:
            said = turns[-1][1]
            text = normalize_query(content_text(message.content))
            if text:
                said.append(text)
            said.extend(
                f"{call['name']}({args_json(call['args'])})" for call in message.tool_calls if call["name"] not in _META_TOOLS
            )
    return [(asked, "\x1e".join(said)) for asked, said in turns]


def _last_sayings(turns: list[tuple[str, str]], asked: str) -> list[str]:
    """The user's earlier sayings in order, each kept at its last place with the reply it got
    there, without empty ones (a "thanks") and ``asked`` (a repeat of the question), whose replies
    go with them: asking again is answered as the first time."""
    kept: list[str] = []
    seen: set[str] = set()
    for said, reply in reversed(turns):
        if said and said != asked and said not in seen:
            seen.add(said)
            # a saying that got no reply hashes as the saying alone
            kept.append(f"{said}\x1e{reply}" if reply else said)
    return kept[::-1]


def _said(messages: Sequence[BaseMessage]) -> tuple[set[str], list[str]]:
    """Ids and word strings of the conversation's user messages."""
    humans = [m for m in messages if isinstance(m, HumanMessage)]
    return {str(m.id) for m in humans if m.id}, [" ".join(words(content_text(m.content))) for m in humans]


def _from(fact: Fact, said: tuple[set[str], list[str]]) -> bool:
    """Whether ``fact`` was read from one of the conversation's own user messages."""
    if fact.source.type != "conversation":
        return False
    ids, texts = said
    if fact.source.ref and fact.source.ref in ids:
        return True
    text = " ".join(words(fact.text))
    return bool(text) and any(text in t for t in texts)


def fact_content(key: str | None, text_hash: str) -> str:
    """The content key of a fact: equal for the same statement under the same key."""
    return f"{key or ''}|{text_hash}"


def _output_atom(message: ToolMessage) -> str:
    """What names a tool output: its ref while the message shows what was captured under it
    (the compact form, or the original a chat history keeps annotated), else its content (an
    output a host replaced after capture, as :func:`~ctxplugin.cas.annotation.current` tells:
    a PII filter masking a card number keeps the annotation, and is not the output an answer saw)."""
    atom = _ATOMS.get(message)
    if atom is None:
        ref = annotation(current(message)).get("ref")
        if isinstance(ref, str) and ref:
            atom = ref
        else:
            atom = "tool:" + _digest([message.name or "", content_text(message.content)])[:24]
        _ATOMS.put(message, atom)
    return atom


_ATOMS: PerMessage[str] = PerMessage(4096)


def _tool_hash(tool: Any, registry: ToolRegistry) -> str:
    try:
        return registry.register(tool).hash
    except CtxpluginError:  # a provider built-in ({"type": "web_search"}) has no schema to register
        return _digest([json.dumps(tool, sort_keys=True, default=repr) if isinstance(tool, dict) else repr(tool)])


def _digest(parts: Sequence[str]) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()


__all__ = ["CacheScope", "CallContext", "call_context", "fact_content", "model_identity", "partition"]
