"""Context notes list what the conversation said, never words scraped from schemas or markup."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, HistoryConfig, Scope
from ctxplugin.history import compress_history
from ctxplugin.testing import chat, context_notes, memory_engine, note_values
from ctxplugin.testing.planning import AGENDA, planning_turns
from ctxplugin.tokens import content_text, count_message, get_counter

SCHEMA = json.dumps(
    {
        "tools": [
            {
                "name": "lookup_customer",
                "description": "Find a customer by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string", "description": "e.g. CUS-40917"}},
                    "required": ["customer_id"],
                },
            }
        ]
    }
)
PAGE = "<html><body><div class=\"alert\" data_role=\"banner\">Order ORD-77120 shipped</div></body></html>"
STRUCTURE = {
    "type", "string", "object", "properties", "required", "parameters", "description", "tools", "name",
    "div", "/div", "/body", "/html", "class", "alert", "data_role", "banner",
}
SCHEMA_WORDS = {"parameters", "properties", "type", "string", "required", "object"}


def conversation(turns: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are a support assistant."), HumanMessage("Help me with customer CUS-40917.")]
    for i in range(turns):
        call = f"c{i}"
        name, content = ("load_tools", SCHEMA) if i == 0 else ("open_page", PAGE) if i == 1 else ("note", "nothing new here, all as before. " * 12)
        args = {"customer_id": "CUS-40917", "region": "EU-WEST-2"} if i < 2 else {}
        out.append(AIMessage("", tool_calls=[{"id": call, "name": name, "args": args}]))
        out.append(ToolMessage(content, tool_call_id=call, name=name))
    out.append(AIMessage("Done."))
    out.append(HumanMessage("What did we find?"))
    return out


def condensed_notes(turns: int) -> list[str]:
    config = ContextConfig(
        budget={"total": 2500, "header": 600, "history": 1600, "facts": 100, "summaries": 600},
        history={"max_tokens": 300, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2},
        facts={"enabled": False},
    )
    prepared = memory_engine(config).prepare(conversation(turns), scope=Scope(session_id="notes"))
    return [note for note in context_notes(prepared.messages) if note.startswith("[context note")]


def test_notes_never_list_json_keys_schema_words_or_markup_names() -> None:
    notes = condensed_notes(24)
    assert notes, "old exchanges were condensed into notes"
    listed: set[str] = set()
    words: set[str] = set()
    for note in notes:
        by_label = note_values(note)
        assert by_label, note
        listed.update(v for values in by_label.values() for v in values)
        words.update(re.findall(r"[\w/]+", note.partition("\n")[2]))
    assert not listed & STRUCTURE, f"structure words in notes: {listed & STRUCTURE}"
    assert not words & SCHEMA_WORDS, f"schema words in notes: {words & SCHEMA_WORDS}"
    assert {"lookup_customer", "ORD-77120"} <= listed, "what was said stays"


def test_notes_are_label_value_lines_about_the_conversation() -> None:
    notes = condensed_notes(24)
    text = "\n".join(notes)
    assert " | " not in text, "values are not a bare list"
    lines = [line for note in notes for line in note.rstrip("]").splitlines()[1:]]
    assert lines and all(re.fullmatch(r"[\w ]+: \S.*", line) for line in lines), lines
    assert "region: EU-WEST-2" in text, "an argument the model passed, under its name"
    assert "CUS-40917" not in note_values(notes[0]).get("customer_id", []), "the task, always shown, is not repeated"
    assert re.search(r"^load_tools returned: .*lookup_customer", text, re.M), "what a tool returned, named by the tool"
    assert re.search(r"^open_page returned: .*ORD-77120", text, re.M)


def test_a_note_keeps_its_token_cap_with_its_labels() -> None:
    counter = get_counter()[0]
    messages: list[BaseMessage] = [HumanMessage("Book the trip for user mia_li_3668.", id="task")]
    for step in range(12):
        call = {"id": f"c{step}", "name": "search_flights", "args": {"origin": f"JFK{step}", "destination": f"SFO{step}", "date": f"2024-05-{step + 10}"}}
        messages.append(AIMessage("", tool_calls=[call], id=f"ai{step}"))
        flights = ", ".join(f"HAT{step}{i:02d}" for i in range(30))
        messages.append(ToolMessage(f"flights: {flights}", tool_call_id=f"c{step}", name="search_flights", id=f"t{step}"))
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=2, archive_blocks=2, archive_tokens=80, digest_tokens=40)
    view = compress_history(messages, config=config, counter=counter, budget=300)
    notes = [m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert notes
    for note in notes:
        assert count_message(note, counter) <= 80
        by_label = note_values(content_text(note.content))
        assert set(by_label) <= {"origin", "destination", "date", "search_flights returned"}, by_label
    archive = note_values(content_text(notes[0].content))
    assert archive["origin"] and archive["date"], "the arguments the model passed come first"


def test_a_long_planning_chat_condensed_into_notes_still_says_who_is_invited(monkeypatch: pytest.MonkeyPatch) -> None:
    # a 30-turn chat whose assistant restates the growing plan each time, so that default
    # settings condense the older turns: the notes keep what the user decided, in order
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)  # the defaults, not the tests' compact mode
    engine = memory_engine(ContextConfig())
    scope = Scope(session_id="offsite-long", user_id="u1")
    turns = planning_turns()
    def reply(i: int, _: str) -> str:
        plan = " ".join(
            f"Item {k + 1}, {topic}: about {20 + k} minutes, with slides and a short written summary sent "
            "before the day so that the discussion can focus on decisions rather than on status updates."
            for k, topic in enumerate(AGENDA[: max(0, i - 3)])
        )
        return f"Noted. The plan so far: {plan}"

    _, prepared = chat(engine, turns, scope=scope, system="You are a planning assistant.", reply=reply)
    assert prepared.report.dropped_exchanges > 0, "older turns were condensed"
    view = "\n".join(content_text(m.content) for m in prepared.messages)
    assert "Lisbon" in view and "Platform Offsite 2026" in view
    assert "platform team" in view and "invite design" in view
    assert "[outdated" not in view and prepared.report.outdated_marked == 0
    said = [v for note in context_notes(prepared.messages) for v in note_values(note).get("user said", [])]
    assert said.index("Invite the platform team only") < said.index("Actually also invite design"), said
    assert "Add agenda item 1: budget review" in said, "agenda items are listed as the user said them"


def test_a_value_that_shows_values_listed_before_takes_their_place() -> None:
    from ctxplugin.history._notes import _note

    counter, _ = get_counter("cl100k_base")
    values = [
        ("path", "/repo/app.py"),
        ("path", "/repo/lib.py"),
        ("path", "app"),
        ("ran", "python /repo/app.py --fix"),  # shows /repo/app.py and app, not /repo/lib.py
        ("ran", "ls"),
    ]
    note, chosen = _note((1, 2), values, {}, set(), "", 200, counter)
    assert note is not None
    assert chosen == ["/repo/lib.py", "python /repo/app.py --fix", "ls"]
    # a label's values without a space are on its first line, those with one on the next
    assert note_values(content_text(note.content)) == {"ran": ["ls", "python /repo/app.py --fix"], "path": ["/repo/lib.py"]}


class _InOrder(set[str]):
    """A set iterated in a given order (a set's own order depends on the hash seed)."""

    def __init__(self, order: list[str]) -> None:
        super().__init__(order)
        self._order = order

    def __iter__(self) -> Iterator[str]:
        return iter(self._order)


def test_a_note_lists_the_same_values_whatever_order_the_known_values_come_in() -> None:
    from ctxplugin.history._notes import _note

    counter, _ = get_counter("cl100k_base")
    values = [("ran", "make | tee"), ("path", "/repo/app.py")]  # the first spans two known values joined
    notes = [
        _note((1, 2), values, {}, _InOrder(order), "", 200, counter)[1]
        for order in (["make", "tee"], ["tee", "make"])
    ]
    assert notes[0] == notes[1]


@pytest.mark.parametrize("odd", ["a\u2028b", "a\x85b", "a\rb", "a\x0cb", "x;", ";", "a\u00a0b", "k: v"])
def test_note_values_reads_back_a_value_holding_a_line_separator_other_than_a_newline(odd: str) -> None:
    # an argument's value is listed whole when it holds no newline: a note reads back as one
    # line per label and kind however else the value breaks
    from ctxplugin.history._notes import _note

    counter, _ = get_counter("cl100k_base")
    values = [("query", odd), ("query", "plain"), ("query", "two words")]
    note, chosen = _note((1, 2), values, {}, set(), "", 200, counter)
    assert note is not None and sorted(chosen) == sorted(v for _, v in values)
    assert sorted(note_values(content_text(note.content))["query"]) == sorted(chosen)


# values as notes list them: stripped, holding a letter or digit
NOTE_VALUE = st.text(st.sampled_from(list("ab1 ;:]`\"-/\t\r\u00a0\u2028\u3000é")), min_size=1, max_size=12).map(str.strip).filter(
    lambda v: any(c.isalnum() for c in v)
)


def test_a_value_holding_a_separator_is_listed_in_backticks_and_read_back_whole() -> None:
    # "ran: cd /repo; ls; make;" was one command or two, for the model as for note_values
    from ctxplugin.history._notes import _note

    counter, _ = get_counter("cl100k_base")
    values = [("ran", "cd /repo; ls"), ("ran", "make test"), ("ran", "`x`; y"), ("ran", "echo `a; b`"), ("ran", "ls;")]
    note, chosen = _note((1, 2), values, {}, set(), "", 200, counter)
    assert note is not None and chosen == [v for _, v in values]
    text = content_text(note.content)
    assert text.endswith("\nran: `cd /repo; ls`; make test; `` `x`; y ``; `` echo `a; b` ``; ls;;]")
    assert note_values(text) == {"ran": [v for _, v in values]}


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["path", "ran", "user said", "bash returned"]), NOTE_VALUE), min_size=1, max_size=8, unique_by=lambda x: x[1]))
def test_note_values_reads_back_every_value_a_note_lists(values: list[tuple[str, str]]) -> None:
    from ctxplugin.history._notes import _render

    lead = "[context note: values used in exchanges 1-2:"
    read = note_values(_render(lead, values, {value: i for i, (_, value) in enumerate(values)}))
    assert {label: sorted(listed) for label, listed in read.items()} == {
        label: sorted(v for named, v in values if named == label) for label in {label for label, _ in values}
    }


def test_a_note_names_the_ref_of_a_stored_output_it_condenses_not_its_size() -> None:
    # the compact form of a captured output opens with its ref line; the note keeps the ref (the
    # model reads the output back with it) and none of the line's other words
    engine = memory_engine(ContextConfig(
        budget={"total": 2500, "header": 600, "history": 1600, "facts": 100, "summaries": 600},
        history={"max_tokens": 300, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2},
        facts={"enabled": False},
    ))
    scope = Scope(session_id="refs")
    messages: list[BaseMessage] = [SystemMessage("You are a research assistant."), HumanMessage("Compare the three vendors.")]
    refs: list[str] = []
    for i in range(16):
        messages.append(AIMessage("", tool_calls=[{"id": f"c{i}", "name": "fetch_page", "args": {"page": f"p{i}"}}]))
        page = "\n".join(f"Vendor row {i}-{n}: plan tier {n} costs {17 * n + i} dollars a month." for n in range(60))
        captured = engine.capture_tool_result(ToolMessage(page, tool_call_id=f"c{i}", name="fetch_page"), scope)
        refs.append(str(captured.additional_kwargs["ctxplugin"]["ref"]))
        messages.append(captured)
    messages.append(AIMessage("Done."))
    messages.append(HumanMessage("Which is cheapest?"))
    prepared = engine.prepare(messages, scope=scope)
    notes = [n for n in context_notes(prepared.messages) if n.startswith("[context note")]
    assert notes
    returned = [v for note in notes for v in note_values(note).get("fetch_page returned", [])]
    condensed = [ref for ref in refs if not any(ref in content_text(m.content) for m in prepared.messages if not content_text(m.content).startswith("[context note"))]
    assert condensed and all(ref in returned for ref in condensed), (condensed, returned)
    assert "expand_ref" not in returned and not any(re.fullmatch(r"[\d,]+", v) for v in returned), returned


def test_values_without_a_space_are_listed_between_spaces_and_the_others_each_end_in_a_semicolon() -> None:
    from ctxplugin.history._notes import _note

    counter, _ = get_counter("cl100k_base")
    numbers = [str(n) for n in range(447, 487)]
    values = [("ran", "sed -n 1,20p a.py"), ("ran", "ls"), ("ran", "make;make"), *(("bash returned", n) for n in numbers)]
    lead = "[context note: values used in exchanges 1-2 (expand_ref reads their stored outputs):"
    listed = f"{lead}\nran: ls\nran: sed -n 1,20p a.py; make;make;\nbash returned: {' '.join(numbers)}]"
    budget = counter.count(listed) + 8  # the message's own overhead and a little room
    note, _ = _note((1, 2), values, {}, set(), "", budget, counter, first=True)
    assert note is not None
    assert content_text(note.content) == listed
    assert note_values(listed) == {"ran": ["ls", "sed -n 1,20p a.py", "make;make"], "bash returned": numbers}
    # a space before each value costs no token where a separator costs one: listed with
    # separators, the same values would not fit
    assert counter.count("; ".join(numbers)) > counter.count(" ".join(numbers)) + 8


def test_a_value_is_spaced_for_every_character_str_isspace_calls_whitespace_and_a_semicolon() -> None:
    import sys

    from ctxplugin.history._notes import _spaced

    for code in range(sys.maxunicode + 1):
        char = chr(code)
        assert _spaced(f"a{char}b") is (char.isspace() or char == ";"), hex(code)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(["path", "ran", "bash returned"]), NOTE_VALUE), min_size=1, max_size=30, unique_by=lambda x: x[1]),
    st.integers(min_value=20, max_value=90),
    st.randoms(use_true_random=False),
)
def test_a_note_cut_to_its_cap_lists_what_it_keeps_in_the_order_it_was_said(
    values: list[tuple[str, str]], cap: int, shuffle: random.Random
) -> None:
    # values dropped to fit the cap leave the others in the conversation's order
    from ctxplugin.history._notes import _note, _render

    counter, _ = get_counter("cl100k_base")
    said = [value for _, value in values]
    shuffle.shuffle(said)
    when = {value: i for i, value in enumerate(said)}
    note, chosen = _note((1, 2), values, when, set(), "", cap, counter)
    if note is None:
        return
    label = {value: name for name, value in values}
    lead = "[context note: values used in exchanges 1-2:"
    assert content_text(note.content) == _render(lead, [(label[v], v) for v in chosen], when)
    assert count_message(note, counter) <= cap


class _Recording:
    """A counter that counts as cl100k_base does and records every text it is asked about."""

    def __init__(self) -> None:
        self._counter, _ = get_counter("cl100k_base")
        self.name = self._counter.name
        self.texts: list[str] = []

    def count(self, text: str) -> int:
        self.texts.append(text)
        return self._counter.count(text)


def test_a_value_tried_by_one_note_is_not_counted_again_by_the_next() -> None:
    from ctxplugin.history._notes import _note

    values = [
        ("path", "/repo/app.py"),
        ("ran", "python /repo/app.py --fix"),  # shows /repo/app.py: its cost is taken off
        ("ran", "cd /repo; ls"),  # listed in backticks
        ("bash returned", "ERROR-4417"),
        *(("bash returned", f"value_{n}") for n in range(30)),
    ]
    counter = _Recording()
    first = _note((1, 2), values, {}, set(), "", 60, counter)
    again = _note((1, 2), values, {}, set(), "", 45, counter)
    assert {"/repo/app.py", "ERROR-4417"} <= set(counter.texts)  # the first note counted its values
    counter.texts.clear()
    assert _note((1, 2), values, {}, set(), "", 60, counter) == first
    assert _note((1, 2), values, {}, set(), "", 45, counter) == again
    assert not {value for _, value in values} & set(counter.texts)
    assert not any(text.startswith("`") for text in counter.texts)
    # the same notes as a counter that never counted them makes
    assert _note((1, 2), values, {}, set(), "", 60, _Recording()) == first
    assert _note((1, 2), values, {}, set(), "", 45, _Recording()) == again


def test_a_note_the_room_left_adds_nothing_to_is_counted_once() -> None:
    # the second fill tries the values too costly for the first in the room the estimate left:
    # none fits it here, so the note is the one already counted
    from ctxplugin.history._notes import _note

    long = [("bash returned", " ".join(f"word{n}_{k}" for k in range(12))) for n in range(4)]
    values = [*(("bash returned", f"v{n}") for n in range(6)), *long]
    counter = _Recording()
    note, chosen = _note((1, 2), values, {}, set(), "", 40, counter)
    assert note is not None and chosen == [f"v{n}" for n in range(6)]
    text = content_text(note.content)
    assert count_message(note, get_counter("cl100k_base")[0]) < 40 - 2  # the room was there
    assert counter.texts.count(text) == 1


def test_the_costs_kept_per_counter_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # emptied when a note finds them over the bound: at most the bound and one note's values
    from ctxplugin.history import _notes

    monkeypatch.setattr(_notes, "_COSTS_SIZE", 10)
    counter = _Recording()
    for note in range(6):
        values = [("bash returned", f"value_{note}_{n}") for n in range(8)]
        made = _notes._note((1, 2), values, {}, set(), "", 400, counter)
        assert made == _notes._note((1, 2), values, {}, set(), "", 400, _Recording())
        assert len(_notes._COSTS[counter]) <= 10 + 8


def test_a_value_tried_again_is_read_from_its_record_not_from_each_memo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # every note of a conversation tries the same values call after call: the second note finds
    # each value's runs and cost in one record, with the same note as a result
    from ctxplugin.history import _notes

    counter = _Recording()
    values = [("bash returned", f"value_{n}") for n in range(8)] + [
        ("ran", f"cat file_{n}.txt") for n in range(8)
    ]
    first = _notes._note((1, 2), values, {}, set(), "", 400, counter)
    looked: list[str] = []

    def counted(read: Callable[[str], object]) -> Callable[[str], object]:
        def wrapper(value: str) -> object:
            looked.append(value)
            return read(value)

        return wrapper

    for name in ("longest_run", "value_runs"):
        monkeypatch.setattr(_notes, name, counted(getattr(_notes, name)))
    assert _notes._note((1, 2), values, {}, set(), "", 400, counter) == first
    assert looked == []


def test_a_value_in_the_text_in_view_is_left_out_of_every_note_and_a_part_of_a_longer_token_is_not() -> None:
    from ctxplugin.history import _notes

    counter, _ = get_counter("cl100k_base")
    task = "Fix issue 4700 in app.py, see /repo/app.py"
    values = [("bash returned", "470"), ("path", "app.py"), ("path", "app.p"), ("path", "/repo/app.py"), ("ran", "ls"), ("bash returned", "4700")]
    for _ in range(2):  # the second note finds what the first looked for
        _, chosen = _notes._note((1, 2), values, {}, set(), task, 200, counter)
        assert chosen == ["470", "app.p", "ls"]
    # looked for only where its longest run is a run of the text: ``470`` is not one
    assert _notes._visible_of(task)[1] == {"app.py": True, "app.p": False, "/repo/app.py": True, "4700": True}


def test_what_was_looked_for_in_the_text_in_view_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # emptied when a note finds it over the bound: at most the bound and one note's values
    from ctxplugin.history import _notes

    monkeypatch.setattr(_notes, "_VISIBLE_SIZE", 10)
    counter, _ = get_counter("cl100k_base")
    task = "Rename alpha to beta in gamma.py"
    for note in range(6):
        values = [("bash returned", f"alpha-{note}-{n}") for n in range(8)]
        _, chosen = _notes._note((1, 2), values, {}, set(), task, 400, counter)
        assert chosen == [value for _, value in values]
        assert len(_notes._visible_of(task)[1]) <= 10 + 8


def _sized_note(chosen: int, room: int) -> tuple[Callable[[int], str], Callable[[str], bool], list[int]]:
    """A note of 10 tokens of lead and 3 per value left, which fits ``room``: how it reads with
    ``dropped`` of its ``chosen`` values left out, whether it fits, and the drops tried."""
    tried: list[int] = []

    def without(dropped: int) -> str:
        tried.append(dropped)
        return "x" * (10 + 3 * (chosen - dropped))

    def fits(note: str) -> bool:
        return len(note) <= room

    return without, fits, tried


def _linear(chosen: int, room: int) -> int:
    """The values a search dropping one at a time drops."""
    return next((k for k in range(1, chosen + 1) if 10 + 3 * (chosen - k) <= room), chosen)


def test_fewest_dropped_drops_as_few_as_dropping_one_at_a_time() -> None:
    from ctxplugin.history._notes import fewest_dropped

    for chosen in range(1, 70):
        for room in range(0, 3 * chosen + 12):
            without, fits, tried = _sized_note(chosen, room)
            dropped, text = fewest_dropped(chosen, without, fits)
            linear = _linear(chosen, room)
            assert (dropped, text) == (linear, "x" * (10 + 3 * (chosen - linear)))
            assert len(tried) <= 2 * chosen.bit_length() + 1


def test_fewest_dropped_from_a_guess_drops_as_few_as_from_none() -> None:
    # the guess (the latest values whose tokens cover what the note ran over) only saves
    # renders: whatever it is, the values dropped are those dropping one at a time drops
    from ctxplugin.history._notes import fewest_dropped

    for chosen in range(1, 40):
        for room in range(0, 3 * chosen + 12, 2):
            linear = _linear(chosen, room)
            for guess in range(-1, chosen + 3):
                without, fits, tried = _sized_note(chosen, room)
                dropped, text = fewest_dropped(chosen, without, fits, guess=guess)
                assert (dropped, text) == (linear, "x" * (10 + 3 * (chosen - linear))), (chosen, room, guess)
                assert len(tried) <= 4 * chosen.bit_length() + 2
                if guess == linear:
                    assert len(tried) <= 2, "a right guess is checked, and one fewer"


def test_what_a_failed_call_printed_is_listed_as_a_failure_not_as_what_the_tool_returned() -> None:
    """A call that failed (its result's status is ``error``) is listed under ``<tool> failed``:
    listed under ``<tool> returned``, the ids its error names would read as found."""
    messages: list[BaseMessage] = [SystemMessage("You are a travel agent."), HumanMessage("Find my bookings.")]
    for i in range(16):
        fails = i % 2 == 0
        output = f"Error: flight FL-{i}00 of this booking was cancelled" if fails else f"Booking confirmed on flight FL-{i}00."
        messages += [
            AIMessage("", tool_calls=[{"id": f"c{i}", "name": "lookup", "args": {"booking": f"BK-{i}00"}}]),
            ToolMessage(output, tool_call_id=f"c{i}", name="lookup", status="error" if fails else "success"),
            AIMessage(f"Checked {i}."),
            HumanMessage(f"Next {i}."),
        ]
    config = ContextConfig(
        mode="compact",
        history={"max_tokens": 300, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2},
        facts={"enabled": False},
    )
    prepared = memory_engine(config).prepare(messages, scope=Scope(session_id="failed"))
    notes = [note for note in context_notes(prepared.messages) if note.startswith("[context note")]
    assert notes, "old exchanges were condensed into notes: the test shows nothing"
    returned = {v for note in notes for v in note_values(note).get("lookup returned", [])}
    failed = {v for note in notes for v in note_values(note).get("lookup failed", [])}
    assert {v for v in returned if v.startswith("FL-")}, f"what the calls that worked returned is listed: {notes}"
    assert failed and all(int(v[3:-2]) % 2 == 0 for v in failed if v.startswith("FL-")), notes
    assert not any(v.startswith("FL-") and int(v[3:-2]) % 2 == 0 for v in returned), notes
