"""A conversation that fits its room is sent as it was; the facts block holds only what the view
no longer shows."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin import ContextConfig, Scope
from ctxplugin._messages import annotation
from ctxplugin._names import META_TOOL_MARK
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

SCOPE = Scope(session_id="whole")


@tool
def expand_ref(ref_id: str) -> str:
    """Read a stored tool output."""
    return ref_id


expand_ref.metadata = {META_TOOL_MARK: True}  # stands in for ctxplugin's own meta-tool


@tool
def search(q: str) -> str:
    """Search flights."""
    return q


def flights(n: int) -> str:
    return json.dumps([{"flight_number": f"HAT{i:03d}", "price": 100 + i, "seats": i % 7} for i in range(n)])


def conversation(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [
        SystemMessage(content="You are a travel agent."),
        HumanMessage(content="My user id is mia_li_3668 and I always fly economy."),
    ]
    for i in range(turns):
        messages.append(AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": f"SFO-JFK {i}"}, "id": f"c{i}"}]))
        messages.append(ToolMessage(content=flights(40), tool_call_id=f"c{i}", name="search"))
        messages.append(AIMessage(content=f"Cheapest is HAT{i:03d}."))
        messages.append(HumanMessage(content=f"And for day {i + 1}?"))
    return messages


def config(total: int) -> ContextConfig:
    return ContextConfig(
        budget={"total": total, "header": 1000, "history": total, "facts": 400, "summaries": total},
        history={"compress": "over_budget", "max_tokens": 600, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2},
        cas={"passthrough_tokens": 100},
        facts={"skip_shown": True},
    )


def test_a_conversation_that_fits_is_sent_as_it_was() -> None:
    engine = memory_engine(config(40_000))
    messages = conversation(3)
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    # the tool outputs are over the pass-through size, yet nothing is replaced by a ref
    assert prepared.messages[1:] == messages[1:]
    assert prepared.report.refs_used == []
    # no ref in the view, so expand_ref is not sent; the facts the user stated are in the view
    # itself, so no facts block repeats them
    assert "expand_ref" not in prepared.report.tools_bound
    assert not any("Known facts" in str(m.content) for m in prepared.messages)
    # the next call repeats this one's prefix whole
    longer = [*messages, AIMessage(content="Here are the flights for day 4.")]
    again = engine.prepare(longer, tools=[search, expand_ref], scope=SCOPE)
    assert again.messages[: len(prepared.messages)] == prepared.messages


def test_compression_starts_when_the_conversation_outgrows_its_room() -> None:
    engine = memory_engine(config(4_000))
    messages = conversation(8)
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    assert prepared.report.refs_used, "tool outputs become refs once the conversation does not fit"
    assert "expand_ref" in prepared.report.tools_bound
    assert prepared.report.tokens_after < prepared.report.tokens_before


def test_facts_are_listed_only_once_the_view_no_longer_shows_their_message() -> None:
    stated = HumanMessage(content="Please note my frequent flyer number is FF-99812.", id="h-ff")
    def talk(turns: int) -> list[BaseMessage]:
        messages = conversation(turns)
        ask = HumanMessage(content="Which frequent flyer number did I give you?")
        return [*messages[:2], stated, AIMessage(content="Noted."), *messages[2:], AIMessage(content="Sure."), ask]

    short = memory_engine(config(40_000)).prepare(talk(1), tools=[search, expand_ref], scope=SCOPE)
    assert stated in short.messages
    assert not any("Known facts" in str(m.content) for m in short.messages)

    long = memory_engine(config(3_000)).prepare(talk(20), tools=[search, expand_ref], scope=SCOPE)
    assert stated not in long.messages, "the statement's exchange is condensed"
    block = [str(m.content) for m in long.messages if "Known facts" in str(m.content)]
    assert block and "FF-99812" in block[0]


def test_a_short_statement_in_a_user_message_without_an_id_is_not_repeated_as_a_fact() -> None:
    # an LCEL chain or a chat history passes messages without ids: the message the fact was
    # read from is still recognised in the view, so no facts block repeats it and the next call
    # repeats this one's view whole
    engine = memory_engine(config(40_000))
    messages: list[BaseMessage] = [SystemMessage(content="You are a travel agent."), HumanMessage(content="I'm mia_li_3668. What's my status?")]
    first = engine.prepare(messages, scope=SCOPE)
    assert first.messages == messages
    longer = [*messages, AIMessage(content="You are gold."), HumanMessage(content="And my zip?")]
    again = engine.prepare(longer, scope=SCOPE)
    assert again.messages == longer
    assert first.report.facts_extracted >= 1, "the statement was read as a fact, and left out as shown"


def test_expand_ref_stays_bound_once_the_model_has_called_it() -> None:
    engine = memory_engine(config(40_000))
    messages = conversation(1)
    messages += [
        AIMessage(content="", tool_calls=[{"name": "expand_ref", "args": {"ref_id": "ref:json:0000"}, "id": "x1"}]),
        ToolMessage(content="not found", tool_call_id="x1", name="expand_ref"),
    ]
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    assert "expand_ref" in prepared.report.tools_bound


def test_a_view_sent_whole_offers_expand_ref_when_it_shows_a_ref() -> None:
    """A host that keeps what ``capture_tool_result`` returned sends the compact form, ref and
    summary: the model is told to use ``expand_ref`` and must be offered it. A host that keeps
    the original with its ref noted (the LangGraph integration's default) sends no ref."""
    engine = memory_engine(config(40_000))
    raw = conversation(2)
    compact = [engine.capture_tool_result(m, SCOPE) if isinstance(m, ToolMessage) else m for m in raw]
    shown = [m for m in compact if isinstance(m, ToolMessage) and str(m.content).startswith("[ref:")]
    assert shown  # the outputs are over the pass-through size
    prepared = engine.prepare(compact, tools=[search, expand_ref], scope=SCOPE)
    assert prepared.messages[1:] == compact[1:]  # sent as it was
    assert "expand_ref" in prepared.report.tools_bound

    kept = [
        m.model_copy(update={"additional_kwargs": dict(c.additional_kwargs)}) if isinstance(m, ToolMessage) else m
        for m, c in zip(raw, compact, strict=True)
    ]
    assert all(annotation(m).get("ref") for m in kept if isinstance(m, ToolMessage))
    other = Scope(session_id="originals kept")
    prepared = engine.prepare(kept, tools=[search, expand_ref], scope=other)
    assert prepared.messages[1:] == kept[1:]
    assert "expand_ref" not in prepared.report.tools_bound


def test_once_the_conversation_outgrew_its_room_it_stays_tiered() -> None:
    """Its stored form (outputs as refs) would fit the room again, but sending that whole would
    only grow back to the room and be cut again, a cache miss on all of it each time: the view
    is tiered from the first call that did not fit, and stays so."""
    from ctxplugin._layout import context_notes

    engine = memory_engine(config(6_000))
    fits = engine.prepare(conversation(4), tools=[search, expand_ref], scope=SCOPE)
    assert not fits.report.refs_used and not context_notes(fits.messages)
    for turns in (6, 7, 8):
        prepared = engine.prepare(conversation(turns), tools=[search, expand_ref], scope=SCOPE)
        assert prepared.report.refs_used, "the conversation no longer fits: outputs are stored"
        notes = context_notes(prepared.messages)
        assert notes and "exchanges 1-" in notes[0], f"{turns} turns: older exchanges are condensed to notes"
        assert prepared.report.compressed_messages > 0


def test_an_agent_working_alone_is_not_sent_whole_once_its_outputs_outgrow_the_solo_room_without_max_tokens() -> None:
    # solo_exchanges with no aim below the room (max_tokens unset, as in compact mode): 8 outputs
    # of about 280 tokens, each under the pass-through size, outgrow the solo room of 1,500
    # though the whole conversation fits the room; the history is compressed to the room with
    # its outputs held to the solo room, not sent as it was
    engine = memory_engine(
        ContextConfig(
            mode="whole",
            budget={"total": 12_000, "header": 1000, "history": 12_000, "facts": 400, "summaries": 12_000},
            history={"compress": "over_budget", "max_tokens": None, "solo_exchanges": 4, "solo_tool_tokens": 1500},
            cas={"passthrough_tokens": 500},
        )
    )
    messages: list[BaseMessage] = [SystemMessage(content="You are a travel agent."), HumanMessage(content="Find flights SFO to JFK")]
    for i in range(8):
        messages.append(AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": f"day {i}"}, "id": f"c{i}"}]))
        messages.append(ToolMessage(content=flights(12).replace("HAT", f"D{i}H"), tool_call_id=f"c{i}", name="search"))
    counter = get_counter("cl100k_base")[0]
    outputs = [counter.count(str(m.content)) for m in messages if isinstance(m, ToolMessage)]
    assert max(outputs) < 500 and sum(outputs) > 1500
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    shown = {str(m.content) for m in prepared.messages}
    # a history tiered by age shows the older outputs shorter (the defaults, with max_tokens, do)
    assert not all(str(m.content) in shown for m in messages if isinstance(m, ToolMessage))
