"""Figures of a replay: tokens, the cache-aware cost model, and grounding recall.

**Cache-aware cost.** Providers cache the longest prompt prefix that is unchanged since an earlier
call and bill it at a discount. For each strategy, the cached part of a call is its longest
prefix equal to the same strategy's previous call: the tool schemas first (when they are the
same list), then the messages in order until the first one that differs. Cost is counted in
token units: ``(input - cached) + discount * cached``. Real providers cache in blocks (e.g. 128
tokens) above a minimum length and may evict entries, so the model is an upper bound on the
discount.

**Grounding recall.** For each call, the *action* is what the recorded assistant message did:
its tool calls when it made any, otherwise its text. The identifiers of an action are:

- every tool-call argument value that is a short, one-line scalar (3 to 80 characters; numbers
  with at least 3 digits), and
- inside argument values and action text: paths (``a/b``, ``/x``), file names with a common
  extension (``fields.py``), URLs, ids (tokens of 4 or more characters that mix letters and
  digits, e.g. ``HAT136``, ``mia_li_3668``), numbers with at least 3 digits (``1114``,
  ``2024-05-20``), and quoted values (``"..."`` and backticks; single quotes only inside tool-call
  arguments, where they are not apostrophes).

An identifier is *eligible* when it occurs earlier in the conversation outside the leading
system messages (identifiers only the system prompt holds are never at risk), and *visible*
when it occurs in the view a strategy sent for that call. Occurrence is a whole-token match: the
identifier not directly preceded or followed by a letter or digit. Recall is visible / eligible,
summed over calls. Stored outputs a model could read back with ``expand_ref`` do not count as
visible: recall measures what the model can see without asking.

**Action-value recall.** Recordings that carry the task's ground-truth tool calls (tau-bench's
``info.task.actions``) are also scored against them: each expected action is paired with the
recorded call that issued its tool (:func:`pair_expected_actions`), and the identifiers of its
expected argument values that occur earlier in the conversation are eligible for that call.
Action-value recall is the share of them that the view sent for that call still shows. Unlike
grounding recall, it does not depend on the agent having chosen the right values.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage

from ctxplugin._message_values import argument_values
from ctxplugin.replay.loaders import ExpectedAction
from ctxplugin.tokens import TokenCounter, content_text, count_message, count_tool_schemas

_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|mjs|ts|tsx|json|jsonl|toml|yaml|yml|cfg|ini|conf|txt|md|rst|csv|tsv|"
    "sh|bash|c|h|cc|cpp|hpp|go|rs|java|kt|rb|php|html|css|sql|xml|lock|log|patch|diff|dcm"
)
_PATTERNS = (
    re.compile(r"https?://[^\s\"'<>)\]]+"),
    re.compile(r"(?:[\w.~-]*/)+[\w.-]*\w"),
    re.compile(rf"\b[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})\b"),
    re.compile(r"[0-9]+(?:[.,:/-][0-9]+)*"),
)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_:.-]*[A-Za-z0-9]")
_DOUBLE_QUOTED = re.compile(r"\"([^\"\n]{3,80})\"|`([^`\n]{3,80})`")
_SINGLE_QUOTED = re.compile(r"'([^'\n]{3,80})'")
_MAX_VALUE = 80


def identifiers_in_text(text: str, *, arguments: bool = False) -> set[str]:
    """Identifiers in free text (see the module docstring for what counts)."""
    found: set[str] = set()
    for pattern in _PATTERNS:
        for match in pattern.finditer(text):
            value = match.group(0).rstrip(".,:;")
            if pattern.pattern.startswith("[0-9]"):
                if sum(ch.isdigit() for ch in value) >= 3:
                    found.add(value)
            elif len(value) >= 3 and any(ch.isalnum() for ch in value):
                found.add(value)
    for match in _TOKEN.finditer(text):
        token = match.group(0)
        if len(token) >= 4 and any(ch.isdigit() for ch in token) and any(ch.isalpha() for ch in token):
            found.add(token)
    quoted = [_DOUBLE_QUOTED, _SINGLE_QUOTED] if arguments else [_DOUBLE_QUOTED]
    for pattern in quoted:
        for match in pattern.finditer(text):
            value = next((g for g in match.groups() if g), "").strip()
            if len(value) >= 3:
                found.add(value)
    return found


def argument_identifiers(args: Any) -> set[str]:
    """Identifiers in tool-call arguments: short one-line scalar values (numbers with at least
    3 digits), and the identifiers inside every string value."""
    found: set[str] = set()
    for leaf in argument_values(args):
        if isinstance(leaf, bool):
            continue
        if isinstance(leaf, (int, float)):
            text = str(leaf)
            if sum(ch.isdigit() for ch in text) >= 3:
                found.add(text)
            continue
        text = str(leaf).strip()
        if 3 <= len(text) <= _MAX_VALUE and "\n" not in text:
            found.add(text)
        found |= identifiers_in_text(text, arguments=True)
    return found


def action_identifiers(message: AIMessage) -> set[str]:
    """Identifiers the recorded action used: its tool-call arguments, else its text."""
    if not message.tool_calls:
        return identifiers_in_text(content_text(message.content))
    found: set[str] = set()
    for call in message.tool_calls:
        found |= argument_identifiers(call["args"])
    return found


def pair_expected_actions(messages: Sequence[BaseMessage], expected: Sequence[ExpectedAction]) -> dict[int, set[str]]:
    """Pair each ground-truth action with the recorded call that issued its tool.

    Among the recorded assistant messages that called the action's tool and are not paired
    yet, the one whose arguments share the most values with the expected ones is taken (the
    earliest on a tie). Actions the agent never issued are left out: there is no call whose
    view could show their values.

    Returns:
        For each paired call (its index in ``messages``), the identifiers of the expected
        arguments of every action paired with it.
    """
    calls: list[tuple[int, str, set[str]]] = []
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage):
            for call in message.tool_calls:
                calls.append((index, call["name"], argument_identifiers(call["args"])))
    taken: set[int] = set()
    paired: dict[int, set[str]] = {}
    for action in expected:
        values = argument_identifiers(action.kwargs)
        best: tuple[int, int] | None = None  # (shared values, -position)
        chosen = -1
        for position, (_, name, recorded) in enumerate(calls):
            if position in taken or name != action.name:
                continue
            score = (len(values & recorded), -position)
            if best is None or score > best:
                best, chosen = score, position
        if chosen < 0:
            continue
        taken.add(chosen)
        paired.setdefault(calls[chosen][0], set()).update(values)
    return paired


def message_identifiers(message: BaseMessage) -> set[str]:
    """Identifiers a message holds: those of its text, and for an AI message those of its
    tool-call arguments as :func:`action_identifiers` finds them."""
    found = identifiers_in_text(content_text(message.content))
    if isinstance(message, AIMessage):
        found |= action_identifiers(message)
    return found


def message_text(message: BaseMessage) -> str:
    """Everything of a message a model reads: its text, and tool-call names and argument values."""
    parts = [content_text(message.content)]
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            parts.append(call["name"])
            parts.extend(str(leaf) for leaf in argument_values(call["args"]))
    return "\n".join(parts)


def occurs(identifier: str, text: str) -> bool:
    """Whether ``identifier`` occurs in ``text`` as a whole token (not inside a longer one)."""
    start = text.find(identifier)
    while start != -1:
        end = start + len(identifier)
        before = text[start - 1] if start else " "
        after = text[end] if end < len(text) else " "
        if not before.isalnum() and not after.isalnum():
            return True
        start = text.find(identifier, start + 1)
    return False


class Meter:
    """Token counts and signatures of messages, memoised per object.

    Strategies hand the same message objects back call after call; counting each once keeps a
    replay of long conversations linear. The meter holds a reference to every message it saw,
    so object ids are never reused while it lives (one meter per conversation).
    """

    def __init__(self, counter: TokenCounter) -> None:
        self.counter = counter
        self._seen: dict[int, tuple[BaseMessage, int, str, str]] = {}

    def _entry(self, message: BaseMessage) -> tuple[BaseMessage, int, str, str]:
        entry = self._seen.get(id(message))
        if entry is None:
            text = message_text(message)
            payload = repr((message.type, message.content, getattr(message, "tool_calls", None), getattr(message, "tool_call_id", None)))
            sig = hashlib.sha1(payload.encode("utf-8", "surrogatepass")).hexdigest()
            entry = (message, count_message(message, self.counter), sig, text)
            self._seen[id(message)] = entry
        return entry

    def tokens(self, message: BaseMessage) -> int:
        """Tokens of one message (as ``ctxplugin.tokens.count_message`` counts them)."""
        return self._entry(message)[1]

    def count(self, messages: Sequence[BaseMessage]) -> int:
        """Tokens of a message list."""
        return sum(self._entry(m)[1] for m in messages)

    def signature(self, message: BaseMessage) -> str:
        """A digest of what the provider sees of a message (for prefix comparison)."""
        return self._entry(message)[2]

    def text(self, messages: Sequence[BaseMessage]) -> str:
        """Readable text of a message list (for identifier matching)."""
        return "\n".join(self._entry(m)[3] for m in messages)


def tools_tokens(tools: Sequence[dict[str, Any]], counter: TokenCounter) -> int:
    """Tokens of tool schemas as sent."""
    return count_tool_schemas(list(tools), counter)


def tools_signature(tools: Sequence[dict[str, Any]]) -> str:
    """A digest of a list of tool schemas, in order."""
    return hashlib.sha1(json.dumps(list(tools), sort_keys=True, default=str).encode()).hexdigest()


@dataclass
class PrefixTracker:
    """The previous call of one strategy, to find how much of the next one a cache would hit."""

    tools_sig: str | None = None
    messages: list[str] = field(default_factory=list)

    def cached(self, tools_sig: str, tool_tokens: int, view: Sequence[BaseMessage], meter: Meter) -> int:
        """Tokens of ``view`` (tools first) equal to the previous call's prefix; then remember it."""
        sigs = [meter.signature(m) for m in view]
        cached = 0
        if self.tools_sig is not None and self.tools_sig == tools_sig:
            cached = tool_tokens
            for message, sig, old in zip(view, sigs, self.messages, strict=False):
                if sig != old:
                    break
                cached += meter.tokens(message)
        self.tools_sig, self.messages = tools_sig, sigs
        return cached


def leading_system_count(messages: Sequence[BaseMessage]) -> int:
    """How many messages at the start are system messages."""
    count = 0
    while count < len(messages) and isinstance(messages[count], SystemMessage):
        count += 1
    return count


def calls_after(messages: Sequence[BaseMessage], indexes: Iterable[int], meter: Meter) -> Iterator[tuple[int, AIMessage, str]]:
    """Each call at ``indexes`` (in order) whose message is an assistant's: its index, the
    message, and the text of the conversation before it, the system messages at its start left
    out (where grounding recall looks for a value the call uses as said before). Each message is
    read into that text once."""
    seen, earlier = leading_system_count(messages), []
    for index in indexes:
        if index > seen:
            earlier.append(meter.text(messages[seen:index]))
            seen = index
        action = messages[index]
        if isinstance(action, AIMessage):
            yield index, action, "\n".join(earlier)
