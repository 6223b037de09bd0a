"""What the extraction rules do not read as statements: source code, a traceback's frames, an
installer's progress lines, a tool's report of a failure, log lines (``ERROR: ...``,
``L031: ...``), which report an event rather than a value, and a label before a request or a
question (``Question 5: please describe the refund policy``), which asks rather than states."""

from __future__ import annotations

import re
from typing import Literal

from ctxplugin._text_shapes import TextShape
from ctxplugin.facts._values import read_values

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
QUOTED_ASSIGN = re.compile(r"[a-z_]\w*\s*=\s*(?:None|True|False|self|[A-Za-z_]\w*(?:\.\w+)+)")
"""A name given a name or a constant (``ret = self``, ``modname = None``, ``ret = ret.parent``):
code when a tool printed it indented (a function's body), a setting at the start of a line
(``debug = True``, ``host = db.example.com`` of a config file)."""
TOOL_CODE = re.compile(
    r"^\s*[a-z_]\w*\s*:\s*[A-Za-z_][\w.]*(?:\[[^\]]*\])?(?:\s*=\s*[^,\s]+)?,\s*$|"
    r"\b[a-z_]\w*=[A-Za-z_][\w.]*,|(?:,|=\S+)\s*[a-z_]\w*=[A-Za-z_][\w.]*\s*$|"
    r"::\s*$|^\s*\.{0,2}/?(?:[\w.-]+/)+[\w.-]+\.\w{1,8}:(?:\d+[:-])?\s"
)
"""Code lines a tool printed that :data:`CODE` leaves to prose (its output under a shell's
envelope reads as text, not code): an annotated parameter (``recurse: bool = True,``), keyword arguments
(``anchor=ref,``, ``tokens, recurse=recurse``; a name given a word alone at the end of a line,
``state=running`` or ``updated: status=shipped``, is a value printed), a docstring's literal block
(``Example: ::``), a ``grep`` hit on an indented line (``./src/rules/L019.py:    description="..."``). They quote a file: what they say is read
without a key, so that no later line quoting other code replaces it (``pn = SomeName``, a value
a script printed, keeps its key)."""
PROGRESS = re.compile(
    r"^\s*(?:Installing|Building|Downloading|Collecting|Requirement already|Successfully (?:installed|built|uninstalled)|"
    r"Uninstalling|Obtaining|Preparing|Attempting|Found existing|Using cached)\b"
)
"""A tool's progress line (an installer's ``Collecting x``, ``Successfully installed y``): an
event, never a fact."""
BARE_VALUE = re.compile(r"\s*[-+]?[$€£]?\d[\d,]*(?:\.\d+)?\s*%?\s*")
"""A tool output (or line) that is a number alone ("55.0" from a calculator, "$1,234.50"):
it names no subject, so as a fact it would stand in a facts block without what it is; the output
stays in the history beside the call that asked for it."""
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


_AUXILIARY = r"(?:is|are|was|were|do|does|did|can|could|would|will|should|shall|may|might|has|have|had)"
_QUESTION = re.compile(
    rf"^(?:what|how|why|which|who|whom|whose|when|where)(?:'s|'re|\s+(?:[\w-]+\s+)?{_AUXILIARY}\b)|^how\s+(?:many|much|long|often|far|soon)\b"
    rf"|^(?!(?:do|have)\s+it\b){_AUXILIARY}(?:n't)?\s+(?:you|we|i|they|it|he|she|there|anyone|anybody|someone|somebody)\b",
    re.IGNORECASE,
)
"""A question without its question mark: "how do refunds work", "what is the budget for ...",
"can you check the status" (a wh-word or an auxiliary before its subject; "do it" and "have it
delivered" tell what to do)."""
_PLEASE = re.compile(r"^(?:please|pls|kindly)\b|^i(?:'d|\s+would)?\s+(?:like|need|want)\s+you\s+to\b", re.IGNORECASE)
_ASK_LABEL = re.compile(
    r"^(?:[\w-]+\s+)?(?:question|q|qn|request|ask|query|prompt|task|todo|to-?do|step|exercise|assignment|problem|action\s+item)"
    r"\s*#?\s*\d{0,4}$",
    re.IGNORECASE,
)
"""A label naming something asked or to be done ("Question 5", "Q5", "Task 3", "Step 2"): the
verb after it is an instruction, while "Decision: use Postgres" or "Requirement 2: support
OAuth" state what holds."""
_STATUS = (
    r"(?:done|complete|completed|finished|passed|passing|failed|failing|pending|ok|okay|succeeded|successful|sent|applied|"
    r"started|running|skipped|blocked|approved|rejected|cancell?ed|scheduled|queued|merged|deployed|resolved|ready|"
    r"in\s+progress|not\s+started|on\s+hold)(?:\s*$|\s*[(\[,;:.!-]|\s+(?:at|in|on|after|with|for|since|by|to|and|but|as|of)\b)"
)
"""How a thing stands, ending the value or before a detail ("failed at 10:02", "done."): after an
action's noun ("build failed", "review pending") it is a status, not a verb's object."""
_IMPERATIVE = re.compile(
    r"^(?:describe|explain|summari[sz]e|tell|list|show|give|provide|find|look|check|verify|confirm|compare|review|"
    r"analy[sz]e|evaluate|assess|calculate|compute|estimate|translate|define|outline|identify|name|suggest|recommend|"
    r"propose|discuss|clarify|elaborate|investigate|research|write|rewrite|draft|create|prepare|generate|implement|fix|"
    r"debug|send|fetch|get|search|open|read|help|answer|share|update|add|remove|delete|cancel|book|schedule|call|email|"
    r"contact|run|test|build|make|set|install|configure|plan|design|prove|solve|complete|fill|submit|upload|download|"
    rf"print|buy)\s+(?!{_STATUS})\S",
    re.IGNORECASE,
)
"""A verb that asks for something to be done, with its object ("open the settings page"; "open"
alone is a state, and so is the verb's noun with how it stands: "build failed")."""


def labelled_ask(label: str, value: str) -> Literal["question", "request"] | None:
    """Whether "``label``: ``value``" asks rather than states: ``question`` for a question
    ("Question 5: how do refunds work", "Order 5: can you check the status"), ``request`` for a
    request ("please ...", "kindly ...", or a verb after a label naming what is asked: "Task 3:
    summarize the report"); None for a value ("Order 5: shipped", "Question 5: yes"), and for a
    polite instruction that gives the value of a label naming no request ("Deadline: please
    submit by Friday")."""
    value = value.strip()
    if _QUESTION.match(value):
        return "question"
    if _ASK_LABEL.match(label.strip()):
        return "request" if _PLEASE.match(value) or _IMPERATIVE.match(value) else None
    return "request" if _PLEASE.match(value) and not any(read_values(value)) else None


__all__ = ["BARE_VALUE", "CODE", "FENCED", "MACHINE_SHAPES", "PROGRESS", "TOOL_TROUBLE", "TRACE_FRAME", "labelled_ask", "log_line"]
