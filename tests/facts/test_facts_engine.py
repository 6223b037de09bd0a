"""The facts stage of ``engine.prepare``: extraction, the facts block, outdated marks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, Fact, FactsLedger, MemoryFactStore, mark_outdated
from ctxplugin.facts.model import FactQuery
from ctxplugin.testing import conversation_messages, memory_engine
from ctxplugin.testing import facts_block as view_facts

S = Scope(session_id="s1", user_id="u1")
BUDGET = {"total": 20_000, "header": 2000, "history": 10_000, "facts": 1500, "summaries": 6000}


def engine() -> ContextEngine:
    return memory_engine(ContextConfig(budget=BUDGET))  # type: ignore[no-any-return]


def facts_block(messages: list[BaseMessage]) -> str:
    block = view_facts(messages)
    assert not block or block.startswith("Known facts")
    return block


def all_facts(eng: ContextEngine) -> list[Fact]:
    return eng.facts.store.find(FactQuery(reader=S))


def chat(*turns: str) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are a helpful assistant.")]
    for i, turn in enumerate(turns):
        out.append(HumanMessage(turn, id=f"h{i}"))
        if i < len(turns) - 1:
            out.append(AIMessage(f"Reply {i}.", id=f"a{i}"))
    return out


def test_prepare_extracts_facts_and_shows_only_current_ones() -> None:
    eng = engine()
    messages = chat(
        "The data team is on Project Alpha.",
        "Actually, the data team moved to Project Beta.",
        "Which project is the data team on?",
    )
    snapshot = [m.model_dump() for m in messages]
    prepared = eng.prepare(messages, scope=S)
    block = facts_block(prepared.messages)
    assert "Project Beta" in block and "Project Alpha" not in block
    assert prepared.report.facts_extracted == 2
    assert prepared.report.facts and prepared.report.facts[0].key == "data_team"
    assert [m.model_dump() for m in messages] == snapshot, "the transcript is never changed"


def test_emphatic_repetition_in_a_conversation() -> None:
    eng = engine()
    messages = chat(
        "The order is approved.",
        "Yes, the order is approved.",
        "To be clear: the order is approved!",
        "Correction: the order is cancelled.",
        "Should we proceed with the order?",
    )
    prepared = eng.prepare(messages, scope=S)
    block = facts_block(prepared.messages)
    assert "cancelled" in block and "approved" not in block
    humans = {m.id: str(m.content) for m in prepared.messages if isinstance(m, HumanMessage)}
    assert humans["h0"] == "[outdated: order is now: The order is cancelled.] The order is approved."
    assert all(humans[i].startswith("[outdated: order changed, as noted above]") for i in ("h1", "h2")), "quoted once"
    assert humans["h3"] == "Correction: the order is cancelled."
    assert prepared.report.outdated_marked == 3


def test_authority_override_in_the_prepared_view() -> None:
    eng = engine()
    eng.facts.write(
        "Max discount is 15%", key="discount", scope=S, kind="constraint", authority="executive", source="policy"
    )
    messages = chat("Discount: 25% for this customer.", "Can we offer 25%?")
    prepared = eng.prepare(messages, scope=S)
    block = facts_block(prepared.messages)
    assert "Max discount is 15%" in block and "25%" not in block
    first = next(m for m in prepared.messages if m.id == "h0")
    assert str(first.content).startswith("[overruled: a executive constraint applies: Max discount is 15%]")


def test_a_contradicting_plan_replaces_the_old_one_without_naming_it() -> None:
    eng = engine()
    messages = chat(
        "The meeting is Tuesday at 2pm.",
        "Let's do the meeting Thursday at 3pm.",
        "When is the meeting?",
    )
    prepared = eng.prepare(messages, scope=S)
    block = facts_block(prepared.messages)
    assert "Thursday at 3pm" in block and "Tuesday" not in block
    first = next(m for m in prepared.messages if m.id == "h0")
    assert str(first.content).startswith("[outdated: meeting is now:") and "Thursday" in str(first.content)


def test_scope_leak_hypotheticals_stay_out_of_the_facts_block() -> None:
    eng = engine()
    messages = chat("The budget is $50k.", "Suppose the budget is $80k.", "What is the budget?")
    block = facts_block(eng.prepare(messages, scope=S).messages)
    assert "$50k" in block and "$80k" not in block


def test_tool_results_captured_feed_the_facts_block() -> None:
    eng = engine()
    call = AIMessage("", tool_calls=[{"name": "get_reservation_details", "args": {"reservation_id": "OBUT9V"}, "id": "c1"}])
    payload = {"reservation_id": "OBUT9V", "origin": "IAH", "destination": "DEN", "cabin": "economy"}
    result = ToolMessage(json.dumps(payload), tool_call_id="c1", name="get_reservation_details")
    compact = eng.capture_tool_result(result, scope=S)
    messages: list[BaseMessage] = [HumanMessage("Change reservation OBUT9V please", id="h0"), call, compact,
                                   AIMessage("Found it."), HumanMessage("What cabin is OBUT9V in?", id="h1")]
    prepared = eng.prepare(messages, scope=S)
    assert "reservation OBUT9V: origin=IAH, destination=DEN, cabin=economy" in facts_block(prepared.messages)
    # a later read of the same record supersedes the earlier snapshot
    payload["cabin"] = "business"
    eng.capture_tool_result(ToolMessage(json.dumps(payload), tool_call_id="c2", name="get_reservation_details"), scope=S)
    block = facts_block(eng.prepare(messages, scope=S).messages)
    assert "cabin=business" in block and "cabin=economy" not in block


def test_facts_from_a_stored_tool_output_cite_its_ref() -> None:
    eng = engine()
    events = [{"event_id": f"E{i}", "note": f"step {i} of the rebooking"} for i in range(80)]
    payload = {"reservation_id": "ZX81PQ", "cabin": "economy", "events": events}
    compact = eng.capture_tool_result(ToolMessage(json.dumps(payload), tool_call_id="c9", name="get_reservation"), scope=S)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    fact = eng.facts.current("reservation:ZX81PQ", scope=S)
    assert fact is not None and fact.source.ref == ref and fact.source.type == "tool"
    assert eng.expand_ref(ref, scope=S) == json.dumps(payload)


def test_prepare_reads_facts_from_the_whole_output_not_its_summary() -> None:
    eng = engine()
    lines = [f"worker finished batch {i} of the night run" for i in range(300)]
    lines.insert(20, "Note: the release deadline is Friday 14 March.")
    log = "\n".join(lines)
    call = AIMessage("", tool_calls=[{"name": "read_log", "args": {"path": "build.log"}, "id": "c1"}])
    messages: list[BaseMessage] = [HumanMessage("Check the build log", id="h0"), call,
                                   ToolMessage(log, tool_call_id="c1", name="read_log", id="t1"),
                                   AIMessage("Read it."), HumanMessage("When is the release deadline?", id="h1")]
    prepared = eng.prepare(messages, scope=S)
    shown = next(m for m in prepared.messages if isinstance(m, ToolMessage))
    ref = shown.additional_kwargs["ctxplugin"]["ref"]
    assert "deadline" not in str(shown.content)  # the summary leaves the line out
    facts = [f for f in all_facts(eng) if "deadline is Friday 14 March" in f.text]
    assert facts and all(f.source.ref == ref for f in facts)
    # the summary's line labels ("L12: ...") never become keyed facts
    assert not [f for f in all_facts(eng) if f.key and f.key[:1] == "l" and f.key[1:].isdigit()]


def test_outputs_captured_before_prepare_are_not_read_again_from_their_summary() -> None:
    eng = engine()
    log = "\n".join(f"L{i}: step {i} is done" for i in range(1, 200))
    compact = eng.capture_tool_result(ToolMessage(log, tool_call_id="c1", name="read_log", id="t1"), scope=S)
    before = {f.id for f in all_facts(eng)}
    call = AIMessage("", tool_calls=[{"name": "read_log", "args": {}, "id": "c1"}])
    prepared = eng.prepare([HumanMessage("Check the log", id="h0"), call, compact, HumanMessage("Done?", id="h1")], scope=S)
    after = {f.id for f in all_facts(eng) if f.source.type == "tool"}
    assert after <= before
    # nor is a summary taken from a prepared view and sent back (it carries the ref only)
    shown = next(m for m in conversation_messages(prepared.messages) if isinstance(m, ToolMessage))
    assert set(shown.additional_kwargs["ctxplugin"]) == {"ref"}
    eng.prepare([HumanMessage("Check the log", id="h0"), call, shown.model_copy(update={"id": "t2"}),
                 HumanMessage("Done now?", id="h2")], scope=S)
    assert {f.id for f in all_facts(eng) if f.source.type == "tool"} <= before


def test_the_facts_block_does_not_repeat_the_task() -> None:
    eng = engine()
    task = "Fix the parser. The release branch is release-7 and the target date is 14 March."
    messages: list[BaseMessage] = [SystemMessage("You are a coding agent."), HumanMessage(task, id="h0"),
                                   AIMessage("On it.", id="a0"),
                                   HumanMessage("Also, the staging database is db-staging-4.", id="h1")]
    eng.prepare(messages, scope=S)
    stated = {f.text for f in all_facts(eng)}
    assert any("release branch is release-7" in t for t in stated), "facts are still read from the task"
    block = facts_block(eng.prepare([*messages, AIMessage("Noted.", id="a1"),
                                     HumanMessage("Which branch and database?", id="h2")], scope=S).messages)
    assert "db-staging-4" in block
    assert "release-7" not in block, "the task is shown whole on every call"


def test_users_do_not_see_each_others_facts_through_prepare() -> None:
    eng = engine()
    alice, bob = Scope(session_id="a", user_id="alice"), Scope(session_id="b", user_id="bob")
    eng.prepare(chat("My budget is 50k.", "ok"), scope=alice)
    block = facts_block(eng.prepare(chat("What is my budget?"), scope=bob).messages)
    assert "50k" not in block


def test_embedded_engine_keeps_facts_on_disk(tmp_path: Path) -> None:
    first = ContextEngine.embedded(path=tmp_path, config=ContextConfig(budget=BUDGET))
    first.prepare(chat("The launch date is June 3.", "ok"), scope=S)
    assert (tmp_path / "chroma").is_dir()
    again = ContextEngine.embedded(path=tmp_path, config=ContextConfig(budget=BUDGET))
    block = facts_block(again.prepare(chat("When is the launch date?"), scope=S).messages)
    assert "The launch date is June 3." in block


def test_facts_can_be_turned_off_piece_by_piece() -> None:
    config = ContextConfig(budget=BUDGET, facts=FactsConfig(extract=False, mark_outdated=False))
    eng = memory_engine(config)
    messages = chat("The order is approved.", "Actually, the order is cancelled.", "Status of the order?")
    prepared = eng.prepare(messages, scope=S)
    assert prepared.report.facts_extracted == 0 and facts_block(prepared.messages) == ""
    assert not any("[outdated" in str(m.content) for m in prepared.messages)


# ---------------------------------------------------------------- outdated marking, measured
def stale_mentions(messages: list[BaseMessage], stale: str) -> tuple[int, int]:
    """(messages stating the stale value, of which unmarked)."""
    stating = [m for m in messages if stale in str(m.content) and not isinstance(m, SystemMessage)]
    unmarked = [m for m in stating if "[outdated:" not in str(m.content)]
    return len(stating), len(unmarked)


def test_outdated_marks_remove_unmarked_stale_values_from_the_view() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    body: list[BaseMessage] = [
        HumanMessage("The data team is on Project Alpha.", id="h0"),
        AIMessage("Great, Project Alpha it is; I will plan around the Alpha milestones for the data team."),
        HumanMessage("Remind me what the data team works on in Project Alpha?", id="h1"),
        AIMessage("The marketing team is on Project Alpha too."),  # another subject: not marked
        HumanMessage("Actually, the data team moved to Project Beta.", id="h2"),
        AIMessage("Understood: the data team moved from Project Alpha to Project Beta."),  # states both
    ]
    ledger.ingest([m for m in body if isinstance(m, HumanMessage)][:2], scope=S)
    view, marked = mark_outdated(body, ledger=ledger, scope=S)
    assert marked == 0 and stale_mentions(view, "Alpha") == (5, 5), "nothing is superseded yet"
    ledger.ingest([body[4]], scope=S)
    view, marked = mark_outdated(body, ledger=ledger, scope=S)
    assert marked == 3
    assert stale_mentions(view, "Alpha") == (5, 2)
    unmarked = [str(m.content) for m in view if "Alpha" in str(m.content) and "[outdated" not in str(m.content)]
    assert unmarked == [
        "The marketing team is on Project Alpha too.",
        "Understood: the data team moved from Project Alpha to Project Beta.",
    ]
    assert len(view) == len(body) and body[0].content == "The data team is on Project Alpha."
    assert view[0].additional_kwargs["ctxplugin"]["outdated"]
    again, _ = mark_outdated(view, ledger=ledger, scope=S)
    assert [m.content for m in again] == [m.content for m in view], "marking twice adds nothing"


def test_outdated_marks_keep_multimodal_blocks() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    old = HumanMessage([{"type": "text", "text": "The order is approved."}, image], id="h0")
    ledger.ingest([old], scope=S)
    ledger.ingest([HumanMessage("Actually the order is cancelled.", id="h1")], scope=S)
    (view,), marked = mark_outdated([old], ledger=ledger, scope=S)
    assert marked == 1 and isinstance(view.content, list)
    assert view.content[0] == {"type": "text", "text": "[outdated: order is now: The order is cancelled.]"}
    assert view.content[1:] == old.content


# ---------------------------------------------------------------- the invariant
KEYS = ["alpha", "beta", "gamma"]


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(KEYS), st.booleans()), min_size=1, max_size=12))
def test_a_facts_block_never_contains_a_superseded_fact(ops: list[tuple[str, bool]]) -> None:
    eng = engine()
    written: list[Fact] = []
    for n, (key, explicit) in enumerate(ops):
        previous = next((f for f in reversed(written) if f.key == key), None)
        if explicit and previous is not None:
            fact = eng.facts.write(f"value {n} for {key} project", scope=S, supersedes=previous.id)
        else:
            fact = eng.facts.write(f"value {n} for {key} project", key=key, scope=S)
        written.append(fact)
    prepared = eng.prepare(chat("what are the values for alpha beta gamma project?"), scope=S)
    shown = {use.id for use in prepared.report.facts}
    for fact in written:
        stored = eng.facts.get(fact.id, scope=S)
        assert stored is not None
        if not stored.is_valid:
            assert fact.id not in shown
            assert f"] {fact.text}\n" not in facts_block(prepared.messages) + "\n"
    assert shown, "current facts are shown"


def _bedrock_request(messages: list[BaseMessage], tools: list[Any]) -> dict[str, Any]:
    """What langchain-aws sends to Bedrock's Converse API (built offline)."""
    from langchain_aws import ChatBedrockConverse
    from langchain_aws.chat_models.bedrock_converse import (
        _messages_to_bedrock,
        _snake_to_camel_keys,
    )

    model = ChatBedrockConverse(  # type: ignore[call-arg]
        model="anthropic.claude-3-5-sonnet-20240620-v1:0",
        region_name="us-east-1",
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )
    converted, _ = _messages_to_bedrock(list(messages), None, model_id=model.model_id, provider=model.provider)
    params: dict[str, Any] = {}
    if tools:
        bound: Any = model.bind_tools(tools)
        # the keyword translation the model applies before it calls the API
        kwargs = _snake_to_camel_keys(dict(bound.kwargs), excluded_keys={"inputSchema", "properties", "thinking"})
        params = bound.bound._converse_params(**kwargs)
    return {"messages": converted, "toolConfig": params.get("toolConfig")}


def test_an_agent_without_tools_gets_facts_and_notes_a_provider_without_a_tool_list_accepts() -> None:
    # a chat assistant: no tools of its own, in the default mode and compressed
    for config in (ContextConfig(mode="whole"), ContextConfig(budget={"total": 700})):
        eng = memory_engine(config)
        eng.facts.write("Max discount is 15% for every customer", key="max_discount", scope=S, source="policy")
        messages = chat(*(f"Question {i} about the quarterly plan and its numbers, in some detail." for i in range(12)),
                        "What is the max discount?")
        for tools in (None, eng.tools_for_model()):
            prepared = eng.prepare(messages, tools=tools, scope=S)
            assert "Max discount is 15%" in facts_block(prepared.messages)
            request = _bedrock_request(prepared.messages, list(prepared.tools))
            blocks = [b for m in request["messages"] for b in m["content"]]
            # Bedrock refuses toolUse and toolResult blocks in a request without a tool list
            assert request["toolConfig"] or not any("toolUse" in b or "toolResult" in b for b in blocks)
            assert prepared.messages[-1] is messages[-1]


def test_an_engine_given_a_fact_store_alone_builds_its_ledger_on_it(tmp_path: Path) -> None:
    # as answer_cache= takes a cache's store, and cas= a store: facts=MemoryFactStore() failed
    # with "'MemoryFactStore' object has no attribute 'store'" when the engine was built
    store = ChromaFactStore.persistent(tmp_path / "facts")
    try:
        config = ContextConfig(facts={"k": 3})
        engine = ContextEngine(config, facts=store)
        assert isinstance(engine.facts, FactsLedger) and engine.facts.store is store
        assert engine.facts.config is config.facts
        prepared = engine.prepare([HumanMessage("My budget is $500.")], scope=S)
        assert not prepared.report.warnings
        assert [f.text for f in store.find(FactQuery(reader=S, key="my_budget"))] == ["My budget is $500."]
        ledger = FactsLedger(MemoryFactStore())
        assert ContextEngine(facts=ledger).facts is ledger  # a ledger is taken as it is
    finally:
        store.close()
