"""What the extraction rules do not read as statements: source code, a traceback's frames, an
installer's progress lines, a tool's report of a failure, and log lines (``ERROR: ...``,
``L031: ...``), which report an event rather than a value."""

from __future__ import annotations

import re

from ctxplugin._text_shapes import TextShape

TOOL_TROUBLE = re.compile(r"(?i)\b(?:errors?|exceptions?|traceback|fatal|failed|failures?)\b|[a-z](?:Error|Exception):|\bNo module named\b")
"""A tool's report of something that went wrong ("Error during parsing: ...", "ModuleNotFoundError:
...", "python: No module named pytest"): what happened when it ran, not current state. Its
summary and the history keep such lines at every tier; as a fact it would outlive the fix."""
MACHINE_SHAPES: frozenset[TextShape] = frozenset({"code", "diff", "report", "listing"})
"""Shapes of tool output whose lines state no facts (see :func:`~ctxplugin._text_shapes.detect_text_shape`):
source code, a diff, a test run's report, a directory listing. Read as prose they give
statements like "Ret = self" or "rootdir: /testbed", which are not current state; the output
stays stored whole and its summary keeps its identifiers."""
FENCED = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
CODE = re.compile(
    r"[;{}]|[A-Za-z_]\w{0,256}\(|\[[^\]\s]{0,256}\]|==|!=|->|=>|\+=|\"\"\"|'''|"
    r"\b(?:import|def|return|lambda|elif)\b|\bself\.|"
    r"^\s*(?:#|//|>>>|\$ |\d+(?:[:|\t]|-\s)|[A-Za-z_][\w.]*\s*=\s*[\[({'\"\d])|"
    r"^\s*</?[A-Za-z][\w-]*>?\s*$|^\s*self\b|^\s*[A-Za-z_][\w.]*,\s*$|"
    r"^\s*(?:for|while|if|with|class|try|except|else|finally|async)\b[^.!?]*:\s*$"
)
"""Code, not prose: calls, brackets, operators, keywords, docstring quotes; listings (grep's
``171:`` and ``171- `` lines, ``cat -n``'s ``566<TAB>``); a lone markup tag (``</pr_description>``);
an argument-list line (``self, x,`` or ``c.first_name,``); a block header (``for a in b:``)."""
PROGRESS = re.compile(
    r"^\s*(?:Installing|Building|Downloading|Collecting|Requirement already|Successfully (?:installed|built|uninstalled)|"
    r"Uninstalling|Obtaining|Preparing|Attempting|Found existing|Using cached)\b"
)
"""A tool's progress line (an installer's ``Collecting x``, ``Successfully installed y``): an
event, never a fact."""
TRACE_FRAME = re.compile(r'^\s*(?:File\s+"[^"]*",\s+line\s+\d+|Traceback\s+\(most recent call last\))')
"""A traceback's frame or heading line: where an error happened, an event rather than a fact."""
_LOG_LABEL = re.compile(
    r"^\s*(?:[A-Z][A-Z0-9_]+|[A-Za-z_]*\d[\w-]*|[A-Za-z]+\s+\d+(?:\s+[A-Z]+)?|\S*/\S*|[\w-]+\.[A-Za-z]\w{0,7}|"
    r"(?:[A-Z]\s+)?[\w.]*(?:Error|Exception|Warning|Failure)|"
    r"(?i:error|warning|warn|info|debug|trace|fatal|critical|notice|fail|failed|failure|pass|passed|ok|note|hint))\s*$"
)
"""Labels of log lines: levels (``ERROR``, ``info``), codes (``L031``, ``E501``), numbered items
(``Test 2``, ``Test 5 PASSED``, ``line 14``), paths and file names (``src/app.py``: grep output),
exception names (``AttributeError``, pytest's ``E KeyError``). A label naming an entity
(``order W1 status``) is not one."""


def log_line(subject: str, value: str) -> bool:
    """Whether "subject: value" is a log line (an event) rather than a labelled value: a log label,
    or a one-word label whose value is itself labelled (``bash: line 1: x: command not found``;
    ``grep: src/pkg/__pycache__/mod.cpython-311.pyc: binary file matches``: a path of any length)."""
    return bool(_LOG_LABEL.match(subject)) or (" " not in subject.strip() and bool(re.match(r"(?:[^:\s]{1,300}|[^:]{1,40}):\s", value)))


__all__ = ["CODE", "FENCED", "MACHINE_SHAPES", "PROGRESS", "TOOL_TROUBLE", "TRACE_FRAME", "log_line"]
