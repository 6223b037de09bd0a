"""The summary of a test report (pytest, go test, cargo test, unittest): totals, the failing
tests, error and warning lines, the head and the tail."""

from __future__ import annotations

import re

from ctxplugin._text_words import keyword_lines, whole_words
from ctxplugin.cas._budget import Lines, clip

_FAILED_TEST = re.compile(
    r"^(?:FAILED|ERROR) (\S+::\S+)|^(\S+::\S+?)(?: \S+)* (?:FAILED|ERROR)\b|^--- FAIL: (\S+)|^FAIL\s+(\S+)|"
    r"^test (\S+) \.\.\. (?:FAILED|ERROR)|^_{3,} (\S.*?) _{3,}$|"
    r"^(?:FAIL|ERROR): (test\w* \([\w.]+\))|^(test\w* \([\w.]+\)) \.\.\. (?:FAIL|ERROR)$"
)
_REPORT_TOTAL = re.compile(r"(?i)^=*\s*(?:\d+ (?:passed|failed|errors?|skipped|xfailed|xpassed|warnings?|deselected)\b.*?)\s*=*$|^(?:ok|FAIL)\s*$|^Ran \d+ tests? in|^(?:FAILED|OK) \(")
_OUTCOME_WORDS = ("PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS")
_OUTCOME = re.compile(r"\b(?:" + "|".join(_OUTCOME_WORDS) + r")\b")


def summarize_report(body: str, lines: Lines, status: str) -> None:
    """Totals, every failing test's name, error and warning lines, then the head and tail."""
    all_lines = body.split("\n")
    failed: dict[str, None] = {}
    for line in all_lines:
        match = _FAILED_TEST.match(line.strip())
        if match:
            failed.setdefault(next(g for g in match.groups() if g).split(" - ")[0], None)
    # unittest marks a failing test FAIL or ERROR, never FAILED: a pattern that finds them
    word = "FAIL" if any(name.endswith(")") for name in failed) else "FAILED"
    hint = f"… expand_ref pattern='{word}' (or a test name) returns failing tests with context"
    lines.budget -= lines.cost(hint)
    totals = [ln.strip().strip("=").strip() for ln in all_lines if _REPORT_TOTAL.match(ln.strip())]
    if len(totals) > 1 and totals[-2].startswith("Ran ") and totals[-1].startswith(("OK", "FAILED (")):
        totals.append(f"{totals[-2]}; {totals[-1]}")  # unittest: "Ran 72 tests in 0.1s; FAILED (failures=1)"
    outcomes = whole_words(_OUTCOME, body[:2_000_000], _OUTCOME_WORDS)
    counts = ", ".join(f"{o.lower()} {outcomes.count(o)}" for o in dict.fromkeys(outcomes))
    lines.add(status + (f"; {totals[-1]}" if totals else f"; {counts}" if counts else ""), force=True)
    # one name per test: "tests/a.py::test_x" covers "test_x" and a later "tests/b.py::test_x";
    # each parameter case of a test is a test of its own ("test_x[1]", "test_x[2]")
    names: dict[str, str] = {}
    for name in failed:
        names.setdefault(name.rsplit("::", 1)[-1], name)
    if names:
        lines.add_list("failed: ", list(names.values()), more_hint=f" (expand_ref pattern='{word}')")
    shown = "\n".join(lines.lines)
    for number, line in keyword_lines(body):
        text = line.strip()
        skip = not text or text[:1] == "=" or text[:60] in shown or _FAILED_TEST.match(text) or re.search(r"\bPASSED\b", text)
        if text.startswith("Traceback (most recent call last)"):
            continue  # says nothing; its exception does
        if not skip and not lines.add(f"L{number + 1}: {clip(text, 200)}"):
            break
    shown = "\n".join(lines.lines)
    edges = [i for i in range(min(3, len(all_lines))) if all_lines[i].strip()][:1]
    edges += [i for i in range(len(all_lines) - 1, max(len(all_lines) - 4, 0), -1) if all_lines[i].strip()][:1]
    for number in edges:
        text = all_lines[number].strip()
        if text[:60] not in shown:
            lines.add(f"L{number + 1}: {clip(text, 160)}")
    lines.budget += lines.cost(hint)
    lines.add(hint, force=True)


__all__ = ["summarize_report"]
