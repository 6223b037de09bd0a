"""Recognising and taking apart text outputs: logs, code, grep matches, listings, tables."""

from __future__ import annotations

import csv
import re
import string
from collections.abc import Callable
from itertools import islice
from operator import itemgetter
from typing import Literal

from ctxplugin._text_words import mentions_trouble

TextShape = Literal["log", "code", "grep", "paths", "listing", "table", "jsonl", "fixed", "report", "diff", "markup", "text"]

_SAMPLE_LINES = 400
_ESCAPE = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b\n]*(?:\x07|\x1b\\)|[@-Z\\-_])")
"""A terminal escape sequence: a colour or cursor control (CSI), a link or title (OSC, ended by
BEL or ST), or a two-character escape. None spans a line break."""


def without_escapes(text: str) -> str:
    """``text`` without terminal escape sequences (``--color=yes``, ``FORCE_COLOR``, links in
    a terminal): what a reader sees on the screen, line for line. ``text`` itself when it holds
    no escape character, which is almost always."""
    return _ESCAPE.sub("", text) if "\x1b" in text else text

_NUMBERED = re.compile(r"^\s*(\d+)(?:\t|: |:|-|\s{2,}| \| )(.*)$")
_DEF = re.compile(
    r"^(?P<indent>\s*)(?:"
    r"(?:async\s+)?def\s+\w+|class\s+\w+"  # Python
    r"|(?:export\s+)?(?:default\s+)?(?:async\s+)?function\*?\s+\w+|(?:export\s+)?(?:abstract\s+)?class\s+\w+"
    r"|(?:export\s+)?(?:const|let)\s+\w+\s*=\s*(?:async\s*)?(?:\([^)]*\)|\w+)\s*=>"  # JS / TS
    r"|func\s+(?:\([^)]*\)\s*)?\w+|type\s+\w+\s+(?:struct|interface)"  # Go
    r"|(?:pub(?:\([\w:]+\))?\s+)?(?:async\s+)?(?:fn|struct|enum|trait|impl|mod)\b"  # Rust
    r"|(?:public|private|protected|internal)\s+(?:static\s+)?(?:final\s+)?[\w<>\[\], ?]+\s+\w+\s*\("  # Java / C#
    r")"
)
_DEF_WORDS = (
    "async", "def", "class", "export", "default", "function", "abstract", "const", "let", "func", "type", "pub", "fn",
    "struct", "enum", "trait", "impl", "mod", "public", "private", "protected", "internal",
)
"""The words a :data:`_DEF` line starts with after its indent: a cheap test that rules out most
lines before the pattern runs."""
_CODEISH = re.compile(
    r"^\s*+(?:import\s|from\s+\S+\s+import|def\s|class\s|return\b|if\b.*:$|elif\b|else:|for\b.*:$|while\b|try:|"
    r"except\b|finally:|with\b.*:$|raise\b|@\w|#|//|/\*|\*|[{}]|.*[;{]$|self\.|\w+\s*=\s*\S)"
)
r"""A line that looks like code. The indent is taken whole (``\s*+``, no backtracking into it):
only ``.*[;{]$`` can start on a space, and it matches from the first non-space as well, so the
answer is that of ``^\s*`` while a line is read once instead of once per indent width."""
_GREP = re.compile(r"^(?P<path>[\w./~+@-]*[\w-]\.[\w]+|[\w.~+@-]*/[\w./~+@-]+)[:-](?P<line>\d+)[:-]|^(?P<file>[\w./~+@-]*\.\w+):\S")
_PATH = re.compile(r"^(?:\.{0,2}/)?[\w.@+-]+(?:/[\w.@+-]*)*$")
_LISTING = re.compile(r"^[-dlcbps][rwxsStT-]{9}[.+@]?\s+\d+\s+\S+\s+\S+\s+[\d,]+\s+\w{3}\s+\d+\s+[\d:]+\s+(.+)$")

_CLIP = 400


def _sample(body: str) -> list[str]:
    # lines are clipped: shape patterns backtrack, and a megabyte-long line must stay cheap
    return [line[:_CLIP] for line in body[:200_000].split("\n", _SAMPLE_LINES)[:_SAMPLE_LINES] if line.strip()]


_TIMESTAMP = re.compile(
    r"^\W{0,2}(?:\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2})?|\d{2}:\d{2}:\d{2}[.,]\d|[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2}|\d{10}(?:\.\d+)?\s)"
    r"|^\W{0,2}(?:DEBUG|INFO|NOTICE|WARN(?:ING)?|ERROR|FATAL|CRITICAL|TRACE)\b"
)
"""A log line's start: a date-time (ISO, syslog, epoch) or a level."""
_REPORT = re.compile(
    r"^(?:=+ (?:test session starts|FAILURES|ERRORS|short test summary info|warnings summary)|"
    r"\S+\.py::\S+(?: \S+)* (?:PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b|(?:PASSED|FAILED|ERROR) \S+::|"
    r"--- (?:PASS|FAIL): |(?:ok|FAIL)\s+\S+\s+[\d.]+s$|test \S+ \.\.\. (?:ok|FAILED|ERROR)|collected \d+ items|"
    r"test\w* \([\w.]+\) \.\.\. (?:ok|FAIL|ERROR|skipped|expected failure|unexpected success)|"
    r"(?:FAIL|ERROR): test\w* \([\w.]+\)|Ran \d+ tests? in )"
)
"""Test runner output: pytest, go test, cargo test, unittest."""
_DIFF = re.compile(r"^(?:diff --git |--- (?:a/|/dev/null)|\+\+\+ (?:b/|/dev/null)|@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|index [0-9a-f]{6,}\.\.)")
_MARKUP_TAG = re.compile(r"<(?:!doctype|html|head|body|div|span|p|a|table|tr|td|li|ul|h[1-6]|script|meta|link|title)\b", re.IGNORECASE)
_FIXED_HEADER = re.compile(r"^[A-Z][A-Z0-9_()%/.-]*(?: [A-Z][A-Z0-9_()%/.-]*)?(?:\s{2,}[A-Z][A-Z0-9_()%/.-]*(?: [A-Z][A-Z0-9_()%/.-]*)?)+\s*$")


_REPORT_STARTS = "=PFE-otcR"
"""How a :data:`_REPORT` line without ``.py::`` starts: ``=`` rules, PASSED, FAILED or FAIL, ERROR,
``---``, ok, test, collected, Ran."""
_LISTING_STARTS = "-dlcbps"
_LOWER_WORD = string.ascii_lowercase + "_"
_NOT_PATH_START = " \t\x0b\x0c\r!\"#$%&'()*,:;<=>?[\\]^`{|}"
"""The ASCII characters that are neither word characters nor one of ``./~+@-``."""


def _starting(firsts: str, chars: str) -> int:
    """How many lines start with one of ``chars``, ``firsts`` being every line's first character."""
    return sum(map(firsts.count, chars))


def _report_bound(firsts: str, joined: str) -> int:
    """At least as many as the :data:`_REPORT` lines: each starts with one of
    :data:`_REPORT_STARTS` or holds ``.py::``. ``joined`` is the lines joined by newlines."""
    return _starting(firsts, _REPORT_STARTS) + joined.count(".py::")


def _log_bound(firsts: str, joined: str) -> int:
    """At least as many as the :data:`_TIMESTAMP` lines, which have a digit or an upper-case
    letter after at most two non-word characters: none starts with a lower-case letter or ``_``
    (a word character, so none is skipped), nor with three spaces."""
    return len(firsts) - _starting(firsts, _LOWER_WORD) - joined.count("\n   ") - joined.startswith("   ")


def _grep_bound(firsts: str) -> int:
    """At least as many as the :data:`_GREP` lines, which start with a word character or one of
    ``./~+@-``: none with one of :data:`_NOT_PATH_START`."""
    return len(firsts) - _starting(firsts, _NOT_PATH_START)


def _jsonl(lines: list[str]) -> bool:
    objects = [ln.strip() for ln in lines[:50]]
    return len(objects) >= 2 and sum(1 for ln in objects if ln[:1] == "{" and ln[-1:] == "}") >= 0.9 * len(objects)


def detect_text_shape(body: str) -> TextShape:
    """The most specific shape the first lines of ``body`` fit.

    Structure is told from the lines' starts before any separator is counted: lines that begin
    with a date-time are a log even when a comma sits in every timestamp.

    A pattern is tried line by line only when counts of the lines' first characters (and of
    ``.py::``) leave room for enough of its lines: the ``*_bound`` functions never count fewer
    lines than the pattern matches, so the answers are those of the patterns alone.
    """
    lines = _sample(body)
    if len(lines) < 2:
        return "text"
    n = len(lines)
    if _jsonl(lines):
        return "jsonl"
    firsts = "".join(map(itemgetter(0), lines))  # sample lines are not blank
    joined = "\n".join(lines)
    if (joined.startswith("@@") or "\n@@" in joined) and _at_least(lines, _DIFF.match, 2):
        return "diff"
    if _report_bound(firsts, joined) >= max(3, 0.2 * n) and _at_least(lines, _REPORT.match, max(3, 0.2 * n)):
        return "report"
    if _log_bound(firsts, joined) >= 0.6 * n and _at_least(lines, _TIMESTAMP.match, 0.6 * n):
        return "log"
    if _FIXED_HEADER.match(lines[0]) and n >= 3 and _fixed_columns(lines[0]) and "," not in lines[0]:
        return "fixed"
    hashes = firsts.count("#")
    if sum(1 for ln in lines[:60] if "<" in ln and _MARKUP_TAG.search(ln)) >= 0.2 * min(n, 60) or (
        hashes >= 3 and not lines[0].startswith("#!") and _headings(body) >= 0.6 * hashes
    ):
        return "markup"
    if _starting(firsts, _LISTING_STARTS) >= 0.6 * n and _at_least(lines, _LISTING.match, 0.6 * n):
        return "listing"
    if _grep_bound(firsts) >= 0.6 * n and _at_least(lines, _GREP.match, 0.6 * n):
        return "grep"
    if _at_least(lines, lambda ln: bool(_PATH.match(ln.strip())) and ("/" in ln or "." in ln), 0.8 * n):
        return "paths"
    code_lines = [text for text in _unnumbered(lines) if text.strip()] if _numbered(lines) else lines
    # counted up to two, which is all the rule asks (is_definition inline: most lines are asked)
    defs = len(list(islice((ln for ln in code_lines if ln.lstrip().startswith(_DEF_WORDS) and _DEF.match(ln)), 2)))
    if (defs == 2 or (defs == 1 and len(code_lines) <= 12)) and _at_least(code_lines, _CODEISH.match, 0.3 * len(code_lines)):
        return "code"
    if n >= 3 and _table_sep(lines) is not None:
        return "table"
    if mentions_trouble(joined):  # n >= 2: one such line is enough
        return "log"
    if n >= 8 and sum(1 for ln in lines if len(ln) < 160) >= 0.9 * n and not _prose(lines):
        return "log"
    return "text"


_HEADING = re.compile(r"#{1,6} \S")
_TOP_LEVEL_CODE = re.compile(r"(?:import\s+[\w.]|from\s+[\w.]+\s+import\s|(?:async\s+)?def\s+\w+\s*\(|class\s+\w+\s*[(:])")


def _headings(body: str) -> int:
    """How many of the first lines of ``body`` are markdown headings (``## Usage``); 0 when the
    text is source code.

    ``#`` also opens a comment in Python, shell, Ruby or YAML. A comment block (a license header,
    a script's notes) is a run of ``#`` lines, where a top-level heading stands apart from the
    headings around it by its level or by text between them; and source code has top-level imports and
    definitions outside fenced blocks, which a document does not.
    """
    raw = [line[:_CLIP] for line in body[:200_000].split("\n", _SAMPLE_LINES)[:_SAMPLE_LINES]]
    marks = [line.split(" ", 1)[0] if line.startswith("#") else "" for line in raw]
    fenced, code, headings = False, 0, 0
    for at, line in enumerate(raw):
        if line.startswith(("```", "~~~")):
            fenced = not fenced
        elif fenced:
            continue
        elif _HEADING.match(line):
            # a run of ``#`` lines is a comment block; a run of ``###`` lines, short sections
            alone = (at == 0 or marks[at - 1] != "#") and (at + 1 == len(raw) or marks[at + 1] != "#")
            headings += marks[at] != "#" or alone
        elif _TOP_LEVEL_CODE.match(line):
            code += 1
            if code == 2:
                return 0
    return headings


def _at_least(lines: list[str], test: Callable[[str], object], need: float) -> bool:
    """Whether at least ``need`` of ``lines`` pass ``test``, read only until that is known."""
    hits, spare = 0, len(lines) - need  # lines that may fail with the answer still yes
    for line in lines:
        if test(line):
            hits += 1
            if hits >= need:
                return True
        else:
            spare -= 1
            if spare < 0:
                return False
    return hits >= need


def _prose(lines: list[str]) -> bool:
    words = sum(len(ln.split()) for ln in lines)
    sentences = sum(ln.count(". ") + ln.rstrip().endswith(".") for ln in lines)
    return words > 40 and sentences * 25 >= words * 0.5


def is_rule(line: str) -> bool:
    """Whether ``line`` is a rule of a drawn table: ``+----+---+``, ``---+---``, ``|---|:--:|``."""
    stripped = line.strip()
    return ("---" in stripped or "===" in stripped) and set(stripped) <= _RULE_CHARS


_RULE_CHARS = frozenset("+-=|: ")


def _grid(head: list[str]) -> bool:
    """Whether ``head`` is a result grid with drawn rules (``mysql``, ``psql``, ``tabulate``):
    every line but a rule or a closing ``(40 rows)`` has the same number of ``|``. Its cells
    may be padded with spaces at the line's start (``psql``)."""
    cells = [ln for ln in head if not is_rule(ln)]
    if len(cells) == len(head) or len(cells) < 2:
        return False
    counts = [ln.count("|") for ln in cells if "|" in ln]
    return len(counts) >= len(cells) - 1 and counts[0] >= 1 and sum(1 for c in counts if c == counts[0]) >= 0.9 * len(counts)


def _table_sep(lines: list[str]) -> str | None:
    head = lines[:50]
    if _grid(head):
        return "|"
    if sum(1 for ln in head if ln[:1].isspace()) * 5 > len(head):  # indented: code, not a table
        return None
    for sep in ("\t", "|", ","):
        counts = [ln.count(sep) for ln in head]
        if counts[0] >= 1 and sum(1 for c in counts if c == counts[0]) >= 0.9 * len(counts):
            if sep == "," and (any(len(ln) > 400 for ln in head) or _sentences(head)):
                return None
            return sep
    return None


def _sentences(head: list[str]) -> bool:
    """Whether comma-separated ``head`` lines are sentences, each with a comma, rather than CSV:
    the lines read as prose and the first holds a sentence break or a cell of over five words
    (a header names columns; a survey's question may be long, but its answers are not prose)."""
    cells = head[0].split(",")
    return _prose(head) and any(". " in cell or len(cell.split()) > 5 for cell in cells)


def _fixed_columns(header: str) -> list[tuple[str, int]]:
    """Column names of a fixed-width header and where each starts."""
    return [(m.group(0).strip(), m.start()) for m in re.finditer(r"\S+(?: \S+)?(?=\s{2,}|\s*$)", header.rstrip())]


def fixed_rows(body: str) -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """Header and rows of a fixed-width table (``kubectl get``, ``docker ps``): cells are split
    at the header's column starts; each row with its 0-based line number."""
    all_lines = body.split("\n")
    start = next((i for i, ln in enumerate(all_lines) if ln.strip()), 0)
    columns = _fixed_columns(all_lines[start]) if all_lines else []
    names = [c for c, _ in columns]
    rows: list[tuple[int, dict[str, str]]] = []
    for number in range(start + 1, len(all_lines)):
        line = all_lines[number]
        if not line.strip():
            continue
        cells = re.split(r"\s{2,}", line.strip())
        if len(cells) != len(columns):  # a cell with single spaces: cut at the header's starts
            cells = [line[pos : columns[i + 1][1] if i + 1 < len(columns) else None].strip() for i, (_, pos) in enumerate(columns)]
        rows.append((number, dict(zip(names, cells, strict=False))))
    return names, rows


def strip_numbering(body: str) -> list[tuple[int, str]]:
    """``(line number, text)`` pairs; numbers printed by ``nl``/``cat -n``/``grep -n`` are used
    when most lines carry one, else positions in ``body`` (1-based)."""
    lines = body.split("\n")
    return _with_numbers(lines) if _numbered(lines) else list(enumerate(lines, 1))


def _with_numbers(lines: list[str]) -> list[tuple[int, str]]:
    """``(printed number, text)`` of numbered ``lines``; a line without one has its position."""
    out = []
    for i, ln in enumerate(lines):
        match = _NUMBERED.match(ln)
        out.append((int(match.group(1)), match.group(2)) if match else (i + 1, ln))
    return out


def _numbered(lines: list[str]) -> bool:
    """Whether most of the first non-blank ``lines`` (at least four in five) carry a number."""
    sample = [ln for ln in lines[:_SAMPLE_LINES] if ln.strip()]
    return bool(sample) and _at_least(sample, _NUMBERED.match, 0.8 * len(sample))


def _unnumbered(lines: list[str]) -> list[str]:
    """``lines`` without the numbers :data:`_NUMBERED` finds at their starts."""
    return [match.group(2) if (match := _NUMBERED.match(ln)) else ln for ln in lines]


def is_definition(line: str) -> bool:
    """Whether ``line`` opens a definition (see :data:`_DEF`)."""
    return line.lstrip().startswith(_DEF_WORDS) and _DEF.match(line) is not None


def code_outline(body: str) -> list[tuple[int, str]]:
    """Definitions (functions, classes, ...) with their line numbers, in order."""
    lines = body.split("\n")
    # is_definition inline: it is asked of every line of the output
    return [
        (number, text.rstrip().rstrip("{").rstrip())
        for number, text in (_with_numbers(lines) if _numbered(lines) else enumerate(lines, 1))
        if text.lstrip().startswith(_DEF_WORDS) and _DEF.match(text)
    ]


def grep_matches(body: str) -> tuple[dict[str, list[str]], int]:
    """Line numbers per file of ``grep -n``-style output, and the number of matches (context
    lines of ``grep -C``, ``path-12-…``, are not matches)."""
    by_file: dict[str, dict[str, None]] = {}  # a file's line numbers, once each, in order
    total = 0
    for full in body.split("\n"):
        line = full[:_CLIP]
        match = _GREP.match(line)
        if not match:
            continue
        path = match.group("path") or match.group("file")
        numbers = by_file.setdefault(path, {})
        if match.group("line") and line[match.end("line")] != ":":
            continue  # ``path-12-``: a context line of -A/-B/-C, not a match
        total += 1
        if match.group("line"):
            numbers[match.group("line")] = None
    return {path: list(numbers) for path, numbers in by_file.items()}, total


def listing_names(body: str) -> list[str]:
    """Entry names of ``ls -l`` output (directories end with ``/``)."""
    names = []
    for line in body.split("\n"):
        match = _LISTING.match(line)
        if match and match.group(1) not in (".", ".."):
            names.append(match.group(1) + ("/" if line.startswith("d") else ""))
    return names


def table_rows(body: str) -> tuple[list[str], list[list[str]], str, list[int]]:
    """Header, rows and separator of a CSV/TSV/pipe table, and the 0-based line of ``body`` each
    row starts on (blank lines, a pipe table's rule lines and the header are not rows)."""
    numbered = [(i, ln) for i, ln in enumerate(body.split("\n")) if ln.strip()]
    sep = _table_sep([ln for _, ln in numbered]) or ","
    rows: list[list[str]] = []
    starts: list[int] = []
    if sep == "|":
        for i, ln in numbered:
            if "|" in ln and not set(ln.strip()) <= _RULE_CHARS:  # nor a rule, nor a grid's ``(40 rows)``
                rows.append([c.strip() for c in ln.strip().strip("|").split("|")])
                starts.append(i)
    else:
        reader = csv.reader((ln for _, ln in numbered), delimiter=sep)
        try:
            while True:
                at = reader.line_num  # lines read so far: the next row starts on the next one
                try:
                    row = next(reader)
                except StopIteration:
                    break
                rows.append(list(row))
                starts.append(numbered[at][0])
        except csv.Error:  # a cell over csv's field size limit (128 KB): a row per line instead
            rows = [ln.split(sep) for _, ln in numbered]
            starts = [i for i, _ in numbered]
    if not rows:
        return [], [], sep, []
    return rows[0], rows[1:], " | " if sep == "|" else sep, starts[1:]
