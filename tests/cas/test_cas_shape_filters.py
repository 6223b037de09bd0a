"""The cheap tests that run before the shape patterns decide exactly as the patterns alone, and
the shortcuts of the summaries give what their plain paths give."""

from __future__ import annotations

import importlib
import json
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin import _text_shapes as shapes
from ctxplugin import _text_words as text_words
from ctxplugin.cas import _report_summary as report_summary
from ctxplugin.cas import _text_summary as text_summary
from ctxplugin.cas import parse_json
from ctxplugin.tokens import get_counter

summarize_module = importlib.import_module("ctxplugin.cas.summarize")  # the package exports a function of that name

LINES = [
    "def run(x):", "    async def fetch(self):", "\u00a0\u2003class Model(Base):", "export default function App() {",
    "export const go = async (a) =>", "func (s *Server) Start() error {", "type Config struct {", "pub(crate) fn new() -> Self {",
    "impl Display for Node {", "public static void main(String[] args) {", "defer close()", "classic = 1", "# def commented",
    "    return value", "", "   ", "typeof x", "fnord()", "mod.rs", "\tprivate final int count(",
]


@pytest.mark.parametrize("line", LINES)
def test_definition_filter_agrees_with_the_pattern(line: str) -> None:
    assert shapes.is_definition(line) == (shapes._DEF.match(line) is not None)


TROUBLE = [
    ["all good", "nothing to see"],
    ["step 1", "ERROR: disk full"],
    ["ok", "raise ValueError('x')"],
    ["ok", "theError happened"],
    ["ok", "Segmentation fault (core dumped)"],
    ["ok", "can't open file"],
    ["ok", "errorless"],
    ["ok", "KILLED by signal"],
    ["ok", "ſegmentation fault"],  # a long s: not ASCII, so the pattern alone decides
    ["résumé", "no such file or directory"],
]


@pytest.mark.parametrize("lines", TROUBLE)
def test_trouble_filter_agrees_with_the_patterns_line_by_line(lines: list[str]) -> None:
    expected = any(text_words._KEYWORD_LINE.search(ln) or text_words._CAMEL_ERROR.search(ln) for ln in lines)
    assert text_words.mentions_trouble("\n".join(lines)) == expected


BACKTRACKING_CODEISH = re.compile(shapes._CODEISH.pattern.replace(r"^\s*+", r"^\s*", 1))
""":data:`~ctxplugin._text_shapes._CODEISH` as it read before its indent was taken whole."""

CODE_LINES = [
    "    return x", "\t\tif ready:", "        foo(bar);", "  \u2003 x = {", "  ;", "   {", "\u00a0\u00a0# note", "    a=b",
    "    ", "x", "    plain words here", "    trailing space; ", "    ends with brace {\r", " \n ;", "  \u0085;", "* item",
    "        self.name = name", "    print('a;')", "  //", "    else:", "    for x in y:", "   =1", "  \x0b\x0c{",
]


@pytest.mark.parametrize("line", CODE_LINES)
def test_whole_indent_codeish_agrees_with_backtracking(line: str) -> None:
    assert (shapes._CODEISH.match(line) is None) == (BACKTRACKING_CODEISH.match(line) is None)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=" \t\u00a0\u2003\u0085\x0b\x0c\r\nxyfi_=;{}:#/*@.s(", max_size=24))
def test_whole_indent_codeish_agrees_with_backtracking_on_any_line(line: str) -> None:
    assert (shapes._CODEISH.match(line) is None) == (BACKTRACKING_CODEISH.match(line) is None)


EXIT_WINDOWS = [
    "done", "exit code 2", "Exited with status 3", "RETURN CODE: -1", "returncode=0", "exit_code 7", "Status Code = 404",
    "exit status", "the return value", "exıt code 1", "ſtatus code 5", "EXİT CODE 4", "résumé exit code 9", "exit\tcode 1",
    "process exited with code\n12", "exitcode 3", "return x\n    return code 5", "status code? then exit code 2; exit code 3",
    "exit code exit code 8", "EXIT_CODE=0 returncode=1",
]


def _plain_exit(window: str) -> str | None:
    found = summarize_module._EXIT.search(window)
    return found.group(1) if found else None


@pytest.mark.parametrize("window", EXIT_WINDOWS)
def test_exit_filter_agrees_with_the_pattern(window: str) -> None:
    assert summarize_module._exit_status(window) == _plain_exit(window)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="exitEXITreturnRETURNstaSTA codeCODE_:=-0123 \n\u017f\u0131\u0130\u212a", max_size=30))
def test_exit_filter_agrees_with_the_pattern_on_any_window(window: str) -> None:
    assert summarize_module._exit_status(window) == _plain_exit(window)


def _identifiers_with_the_whole_pattern(text: str) -> list[str]:
    """:func:`~ctxplugin._text_words.identifiers_in` trying every alternative on every word."""
    seen: dict[str, None] = {}
    for word in dict.fromkeys(text.split()):
        if len(word) > text_words._WORD_MAX or word.isalpha():
            continue
        for match in text_words._IDENT.finditer(word):
            value = match.group(0).rstrip(".,:;")
            if len(value) > 120 or value in seen:
                continue
            seen[value] = None
            if len(seen) >= text_words._IDENT_CAP:
                return list(seen)
    return list(seen)


IDENTIFIER_TEXTS = [
    "see https://example.com/a/b?x=1 and mail ops@example.org about src/app/main.py:12",
    "foo.bar.baz() v2 build-42 ./run.sh ../x/y a@b.c x.py, done.", "a/b@c.d http://x", "node_modules/@scope/pkg@1.2.3",
    "e@mail http:/x ab/c.py ab.cd.ef.gh x1y2z3 __init__.py", "٣abc abc٣ abcd1 1abcd",
]


@pytest.mark.parametrize("text", IDENTIFIER_TEXTS)
def test_identifiers_agree_with_the_whole_pattern(text: str) -> None:
    assert text_words.identifiers_in(text) == _identifiers_with_the_whole_pattern(text)


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(alphabet="abcxyhtps019._-/@:?=", min_size=1, max_size=20), max_size=40))
def test_identifiers_agree_with_the_whole_pattern_on_any_words(words: list[str]) -> None:
    text = " ".join(words)
    assert text_words.identifiers_in(text) == _identifiers_with_the_whole_pattern(text)


TROUBLE_ALPHABET = "errorwaningfalExcptiWrEx_ ER\n.'t:kldabscuAFI\u017f\u212a\u0131"


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet=TROUBLE_ALPHABET, max_size=40))
def test_trouble_filter_agrees_with_the_patterns_on_any_text(text: str) -> None:
    expected = text_words._KEYWORD_LINE.search(text) is not None or text_words._CAMEL_ERROR.search(text) is not None
    assert text_words.mentions_trouble(text) == expected


SEVERE_LINES = [
    "ERROR: x", "an error", "errors", "xError: y", "TypeError", "ValueException raised", "failed to start", "FAILURE",
    "crashed", "crash_report", "warning only", "errorless", "_error", "aError", "EXCEPTION", "ſerror", "panic!", "not denied",
]


@pytest.mark.parametrize("line", SEVERE_LINES)
def test_severity_filter_agrees_with_the_pattern(line: str) -> None:
    assert text_summary._severe(line) == (text_summary._SEVERE.search(line) is not None)


@settings(max_examples=2000, deadline=None)
@given(st.text(alphabet="errorfatlcipnkxsuhbdEROXCPTIFA_ -:\u017f\u0131", max_size=30))
def test_severity_filter_agrees_with_the_pattern_on_any_line(line: str) -> None:
    assert text_summary._severe(line) == (text_summary._SEVERE.search(line) is not None)


SHAPE_LINES = [
    "2024-01-02 10:11:12 INFO started", " 2024-01-02T10:11 ERROR x", "Jan  2 10:11:12 host sshd[1]: Failed", "1700000000.123 up",
    "12:13:14.5 tick", "[INFO] building", "WARNING: deprecated", "->DEBUG x", "__ERROR", "_INFO", "   2024-01-02 10:11",
    "-rw-r--r--  1 user group  1,234 Jan  2 10:11 file.txt", "drwxr-xr-x 2 root root 4096 Feb 13 09:00 dir",
    "src/a.py:12:def x():", "src/a.py-13-    pass", "README.md:hello", "./path/to/file.py", "~/x.c:3:y", "+a.b:1:c", "@s/x.js:2:z",
    "tests/test_a.py::test_x PASSED", "x/y.py::t[1] FAILED", "FAILED t.py::y - assert 1", "ERROR t.py::z", "PASSED a.py::b",
    "--- FAIL: TestX (0.00s)", "ok  \tpkg/x\t0.012s", "FAIL pkg/y 1.2s", "test foo::bar ... ok", "collected 12 items",
    "===== test session starts =====", "= FAILURES =", "def f(x):", "    return x", "\tindented", "\u00a0\u2003A", "\u3000x",
    "\u0661\u0662\u0663\u0664-01-02 10:11", "  x", " #", "é-x", "_a.b:1:c", "  2024-01-02 10:11:12 two spaces",
]
line_strategy = st.one_of(
    st.sampled_from(SHAPE_LINES),
    st.text(alphabet=" \t\u00a0-=:._/~+@#aAdlrwxFPEotcs0123456789", min_size=1, max_size=30),
).filter(lambda ln: bool(ln.strip()) and "\n" not in ln)


@settings(max_examples=1000, deadline=None)
@given(st.lists(line_strategy, min_size=1, max_size=30))
def test_line_start_bounds_count_at_least_the_lines_each_pattern_matches(lines: list[str]) -> None:
    firsts, joined = "".join(ln[0] for ln in lines), "\n".join(lines)

    def matching(pattern: re.Pattern[str]) -> int:
        return sum(1 for ln in lines if pattern.match(ln))

    assert shapes._report_bound(firsts, joined) >= matching(shapes._REPORT)
    assert shapes._log_bound(firsts, joined) >= matching(shapes._TIMESTAMP)
    assert shapes._starting(firsts, shapes._LISTING_STARTS) >= matching(shapes._LISTING)
    assert shapes._grep_bound(firsts) >= matching(shapes._GREP)


@pytest.mark.parametrize("line", SHAPE_LINES)
def test_line_start_bounds_keep_every_line_a_pattern_matches(line: str) -> None:
    for pattern, bound in [
        (shapes._REPORT, shapes._report_bound(line[0], line)),
        (shapes._TIMESTAMP, shapes._log_bound(line[0], line)),
        (shapes._LISTING, shapes._starting(line[0], shapes._LISTING_STARTS)),
        (shapes._GREP, shapes._grep_bound(line[0])),
    ]:
        assert bound >= (pattern.match(line) is not None), pattern.pattern


SUMMARY_TEXTS = [
    "\n".join(f"2024-01-02 10:11:{i % 60:02d} ERROR worker {i} failed: timeout" for i in range(300)),
    "Traceback (most recent call last):\n  File \"/app/x.py\", line 3, in <module>\nValueError: bad\n" * 40,
    "\n".join(f"src/pkg/m{i}.py:{i}:def f{i}(x):" for i in range(200)),
    "\n".join(f"    def method_{i}(self, value):\n        return value + {i}" for i in range(200)),
    json.dumps([{"id": f"row-{i}", "name": f"n{i}", "v": i} for i in range(300)]),
    "tests/test_a.py::test_x PASSED\n" * 50 + "FAILED tests/test_b.py::test_y - assert 1 == 2\n" * 20,
    "A plain sentence about the run. " * 400,
]


@pytest.mark.parametrize("text", SUMMARY_TEXTS)
@pytest.mark.parametrize("budget", [40, 120, 400])
def test_summaries_counting_each_line_once_match_counting_every_time(text: str, budget: int, monkeypatch: pytest.MonkeyPatch) -> None:
    counter = get_counter()[0]
    once = summarize_module.summarize(text, parse_json(text), counter, budget, error_budget=240)
    monkeypatch.setattr(summarize_module, "CountedOnce", lambda c: c)  # the counter itself, every time
    assert summarize_module.summarize(text, parse_json(text), counter, budget, error_budget=240) == once


OUTCOME_ALPHABET = ["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAIL", "XPASS", "PASS", "X", "S", "_", "é", "1", " ", "\n", ":", "-"]


@settings(max_examples=2000, deadline=None)
@given(st.lists(st.sampled_from(OUTCOME_ALPHABET), max_size=20))
def test_outcomes_found_at_their_words_agree_with_findall(parts: list[str]) -> None:
    text = "".join(parts)
    plain = re.findall(r"\b(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", text)
    assert text_words.whole_words(report_summary._OUTCOME, text, report_summary._OUTCOME_WORDS) == plain


def _outline_line_by_line(body: str) -> list[tuple[int, str]]:
    """:func:`~ctxplugin._text_shapes.code_outline` asking :func:`is_definition` of each line."""
    return [(n, text.rstrip().rstrip("{").rstrip()) for n, text in shapes.strip_numbering(body) if shapes.is_definition(text)]


@settings(max_examples=500, deadline=None)
@given(st.lists(st.sampled_from(LINES), max_size=30), st.booleans())
def test_code_outline_agrees_with_asking_each_line(lines: list[str], numbered: bool) -> None:
    body = "\n".join(f"{i + 3:>6}\t{line}" if numbered else line for i, line in enumerate(lines))
    assert shapes.code_outline(body) == _outline_line_by_line(body)
