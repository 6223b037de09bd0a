"""A view from which ``expand_ref`` is taken out never tells the model to call it.

Stored outputs, cut messages and context notes say how ``expand_ref`` reads what they leave
out; a view given the tool and then not bound it (a chat whose view shows nothing it reads, a
text-mode agent that calls none) says nothing of it. A view prepared without it keeps the hints:
the host may bind it beside (an LCEL step, a chat history). A text-mode agent is shown an older
output's summary under a line saying how long the output was and that running its command again
shows it whole: a ref is no use to a model that cannot read it, so the view names none (the
report lists them).
"""

from __future__ import annotations

import re

from ctxplugin._shrunk import SHRUNK_HINT
from ctxplugin._untrusted import REF_TEXT
from ctxplugin.cas.capture import EXPAND_MORE
from ctxplugin.history import GIST_PREFIX, without_expand_hint, without_latest_refs
from ctxplugin.history._note_values import from_tool

_HEAD = re.compile(
    rf"\A\[{REF_TEXT} · (?:[^\n\]]* · )?(?P<tokens>[\d,]+) tokens stored(?: · expand_ref for more)?\]"
)
"""The ref line a stored output's compact form opens with (see :func:`ctxplugin.cas.capture.compact_text`)."""
_CUT = re.compile(rf"; expand_ref\(ref_id='({REF_TEXT})'\) reads the whole message …\]")
"""The end of the note on a user message cut to fit (see :func:`ctxplugin._cut.cut_text`)."""
_STORED_AS = r"; stored as \1 …]"
_SHRUNK = re.compile(rf" \[({REF_TEXT}){re.escape(SHRUNK_HINT)}\Z")
"""The end of a stored output the budget reduced to its first line (see :mod:`ctxplugin._shrunk`)."""
_HINTS = (
    # "… 35 more rows (expand_ref offset=40)": the end of a list line
    (re.compile(r" \(expand_ref\b[^()\n]*\)$", re.MULTILINE), ""),
    # "[this output also holds 2 images, not shown here; expand_ref(ref_id=…) alone returns them]"
    (
        re.compile(
            r"(\[this output also holds [^\n;\]]*); expand_ref\([^()\n]*\) alone returns them\]"
        ),
        r"\1]",
    ),
    # "… 3 more rare lines; expand_ref pattern=… returns matching lines whole; offset/limit page"
    (re.compile(r"^(… \d+ more rare [^\n;]*); expand_ref\b[^\n]*$", re.MULTILINE), r"\1"),
    # "… expand_ref pattern='FAILED' returns failing tests", "expand_ref pattern=… returns …": a line
    (re.compile(r"\n(?:… )?expand_ref pattern=[^\n]*"), ""),
)
"""The hints a stored output's summary gives, each matched only as its line is written (see
:mod:`ctxplugin.cas`): the lines of the output it shows are left as they were."""
_STORED = re.compile(rf"; stored as {REF_TEXT} …\]")
_REF = re.compile(rf"(?<![^\s:]){REF_TEXT}(?![^\s\]])")
_FACT_REF = re.compile(rf"; {REF_TEXT}(?=[;\]])")
_BARE_ENTITY = re.compile(r"^(- )\[entity\] ", re.MULTILINE)
_RERUN = "[summary of {tokens} tokens; rerun the command to see it whole]"
"""The line a text-mode agent's older output shown summarised opens with."""
_OVER = (
    "[summary of {tokens} tokens, too long to show whole; rerun the command filtered to see more]"
)
"""The line its latest output opens with when, whole, it would not fit the budget."""
_AGAIN = "[rerun the command to see the output whole]"
"""What follows an output reduced to its first line when that line is not the ref line."""


def unoffered(text: str) -> str:
    """``text`` without the hints that name ``expand_ref``: a stored output's ref line and the
    note on a cut message keep their ref (the report and ``ctxplugin expand`` read it), and say
    nothing of the tool. Only what ctxplugin wrote is rewritten: a message shown as it was sent
    (a user asking about ``expand_ref``) is left whole."""
    if "expand_ref" not in text:
        return text
    if text.startswith(GIST_PREFIX):  # an older stored output gisted: its ref line after the mark
        return GIST_PREFIX + unoffered(text[len(GIST_PREFIX) :])
    text = _CUT.sub(_STORED_AS, text)
    if _HEAD.match(text) is None:  # not a stored output's compact form
        return text
    return _unhinted(text.replace(EXPAND_MORE, "]", 1))


def _unhinted(text: str) -> str:
    for hint, kept in _HINTS:
        text = hint.sub(kept, text)
    return text


def unshrunk(text: str, *, ref: str | None) -> str:
    """A stored output the budget reduced to its first line (see :mod:`ctxplugin._shrunk`),
    for a view without ``expand_ref``: its ref, and no word of the tool. Only the form naming
    ``ref``, the message's own, is ctxplugin's: a tool's text that looks like it is kept."""
    shrunk = _shrunk(text, ref)
    if shrunk is None or ref is None:
        return text
    first = text[: shrunk.start()]
    if ref not in first:
        return f"{first} [{ref}]"
    return first if _HEAD.match(first) else f"[{ref} …]"  # the ref line, or the ref line cut short


def _shrunk(text: str, ref: str | None) -> re.Match[str] | None:
    """Where ``text`` ends as the budget reduces an output with ``ref`` to its first line."""
    found = _SHRUNK.search(text) if ref else None
    return found if found is not None and found.group(1) == ref else None


def rerun_output(text: str, *, latest: bool = False, ref: str | None = None) -> str:
    """A text-mode agent's output shown summarised: its ref line the size it had and that
    running the command again shows it whole (the ``latest`` output, too long to go whole,
    that a filtered command shows more), and no hint naming ``expand_ref``. An output reduced
    to its first line (an output with ``ref``) shows no ref either; one gisted, its gist mark first."""
    if text.startswith(GIST_PREFIX):
        return GIST_PREFIX + rerun_output(text[len(GIST_PREFIX) :], latest=latest, ref=ref)
    shrunk = _shrunk(text, ref)
    if shrunk is not None:
        text = text[: shrunk.start()]
    head = _HEAD.match(text)
    if head is not None and shrunk is not None and not head.group(0).startswith(f"[{ref} "):
        head = None  # the tool's own first line, naming another output's ref
    if head is None:
        if shrunk is None:
            return unoffered(text)
        return _AGAIN if f"[{ref}" in text else f"{text} {_AGAIN}"
    line = (_OVER if latest else _RERUN).format(tokens=head.group("tokens"))
    return line + _unhinted(_CUT.sub(_STORED_AS, text[head.end() :]))


def unreffed_cut(text: str) -> str:
    """The note on a user message cut to fit without its ref, for a text-mode agent:
    ``[… 900 tokens cut to fit the budget …]``."""
    return _STORED.sub(" …]", text) if "; stored as ref:" in text else text


def unoffered_note(text: str, *, refs: bool = True) -> str:
    """A context note for a view without ``expand_ref``: no line on the tool, nor its name among
    what tools returned (from a summary's hint), nor, without ``refs``, the refs listed there."""
    text = without_expand_hint(text)
    if not refs:  # what the minimum viable view dropped: its latest outputs' refs named last
        text = without_latest_refs(text)
    if "expand_ref" not in text and (refs or "ref:" not in text):
        return text
    lines: list[str] = []
    for line in text.split("\n"):
        label, colon, values = line.partition(": ")
        if (
            colon and from_tool(label) and not values.endswith((";", ";]"))
        ):  # values without a space
            closed = values.endswith("]")
            kept = [
                v
                for v in values.removesuffix("]").split(" ")
                if v != "expand_ref" and (refs or not _REF.fullmatch(v))
            ]
            if not kept:
                if closed and lines:
                    lines[-1] += "]"
                continue
            line = f"{label}: {' '.join(kept)}{']' if closed else ''}"
        lines.append(line)
    return "\n".join(lines)


def unreffed_facts(text: str) -> str:
    """The facts block for a view without ``expand_ref``: a line read from a tool output without
    the ref of the output it came from."""
    if "ref:" not in text:
        return text
    # an entity with nothing else to its label is its quoted text alone, as the block shows it
    return _BARE_ENTITY.sub(r"\1", _FACT_REF.sub("", text))


__all__ = [
    "rerun_output",
    "unoffered",
    "unoffered_note",
    "unreffed_cut",
    "unreffed_facts",
    "unshrunk",
]
