"""The last tier: old exchanges condensed to context notes when the history must fit a budget.

Old exchanges go in whole blocks of ``block_size``. A condensed block is replaced by one note
(a ``HumanMessage``) listing the exact values its exchanges used — commands, paths, ids,
numbers, quoted strings, short sentences of the user — within ``digest_tokens``, as
``label: value; value`` lines that say where each value came from::

    [context note: exchanges 4-5 are condensed to the values they used:
    ran: python repro.py
    customer_id: CUS-40917
    lookup_customer returned: ORD-77120; 2024-05-01]

A label is the argument the model passed the value in (``ran`` for a shell command, ``path``
for a path inside a longer argument, ``in <argument>`` for other parts of one), ``user said``,
``user mentioned`` or ``assistant mentioned`` for what the conversation said, and
``<tool> returned`` for what a tool printed.

Every ``archive_blocks`` condensed blocks are merged into one archive note at the front, deduplicated, within ``archive_tokens``, the
values likeliest to be used again per token first (what the model itself used in several
exchanges, then recent before old, short before long): the rest fall out of the archive, never
out of a note still shown.

Cache stability: a note depends only on the blocks it covers and those before them, so it never
changes while shown, and which blocks are condensed depends only on exchanges already gisted and
on the window as it stood at the last tier move. Between moves every call just appends to the
previous view; the archive (right after the task) is rewritten once every ``archive_blocks``
moves.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, PerMessage
from ctxplugin._messages import META_KEY
from ctxplugin.config import HistoryConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.history.identifiers import identifiers, occurs
from ctxplugin.tokens import MESSAGE_OVERHEAD, TokenCounter, content_text, count_message

OMITTED_NOTE = "[earlier exchanges are not shown; stored tool outputs stay available through expand_ref]"
"""The note that stands for exchanges the budget stage dropped: in the history where they were,
or in the header when only the essentials fit. It names no count, so it reads the same however
many are dropped."""
EXPAND_HINT = "their stored tool outputs stay readable with expand_ref"
"""What the first context note adds, so that omitted history is announced in the history and
the header (the start of every cached prefix) never changes."""

_SHORT_ARGUMENT = 80


@dataclass(frozen=True)
class HistoryBudget:
    """Token limits the compressed history must meet (None: no limit on that part).

    Attributes:
        total: all history messages together.
        messages: messages other than tool results (the engine's ``history`` section).
        tool_results: tool results (the engine's ``summaries`` section).
    """

    total: int | None = None
    messages: int | None = None
    tool_results: int | None = None

    def __post_init__(self) -> None:
        for name in ("total", "messages", "tool_results"):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise InvalidInputError(f"history budget {name} must be >= 0, got {value}")

    def fits(self, messages: Sequence[BaseMessage], counter: TokenCounter) -> bool:
        """Whether ``messages`` as they are meet every limit."""
        total = results = 0
        for message in messages:  # one pass: this runs on every call, over the whole history
            size = count_message(message, counter)
            total += size
            if isinstance(message, ToolMessage):
                results += size
        return not (
            (self.total is not None and total > self.total)
            or (self.messages is not None and total - results > self.messages)
            or (self.tool_results is not None and results > self.tool_results)
        )

    def limits(self) -> Iterator[tuple[int, type[BaseMessage] | None, bool]]:
        """``(limit, kind, is_kind)``: the limit applies to messages that are (or are not) of ``kind``."""
        if self.total is not None:
            yield self.total, None, True
        if self.messages is not None:
            yield self.messages, ToolMessage, False
        if self.tool_results is not None:
            yield self.tool_results, ToolMessage, True


def _counts(message: BaseMessage, kind: type[BaseMessage] | None, is_kind: bool) -> bool:
    return kind is None or isinstance(message, kind) == is_kind


@dataclass(frozen=True)
class OmissionPlan:
    """How many of the oldest blocks (of ``block_size`` exchanges) are not shown as exchanges.

    Attributes:
        condensed: blocks ``0 .. condensed - 1`` are condensed.
        archived: of those, blocks ``0 .. archived - 1`` are merged into one archive note; the
            others each keep a note of their own.
        archive_tokens: cap of the archive note (``archive_tokens`` of the configuration, halved
            as often as needed when even a fully condensed history does not fit).
    """

    condensed: int = 0
    archived: int = 0
    archive_tokens: int = 0


def plan_omission(
    rendered: Sequence[Sequence[BaseMessage]],
    sizes: Sequence[Sequence[int]],
    protected_spans: set[int],
    digests: Digests,
    *,
    bounds: tuple[int, int],
    budget: HistoryBudget,
    config: HistoryConfig,
) -> OmissionPlan:
    """The fewest old blocks to condense so that every limit of ``budget`` is met.

    ``rendered``/``sizes`` hold each exchange's messages as their tiers show them and their
    tokens. Blocks are condensed oldest first; condensed blocks are merged into the archive
    ``archive_blocks`` at a time. The window (trimmed and verbatim exchanges) is measured as it
    was at the last boundary move, plus room for ``block_size - 1`` more exchanges, so the plan
    stays the same until the boundaries move again — unless the window outgrows that room (a
    long script since the move): the archive then shrinks to fit the window as it is, since
    otherwise the budget stage would drop the oldest exchanges, which are the notes.
    """
    gist_end, verbatim_start = bounds
    block = config.block_size
    blocks = gist_end // block
    if not any(digests.members(k) for k in range(blocks)):
        return OmissionPlan()
    window_end = min(len(rendered), verbatim_start + config.verbatim_exchanges)
    caps = [config.archive_tokens >> shift for shift in range(4)] + [0]
    condensed, level = 0, 0
    for limit, kind, is_kind in budget.limits():

        def part(i: int, kind: type[BaseMessage] | None = kind, is_kind: bool = is_kind) -> int:
            return sum(t for m, t in zip(rendered[i], sizes[i], strict=True) if _counts(m, kind, is_kind))

        def tokens(message: BaseMessage | None, kind: type[BaseMessage] | None = kind, is_kind: bool = is_kind) -> int:
            return digests.size(message) if message is not None and _counts(message, kind, is_kind) else 0

        window = [part(i) for i in range(gist_end, window_end)]
        fresh = [part(i) for i in range(verbatim_start, window_end)] or window
        reserve = (block - 1) * (sum(fresh) // len(fresh)) if fresh else 0
        kept = sum(part(i) for i in range(gist_end) if i in protected_spans)
        allowance = limit - kept - sum(window) - reserve
        gists = [sum(part(i) for i in digests.members(k)) for k in range(blocks)]
        after = [0] * (blocks + 1)  # after[k]: the gists of blocks k.. (summed once, read per try)
        for k in reversed(range(blocks)):
            after[k] = after[k + 1] + gists[k]

        def fits(count: int, cap: int, after: list[int] = after, allowance: int = allowance) -> bool:
            if after[count] > allowance:
                return False  # the blocks left as gists alone are over: no note is made to learn that
            archived = count // config.archive_blocks * config.archive_blocks
            shown = [digests.archive(archived, cap), *(digests.block(k, archived, cap) for k in range(archived, count))]
            return sum(tokens(m) for m in shown) + after[count] <= allowance

        need = next((count for count in range(blocks + 1) if fits(count, caps[level])), None)
        planned = allowance  # the room the plan leaves for the window to grow into
        if need is None:
            # Even a fully condensed history is too large with room for the exchanges still to
            # come: a smaller archive, one that fits the window as it stood at the move (still
            # the same plan until the next move). When none does (the window alone is over),
            # shrinking it would only lose older history without meeting the limit; the budget
            # stage cuts the rest.
            need, planned = blocks, allowance + reserve
            level = next((lv for lv in range(level, len(caps)) if fits(blocks, caps[lv], allowance=planned)), level)
        now = limit - kept - sum(part(i) for i in range(gist_end, len(rendered)))
        if now < planned and not fits(need, caps[level], allowance=now):
            # The window outgrew the room kept for it (a long script since the move): condense
            # more, or shrink the archive, now, rather than leave the budget stage to drop the
            # oldest exchanges, which are the notes themselves. The window only grows until the
            # next move, so this happens at most once per shrink.
            more = next((count for count in range(need, blocks + 1) if fits(count, caps[level], allowance=now)), None)
            if more is not None:
                need = more
            else:
                need = blocks
                level = next((lv for lv in range(level, len(caps)) if fits(blocks, caps[lv], allowance=now)), level)
        condensed = max(condensed, need)
    return OmissionPlan(
        condensed=condensed,
        archived=condensed // config.archive_blocks * config.archive_blocks,
        archive_tokens=caps[level],
    )


_SINGLE_QUOTED = re.compile(r"'([^'\n]{3,80})'")
_PATHLIKE = re.compile(r"/|\.[A-Za-z]\w{0,7}$")
_HEREDOC = re.compile(r"(?<!<)<<-?[ \t]*(?:(['\"])([^'\"\s]+)\1|([A-Z_][A-Z0-9_]*)\b)")
"""A here-document operator (``<< 'EOF'``, ``<<-END``): a quoted word or an upper-case one, so
that a shift (``mask << bits``) or a here-string (``<<<``) is not taken for one."""


def _shell_lines(text: str) -> list[str]:
    """The short lines of a shell command with here-documents, outside them: ``python repro.py``
    after ``cat > repro.py << 'EOF' ... EOF``, which an agent runs again after each edit. Nothing
    for other multi-line text (a file's content passed to a write tool is not commands)."""
    if not _HEREDOC.search(text):
        return []
    lines: list[str] = []
    end: str | None = None
    for raw in text.splitlines():
        line = raw.strip()
        if end is not None:
            if line == end:
                end = None
            continue
        heredoc = _HEREDOC.search(line)
        if heredoc:
            end = heredoc.group(2) or heredoc.group(3)
        elif 3 <= len(line) <= _SHORT_ARGUMENT:
            lines.append(line)
    return lines


_JSON_KEY = re.compile(r"\"([^\"\n]{1,80})\"\s*:")
_MARKUP_NAME = re.compile(r"</?([A-Za-z][\w:-]*)|\s([A-Za-z][\w:-]*)=[\"']([^\"'<>\n]{0,80})[\"']")
_MARKUP_DOC = re.compile(r"\s*<(?:!doctype|\?xml|html|head|body|div|table|svg|ul|ol|p|span|section|article|main)\b", re.IGNORECASE)
"""An HTML or XML document (not a command's output wrapped in ``<returncode>``/``<output>``)."""
_SCHEMA_WORDS = frozenset(
    ["type", "string", "object", "array", "integer", "number", "boolean", "null", "properties", "required", "parameters", "description", "items", "enum", "default", "title", "format", "anyOf", "oneOf", "allOf", "additionalProperties", "minimum", "maximum", "pattern", "const", "$ref", "$schema", "definitions", "$defs", "examples"]
)
"""Words of a JSON schema's vocabulary: they say how a tool is called, not what was said."""


def _scraped(text: str) -> set[str]:
    """Names that are structure, not content: JSON keys, schema vocabulary, markup tags and
    attributes. A note lists what the conversation said, never these."""
    names = set(_SCHEMA_WORDS)
    start = text.lstrip()[:1]
    if start in ("{", "["):
        names.update(m.group(1) for m in _JSON_KEY.finditer(text))
    if _MARKUP_DOC.match(text):  # tag and attribute names, closing tags (``/div``) and attribute values
        for match in _MARKUP_NAME.finditer(text):
            tag, attribute, value = match.groups()
            names.update(n for n in (tag, f"/{tag}" if tag else None, attribute, value) if n)
    return names


Labelled = tuple[str, str]
"""A value of a note and the label it is listed under: ``("customer_id", "CUS-40917")``."""

RAN = "ran"
"""The label of the commands the model ran (a shell tool's ``command`` argument, here-document
run lines)."""
PATH = "path"
"""The label of file paths found inside longer arguments."""
USER_SAID = "user said"
"""The label of short sentences of the user's messages."""
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_SENTENCE_CHARS = 160
_COMMAND_KEYS = frozenset(["command", "cmd", "commands", "script", "shell"])
_LABEL_CHARS = 40
_FILE_PATH = re.compile(
    r"/|\.(?:py|pyi|js|jsx|ts|tsx|json|jsonl|ya?ml|toml|ini|cfg|conf|txt|md|rst|csv|tsv|log|sh|c|h|cc|cpp|hpp|go|rs|java|kt|rb|php|html?|css|xml|sql|lock|patch|diff)$"
)


def _said_by(message: BaseMessage, tools: Mapping[str, str]) -> str:
    """The label of values found in the text of ``message``: who said them (a tool result is
    named by its message's name, else by the call it answers)."""
    if isinstance(message, ToolMessage):
        return f"{message.name or tools.get(message.tool_call_id) or 'tool'} returned"
    if isinstance(message, AIMessage):
        return "assistant mentioned"
    if isinstance(message, HumanMessage):
        return "user mentioned"
    return "mentioned"


def _label_rank(label: str) -> int:
    """Where a label's line goes in a note: commands, then arguments, paths, parts of longer
    arguments, what the user said, values the user and the assistant mentioned, and last what
    tools returned."""
    if label == RAN:
        return 0
    if label == PATH:
        return 2
    if label.startswith("in "):
        return 3
    if label == USER_SAID:
        return 4
    if label.endswith(" mentioned"):
        return 5 if label.startswith("user") else 6
    if label.endswith(" returned"):
        return 7
    return 1


def _argument_items(value: object, key: str = "argument") -> Iterator[tuple[str, object]]:
    """``(name, value)`` of every scalar in tool-call arguments: the name of the innermost key
    holding it (list items take their list's), None left out."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _argument_items(item, " ".join(str(name).split())[:_LABEL_CHARS] or key)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _argument_items(item, key)
    elif value is not None:
        yield key, value


_VALUES: PerMessage[tuple[str, tuple[list[Labelled], list[Labelled]]]] = PerMessage(4096)
"""The labelled values of each message, read once: old exchanges are condensed again at every
tier move. Kept with the label of the message's own values, which for a tool result may come
from the exchange (the tool named by its call)."""


def _values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[list[Labelled], list[Labelled]]:
    """Exact values of one message with their labels, as ``(first, rest)``: short tool-call
    arguments whole (under the argument's name, ``ran`` for commands), single-quoted arguments
    and paths first, other identifiers after; JSON keys, schema words and markup names are left
    out (see :func:`_scraped`), and so are values without a letter or digit. ``tools`` maps
    the tool call ids of the exchange to their tools' names. Memoised per message (callers get
    copies)."""
    said = _said_by(message, tools)
    hit = _VALUES.get(message)
    if hit is None or hit[0] != said:
        hit = (said, _read_values(message, tools))
        _VALUES.put(message, hit)
    first, rest = hit[1]
    return list(first), list(rest)


def _read_values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[list[Labelled], list[Labelled]]:
    first, rest = _raw_values(message, tools)
    skip = _scraped(content_text(message.content))

    def kept(values: list[Labelled]) -> list[Labelled]:
        out: list[Labelled] = []
        for label, value in values:
            value = value.strip()
            if value not in skip and any(c.isalnum() for c in value):
                out.append((label, value))
        return out

    return kept(first), kept(rest)


def _raw_values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[list[Labelled], list[Labelled]]:
    first: list[Labelled] = []
    rest: list[Labelled] = []
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            for key, value in _argument_items(call["args"]):
                text = value if isinstance(value, str) else json.dumps(value)
                command = key.lower() in _COMMAND_KEYS
                whole, part = (RAN, "in commands") if command else (key, f"in {key}")
                if len(text) <= _SHORT_ARGUMENT and "\n" not in text:
                    first.append((whole, text))
                elif "\n" in text:
                    first.extend((RAN, line) for line in _shell_lines(text))
                quoted = [m.group(1) for m in _SINGLE_QUOTED.finditer(text)]
                first.extend((PATH if _FILE_PATH.search(found) else part, found) for found in quoted)
                for found in identifiers(text):
                    label = PATH if _FILE_PATH.search(found) else part
                    (first if _PATHLIKE.search(found) else rest).append((label, found))
    label = _said_by(message, tools)
    text = content_text(message.content)
    for found in identifiers(text):
        (first if _PATHLIKE.search(found) and not isinstance(message, ToolMessage) else rest).append((label, found))
    if isinstance(message, HumanMessage):
        # what the user asked or decided, in their words, after the values in it (a sentence
        # that fits takes the place of the values it holds)
        for line in text.splitlines():
            sentences = (s.removesuffix(".") for s in _SENTENCE_END.split(line.strip()))
            rest.extend((USER_SAID, s) for s in sentences if 3 <= len(s) <= _SENTENCE_CHARS)
    return first, rest


_Valued = tuple[bool, list[Labelled], list[Labelled]]
"""A message's values: ``(from a tool, first, rest)`` as :func:`_values` splits them."""


def _valued(exchanges: Sequence[Sequence[BaseMessage]]) -> list[list[_Valued]]:
    """The values of every message of ``exchanges``, read once."""
    out: list[list[_Valued]] = []
    for span in exchanges:
        tools = {c["id"]: c["name"] for m in span if isinstance(m, AIMessage) for c in m.tool_calls if c["id"]}
        out.append([(isinstance(m, ToolMessage), *_values(m, tools)) for m in span])
    return out


def _ordered(valued: Sequence[Sequence[_Valued]]) -> Iterator[Labelled]:
    """Values in three passes: what the model ran (commands, their quoted arguments, paths),
    then the rest of what it said, then what tools returned."""
    flat = [entry for span in valued for entry in span]
    said = [(first, rest) for tool, first, rest in flat if not tool]
    for first, _ in said:
        yield from first
    for _, rest in said:
        yield from rest
    for tool, first, rest in flat:
        if tool:
            yield from first
            yield from rest


def _by_priority(valued: Sequence[Sequence[_Valued]]) -> Iterator[Labelled]:
    """Values of exchanges given newest first, in three passes: what the model ran (commands,
    their quoted arguments, paths), then the rest of what it said, then what tools returned —
    an agent reuses its own commands and paths more than raw output."""
    return _ordered(valued)


def _chronology(valued: Sequence[Sequence[_Valued]]) -> dict[str, int]:
    """The place of each value of exchanges given newest first in the conversation's order
    (of its first occurrence), so that a note lists what was said in the order it was said."""
    when: dict[str, int] = {}
    for span in reversed(valued):
        for _, first, rest in span:
            for _, value in (*first, *rest):
                when.setdefault(value, len(when))
    return when


_TYPED_WEIGHT = (1.0, 7.0, 20.0, 80.0)
"""How much likelier a value is to be used again by the number of exchanges in which the model
itself used it (none, one, two, three or more). Measured with ``benchmarks/history_reuse.py`` on
the SWE runs: of the values older history held, the next action used about 0.05%, 0.4%, 1% and
4%."""
_AGE_POWER = 0.8
"""How fast that likelihood falls with age in exchanges (about ``age ** -0.8`` there)."""


def _by_reuse(valued: Sequence[Sequence[_Valued]], counter: TokenCounter) -> list[Labelled]:
    """Values of exchanges given newest first, the best bet per token first: values the model
    itself used in several exchanges before values a tool printed once, recent before old,
    short before long (ties keep :func:`_by_priority`'s order). A value keeps the label it
    has there first."""
    labels: dict[str, str] = {}
    for label, value in _ordered(valued):
        labels.setdefault(value, label)
    order = list(labels)
    newest: dict[str, int] = {}  # value -> age in exchanges of its newest occurrence
    said_in: dict[str, int] = {}  # value -> exchanges in which the model used it
    for age, span in enumerate(valued):
        said: set[str] = set()
        for tool, first, rest in span:
            for _, value in (*first, *rest):
                newest.setdefault(value, age)
            if not tool:
                said.update(value for _, value in (*first, *rest))
        for value in said:
            said_in[value] = said_in.get(value, 0) + 1
    rank = {value: i for i, value in enumerate(order)}

    def score(value: str) -> float:
        weight: float = _TYPED_WEIGHT[min(said_in.get(value, 0), 3)] * (1.0 + newest[value]) ** -_AGE_POWER
        return weight / (counter.count(value) + 1)

    return [(labels[value], value) for value in sorted(order, key=lambda value: (-score(value), rank[value]))]


def _render(lead: str, chosen: Sequence[Labelled], when: Mapping[str, int]) -> str:
    """A note's text: ``lead``, then one ``label: value; value`` line per label (in the order
    of :func:`_label_rank`, then of their first value), values in the order of ``when``."""
    groups: dict[str, list[str]] = {}
    for label, value in sorted(chosen, key=lambda item: when.get(item[1], -1)):
        groups.setdefault(label, []).append(value)
    ordered = sorted(groups.items(), key=lambda group: _label_rank(group[0]))
    lines = "\n".join(f"{label}: {'; '.join(values)}" for label, values in ordered)
    return f"{lead}\n{lines}]"


class _Picker:
    """The values a note lists, picked greedily within a token budget."""

    def __init__(self, known: set[str], visible: str, counter: TokenCounter) -> None:
        self.chosen: list[Labelled] = []
        self._labels: set[str] = set()
        self._taken = set(known)
        self._visible = visible
        self._listed = " | ".join(known)  # a value inside one already listed (a path in a command) is shown
        self._counter = counter

    def fill(self, values: Iterable[Labelled], budget: int) -> None:
        """Add the values that fit ``budget`` (tokens), in order."""
        counter = self._counter
        for label, value in values:
            if budget < 2:
                break
            if value in self._taken or occurs(value, self._visible) or occurs(value, self._listed):
                continue
            # values listed earlier that this one shows (a path, then the command holding it) go
            inside = [c for c in self.chosen if c[1] in value and occurs(c[1], value)]
            cost = counter.count(value) + 1 - sum(counter.count(c[1]) + 1 for c in inside)
            if label not in self._labels:
                cost += counter.count(f"{label}:") + 1
            if cost <= budget:
                if inside:
                    self.chosen = [c for c in self.chosen if c not in inside]
                self.chosen.append((label, value))
                self._taken.add(value)
                self._labels.add(label)
                self._listed = f"{self._listed} | {value}"
                budget -= cost


def _note(
    span: tuple[int, int],
    values: Sequence[Labelled],
    when: Mapping[str, int],
    known: set[str],
    visible: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    first: bool = False,
) -> tuple[HumanMessage | None, list[str]]:
    """A context note for exchanges ``span`` listing values not yet known or visible, within
    ``max_tokens``, as ``label: value`` lines (values in the order of ``when``); None when
    nothing fits. Values are picked in the order given while their estimated cost fits, then
    once more with the room the estimate left. The ``first`` note shown also says that stored outputs
    stay readable (said here, not in the header, so the header never changes)."""
    hint = f" ({EXPAND_HINT})" if first else ""
    lead = f"[context note: exchanges {span[0]}-{span[1]} are condensed to the values they used{hint}:"
    picker = _Picker(known, visible, counter)
    picker.fill(values, max_tokens - counter.count(lead) - MESSAGE_OVERHEAD - 1)
    text = _render(lead, picker.chosen, when)
    room = max_tokens - counter.count(text) - MESSAGE_OVERHEAD
    if room >= 2 and picker.chosen:
        picker.fill(values, room)
        text = _render(lead, picker.chosen, when)
    chosen = picker.chosen
    while chosen and counter.count(text) + MESSAGE_OVERHEAD > max_tokens:
        chosen.pop()
        text = _render(lead, chosen, when)
    if not chosen:
        return None, []
    note = HumanMessage(content=text, additional_kwargs={META_KEY: {"condensed": list(span)}})
    return note, [value for _, value in chosen]


def note_values(text: str) -> dict[str, list[str]]:
    """The values a context note lists, by label (``{}`` for text that is not one).

    Example:
        >>> note_values("[context note: exchanges 2-3 are condensed to the values they used:\\n"
        ...             "customer_id: CUS-40917\\nlookup_customer returned: ORD-77120; 2024-05-01]")
        {'customer_id': ['CUS-40917'], 'lookup_customer returned': ['ORD-77120', '2024-05-01']}
    """
    lead, _, body = text.partition("\n")
    if not (lead.startswith("[context note: ") and lead.endswith(":") and body.endswith("]")):
        return {}
    out: dict[str, list[str]] = {}
    for line in body[:-1].splitlines():
        label, _, values = line.partition(": ")
        out.setdefault(label, []).extend(values.split("; "))
    return out


Exchange = tuple[BaseMessage, ...]

_CACHE: OrderedDict[tuple[object, ...], tuple[HumanMessage | None, tuple[str, ...]]] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 4096
_RANKED: LRU[tuple[str, int, str], tuple[list[list[_Valued]], list[Labelled]]] = LRU(64)


class Digests:
    """The context notes that stand for condensed blocks of one conversation.

    The archive of blocks ``0 .. a - 1`` lists their values, ranked by :func:`_by_reuse`,
    deduplicated, within ``archive_tokens``; each later condensed block has a note of its own (within
    ``digest_tokens``) with the values the archive and earlier notes do not list. A note depends
    only on the blocks it covers and those before them, so it never changes while shown; notes
    are remembered by content, since the same old blocks come back on every call.

    Args:
        exchanges: every exchange of the conversation (original messages).
        spans_of_block: exchange numbers of each gisted block that may be condensed.
        gist_sizes: tokens of each block as the gist tier shows it (a note is never larger).
        known: text always in view (the task); values in it are not listed.
        config: note sizes.
        counter: token counter.
    """

    def __init__(
        self,
        exchanges: Sequence[Exchange],
        spans_of_block: Sequence[Sequence[int]],
        gist_sizes: Sequence[int],
        known: str,
        config: HistoryConfig,
        counter: TokenCounter,
    ) -> None:
        self._exchanges = exchanges
        self._spans = spans_of_block
        self._gist_sizes = gist_sizes
        self._known = known
        self._config = config
        self._counter = counter
        self._keys: list[str] = []
        self._seen: dict[tuple[object, ...], tuple[HumanMessage | None, tuple[str, ...]]] = {}
        digest = hashlib.sha1(known.encode("utf-8", "surrogatepass"))
        for members in spans_of_block:
            for number in members:
                for message in exchanges[number]:
                    digest.update(b"\x00" + _digest(message))
            digest.update(b"\x01")
            self._keys.append(digest.hexdigest())

    def members(self, block: int) -> Sequence[int]:
        """Exchange numbers of ``block`` that may be condensed (not protected)."""
        return self._spans[block]

    def size(self, message: BaseMessage) -> int:
        """Tokens of a note."""
        return count_message(message, self._counter)

    def _cached(self, key: tuple[object, ...], make: Callable[[], tuple[HumanMessage | None, list[str]]]) -> tuple[HumanMessage | None, tuple[str, ...]]:
        # a plan asks for the same notes many times: looked up once per call, then here
        made = self._seen.get(key)
        if made is not None:
            return made
        with _CACHE_LOCK:
            if key in _CACHE:
                _CACHE.move_to_end(key)
                made = _CACHE[key]
        if made is None:
            note, chosen = make()
            made = (note, tuple(chosen))
            with _CACHE_LOCK:
                _CACHE[key] = made
                while len(_CACHE) > _CACHE_SIZE:
                    _CACHE.popitem(last=False)
        self._seen[key] = made
        return made

    def _archive(self, upto: int, cap: int) -> tuple[HumanMessage | None, tuple[str, ...]]:
        if upto <= 0 or cap <= 0:
            return None, ()
        key = ("archive", self._keys[upto - 1], upto, cap, self._counter.name)
        cap = min(cap, sum(self._gist_sizes[:upto]) - 1)
        first = next((m[0] for m in self._spans[:upto] if m), 0)
        last = next((m[-1] for m in reversed(self._spans[:upto]) if m), 0)
        return self._cached(key, lambda: self._archive_note(upto, first, last, cap))

    def _archive_note(self, upto: int, first: int, last: int, cap: int) -> tuple[HumanMessage | None, list[str]]:
        valued, ranked = self._ranked(upto)
        return _note((first, last), list(ranked), _chronology(valued), set(), self._known, cap, self._counter, first=True)

    def _ranked(self, upto: int) -> tuple[list[list[_Valued]], list[Labelled]]:
        """The values of blocks ``0 .. upto - 1``, newest exchange first, and as
        :func:`_by_reuse` ranks them: once for all the caps an archive is tried at."""
        key = (self._keys[upto - 1], upto, self._counter.name)
        with _CACHE_LOCK:
            hit = _RANKED.hit(key)
        if hit is not None:
            return hit
        newest_first = [self._exchanges[n] for k in reversed(range(upto)) for n in reversed(self._spans[k])]
        valued = _valued(newest_first)
        found = (valued, _by_reuse(valued, self._counter))
        with _CACHE_LOCK:
            _RANKED.put(key, found)
        return found

    def archive(self, upto: int, cap: int) -> HumanMessage | None:
        """The note for blocks ``0 .. upto - 1`` within ``cap`` tokens (None if there are no
        such blocks or it lists nothing)."""
        return self._archive(upto, cap)[0]

    def block(self, block: int, archived: int, archive_cap: int) -> HumanMessage | None:
        """The note of one condensed ``block`` after an archive of ``archived`` blocks."""
        return self._block(block, archived, archive_cap)[0]

    def _block(self, block: int, archived: int, archive_cap: int) -> tuple[HumanMessage | None, tuple[str, ...]]:
        members = self._spans[block]
        if not members:
            return None, ()
        key = ("block", self._keys[block], block, archived, archive_cap, self._config.digest_tokens, self._counter.name)

        def make() -> tuple[HumanMessage | None, list[str]]:
            known = set(self._archive(archived, archive_cap)[1])
            for earlier in range(archived, block):
                known.update(self._block(earlier, archived, archive_cap)[1])
            cap = min(self._config.digest_tokens, self._gist_sizes[block] - 1)
            valued = _valued([self._exchanges[n] for n in reversed(members)])
            shown_first = archived == 0 and block == next(k for k, m in enumerate(self._spans) if m)
            return _note(
                (members[0], members[-1]), list(_by_priority(valued)), _chronology(valued), known, self._known, cap,
                self._counter, first=shown_first,
            )

        return self._cached(key, make)


_DIGESTS: PerMessage[bytes] = PerMessage(4096)


def _digest(message: BaseMessage) -> bytes:
    """The sha1 of :func:`_text` of ``message``, once per message."""
    found = _DIGESTS.get(message)
    if found is None:
        found = hashlib.sha1(_text(message).encode("utf-8", "surrogatepass")).digest()
        _DIGESTS.put(message, found)
    return found


def _text(message: BaseMessage) -> str:
    parts = [content_text(message.content)]
    if isinstance(message, AIMessage):
        parts.extend(json.dumps(c["args"], ensure_ascii=False, sort_keys=True) for c in message.tool_calls)
    return "\n".join(parts)


__all__ = ["OMITTED_NOTE", "Digests", "HistoryBudget", "OmissionPlan", "note_values", "plan_omission"]
