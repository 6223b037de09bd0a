"""Shape-aware, zero-LLM summaries of tool outputs.

Every summary keeps what an agent acts on: identifiers (ids, paths, URLs), counts, exit status,
every error or warning line, and where to look next. Work is linear in the output's size, so a
10 MB output is summarized in well under a second.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from ctxplugin._text_shapes import detect_text_shape, listing_names, without_escapes
from ctxplugin._text_words import word_starts
from ctxplugin.cas._budget import CountedOnce, Lines
from ctxplugin.cas._json_summary import (
    record_list,
    summarize_array,
    summarize_object,
    summarize_records_array,
    summarize_wrapped,
)
from ctxplugin.cas._records import worth_a_record_set
from ctxplugin.cas._report_summary import summarize_report
from ctxplugin.cas._text_summary import (
    add_error_lines,
    add_identifiers,
    summarize_code,
    summarize_diff,
    summarize_fixed,
    summarize_grep,
    summarize_jsonl,
    summarize_log,
    summarize_markup,
    summarize_table,
    summarize_text,
)
from ctxplugin.tokens import TokenCounter

Shape = Literal[
    "json", "command", "log", "code", "grep", "paths", "listing", "table", "jsonl", "fixed", "report", "diff", "markup", "text"
]

_WRAPPED = re.compile(r"\A\s*<returncode>\s*(-?\d+)\s*</returncode>\s*<output>\n?")
_EXIT = re.compile(r"(?i)(?:exit(?:ed)?(?: with)? (?:code|status)|return ?code|exit_code|status code)[\s:=]+(-?\d+)")
_EXIT_WORDS = ("exit", "return", "status code")
"""Every :data:`_EXIT` match starts with one of these (in any case)."""


def _exit_status(window: str) -> str | None:
    """The exit code ``window`` states: its first :data:`_EXIT` match.

    In an ASCII window a match can only start where one of :data:`_EXIT_WORDS` does once
    lower-cased, so the pattern is tried there alone (found by ``str.find``), in order, rather
    than case-insensitively at every position. Outside ASCII a few characters (``ſ``, ``ı``)
    match a letter of the pattern without lower-casing to it: the pattern searches alone.
    """
    if not window.isascii():
        found = _EXIT.search(window)
        return found.group(1) if found else None
    for start in sorted(word_starts(window.lower(), _EXIT_WORDS)):
        found = _EXIT.match(window, start)
        if found:
            return found.group(1)
    return None


@dataclass(frozen=True)
class Summary:
    """A summary body and the shape it was made for (``label`` is shown next to the ref)."""

    shape: Shape
    label: str
    text: str


def summarize(
    text: str,
    parsed: tuple[bool, Any],
    counter: TokenCounter,
    budget: int,
    *,
    is_error: bool = False,
    error_budget: int | None = None,
) -> Summary:
    """Summarize ``text`` in about ``budget`` tokens; error lines have their own allowance.

    Args:
        text: the output.
        parsed: ``(is_json, value)`` from :func:`ctxplugin.cas._canon.parse_json`.
        counter: token counter for the budget.
        budget: tokens for the summary body.
        is_error: the tool reported failure; error lines are then kept ahead of everything else.
        error_budget: tokens error lines may take when the output failed (exit status not 0 or
            ``is_error``); twice ``budget`` when None. Past it, the rest are counted.
    """
    is_json, value = parsed
    counter = CountedOnce(counter)  # a line moved between budgets is counted once
    if is_json and isinstance(value, dict):
        label = f"JSON object, {len(value)} keys"
        inner = record_list(value)
        if inner is not None:
            return Summary("json", label, summarize_wrapped(value, inner, counter, budget).text())
        return Summary("json", label, summarize_object(value, counter, budget).text())
    if is_json and isinstance(value, list):
        label = f"JSON array, {len(value)} items"
        if worth_a_record_set(value):
            return Summary("json", label, summarize_records_array(value, counter, budget).text())
        return Summary("json", label, summarize_array(value, counter, budget).text())
    exit_code: str | None = None
    # read as a terminal shows it: colours hide the words and lines each shape is known by
    text = without_escapes(text)
    body = text
    wrapped = _WRAPPED.match(text)
    if wrapped:
        exit_code = wrapped.group(1)
        body = text[wrapped.end() :]
        tail = body.rstrip()
        if tail.endswith("</output>"):
            body = tail[: -len("</output>")]
    else:
        exit_code = _exit_status(text[:2000])
        if exit_code is None:
            exit_code = _exit_status(text[-2000:])
    shape = detect_text_shape(body)
    if is_error or (exit_code not in (None, "0") and shape not in ("code", "report")):
        shape = "log"
    lines = Lines(counter, budget)
    n_lines = body.count("\n") + (0 if body.endswith("\n") or not body else 1)
    prefix = "command output" if wrapped or exit_code is not None else ""
    status = f"exit {exit_code}, " if exit_code is not None else ""
    if shape == "log" or (prefix and shape == "text"):
        label = prefix or "log"
        lines.add(f"{status}{n_lines} lines")
        failed = is_error or exit_code not in (None, "0")
        summarize_log(body, lines, error_budget=(error_budget or budget * 2) if failed else None)
    elif shape == "code":
        label = "source code" if not prefix else "command output (source code)"
        lines.add(f"{status}{n_lines} lines; outline (line: definition):")
        summarize_code(body, lines)
        add_identifiers(body, lines)
    elif shape == "grep":
        label = "search matches" if not prefix else "command output (search matches)"
        if status:
            lines.add(status.rstrip(", "))
        summarize_grep(body, lines)
    elif shape in ("paths", "listing"):
        label = "file list" if not prefix else "command output (file list)"
        names = listing_names(body) if shape == "listing" else [ln.strip() for ln in body.splitlines() if ln.strip()]
        lines.add(f"{status}{len(names)} entries")
        lines.add_list("", names, more_hint=" (expand_ref offset/limit)")
        add_error_lines(body, lines)
    elif shape in ("table", "fixed", "jsonl"):
        label = {"table": "table", "fixed": "table", "jsonl": "JSON Lines"}[shape]
        label = label if not prefix else f"command output ({label})"
        if status:
            lines.add(status.rstrip(", "))
        # rows are labelled with the line expand_ref's offset reads them at: past the wrapper's
        first_line = text.count("\n", 0, wrapped.end()) if wrapped else 0
        {"table": summarize_table, "fixed": summarize_fixed, "jsonl": summarize_jsonl}[shape](body, lines, first_line)
    elif shape == "report":
        label = "test report" if not prefix else "command output (test report)"
        summarize_report(body, lines, f"{status}{n_lines} lines")
    elif shape == "diff":
        label = "diff" if not prefix else "command output (diff)"
        if status:
            lines.add(status.rstrip(", "))
        summarize_diff(body, lines)
    elif shape == "markup":
        label = "document" if not prefix else "command output (document)"
        if status:
            lines.add(status.rstrip(", "))
        summarize_markup(body, lines)
    else:
        label = "text" if not prefix else "command output"
        if status:
            lines.add(status.rstrip(", "))
        summarize_text(body, lines)
    return Summary(shape if shape != "text" or not prefix else "command", label, lines.text())
