"""The note that stands for exchanges the budget stage dropped, listing the values they used.

The history stage condenses old exchanges into context notes only in whole blocks of old
exchanges; a short chat whose messages are long (a pasted text, a structured answer) can be
over its budget with nothing old enough to condense, and the budget stage then drops whole
exchanges. Their note lists what they used, as a context note does (``label: value`` lines:
the arguments of the model's calls, what the user said and mentioned), within the room the
budget leaves it, so a value the user gave is not lost without a word. The note is shown as
ctxplugin's answer to a lookup (a tool result), as context notes are; where the view has no
place for a lookup and it would go in a system message, it lists nothing a tool returned
(``tool_values=False``): text from a tool output stays in the tool role, and the outputs
themselves stay one ``expand_ref`` away.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from ctxplugin._layout import is_note
from ctxplugin._untrusted import REF_TEXT
from ctxplugin.history._note_values import Labelled, _label_rank, _Valued, _valued, from_tool
from ctxplugin.history._notes import (
    EXPAND_HINT,
    _by_priority,
    _chronology,
    _Picker,
    _render,
    fewest_dropped,
    listed_values,
)
from ctxplugin.tokens import MESSAGE_OVERHEAD, TokenCounter, content_text

OMITTED_NOTE = "[earlier exchanges are not shown; stored tool outputs stay available through expand_ref]"
"""The note that stands for exchanges the budget stage dropped when none of their values fits
(or they have none): in the history where they were, or in the header when only the essentials
fit. It names no count, so it reads the same however many are dropped."""

_LATEST = "[earlier exchanges are not shown; stored tool outputs stay available through expand_ref, the latest: {refs}]"
_REF = re.compile(REF_TEXT)


def omitted_note(dropped: Sequence[BaseMessage], kept: Sequence[BaseMessage], most: int = 2) -> str:
    """The note standing for the messages ``dropped`` when only ``kept`` stay (the minimum
    viable view): :data:`OMITTED_NOTE` naming the refs of the latest ``most`` outputs they stored
    that ``kept`` does not name, newest first, so that the model has one to read."""
    named = set(_REF.findall("\n".join(content_text(m.content) for m in kept)))
    latest: list[str] = []
    for message in reversed(dropped):
        latest.extend(r for r in dict.fromkeys(reversed(_REF.findall(content_text(message.content)))) if r not in named and r not in latest)
        if len(latest) >= most:
            break
    return _LATEST.format(refs=", ".join(latest[:most])) if latest else OMITTED_NOTE


DROPPED_LEAD = "[earlier exchanges are not shown, only the values they used (stored tool outputs stay available through expand_ref):"
"""The first line of a note that lists the values of the exchanges dropped."""


def dropped_note(
    exchanges: Sequence[Sequence[BaseMessage]], known: str, max_tokens: int, counter: TokenCounter, *, tool_values: bool = True
) -> tuple[str, int]:
    """The note standing for the dropped ``exchanges`` (oldest first) within ``max_tokens`` and
    how many of their values it leaves out. Values in ``known`` (the text before the note,
    which stays in view) are not listed, nor, without ``tool_values``, what tools returned;
    when none fits, the note is :data:`OMITTED_NOTE`. The same exchanges and ``known`` give the
    same text, so a note that stays is cached."""
    valued = _read(list(reversed(exchanges)))  # newest first, as a block's note reads them
    if not tool_values:
        valued = _without_tool_output(valued)
    values = list(_by_priority(valued))
    picker = _Picker(set(), known, counter)
    picker.fill(values, max_tokens - counter.count(DROPPED_LEAD) - MESSAGE_OVERHEAD - 1)
    when = _chronology(valued)
    text = _render(DROPPED_LEAD, picker.chosen, when)
    room = max_tokens - counter.count(text) - MESSAGE_OVERHEAD
    if room >= 2 and picker.chosen and picker.later:
        picker.fill(picker.later, room)
        text = _render(DROPPED_LEAD, picker.chosen, when)
    left = len({value for _, value in picker.later})
    chosen = picker.chosen
    if chosen and counter.count(text) + MESSAGE_OVERHEAD > max_tokens:  # the latest chosen go until it fits
        dropped, text = fewest_dropped(
            len(chosen),
            lambda k: _render(DROPPED_LEAD, chosen[: len(chosen) - k], when),
            lambda note: counter.count(note) + MESSAGE_OVERHEAD <= max_tokens,
        )
        del chosen[len(chosen) - dropped :]
        left += dropped
    if not chosen:
        listed = _Picker(set(), known, counter)
        listed.fill(values, 1 << 30)
        return OMITTED_NOTE, len(listed.chosen)
    return text, left


_READS_STORED = "stored tool outputs stay available through expand_ref"
_LATEST_UNOFFERED = "; the latest stored tool outputs:"
_LATEST_REFS = re.compile(rf"{re.escape(_LATEST_UNOFFERED)} {REF_TEXT}(?:, {REF_TEXT})*\]\Z")
_HINTS = (
    (f" ({EXPAND_HINT}):", ":"), (f"; {_READS_STORED}]", "]"), (f" ({_READS_STORED}):", ":"),
    (f"; {_READS_STORED}, the latest:", _LATEST_UNOFFERED),
)


def without_expand_hint(text: str) -> str:
    """``text``, a context note, without its line on ``expand_ref``: for a view that binds no
    ``expand_ref`` (a chat without tools of its own), which must not offer a tool it lacks."""
    for hint, bare in _HINTS:
        text = text.replace(hint, bare, 1)
    return text


def without_latest_refs(text: str) -> str:
    """``text``, a note :func:`without_expand_hint` gave, without the refs the minimum viable
    view's note names last: for a view whose model cannot read a ref (a text-mode agent)."""
    return _LATEST_REFS.sub("]", text)


def without_tool_values(text: str) -> str | None:
    """``text``, a context note, without its lines of what tools returned (``<tool> returned``,
    ``<tool> failed``), for a note that goes in a system message; None when it lists nothing
    else. Text that is no note listing values is returned as it is."""
    lead, _, body = text.partition("\n")
    if not body.endswith("]") or not listed_values(body):
        return text
    lines = [line for line in body[:-1].split("\n") if not from_tool(line.partition(": ")[0])]
    return "\n".join([lead, *lines]) + "]" if lines else None


def _read(exchanges: Sequence[Sequence[BaseMessage]]) -> tuple[tuple[_Valued, ...], ...]:
    """The values of every message of ``exchanges``; a context note among them (the budget
    drops notes too) gives the values it lists under the labels it lists them with. Read as a
    message, a note is a human one: every line of it, what tools returned among them, would be
    listed as what the user said."""
    out: list[tuple[_Valued, ...]] = []
    for span in exchanges:
        plain = iter(_valued([[m for m in span if not is_note(m)]])[0])
        out.append(tuple(entry for m in span for entry in (_listed(content_text(m.content)) if is_note(m) else (next(plain),))))
    return tuple(out)


def _listed(text: str) -> tuple[_Valued, ...]:
    """What a note lists, as :func:`_valued` gives a message's values: what was said (commands,
    arguments and paths first), then, as a tool message's, what tools returned."""
    lead, _, body = text.partition("\n")
    if not (lead.startswith("[context note: ") or lead == DROPPED_LEAD) or not lead.endswith(":"):
        return ()
    listed: list[Labelled] = [(label, value) for label, values in listed_values(body).items() for value in values]
    said = [item for item in listed if not from_tool(item[0])]
    first = tuple(item for item in said if _label_rank(item[0]) <= 3)
    rest = tuple(item for item in said if _label_rank(item[0]) > 3)
    returned = tuple(item for item in listed if from_tool(item[0]))
    return (False, first, rest), (True, (), returned)


def _without_tool_output(valued: tuple[tuple[_Valued, ...], ...]) -> tuple[tuple[_Valued, ...], ...]:
    """``valued`` without what tools returned: a tool message's values, and what a provider's
    own tool found (listed in the model's message under ``<tool> returned``)."""
    return tuple(
        tuple(
            (False, (), ()) if from_tool else (
                False,
                tuple(v for v in first if not v[0].endswith(" returned")),
                tuple(v for v in rest if not v[0].endswith(" returned")),
            )
            for from_tool, first, rest in exchange
        )
        for exchange in valued
    )


__all__ = ["DROPPED_LEAD", "OMITTED_NOTE", "dropped_note", "without_expand_hint", "without_tool_values"]
