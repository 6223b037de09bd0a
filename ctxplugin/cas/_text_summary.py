"""Zero-LLM summaries of text outputs, one per shape: what each kind of output holds that an agent
acts on (error lines, outlines, matches, rows, changed files), written into a budgeted
:class:`~ctxplugin.cas._budget.Lines`. Test reports have theirs in :mod:`._report_summary`."""

from __future__ import annotations

import csv
import re

from ctxplugin._text_shapes import (
    code_outline,
    fixed_rows,
    grep_matches,
    strip_numbering,
    table_rows,
)
from ctxplugin._text_words import KEYWORD_CAP, identifiers_in, keyword_lines, matched_at_words
from ctxplugin.cas._budget import Lines, clip
from ctxplugin.cas._canon import parse_json
from ctxplugin.cas._records import RecordSet, summarize_records

_SENTENCE = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(\[])")
_IDENT_WINDOW = 64_000
_TABLE_PARSED = 200_000
"""Characters of a table or of JSON Lines parsed into records; past them lines are counted only."""


def summarize_log(body: str, lines: Lines, *, error_budget: int | None) -> None:
    """Every error/warning line, then the tail, then the head, printed in line order with
    their line numbers; identifiers from the rest follow."""
    all_lines = body.split("\n")
    while all_lines and not all_lines[-1].strip():
        all_lines.pop()
    picked: dict[int, str] = {}
    # error lines get their own allowance when the tool failed; otherwise most of the budget
    errors = Lines(lines.counter, error_budget if error_budget is not None else max(lines.left - 25, 20))
    repeats: dict[str, int] = {}
    hits = keyword_lines(body)
    for _, line in hits:
        repeats[line] = repeats.get(line, 0) + 1
    # past the cap keyword_lines stops looking: a line's count is then taken from the whole text
    counted = len(hits) < KEYWORD_CAP
    placed: set[str] = set()
    # exception lines first, then where the traceback passed through the project's code, then
    # every other error or warning line in order
    exceptions = [h for h in hits if _EXCEPTION.match(h[1])]
    # errors and failures ahead of warnings when not all fit; they are printed in line order
    others = sorted((h for h in hits if not _EXCEPTION.match(h[1])), key=lambda h: 0 if _severe(h[1]) else 1)

    def place(group: list[tuple[int, str]]) -> None:
        for number, line in group:
            if line in placed:
                continue
            if not counted and repeats[line] > 1:
                repeats[line] = all_lines.count(line)
            note = f" (×{repeats[line]:,})" if repeats[line] > 1 else ""
            entry = f"L{number + 1}: {clip(line.rstrip(), 240)}{note}"
            if not errors.add(entry):
                return
            placed.add(line)
            picked[number] = entry

    place(exceptions)
    frame_line = Lines(lines.counter, max(errors.budget // 3, 40))
    shown = "\n".join(picked.values())
    frame_line.add_list("traceback frames: ", [f for f in _frames(body) if f.rsplit(":", 1)[0] not in shown], sep=" > ")
    errors.used += frame_line.used
    place(others)
    rest = Lines(lines.counter, max(0, lines.left - errors.used))
    edge = 3 if len(all_lines) > 6 else len(all_lines)
    order = [*range(len(all_lines) - 1, len(all_lines) - 1 - edge, -1), *range(edge)] if len(all_lines) > 6 else list(range(edge))
    for number in order:
        if number in picked or number < 0 or not all_lines[number].strip() or all_lines[number] in placed:
            continue  # a line shown with its count is not shown again
        entry = f"L{number + 1}: {clip(all_lines[number].rstrip(), 200)}"
        if rest.add(entry):
            picked[number] = entry
    previous = -1
    for number in sorted(picked):
        if previous >= 0 and number > previous + 1:
            lines.add("…", force=True)
        lines.add(picked[number], force=True)
        previous = number
    missing = len({line for _, line in hits}) - len(placed)
    if missing > 0:
        lines.add(f"… {missing} more error/warning lines (expand_ref pattern='error')", force=True)
    if frame_line.lines:
        lines.add(frame_line.lines[0], force=True)
    add_identifiers(body, lines)


_SEVERE = re.compile(r"(?i)\b(?:error|fatal|critical|panic|fail(?:ed|ure)?|exception|traceback|crash\w*|killed|denied)\b|[a-z](?:Error|Exception)\b")
_SEVERE_WORDS = ("error", "fatal", "critical", "panic", "fail", "exception", "traceback", "crash", "killed", "denied")


def _severe(line: str) -> bool:
    """Whether ``line`` has an error word (:data:`_SEVERE`, case-insensitive throughout). In ASCII
    a match starts where one of :data:`_SEVERE_WORDS` does once lower-cased, or a character before
    an ``error``/``exception``: tried there alone (see :func:`matched_at_words`)."""
    if not line.isascii():
        return _SEVERE.search(line) is not None
    low = line.lower()
    return matched_at_words(_SEVERE, line, low, _SEVERE_WORDS) or matched_at_words(_SEVERE, line, low, ("error", "exception"), 1)
_EXCEPTION = re.compile(r"^[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b")
_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def _frames(body: str) -> list[str]:
    """``path:line`` of traceback frames outside installed packages, innermost first."""
    window = body if len(body) <= 2 * _IDENT_WINDOW else body[:_IDENT_WINDOW] + body[-_IDENT_WINDOW:]
    if "Traceback" not in window:
        return []
    seen: dict[str, None] = {}
    for path, line, _ in reversed(_FRAME.findall(window)):
        if "site-packages" not in path and "/lib/python" not in path and "/bin/" not in path:
            seen.setdefault(f"{path}:{line}", None)
    return list(seen)


def add_error_lines(body: str, lines: Lines) -> None:
    for number, line in keyword_lines(body)[:20]:
        lines.add(f"L{number + 1}: {clip(line.strip(), 240)}", force=True)


def summarize_code(body: str, lines: Lines) -> None:
    outline = code_outline(body)
    placed = 0
    for number, definition in outline:
        if not lines.add(f"{number}: {clip(definition, 120)}"):
            break
        placed += 1
    if placed < len(outline):
        lines.add(f"… {len(outline) - placed} more definitions (expand_ref pattern='def ')", force=True)
    if not outline:
        for line in strip_numbering(body)[:5]:
            lines.add(clip(line[1], 160))


def summarize_grep(body: str, lines: Lines) -> None:
    by_file, total = grep_matches(body)
    lines.add(f"{total} matches in {len(by_file)} files")
    placed = 0
    for path, numbers in by_file.items():
        shown = ", ".join(numbers[:12]) + (f", …+{len(numbers) - 12}" if len(numbers) > 12 else "")
        entry = f"{path}: {shown}" if shown else path
        if not lines.add(entry):
            break
        placed += 1
    if placed < len(by_file):
        rest = list(by_file)[placed:]
        lines.add_list("also in: ", rest)


def summarize_table(body: str, lines: Lines, first_line: int = 0) -> None:
    """Rows × columns, column names, then the rare rows or else the first rows. Rows are
    labelled with their line in the stored output, whose line ``first_line`` is ``body``'s first.

    A table of more than :data:`_TABLE_PARSED` characters is parsed up to the last line break
    before them: its rows are all counted (:func:`table_row_count`), its value counts and rare
    rows are those of the parsed rows, which the summary says."""
    part = _parsed_part(body)
    header, rows, sep, starts = table_rows(part)
    total = len(rows) if part is body else table_row_count(body, sep)
    positions = [first_line + n for n in starts]
    lines.add(f"{total} rows × {len(header)} columns")
    lines.add_list("columns: ", header)
    if total > len(rows):
        lines.add(f"values counted and rare rows found in the first {len(rows):,} rows only", force=True)
    records = [dict(zip(header, row, strict=False)) for row in rows]
    rs = RecordSet(records, lambda i: sep.join(rows[i]), "rows", positions)
    if len(records) >= 8 and rs.rare:
        summarize_records(rs, lines, head=False)
        return
    shown = 0
    for row in rows:
        if not lines.add(clip(sep.join(row), 200)):
            break
        shown += 1
    if shown < total:
        lines.add(f"… {total - shown} more rows (expand_ref offset={positions[shown] if shown < len(rows) else first_line})", force=True)


_BLANK_LINE = re.compile(r"(?m)^[^\S\n]*$")
_PIPE_LINE = re.compile(r"(?m)^[^\n|]*\|")
_RULE_LINE = re.compile(r"(?m)^[^\S\n]*[-+=|: ]*\|[-+=|: ]*[^\S\n]*$")


def table_row_count(body: str, sep: str) -> int:
    """How many rows :func:`~ctxplugin._text_shapes.table_rows` finds in ``body`` (separator
    ``sep`` as it returns it), counted without building them: lines holding a ``|`` less rule
    lines for a pipe table; non-blank lines when no cell is quoted; else the rows csv reads."""
    if sep == " | ":
        found = len(_PIPE_LINE.findall(body)) - len(_RULE_LINE.findall(body))
    elif '"' not in body:
        found = filled_lines(body)
    else:
        try:
            found = sum(1 for _ in csv.reader((ln for ln in body.split("\n") if ln.strip()), delimiter=sep))
        except csv.Error:  # as table_rows: a row per line
            found = filled_lines(body)
    return max(found - 1, 0)


def _parsed_part(body: str) -> str:
    """``body``, or its lines up to :data:`_TABLE_PARSED` characters when it is longer."""
    if len(body) <= _TABLE_PARSED:
        return body
    cut = body.rfind("\n", 0, _TABLE_PARSED)
    return body[:cut] if cut > 0 else body


def filled_lines(body: str) -> int:
    """How many lines of ``body`` (split at ``\\n``) are not blank."""
    return body.count("\n") + 1 - len(_BLANK_LINE.findall(body))


def summarize_fixed(body: str, lines: Lines, first_line: int = 0) -> None:
    """A fixed-width table (``kubectl get``, ``docker ps``) as a record set; see :func:`summarize_table`."""
    header, numbered = fixed_rows(body)
    all_lines = body.split("\n")
    records = [r for _, r in numbered]
    lines.add(f"{len(records)} rows × {len(header)} columns")
    lines.add_list("columns: ", header)
    positions = [first_line + n for n, _ in numbered]
    rs = RecordSet(records, lambda i: " ".join(all_lines[numbered[i][0]].split()), "rows", positions)
    summarize_records(rs, lines, head=False)


def summarize_jsonl(body: str, lines: Lines, first_line: int = 0) -> None:
    """JSON Lines as a record set; see :func:`summarize_table`."""
    part = _parsed_part(body)  # parsing is the cost here; the rest stays searchable
    numbered = [(i, ln) for i, ln in enumerate(part.split("\n")) if ln.strip()]
    total = filled_lines(body) if part is not body else len(numbered)
    if total > len(numbered):
        lines.add(f"{total:,} lines; the first {len(numbered):,} are summarized", force=True)
    raw = [ln for _, ln in numbered]
    values = [parse_json(ln) for ln in raw]
    records = [v if ok and isinstance(v, dict) else {"line": ln} for (ok, v), ln in zip(values, raw, strict=True)]
    bad = sum(1 for ok, v in values if not (ok and isinstance(v, dict)))
    if bad:
        lines.add(f"{bad} lines are not JSON objects")
    rs = RecordSet(records, lambda i: raw[i].strip(), "lines", [first_line + n for n, _ in numbered])
    summarize_records(rs, lines, prefix="JSON Lines: ")


def summarize_text(body: str, lines: Lines) -> None:
    """Lead sentences (about half the budget), then identifiers."""
    lead = " ".join(body[:4000].split())
    sentences = _SENTENCE.split(lead)
    half = Lines(lines.counter, lines.budget // 2)
    for sentence in sentences[:6]:
        if not half.add(clip(sentence, 300)):
            if not half.lines:
                half.add(clip(sentence, 160), force=True)
            break
    if half.lines:
        lines.add(" ".join(half.lines), force=True)
    _errors_only_new(body, lines)
    add_identifiers(body, lines)


def _errors_only_new(body: str, lines: Lines) -> None:
    shown = "\n".join(lines.lines)
    for number, line in keyword_lines(body)[:10]:
        if line.strip() and line.strip()[:60] not in shown:
            lines.add(f"L{number + 1}: {clip(line.strip(), 240)}")


def add_identifiers(body: str, lines: Lines) -> None:
    if lines.left <= 8:  # no room for them: not looked for
        return
    window = body if len(body) <= 2 * _IDENT_WINDOW else body[:_IDENT_WINDOW] + "\n" + body[-_IDENT_WINDOW:]
    shown = "\n".join(lines.lines)
    found = [i for i in identifiers_in(window) if i not in shown]
    if found:
        lines.add_list("ids: ", found)


_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_DIFF_FILE = re.compile(r"^diff --git a/(\S+) b/(\S+)|^\+\+\+ b/(\S+)|^--- a/(\S+)")


def summarize_diff(body: str, lines: Lines) -> None:
    """Files with lines added/removed; new, deleted and renamed files first; error lines."""
    files: dict[str, list[int]] = {}
    marks: dict[str, str] = {}
    current = ""
    old_left = new_left = 0  # lines of the current hunk still to come, from its @@ header
    for line in body.split("\n"):
        kind = line[:1]
        if (old_left > 0 or new_left > 0) and kind in ("-", "+", " ", "", "\\") and current:
            # inside a hunk a line is what its first character says, even "--- " or "+++ "
            if kind == "+":
                files[current][0] += 1
            elif kind == "-":
                files[current][1] += 1
            if kind != "\\":  # "\ No newline at end of file" is no line of either side
                old_left -= kind != "+"
                new_left -= kind != "-"
            continue
        if hunk := _HUNK.match(line):
            old_left, new_left = int(hunk.group(1) or 1), int(hunk.group(2) or 1)
            continue
        old_left = new_left = 0
        match = _DIFF_FILE.match(line)
        if match:
            name = next(g for g in match.groups() if g)
            if line.startswith("diff --git") or name not in files:
                current = match.group(2) or name
                files.setdefault(current, [0, 0])
            continue
        if line.startswith(("new file mode", "deleted file mode", "rename from", "Binary files")):
            marks[current] = line.split(" mode")[0].split(" from")[0].replace("Binary files", "binary")
        elif line.startswith("+") and not line.startswith("+++") and current:
            files[current][0] += 1
        elif line.startswith("-") and not line.startswith("---") and current:
            files[current][1] += 1
    added = sum(a for a, _ in files.values())
    removed = sum(r for _, r in files.values())
    hint = "… expand_ref pattern='<file name>' returns a file's hunks"
    lines.budget -= lines.cost(hint)
    lines.add(f"{len(files)} files changed, +{added} -{removed}", force=True)
    for name, mark in marks.items():
        lines.add(f"{mark}: {name}", force=True)
    lines.add_list("", [f"{n} +{a} -{r}" for n, (a, r) in files.items() if n not in marks], more_hint=" (expand_ref pattern='diff --git')")
    _errors_only_new(body, lines)
    lines.budget += lines.cost(hint)
    lines.add(hint, force=True)


_TAG = re.compile(r"<[^>]{0,400}>")
_MD_TABLE = re.compile(r"(?m)^\|?([^\n|]*\|[^\n]*)\n\|?[ \t]*:?-{3,}:?[ \t]*(?:\|[ \t]*:?-{3,}:?[ \t]*)+\|?[ \t]*$((?:\n\|[^\n]*)*)")


def markdown_tables(window: str) -> list[tuple[list[str], int]]:
    """The column names and row count of each markdown pipe table in ``window``."""
    return [
        ([c.strip() for c in m.group(1).strip().strip("|").split("|")], m.group(2).count("\n"))
        for m in _MD_TABLE.finditer(window)
    ]
_TITLE = re.compile(r"(?is)<title[^>]*>(.{0,400}?)</title>|(?m:^#[ \t]+([^\n]+))")
_HEADING = re.compile(r"(?is)<h([1-3])[^>]*>(.{0,400}?)</h\1>|(?m:^(#{1,3})[ \t]+([^\n]+))")


def _blank(markup: re.Match[str]) -> str:
    """A space for ``markup``, with the line breaks it spans."""
    return " " + "\n" * markup.group(0).count("\n")


def summarize_markup(body: str, lines: Lines) -> None:
    """Title, outline of headings, every error/warning sentence, stripped of markup."""
    window = body[:400_000]
    # markup goes, its line breaks stay: an error line keeps the number it has in the output
    text = _TAG.sub(_blank, re.sub(r"(?is)<(script|style)\b.*?</\1>", _blank, window))
    title = _TITLE.search(window)
    if title:
        lines.add("title: " + clip(" ".join(_TAG.sub(" ", title.group(1) or title.group(2)).split()), 160), force=True)
    headings = [" ".join(_TAG.sub(" ", m.group(2) or m.group(4)).split()) for m in _HEADING.finditer(window)]
    warnings = [(n, " ".join(ln.split())) for n, ln in keyword_lines(text) if ln.strip()]
    for number, line in warnings[:12]:
        if not lines.add(f"L{number + 1}: {clip(line, 200)}"):
            break
    lines.add_list("sections: ", [h for h in headings if h], more_hint=" (expand_ref pattern=...)")
    lead = next((ln for ln in map(" ".join, map(str.split, text.split("\n"))) if _sentence(ln)), "")
    if lead:
        lines.add("text: " + clip(lead, 240))
    for columns, rows in markdown_tables(window)[:3]:
        lines.add_list(f"table ({rows} rows): ", columns)
    add_identifiers(text, lines)


def _sentence(line: str) -> bool:
    """Whether ``line`` (markup stripped) reads as a sentence of the document, not a heading,
    a menu or a table row."""
    return len(line.split()) >= 8 and (". " in line or line.endswith(".")) and line[:1] not in "#|"


__all__ = [
    "add_error_lines",
    "add_identifiers",
    "filled_lines",
    "summarize_code",
    "summarize_diff",
    "summarize_fixed",
    "summarize_grep",
    "summarize_jsonl",
    "summarize_log",
    "summarize_markup",
    "summarize_table",
    "summarize_text",
    "table_row_count",
]
