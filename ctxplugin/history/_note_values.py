"""The values a context note lists, read from a message, each with the label it is listed under.

A label says where a value came from: the argument the model passed it in (``ran`` for a shell
command, ``path`` for a path inside a longer argument, ``in <argument>`` for other parts of
one), ``user said``, ``user mentioned`` or ``assistant mentioned`` for what the conversation
said, ``<tool> returned`` for what a tool printed and ``<tool> failed`` for what it printed
when the call failed (its result's status is ``error``): the ids an error names were not found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._block_text import server_tools
from ctxplugin._lru import RECENT_MESSAGES, PerMessage, shared
from ctxplugin._untrusted import REF_TEXT, name_form
from ctxplugin.history.identifiers import identifiers
from ctxplugin.tokens import args_json, content_text

_SHORT_ARGUMENT = 80
_BREAKS = "\n\r\v\f\x1c\x1d\x1e\x85\u2028\u2029"
"""The characters ``str.splitlines`` (and many renderers) break a line at: a value listed whole
holds none, or what follows one would read as a line of the note of its own."""
_BREAK = re.compile(f"[{_BREAKS}]")
_SINGLE_QUOTED = re.compile(f"'([^'{_BREAKS}]{{3,80}})'")
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


_CLOSING_TAG = re.compile(r"</([A-Za-z][\w:-]*)>")


def _scraped(text: str) -> set[str]:
    """Names that are structure, not content: JSON keys, schema vocabulary, markup tags and
    attributes. A note lists what the conversation said, never these."""
    names = set(_SCHEMA_WORDS)
    # a closing tag reads as a path (``</output>``: ``/output``), in any text: a command's
    # output wrapped in ``<returncode>``/``<output>`` puts two in every note
    names.update(f"/{tag}" for tag in _CLOSING_TAG.findall(text))
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
_REF_HEAD = re.compile(rf"\[(?P<ref>{REF_TEXT}) · [^\n\]]*\]")
"""The line a captured output's compact form opens with: ``[ref:... · label · N tokens stored · expand_ref for more]``."""
_SUMMARY_WORDS = re.compile(
    r"\(expand_ref\b[^()\n]*\)|(?:;|^) *(?:… )?expand_ref\b[^\n]*|… \+\d[\d,]* more|^(?:JSON array of \d+ records|[^\n:]{1,40}: \d+ records); keys: [^\n]*",
    re.MULTILINE,
)
"""What a stored output's summary says of itself rather than of the output: how ``expand_ref``
reads more, how many more there are, the keys its records have."""
_SENTENCE_CHARS = 160
_CODE = re.compile(r"^(?=[^\s]*[0-9])(?=[^\s]*[A-Za-z])[^\s]+$")
"""A code that mixes letters and digits (``credit_card_9525117``, ``HAT276``): a record's id."""
_COMMAND_KEYS = frozenset(["command", "cmd", "commands", "script", "shell"])
_LABEL_CHARS = 40
_FILE_PATH = re.compile(
    r"/|\.(?:py|pyi|js|jsx|ts|tsx|json|jsonl|ya?ml|toml|ini|cfg|conf|txt|md|rst|csv|tsv|log|sh|c|h|cc|cpp|hpp|go|rs|java|kt|rb|php|html?|css|xml|sql|lock|patch|diff)$"
)


_PHRASE = re.compile(r"[\s;]")


def archivable(item: Labelled) -> bool:
    """Whether the archive note may list ``item``: any value but a phrase (one holding
    whitespace or a semicolon) that the assistant mentioned or a tool printed. The archive
    stands for the oldest exchanges, whose commands, arguments, paths and ids an agent still
    reuses; a sentence of its own prose or a line of an old output it hardly ever quotes again,
    and such phrases took the archive's room after the values ranked above them."""
    label, value = item
    return not ((label == "assistant mentioned" or from_tool(label)) and _PHRASE.search(value) is not None)


def from_tool(label: str) -> bool:
    """Whether ``label`` lists what a tool printed (``<tool> returned`` or ``<tool> failed``)."""
    return label.endswith((" returned", " failed"))


def _between_spans(text: str) -> set[str]:
    """The stretches of prose between two backtick spans of a line that hold a space. A span
    too short to be read as a quoted value (an ``in`` in backticks) leaves its closing backtick
    to open a false one, ending at the next span's opening backtick: "operator. When" is then
    read as a value. A value without a space is found without quotes too, and stays."""
    found: set[str] = set()
    for line in text.splitlines():
        if line.count("`") < 3:
            continue
        parts = line.split("`")
        found.update(stretch for part in parts[2:-1:2] if " " in (stretch := part.strip()))
    return found


def _said_by(message: BaseMessage, tools: Mapping[str, str]) -> str:
    """The label of values found in the text of ``message``: who said them (a tool result is
    named by its message's name, else by the call it answers; ``failed`` when the call failed).
    A name is shown only in the form of a tool's name: a tool that returns its own message chooses its
    name, and one with a line break would write lines of the note (``user said: ...``)."""
    if isinstance(message, ToolMessage):
        name = name_form(message.name) or name_form(tools.get(message.tool_call_id)) or "tool"
        return f"{name} {'failed' if message.status == 'error' else 'returned'}"
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
    if from_tool(label):
        return 7
    return 1


_KEY_LABEL = re.compile(r"[\w .@+=/$-]+")
"""The form of a label a key gives its values: no colon, bracket, quote, ``#``, ``*`` or ``>``;
a ``$`` leads OData's arguments (``$filter``, ``$top``)."""
_SPEAKERS = frozenset([USER_SAID, "user mentioned", "assistant mentioned", "mentioned"])
_JOINERS = re.compile(r"[\W_]+")
"""What a key may join a label's words with (``user_said``, ``User-Said``): read as a space."""


def _key_label(name: object, outer: str) -> str:
    """The label of values held under the argument key ``name``: the key (its whitespace one
    space), or ``outer`` for a key that says who spoke (``user said``, in any case, its words
    joined by any mark: ``User_Said``) or holds a colon or a bracket. Keys are chosen by a tool's schema (a remote MCP server's among them) and by the
    model: one such key would list a value as the user's, or write a label of its own."""
    label = " ".join(str(name).split())[:_LABEL_CHARS]
    spoken = _JOINERS.sub(" ", label.casefold()).strip()
    return label if _KEY_LABEL.fullmatch(label) and spoken not in _SPEAKERS else outer


def _argument_items(value: object, key: str = "argument") -> Iterator[tuple[str, object]]:
    """``(name, value)`` of every scalar in tool-call arguments: the name of the innermost key
    holding it (list items take their list's, a key of another form its outer key's), None left out."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield from _argument_items(item, _key_label(name, key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _argument_items(item, key)
    elif value is not None:
        yield key, value


_VALUES: PerMessage[tuple[str, tuple[tuple[Labelled, ...], tuple[Labelled, ...]]]] = PerMessage(RECENT_MESSAGES)
"""The labelled values of each message, read once: old exchanges are condensed again at every
tier move. Kept with the label of the message's own values, which for a tool result may come
from the exchange (the tool named by its call)."""


def _values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[tuple[Labelled, ...], tuple[Labelled, ...]]:
    """Exact values of one message with their labels, as ``(first, rest)``: short tool-call
    arguments whole (under the argument's name, ``ran`` for commands), single-quoted arguments
    and paths first, other identifiers after; JSON keys, schema words and markup names are left
    out (see :func:`_scraped`), and so are values without a letter or digit. ``tools`` maps
    the tool call ids of the exchange to their tools' names. Memoised per message (as tuples of
    strings, which the garbage collector stops tracking: a long conversation keeps many)."""
    said = _said_by(message, tools)
    hit = _VALUES.get(message)
    if hit is None or hit[0] != said:
        first, rest = _read_values(message, tools)
        hit = (said, (shared(first), shared(rest)))  # a value is named by many messages
        _VALUES.put(message, hit)
    return hit[1]


def _read_values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[list[Labelled], list[Labelled]]:
    first, rest = _raw_values(message, tools)
    skip = _scraped(content_text(message.content))

    def kept(values: list[Labelled]) -> list[Labelled]:
        # a value holding a line break (one quoted in backticks or double quotes may) is left
        # out: what follows the break would read as a line of the note of its own
        out: list[Labelled] = []
        for label, value in values:
            value = value.strip()
            if value not in skip and any(c.isalnum() for c in value) and _BREAK.search(value) is None:
                out.append((label, value))
        return out

    return kept(first), kept(rest)


def _raw_values(message: BaseMessage, tools: Mapping[str, str]) -> tuple[list[Labelled], list[Labelled]]:
    first: list[Labelled] = []
    rest: list[Labelled] = []
    if isinstance(message, AIMessage):
        for call in message.tool_calls:
            _argument_values(call["args"], first, rest)
        # tools the provider ran (web search, fetch, code execution): their inputs are arguments,
        # what they found is a tool's output that no tool message carries
        for role, name, found in server_tools(message.content):
            if role == "call":
                _argument_values(_parsed(found), first, rest)
            else:
                # named by the provider or a remote MCP server: shown only in a tool name's form
                rest.extend((f"{(name_form(name) or 'tool')[:_LABEL_CHARS]} returned", value) for value in identifiers(found))
    label = _said_by(message, tools)
    text = content_text(message.content)
    head = _REF_HEAD.match(text) if isinstance(message, ToolMessage) else None
    if head is not None:  # a stored output's ref line: its ref first, not its size or the tool it names
        first.append((label, head.group("ref")))
        text = _SUMMARY_WORDS.sub("", text[head.end() :])
    between = _between_spans(text) if "`" in text else set()
    # the ids of a record a tool returned (a payment method, a reservation) are what a next call
    # passes on; the words of a command's text output rarely are: a record's ids go first
    record = isinstance(message, ToolMessage) and text.lstrip()[:1] in ("{", "[")
    for found in identifiers(text):
        if found in between:
            continue
        said = _PATHLIKE.search(found) and not isinstance(message, ToolMessage)
        (first if said or (record and _CODE.search(found)) else rest).append((label, found))
    if isinstance(message, HumanMessage):
        # what the user asked or decided, in their words, after the values in it (a sentence
        # that fits takes the place of the values it holds)
        for line in text.splitlines():
            sentences = (s.removesuffix(".") for s in _SENTENCE_END.split(line.strip()))
            rest.extend((USER_SAID, s) for s in sentences if 3 <= len(s) <= _SENTENCE_CHARS)
    return first, rest


def _argument_values(args: object, first: list[Labelled], rest: list[Labelled]) -> None:
    """The values of one call's arguments, appended to ``first`` and ``rest`` (see :func:`_values`)."""
    for key, value in _argument_items(args):
        text = value if isinstance(value, str) else args_json(value, sort_keys=False, ensure_ascii=True)
        command = key.lower() in _COMMAND_KEYS
        whole, part = (RAN, "in commands") if command else (key, f"in {key}")
        broken = _BREAK.search(text) is not None
        if len(text) <= _SHORT_ARGUMENT and not broken:
            first.append((whole, text))
        elif broken:
            first.extend((RAN, line) for line in _shell_lines(text))
        quoted = [m.group(1) for m in _SINGLE_QUOTED.finditer(text)]
        first.extend((PATH if _FILE_PATH.search(found) else part, found) for found in quoted)
        for found in identifiers(text):
            label = PATH if _FILE_PATH.search(found) else part
            (first if _PATHLIKE.search(found) else rest).append((label, found))


def _parsed(arguments: object) -> object:
    """A call's input as an object: a JSON string of arguments (an MCP call's) read."""
    if isinstance(arguments, str) and arguments.lstrip().startswith("{"):
        try:
            return json.loads(arguments)
        except ValueError:
            return arguments
    return arguments


_Valued = tuple[bool, tuple[Labelled, ...], tuple[Labelled, ...]]
"""A message's values: ``(from a tool, first, rest)`` as :func:`_values` splits them."""


def _valued(exchanges: Sequence[Sequence[BaseMessage]]) -> tuple[tuple[_Valued, ...], ...]:
    """The values of every message of ``exchanges``, read once."""
    out: list[tuple[_Valued, ...]] = []
    for span in exchanges:
        tools = {c["id"]: c["name"] for m in span if isinstance(m, AIMessage) for c in m.tool_calls if c["id"]}
        out.append(tuple((isinstance(m, ToolMessage), *_values(m, tools)) for m in span))
    return tuple(out)
