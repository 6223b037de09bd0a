"""Context notes written from labelled values: which values a note lists, and in what order.

A note is one ``HumanMessage``: a lead naming the exchanges it stands for, then the values
by label, within a token budget: a ``label: value value`` line of the values without a space or
a semicolon, and a ``label: some value; other value;`` line of those with one, each ended by a
semicolon. A space costs no token before most words where a separator costs one, and an
identifier, a path or a number holds none. On the second line a value holding ``"; "`` (or
opening with a backtick) is in backticks, as Markdown quotes code (```cd /repo; ls`;``): it
would read as two values otherwise, to the model as to :func:`note_values`.
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any

from langchain_core.messages import HumanMessage

from ctxplugin._lru import Memo
from ctxplugin._messages import META_KEY
from ctxplugin.history._note_tokens import note_tokens, per_counter
from ctxplugin.history._note_values import Labelled, _label_rank, _Valued
from ctxplugin.history.identifiers import longest_run, occurs, text_runs, value_runs
from ctxplugin.tokens import MESSAGE_OVERHEAD, TokenCounter

EXPAND_HINT = "expand_ref reads their stored outputs"
"""What the first context note adds, so that omitted history is announced in the history and
the header (the start of every cached prefix) never changes."""


def _ordered(valued: Sequence[Sequence[_Valued]]) -> Iterator[Labelled]:
    """Values in three passes: what the model ran (commands, their quoted arguments, paths),
    then the rest of what it said, then what tools returned."""
    flat = [entry for span in valued for entry in span]
    said = [(first, rest) for tool, first, rest in flat if not tool]
    for first, _ in said:
        yield from first
    for _, rest in said:
        yield from rest
    for tool, first, rest in flat:
        if tool:
            yield from first
            yield from rest


def _by_priority(valued: Sequence[Sequence[_Valued]]) -> Iterator[Labelled]:
    """Values of exchanges given newest first, in three passes: what the model ran (commands,
    their quoted arguments, paths), then the rest of what it said, then what tools returned —
    an agent reuses its own commands and paths more than raw output."""
    return _ordered(valued)


def _chronology(valued: Sequence[Sequence[_Valued]]) -> dict[str, int]:
    """The place of each value of exchanges given newest first in the conversation's order
    (of its first occurrence), so that a note lists what was said in the order it was said."""
    when: dict[str, int] = {}
    for span in reversed(valued):
        for _, first, rest in span:
            for _, value in (*first, *rest):
                when.setdefault(value, len(when))
    return when


_SPACE = re.compile(r"[\s;]")
"""Whitespace (as ``str.isspace`` has it) or a semicolon."""


@lru_cache(maxsize=65536)
def _spaced(value: str) -> bool:
    """Whether ``value`` holds whitespace or a semicolon: it is then listed on its label's
    line of values that each end in ``;`` (see the module docstring)."""
    return _SPACE.search(value) is not None


_SEPARATOR = "; "
_TICKS = re.compile(r"`+")


def _shown(value: str) -> str:
    """``value`` as a line of spaced values lists it: itself, or in a run of backticks longer
    than any it holds when it holds ``"; "`` or opens with a backtick, with a space inside each
    end when it opens or ends with a backtick or a space (Markdown's code span)."""
    if _SEPARATOR not in value and not value.startswith("`"):
        return value
    fence = "`" * (max(map(len, _TICKS.findall(value)), default=0) + 1)
    pad = " " if value[:1] in "` " or value[-1:] in "` " else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def _spaced_values(text: str) -> list[str]:
    """The values of a line of spaced values, ``text`` being what follows its label (ending in
    ``;``): what :func:`_shown` wrote, read back exactly."""
    out: list[str] = []
    at, end = 0, len(text) - 1
    while at <= end:
        fence = _TICKS.match(text, at)
        close = None
        if fence is not None:
            ticks = len(fence.group())
            close = re.compile(rf"(?<!`)`{{{ticks}}}(?!`)(?=;(?: |$))").search(text, at + ticks)
        if fence is not None and close is not None:
            value = text[at + ticks : close.start()]
            out.append(value[1:-1] if len(value) > 1 and value[0] == value[-1] == " " else value)
            at = close.end() + len(_SEPARATOR)
            continue
        cut = text.find(_SEPARATOR, at)
        if cut < 0:
            out.append(text[at:end])
            break
        out.append(text[at:cut])
        at = cut + len(_SEPARATOR)
    return out


def _render(lead: str, chosen: Sequence[Labelled], when: Mapping[str, int]) -> str:
    """A note's text: ``lead``, then per label (in the order of :func:`_label_rank`, then of
    their first value) a ``label: value value`` line of its values without a space or a
    semicolon and a ``label: some value; other value;`` line of the others, values in the
    order of ``when``."""
    return _lines(lead, _in_order(chosen, when))


def _in_order(chosen: Sequence[Labelled], when: Mapping[str, int]) -> list[Labelled]:
    """``chosen`` in the order of ``when`` (stable: a value it lacks goes first, as chosen)."""
    return sorted(chosen, key=lambda item: when.get(item[1], -1))


def _lines(lead: str, ordered: Sequence[Labelled]) -> str:
    """:func:`_render` of values already in the order of ``when``."""
    groups: dict[str, tuple[list[str], list[str]]] = {}
    for label, value in ordered:
        plain, spaced = groups.setdefault(label, ([], []))
        (spaced if _spaced(value) else plain).append(value)
    lines: list[str] = []
    for label, (plain, spaced) in sorted(groups.items(), key=lambda group: _label_rank(group[0])):
        if plain:
            lines.append(f"{label}: {' '.join(plain)}")
        if spaced:
            lines.append(f"{label}: {_SEPARATOR.join(map(_shown, spaced))};")
    return f"{lead}\n{chr(10).join(lines)}]"


_VISIBLE: Memo[str, tuple[frozenset[str], dict[str, bool]]] = Memo(16)
_VISIBLE_SIZE = 32_768


def _visible_of(text: str) -> tuple[frozenset[str], dict[str, bool]]:
    """The :data:`~ctxplugin.history.identifiers.RUN` s of ``text`` (the text always in view,
    the same for every note of a conversation: kept for the last few), and whether each value
    looked for lately occurs in it (every note of the conversation looks for the same values,
    call after call; emptied when full)."""
    runs, found = _VISIBLE.get_or_make(text, lambda: (text_runs(text), {}))
    if len(found) > _VISIBLE_SIZE:
        found.clear()  # a lookup in another thread finds the answer or looks again
    return runs, found


_Record = tuple[str, tuple[str, ...], bool, int]  # a value's longest run, runs, spacing, tokens on a line
_COSTS: weakref.WeakKeyDictionary[Any, dict[str, _Record]] = weakref.WeakKeyDictionary()
_COSTS_LOCK = threading.Lock()
_COSTS_SIZE = 32_768


def _costs_of(counter: TokenCounter) -> dict[str, _Record]:
    """The :func:`_record` of values counted with ``counter`` lately: every note of a
    conversation tries the same values call after call (the archive's hundreds, at each cap), and
    one lookup here stands for one in each of the memos it is made from. Emptied when full; a fresh
    map for a counter that cannot be weakly referenced."""
    costs = per_counter(_COSTS, _COSTS_LOCK, counter, _COSTS_SIZE)
    return {} if costs is None else costs


def _record(value: str, count: Callable[[str], int]) -> _Record:
    # a value after a space costs its own tokens; one that holds a space, its ``;`` too
    spaced = _spaced(value)
    return longest_run(value), value_runs(value), spaced, count(_shown(value)) + 1 if spaced else count(value)


class _Picker:
    """The values a note lists, picked greedily within a token budget."""

    def __init__(self, known: set[str], visible: str, counter: TokenCounter) -> None:
        self.chosen: list[Labelled] = []
        self._labels: set[tuple[str, bool]] = set()  # the lines begun: a label, of spaced values or not
        self._taken = set(known)
        self._visible = visible
        self._visible_runs, self._visible_found = _visible_of(visible)
        # a value inside one already listed (a path in a command) is shown; sorted, so that what
        # the joined text holds across a separator does not depend on the set's (hash seed's) order
        self._listed = " | ".join(sorted(known))
        self._listed_runs: set[str] = set().union(*map(value_runs, known))  # the runs of ``_listed``
        self._counter = counter
        # the chosen values by their longest alphanumeric run (those with none apart): a value
        # that occurs inside another as a whole token has each of its runs among the other's
        self._by_run: dict[str, list[Labelled]] = {}
        self._runless: list[Labelled] = []
        self._order: dict[Labelled, int] = {}  # each chosen value's turn: the order of ``chosen``
        self.added = 0  # how many values were chosen (a value goes only when another takes its place)
        self.later: list[Labelled] = []

    def _inside(self, value: str, runs: tuple[str, ...]) -> list[Labelled]:
        """The chosen values that ``value`` shows (occur in it as whole tokens), in the order
        they were chosen."""
        by_run = self._by_run
        # each chosen value is in one group (of its longest run) or among the runless, once
        found = [c for run in runs & by_run.keys() for c in by_run[run] if c[1] in value and occurs(c[1], value)]
        found += [c for c in self._runless if c[1] in value and occurs(c[1], value)]
        return sorted(found, key=self._order.__getitem__) if found else []

    def fill(self, values: Sequence[Labelled], budget: int) -> None:
        """Add the values that fit ``budget`` (tokens), in order. ``later`` is left holding
        the values another fill could still add: those too costly now and those not reached
        (a value already shown, listed or taken stays so)."""
        count = self._counter.count
        costs = _costs_of(self._counter)
        taken, labels, chosen, order = self._taken, self._labels, self.chosen, self._order
        visible, visible_runs, visible_found, listed_runs = self._visible, self._visible_runs, self._visible_found, self._listed_runs
        by_run, runless = self._by_run, self._runless
        heads: dict[str, int] = {}  # what beginning a line costs, per label (a fill tries thousands of values)
        later: list[Labelled] = []
        self.later = later
        for index, item in enumerate(values):
            if budget < 2:
                later.extend(values[index:])
                break
            label, value = item
            if value in taken:
                continue
            record = costs.get(value)
            if record is None:
                record = costs[value] = _record(value, count)
            # a value occurs in a text as a whole token only if its longest run is a run there
            run, runs, spaced, cost = record
            if not run or run in visible_runs:
                shown = visible_found.get(value)
                if shown is None:
                    shown = visible_found[value] = occurs(value, visible)
                if shown:
                    continue
            if (not run or run in listed_runs) and occurs(value, self._listed):
                continue
            # values listed earlier that this one shows (a path, then the command holding it) go
            # (most values share no run with a chosen one and none is without runs: none is inside)
            inside = self._inside(value, runs) if runless or not by_run.keys().isdisjoint(runs) else ()
            for c in inside:
                cost -= (costs.get(c[1]) or _record(c[1], count))[3]
            line = (label, spaced)
            if line not in labels:
                head = heads.get(label)
                if head is None:
                    head = heads[label] = count(f"{label}:") + 1
                cost += head
            if cost > budget:
                later.append(item)
                continue
            for c in inside:
                chosen.remove(c)
                del order[c]
                group = by_run.get(longest_run(c[1]))
                (group if group is not None else runless).remove(c)
            entry = (label, value)
            order[entry] = self.added
            self.added += 1
            chosen.append(entry)
            if run:
                by_run.setdefault(run, []).append(entry)
            else:
                runless.append(entry)
            taken.add(value)
            labels.add(line)
            self._listed = f"{self._listed} | {value}"
            listed_runs.update(runs)
            budget -= cost


def fewest_dropped(chosen: int, without: Callable[[int], str], fits: Callable[[str], bool], guess: int = 1) -> tuple[int, str]:
    """How few of the ``chosen`` values a note that does not fit must drop, the latest chosen
    first, and its text then: ``without(k)`` is the note without the latest ``k``, and no value
    left fits when all are dropped. A note's tokens never grow as values leave it, so the number
    is found by doubling it, then halving the gap, not one value at a time: an estimate that ran
    30 values over had the 850-token archive counted 30 times. The search starts at ``guess``
    (checked, and one fewer: two notes counted when it is right); any guess finds the same number."""
    texts: dict[int, str] = {}

    def enough(dropped: int) -> bool:
        text = texts[dropped] = without(dropped)
        return dropped >= chosen or fits(text)

    short, enough_at = 0, min(max(guess, 1), chosen)  # dropping none does not fit
    if enough(enough_at):
        step = 1  # down from the guess, doubling the step, to one that does not fit
        while enough_at - short > 1:
            probe = max(enough_at - step, short + 1)
            if not enough(probe):
                short = probe
                break
            enough_at, step = probe, 2 * step
    else:
        short, enough_at = enough_at, min(2 * enough_at, chosen)
        while not enough(enough_at):
            short, enough_at = enough_at, min(2 * enough_at, chosen)
    while enough_at - short > 1:
        middle = (short + enough_at) // 2
        if enough(middle):
            enough_at = middle
        else:
            short = middle
    return enough_at, texts[enough_at]


def _note(
    span: tuple[int, int],
    values: Sequence[Labelled],
    when: Mapping[str, int],
    known: set[str],
    visible: str,
    max_tokens: int,
    counter: TokenCounter,
    *,
    first: bool = False,
) -> tuple[HumanMessage | None, list[str]]:
    """A context note for exchanges ``span`` listing values not yet known or visible, within
    ``max_tokens``, as ``label: value`` lines (see :func:`_render`; values in the order of ``when``); None when
    nothing fits. Values are picked in the order given while their estimated cost fits, then
    once more with the room the estimate left. The ``first`` note shown also says that stored outputs
    stay readable (said here, not in the header, so the header never changes)."""
    hint = f" ({EXPAND_HINT})" if first else ""
    lead = f"[context note: values used in exchanges {span[0]}-{span[1]}{hint}:"
    picker = _Picker(known, visible, counter)
    picker.fill(values, max_tokens - counter.count(lead) - MESSAGE_OVERHEAD - 1)
    ordered = _in_order(picker.chosen, when)  # kept for dropping values: the chosen change only as values are added
    text = _lines(lead, ordered)
    tokens = note_tokens(text, counter)
    room = max_tokens - tokens - MESSAGE_OVERHEAD
    chosen = picker.chosen
    if room >= 2 and chosen:
        added = picker.added
        picker.fill(picker.later, room)
        if picker.added != added:  # the same values: the same text, counted already
            ordered = _in_order(chosen, when)
            text = _lines(lead, ordered)
            tokens = note_tokens(text, counter)
    over = tokens + MESSAGE_OVERHEAD - max_tokens if chosen else 0
    if over > 0:
        # the latest chosen go until it fits (the others keep their places in ``ordered``), from as many as their costs cover ``over``
        costs, guess, freed = _costs_of(counter), 0, 0
        while freed < 2 * over and guess < len(chosen):  # (in half tokens: a value frees about its cost and a half)
            guess += 1
            record = costs.get(chosen[-guess][1])
            freed += 2 * (record[3] if record else 1) + 1

        def without(dropped: int) -> str:
            gone = set(chosen[len(chosen) - dropped :])
            return _lines(lead, [item for item in ordered if item not in gone])

        dropped, text = fewest_dropped(
            len(chosen), without, lambda note: note_tokens(note, counter) + MESSAGE_OVERHEAD <= max_tokens, guess=guess
        )
        del chosen[len(chosen) - dropped :]
    if not chosen:
        return None, []
    note = HumanMessage(content=text, additional_kwargs={META_KEY: {"condensed": list(span)}})
    return note, [value for _, value in chosen]


def note_values(text: str) -> dict[str, list[str]]:
    """The values a context note lists, by label (``{}`` for text that is not one).

    A line that ends in ``;`` lists values that each end in one, those holding ``; `` in
    backticks (```cd /repo; ls`;``); any other, values separated by spaces (see
    :func:`_render`). Every value a note lists reads back exactly.

    Example:
        >>> note_values("[context note: values used in exchanges 2-3:\\n"
        ...             "ran: python app.py; ls -l;\\ncustomer_id: CUS-40917\\n"
        ...             "lookup_customer returned: ORD-77120 2024-05-01]")
        {'ran': ['python app.py', 'ls -l'], 'customer_id': ['CUS-40917'], 'lookup_customer returned': ['ORD-77120', '2024-05-01']}
    """
    lead, _, body = text.partition("\n")
    if not (lead.startswith("[context note: ") and lead.endswith(":")):
        return {}
    return listed_values(body)


def listed_values(body: str) -> dict[str, list[str]]:
    """The values of a note's ``label: values`` lines (its text after the first line), by label:
    ``{}`` for text that is none (it ends with no ``]``)."""
    if not body.endswith("]"):
        return {}
    out: dict[str, list[str]] = {}
    for line in body[:-1].split("\n"):  # a value may hold another line break (``\u2028``)
        label, _, values = line.partition(": ")
        listed = _spaced_values(values) if values.endswith(";") else values.split(" ")
        out.setdefault(label, []).extend(listed)
    return out

