"""Log records as a user reads them: the logger's name already says ``ctxplugin``, so the
standard format (``logging.basicConfig``) must not print it twice."""

from __future__ import annotations

import ast
import io
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.runnables import RunnableLambda

from ctxplugin import ContextCallbackHandler, Scope, _run_scope
from ctxplugin._store_guard import StoreGuard
from ctxplugin.stages.view import log_degraded
from ctxplugin.testing import memory_engine

ROOT = Path(__file__).resolve().parents[1]
SOURCES = [ROOT / "ctxplugin", *sorted((ROOT / "integrations").glob("*/ctxplugin_*"))]
LEVELS = {"debug", "info", "warning", "error", "exception", "critical", "log"}


@pytest.fixture
def basic_format() -> Iterator[io.StringIO]:
    """What ``logging.basicConfig()`` prints for the ``ctxplugin`` loggers."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.setFormatter(logging.Formatter(logging.BASIC_FORMAT))
    logger = logging.getLogger("ctxplugin")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    _run_scope._direct_warned.clear()
    try:
        yield out
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
        _run_scope._direct_warned.clear()


def test_warnings_name_ctxplugin_once_in_the_basic_format(basic_format: io.StringIO) -> None:
    StoreGuard("CAS", timeout=1.0).trip("disk is full")
    log_degraded(Scope(session_id="s1"), "facts store unavailable; facts skipped for this call")
    memory_engine().prepare([HumanMessage("hi")])
    lines = basic_format.getvalue().splitlines()
    assert lines[:2] == [
        "WARNING:ctxplugin:CAS unavailable, calls fail fast until it answers again: disk is full",
        "WARNING:ctxplugin:facts store unavailable; facts skipped for this call (session s1)",
    ]
    assert any(
        line.startswith("WARNING:ctxplugin:ContextEngine.prepare called without a scope")
        for line in lines
    ), lines
    assert not [line for line in lines if "ctxplugin:ctxplugin" in line]


def test_a_long_session_id_is_shortened_in_log_lines_and_kept_whole_elsewhere(
    basic_format: io.StringIO, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="ctxplugin")
    thread, twin = "t" * 20_000, "t" * 19_999 + "u"  # alike in their first 64 characters
    log_degraded(Scope(session_id=thread), "facts store unavailable; facts skipped for this call")
    log_degraded(Scope(session_id=twin), "facts store unavailable; facts skipped for this call")
    handler = ContextCallbackHandler()
    prepare = RunnableLambda(lambda m: memory_engine().prepare(m, scope=Scope(session_id=thread)))
    prepare.invoke([HumanMessage("hi")], {"callbacks": [handler]})
    lines = basic_format.getvalue().splitlines()
    first, second = lines[:2]
    assert first.endswith(f"(session {'t' * 64}…{first[-13:-1]})") and second != first
    assert all(len(line) < 200 for line in lines), [len(line) for line in lines]
    assert any(line.startswith(f"INFO:ctxplugin:session {'t' * 64}…") for line in lines), lines
    debug = [r for r in caplog.records if r.levelno == logging.DEBUG and r.msg.startswith("ctxplugin.prepare")]
    assert debug and len(debug[0].getMessage()) < 200
    # what a program reads keeps the id whole
    degraded = [r for r in caplog.records if hasattr(r, "ctxplugin_session")]
    assert [r.ctxplugin_session for r in degraded] == [thread, twin]
    assert debug[0].__dict__["ctxplugin"]["ctxplugin.session_id"] == thread
    assert handler.reports[0].session_id == thread


def _constants(tree: ast.Module) -> dict[str, str]:
    """Module-level string constants (a message kept in a name and logged from there)."""
    out: dict[str, str] = {}
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            out.update((t.id, node.value.value) for t in node.targets if isinstance(t, ast.Name))
    return out


def _message(arg: ast.expr, constants: dict[str, str]) -> str | None:
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        return arg.value
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        return str(arg.values[0].value)
    if isinstance(arg, ast.Name):
        return constants.get(arg.id)
    return None


def test_no_log_message_repeats_the_loggers_name() -> None:
    """Every logger of the package and its integrations is ``ctxplugin`` or below it."""
    doubled = []
    for path in (p for source in SOURCES for p in sorted(source.rglob("*.py"))):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        constants = _constants(tree)
        for node in ast.walk(tree):
            if not (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in LEVELS
            ):
                continue
            if not (
                isinstance(node.func.value, ast.Name)
                and node.func.value.id in {"logger", "log"}
                and node.args
            ):
                continue
            text = _message(node.args[1] if node.func.attr == "log" else node.args[0], constants)
            if text is not None and text.startswith("ctxplugin:"):
                doubled.append(f"{path.relative_to(ROOT)}:{node.lineno}: {text[:60]}")
    assert not doubled, doubled


@pytest.mark.parametrize("session", ["t1\nWARNING:ctxplugin:forged line", "t1\r\x1b[2J", "t1\u2028x", "t1\ud800"])
def test_a_session_id_holding_a_line_break_or_control_character_cannot_break_a_log_line(basic_format: io.StringIO, session: str) -> None:
    log_degraded(Scope(session_id=session), "facts store unavailable; facts skipped for this call")
    log_degraded(Scope(session_id="t1"), "facts store unavailable; facts skipped for this call")
    lines = basic_format.getvalue().split("\n")[:-1]
    assert len(lines) == 2 and not any(line.startswith("WARNING:ctxplugin:forged") for line in lines), lines
    assert all(c.isprintable() for line in lines for c in line), lines
    assert lines[0].startswith("WARNING:ctxplugin:facts store unavailable; facts skipped for this call (session t1\\")
    assert lines[1].endswith("(session t1)")
