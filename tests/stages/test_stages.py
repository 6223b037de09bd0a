"""Stages alone, on hand-made views: each takes a view and returns a new one."""

from __future__ import annotations

import dataclasses
import time
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin._messages import META_KEY, MISSING_RESULT
from ctxplugin._names import META_TOOL_MARK
from ctxplugin._stored_refs import GrownRefs
from ctxplugin.budget import FactLine
from ctxplugin.cas.memory import MemoryCASStore
from ctxplugin.config import ContextConfig, HistoryConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import Scope
from ctxplugin.stages import (
    Account,
    CallView,
    CaptureMemo,
    CompressHistory,
    FindRoom,
    SkipShown,
    StoreRefs,
    Tools,
    Validate,
    choose_tools,
)
from ctxplugin.tokens import get_counter
from ctxplugin.tools import ToolRegistry

COUNTER = get_counter("cl100k_base")[0]


@tool
def expand_ref(ref_id: str) -> str:
    """Read a stored tool output."""
    return ref_id


expand_ref.metadata = {META_TOOL_MARK: True}  # stands in for ctxplugin's own meta-tool


@tool
def lookup(order_id: str) -> str:
    """Look an order up."""
    return order_id


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage(content="You help with orders."),
        HumanMessage(content="Where is order W1234?", id="h1"),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": "W1234"}, "id": "c1"}]),
        ToolMessage(content="W1234 shipped on 2024-05-02", tool_call_id="c1", name="lookup"),
    ]


def fresh_view(messages: list[BaseMessage], tools: tuple[object, ...] = (), config: ContextConfig | None = None) -> CallView:
    budgets = (config or ContextConfig(encoding="cl100k_base")).budget.resolve()
    return CallView(
        scope=Scope(session_id="s1"), received=messages, tools_given=tools, budgets=budgets, started=time.perf_counter()
    )


def test_validate_splits_the_header_and_leaves_the_view_it_was_given() -> None:
    view = fresh_view(conversation())
    out = Validate().apply(view)
    assert [type(m) for m in out.header] == [SystemMessage]
    assert len(out.history) == 3 and out.original == out.history
    assert view.history == () and out is not view
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.history = ()  # type: ignore[misc]


def test_validate_raises_on_what_cannot_be_sent() -> None:
    with pytest.raises(InvalidInputError):
        Validate().apply(fresh_view([]))


def test_validate_checks_a_growing_conversation_as_a_fresh_check_would() -> None:
    stage = Validate(orphans="pair")
    messages = conversation()
    messages[3:] = [
        ToolMessage(content="stray", tool_call_id="c0", name="lookup"),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {}, "id": "c2"}, {"name": "lookup", "args": {}, "id": "c3"}]),
        ToolMessage(content="W1234 shipped", tool_call_id="c2", name="lookup"),
    ]
    views = []
    for extra in ([], [HumanMessage(content="and W99?")], [AIMessage(content="W99 is late")]):
        messages += extra
        views.append(stage.apply(fresh_view(list(messages))))
        fresh = Validate(orphans="pair").apply(fresh_view(list(messages)))
        assert views[-1].history == fresh.history and views[-1].warnings == fresh.warnings
    # the placeholder for c3 is the same object from call to call, once it is made
    placeholders = [[m for m in v.history if isinstance(m, ToolMessage) and m.content == MISSING_RESULT] for v in views]
    assert [len(p) for p in placeholders] == [2, 2, 2]
    assert placeholders[1][1] is placeholders[2][1] and placeholders[1][1].tool_call_id == "c3"
    # a conversation that does not start with the messages checked before is checked afresh
    edited = [*messages[:2], HumanMessage(content="never mind")]
    assert Validate(orphans="pair").apply(fresh_view(edited)).history == stage.apply(fresh_view(edited)).history


def test_refs_of_a_growing_conversation_are_those_of_a_fresh_stage() -> None:
    config = ContextConfig(encoding="cl100k_base")
    captures = CaptureMemo(MemoryCASStore(), config.cas, COUNTER)
    stage = StoreRefs(enabled=True, captures=captures)
    messages: list[BaseMessage] = [HumanMessage(content="List the logs.", id="h1")]
    views = []
    for turn in range(3):
        listing = "\n".join(f"/var/log/app-{turn}-{n}.log  {n * 1024} bytes" for n in range(200))
        messages += [
            AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": str(turn)}, "id": f"c{turn}"}]),
            ToolMessage(content=listing, tool_call_id=f"c{turn}", name="lookup"),
        ]
        view = Validate().apply(fresh_view(list(messages)))
        views.append(stage.apply(view))
        fresh = StoreRefs(enabled=True, captures=captures).apply(view)
        assert (views[-1].history, views[-1].refs_used, views[-1].stored) == (fresh.history, fresh.refs_used, fresh.stored)
        # each call stores its new output, and only that; the fresh stage finds them all stored
        assert views[-1].refs_created == (views[-1].stored[f"c{turn}"],) and fresh.refs_created == ()
        # and says what it grew by since the previous call's (which a fresh stage cannot say)
        stored = views[-1].stored
        assert isinstance(stored, GrownRefs) and stored.added == ((f"c{turn}", stored[f"c{turn}"]),)
        assert stored.before is (views[-2].stored if turn else None) and isinstance(fresh.stored, GrownRefs) and fresh.stored.before is None
    assert len(views[-1].refs_used) == 3
    assert views[0].history[2] is views[2].history[2], "an output shown as its ref is the same copy on every call"


def test_an_output_changed_in_place_is_stored_again() -> None:
    config = ContextConfig(encoding="cl100k_base")
    captures = CaptureMemo(MemoryCASStore(), config.cas, COUNTER)
    stage = StoreRefs(enabled=True, captures=captures)
    listing = "\n".join(f"/var/log/app-{n}.log  {n * 1024} bytes" for n in range(200))
    messages: list[BaseMessage] = [
        HumanMessage(content="List the logs.", id="h1"),
        AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": "1"}, "id": "c1"}]),
        ToolMessage(content=listing, tool_call_id="c1", name="lookup"),
    ]
    before = stage.apply(Validate().apply(fresh_view(list(messages))))
    messages[2].content = listing.replace("/var/log/", "/srv/logs/")  # the host rewrote it in place
    view = Validate().apply(fresh_view([*messages, HumanMessage(content="And now?", id="h2")]))
    after = stage.apply(view)
    fresh = StoreRefs(enabled=True, captures=captures).apply(view)
    assert after.history == fresh.history and after.stored == fresh.stored
    assert after.stored["c1"] != before.stored["c1"], "the new content has a ref of its own"
    assert isinstance(after.stored, GrownRefs) and after.stored.before is None, "a changed map does not say it grew"


def test_a_conversation_that_fits_goes_whole_without_expand_ref() -> None:
    config = ContextConfig(encoding="cl100k_base", history=HistoryConfig(compress="over_budget"))
    view = Validate().apply(fresh_view(conversation(), (lookup, expand_ref), config))
    view = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER)).apply(view)
    assert expand_ref in view.tools
    out = FindRoom(history=config.history, facts=config.facts, counter=COUNTER).apply(view)
    assert out.room is not None and out.room.whole
    assert expand_ref not in out.tools
    assert out.tool_tokens == view.tool_tokens - view.expand_ref_tokens


def header_of(stage: Tools, messages: list[BaseMessage], config: ContextConfig) -> tuple[SystemMessage, ...]:
    return stage.apply(Validate().apply(fresh_view(messages, (lookup,), config))).system


@pytest.mark.parametrize("prompt", ["You help with orders.", [{"type": "text", "text": "You help with orders."},
                                                              {"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]])
def test_the_host_prompt_is_sent_as_given_and_the_directory_in_a_message_of_its_own(prompt: Any) -> None:
    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    host = SystemMessage(content=prompt, name="policy", id="sys-1")
    as_given = host.model_dump()
    header = header_of(stage, [host, *conversation()[1:]], config)
    assert len(header) == 2
    assert header[0].model_dump() == as_given, "the host's system prompt is sent exactly as it gave it"
    assert host.model_dump() == as_given, "and its own message is left as it was"
    directory = header[1]
    assert isinstance(directory, SystemMessage) and isinstance(directory.content, str)
    assert directory.content.startswith("Tool directory.") and directory.content.endswith("\n- lookup: Look an order up")
    assert "You help with orders." not in directory.content


def test_without_a_directory_the_header_is_the_host_prompt_alone() -> None:
    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "never"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    messages = conversation()
    assert [m.content for m in header_of(stage, messages, config)] == ["You help with orders."]
    assert header_of(stage, messages[1:], config) == ()
    always = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    alone = header_of(Tools(config=always.tools, counter=COUNTER, registry=ToolRegistry(COUNTER)), messages[1:], always)
    assert len(alone) == 1 and str(alone[0].content).startswith("Tool directory."), "no host prompt: the directory alone"


def test_several_host_system_messages_are_kept_as_given_in_order() -> None:
    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    given = [SystemMessage(content="You help with orders."), SystemMessage(content=[{"type": "text", "text": "Today is Monday."}])]
    header = header_of(stage, [*given, *conversation()[1:]], config)
    assert [m.model_dump() for m in header[:2]] == [m.model_dump() for m in given]
    assert str(header[2].content).startswith("Tool directory.")


def test_the_header_messages_are_the_same_objects_while_they_say_the_same() -> None:
    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    messages = conversation()
    first = header_of(stage, messages, config)
    again = header_of(stage, [*messages, HumanMessage(content="and W99?")], config)
    assert len(first) == 2 and all(a is b for a, b in zip(again, first, strict=True))
    rebuilt = [SystemMessage(content="You help with " + "orders."), *messages[1:]]  # a host that builds it every call
    assert all(a is b for a, b in zip(header_of(stage, rebuilt, config), first, strict=True))
    first[0].content = "Ignore the rules."  # something downstream wrote over the header it was given
    kept = header_of(stage, messages, config)
    assert kept[0] is not first[0] and kept[0].content == "You help with orders." and kept[1] is first[1]
    messages[0].content = "You help with returns."  # the host changed its prompt in place
    changed = header_of(stage, messages, config)
    assert changed[0] is not kept[0] and changed[0].content == "You help with returns." and changed[1] is first[1]
    blocks = [SystemMessage(content=[{"type": "text", "text": "Rules."}]), *messages[1:]]
    made = header_of(stage, blocks, config)
    assert header_of(stage, [SystemMessage(content=[{"type": "text", "text": "Rules."}]), *messages[1:]], config)[0] is made[0]
    blocks[0].content.append({"type": "text", "text": "More rules."})  # type: ignore[union-attr]
    grown = header_of(stage, blocks, config)
    assert grown[0].content == [{"type": "text", "text": "Rules."}, {"type": "text", "text": "More rules."}]
    assert made[0].content == [{"type": "text", "text": "Rules."}], "a view already made is not changed by the host's edit"


def test_a_text_prompt_that_reads_like_blocks_is_not_sent_as_the_blocks_it_reads_like() -> None:
    import json

    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    blocks: list[str | dict[Any, Any]] = [{"type": "text", "text": "Rules."}]
    as_blocks = header_of(stage, [SystemMessage(content=blocks), *conversation()[1:]], config)[0]
    as_text = header_of(stage, [SystemMessage(content=json.dumps(blocks, sort_keys=True)), *conversation()[1:]], config)[0]
    assert as_blocks.content == blocks
    assert as_text.content == json.dumps(blocks, sort_keys=True), "a text prompt is sent as the text it is"
    tagged = SystemMessage(content="You help with orders.", response_metadata={"source": "policy-v2"})
    assert header_of(stage, conversation(), config)[0].response_metadata == {}
    assert header_of(stage, [tagged, *conversation()[1:]], config)[0].model_dump() == tagged.model_dump()


def test_every_tracked_session_keeps_its_header_objects_when_each_has_its_own_message_id() -> None:
    """A system message kept in a graph's state carries an id of that thread's: as many
    distinct messages as sessions, each to stay the same object from call to call."""
    from ctxplugin.stages.view import SESSIONS_TRACKED

    config = ContextConfig.model_validate({"encoding": "cl100k_base", "tools": {"directory": "always"}})
    stage = Tools(config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    prompts = [[SystemMessage(content="You help with orders.", id=f"system-{k}")] for k in range(SESSIONS_TRACKED)]
    first = [stage.header(parts, "Tool directory.") for parts in prompts]
    again = [stage.header(parts, "Tool directory.") for parts in prompts]
    assert all(b[0] is a[0] and b[1] is a[1] for a, b in zip(first, again, strict=True))
    assert [h[0].id for h in again] == [f"system-{k}" for k in range(SESSIONS_TRACKED)]


def test_choose_tools_binds_the_hosts_meta_tools_as_given() -> None:
    config = ContextConfig(encoding="cl100k_base")
    choice = choose_tools([lookup, expand_ref], [], config=config.tools, counter=COUNTER, registry=ToolRegistry(COUNTER))
    assert choice.expand_ref is expand_ref and choice.bound[-1] is expand_ref


def test_shown_leaves_out_a_fact_read_from_a_message_the_view_still_shows() -> None:
    view = Validate().apply(fresh_view(conversation()))
    from_output = FactLine(text="W1234 shipped", score=1.0, fact_id="f1", source_ref="c1")
    elsewhere = FactLine(text="the customer is a member", score=0.5, fact_id="f2", source_ref="c9")
    out = SkipShown().apply(view.override(facts=(from_output, elsewhere)))
    assert out.facts == (elsewhere,)


def test_shown_leaves_out_a_mention_whose_values_the_first_note_lists() -> None:
    view = Validate().apply(fresh_view(conversation()))
    archive = HumanMessage(
        content="[context note: exchanges 1-8 are condensed to the values they used:\npath: ./src/parser/helpers.py; HAT136]",
        additional_kwargs={META_KEY: {"condensed": [0, 8]}},
    )
    block = HumanMessage(content="[context note: exchanges 9-12: W9876]", additional_kwargs={META_KEY: {"condensed": [8, 12]}})
    history = (view.history[0], archive, block, *view.history[1:])

    def line(fact_id: str, statement: str, kind: str) -> FactLine:
        return FactLine(text=f"[{kind}] {statement}", score=1.0, fact_id=fact_id, statement=statement, kind=kind)

    listed = line("f1", "./src/parser/helpers.py", "entity")  # its one value is in the archive
    both = line("f2", "Flight HAT136 departs from src/parser/helpers.py", "metric")
    partly = line("f3", "HAT136 and HAT999", "entity")  # one value is not listed
    later = line("f4", "W9876", "entity")  # only a later note lists it: the block must not follow every move
    keyed = line("f5", "HAT136", "fact")  # states what is current: kept whatever the notes list
    out = SkipShown().apply(view.override(history=history, facts=(listed, both, partly, later, keyed)))
    assert out.facts == (partly, later, keyed)


def test_shown_follows_a_conversation_that_grows_and_one_that_is_edited() -> None:
    # the stage keeps the session's message ids between calls: a message added since is shown,
    # and a message the host replaced is read again
    validate, stage = Validate(), SkipShown()
    line = FactLine(text="W77 shipped", score=1.0, fact_id="f1", source_ref="c7")
    messages = conversation()
    first = validate.apply(fresh_view(messages))
    assert stage.apply(first.override(facts=(line,))).facts == (line,)
    call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": "W77"}, "id": "c7"}])
    grown = validate.apply(fresh_view([*messages, call, ToolMessage(content="W77 shipped", tool_call_id="c7")]))
    assert grown.original_stamp is not None and grown.original_stamp.grew_from(first.original_stamp)
    assert stage.apply(grown.override(facts=(line,))).facts == ()
    edited = [*messages[:3], ToolMessage(content="W1234 shipped on 2024-05-02", tool_call_id="c1"), call]
    edited.append(ToolMessage(content="W77 is delayed", tool_call_id="c7"))
    again = validate.apply(fresh_view(edited))
    assert again.original_stamp is not None and not again.original_stamp.grew_from(grown.original_stamp)
    assert stage.apply(again.override(facts=(line,))).facts == ()


def test_history_and_account_need_the_stages_before_them() -> None:
    view = Validate().apply(fresh_view(conversation()))
    with pytest.raises(InvalidInputError, match="room"):
        CompressHistory(config=HistoryConfig(), counter=COUNTER).apply(view)
    with pytest.raises(InvalidInputError, match="fit"):
        Account(counter=COUNTER).apply(view)


def test_degraded_adds_a_warning_and_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    view = fresh_view(conversation())
    with caplog.at_level("WARNING", logger="ctxplugin"):
        out = view.degraded("CAS unavailable; tool output passed through")
    assert out.warnings == ("CAS unavailable; tool output passed through",)
    assert "session s1" in caplog.text


def test_override_copies_every_field_changes_only_those_named_and_refuses_others() -> None:
    view = fresh_view(conversation()).override(compressed=2, warnings=("a",))
    out = view.override(omitted=3)
    assert (out.omitted, out.compressed, out.warnings, out.scope, out.received) == (3, 2, ("a",), view.scope, view.received)
    assert view.omitted == 0, "the view overridden is left as it was"
    assert dataclasses.fields(out) == dataclasses.fields(view) and out == view.override(omitted=3)
    with pytest.raises(dataclasses.FrozenInstanceError):
        out.omitted = 4  # type: ignore[misc]
    with pytest.raises(TypeError, match="no field omited"):
        view.override(omited=1)
    stamped = Validate().apply(fresh_view(conversation()))
    assert stamped.history_stamp is not None and stamped.override(history=()).history_stamp is None


def working_alone(calls: int, *, user_between: bool = False, lines: int = 10) -> list[BaseMessage]:
    """A task, then ``calls`` tool calls in a row, each output ``lines`` lines (10: about 2,000
    tokens in all for 12 calls; a user message before the last three when ``user_between``)."""
    messages: list[BaseMessage] = [HumanMessage(content="Fix the failing test.", id="h1")]
    for n in range(calls):
        if user_between and n == calls - 3:
            messages.append(HumanMessage(content="Try the other module too.", id="h2"))
        messages.append(AIMessage(content="", tool_calls=[{"name": "lookup", "args": {"order_id": str(n)}, "id": f"c{n}"}]))
        output = "\n".join(f"src/module_{n}/file_{k}.py:{k}: def handler_{k}(self):" for k in range(lines))
        messages.append(ToolMessage(content=output, tool_call_id=f"c{n}", name="lookup"))
    return messages


@pytest.mark.parametrize(("calls", "user_between", "whole"), [(12, False, False), (11, False, True), (12, True, True)])
def test_a_long_run_of_tool_calls_goes_whole_only_while_its_outputs_fit_the_solo_room(calls: int, user_between: bool, whole: bool) -> None:
    config = ContextConfig(
        encoding="cl100k_base",
        budget={"total": 7500, "history": 6875, "summaries": 6875, "facts": 200},
        history={"compress": "over_budget", "solo_exchanges": 12, "solo_tool_tokens": 1500},
    )
    view = Validate().apply(fresh_view(working_alone(calls, user_between=user_between), (lookup,), config))
    assert sum(COUNTER.count(str(m.content)) for m in view.history if isinstance(m, ToolMessage)) > 1500
    out = FindRoom(history=config.history, facts=config.facts, counter=COUNTER).apply(view)
    assert out.room is not None and out.room.whole is whole
    assert out.room.total > out.room.history_tokens, "the whole conversation fits the room either way"


@pytest.mark.parametrize(("calls", "whole"), [(8, False), (7, True)])
def test_by_default_an_agent_working_alone_for_eight_calls_goes_whole_only_while_its_outputs_fit_1500_tokens(calls: int, whole: bool) -> None:
    # the whole mode's defaults (the default mode, see tests/test_defaults.py), the history's fields left to them
    config = ContextConfig(mode="whole", encoding="cl100k_base")
    view = Validate().apply(fresh_view(working_alone(calls, lines=14), (lookup,), config))
    assert sum(COUNTER.count(str(m.content)) for m in view.history if isinstance(m, ToolMessage)) > 1500
    out = FindRoom(history=config.history, facts=config.facts, counter=COUNTER).apply(view)
    assert out.room is not None and out.room.whole is whole
    assert out.room.total > out.room.history_tokens, "the whole conversation fits the room either way"
