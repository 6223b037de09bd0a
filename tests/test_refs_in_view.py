"""What the report says the view uses of the CAS is what the view names: refs of outputs the
history condensed or the budget dropped are listed only where a note still names them, and the
note standing for what the minimum viable view dropped names the latest of them."""

from __future__ import annotations

import json
import re

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin import ContextConfig, Scope
from ctxplugin.history import OMITTED_NOTE, without_expand_hint
from ctxplugin.history.omission import omitted_note
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

SCOPE = Scope(session_id="trip", user_id="u1")
REF = re.compile(r"ref:[a-z0-9][a-z0-9_-]{0,39}:[0-9a-f]{16}")


@tool
def search_flights(origin: str, dest: str) -> str:
    """Search flights between two airports."""
    return ""


def session(searches: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You book flights. " * 20)]
    for i in range(searches):
        messages.append(HumanMessage(f"Find flights {i} from JFK to LAX on 2024-05-{i % 28 + 1:02d}, reference REF{i:04d}. " * 3))
        messages.append(AIMessage("", tool_calls=[{"name": "search_flights", "args": {"origin": "JFK", "dest": "LAX"}, "id": f"c{i}"}]))
        rows = [{"flight": f"UA{i}{j:02d}", "price": 100 + j, "depart": f"2024-05-01T{j % 24:02d}:00"} for j in range(40)]
        messages.append(ToolMessage(json.dumps(rows), tool_call_id=f"c{i}", name="search_flights"))
        messages.append(AIMessage(f"Found 40 flights; cheapest UA{i}00 at $100."))
    messages.append(HumanMessage("Which was the cheapest overall?"))
    return messages


def named(messages: list[BaseMessage]) -> set[str]:
    return {ref for m in messages for ref in REF.findall(content_text(m.content))}


def test_the_refs_used_are_those_the_view_names() -> None:
    engine = memory_engine(ContextConfig(mode="compact"))
    messages = session(40)
    first = engine.prepare(messages[:9], scope=SCOPE, tools=[search_flights])
    prepared = engine.prepare(messages, scope=SCOPE, tools=[search_flights])
    used = prepared.report.refs_used
    assert used and len(used) == len(set(used))
    assert set(used) == named(prepared.messages), "the refs listed are those the view names"
    # the first outputs are condensed away by now: their refs are not the view's
    assert first.report.refs_used and not set(first.report.refs_used) <= set(used)
    assert len(used) < 40


def test_the_minimum_viable_view_names_the_latest_outputs_it_dropped() -> None:
    engine = memory_engine(ContextConfig(mode="compact", budget={"total": 800}))
    messages = session(40)
    prepared = engine.prepare(messages, scope=SCOPE, tools=[search_flights])
    assert any("minimum viable" in w for w in prepared.report.warnings)
    [note] = [m for m in prepared.messages if "earlier exchanges are not shown" in content_text(m.content)]
    refs = REF.findall(content_text(note.content))
    assert len(refs) == 2 and set(refs) == set(prepared.report.refs_used)
    latest = json.loads(engine.expand_ref(refs[0], scope=SCOPE))
    assert latest[0]["flight"] == "UA3900", "the newest output first, whole behind its ref"
    assert json.loads(engine.expand_ref(refs[1], scope=SCOPE))[0]["flight"] == "UA3800"


def test_the_note_names_no_ref_the_view_keeps_nor_any_when_none_was_stored() -> None:
    kept = [ToolMessage("[ref:json:00000000000000aa · 9 tokens stored]\n[1]", tool_call_id="c2")]
    dropped = [
        ToolMessage("[ref:json:00000000000000bb · 9 tokens stored]\n[2]", tool_call_id="c0"),
        ToolMessage("[ref:json:00000000000000aa · 9 tokens stored]\n[1]", tool_call_id="c1"),
    ]
    assert omitted_note(dropped, kept) == (
        "[earlier exchanges are not shown; stored tool outputs stay available through expand_ref, the latest: "
        "ref:json:00000000000000bb]"
    )
    assert omitted_note([HumanMessage("hello")], kept) == OMITTED_NOTE
    # a view that binds no expand_ref keeps the refs and says nothing of the tool
    assert without_expand_hint(omitted_note(dropped, [])) == (
        "[earlier exchanges are not shown; the latest stored tool outputs: ref:json:00000000000000aa, ref:json:00000000000000bb]"
    )


def test_a_note_lists_what_a_stored_output_held_not_what_its_summary_says_of_itself() -> None:
    from ctxplugin.history import note_values

    engine = memory_engine(ContextConfig(mode="compact"))
    prepared = engine.prepare(session(40), scope=SCOPE, tools=[search_flights])
    listed = [
        value
        for m in prepared.messages
        for label, values in note_values(content_text(m.content)).items()
        if label == "search_flights returned"
        for value in values
    ]
    assert any(REF.fullmatch(v) for v in listed), "the outputs' refs are listed"
    assert any(v.startswith("2024-05-01T") for v in listed), "and what they held"
    assert not {"expand_ref", "offset/limit"} & set(listed) and not any(v.startswith("+") for v in listed)
