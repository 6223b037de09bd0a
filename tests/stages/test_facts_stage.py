"""The facts stage carried from call to call: a conversation that grows is read and marked only
where it grew, and gives, call for call, what a stage reading it afresh gives."""

from __future__ import annotations

import dataclasses
import os
import threading
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._lru import LRU
from ctxplugin.facts import outdated
from ctxplugin.replay.loaders import load_file
from ctxplugin.stages import CallView, ChooseFacts
from ctxplugin.stages import facts as facts_stage
from ctxplugin.testing import chat, logical_clock, memory_engine

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
SWE = DATA / "trajectories" / "swe"


@dataclasses.dataclass(frozen=True, slots=True)
class AgainFromScratch:
    """The engine's facts stage, checked on every call against a stage that has seen no earlier
    call (same ledger, same memos: it reads nothing new, it marks the whole history afresh)."""

    stage: ChooseFacts
    calls: list[tuple[CallView, CallView]]

    @property
    def name(self) -> str:
        return self.stage.name

    def apply(self, view: CallView) -> CallView:
        out = self.stage.apply(view)
        fresh = dataclasses.replace(
            self.stage, _window_lines=LRU(8), _seen=LRU(8), _rules=LRU(8), _lock=threading.Lock()
        ).apply(view)
        self.calls.append((out, fresh))
        return out


def checked(engine: ContextEngine) -> list[tuple[CallView, CallView]]:
    calls: list[tuple[CallView, CallView]] = []
    engine._stages = tuple(
        AgainFromScratch(s, calls) if isinstance(s, ChooseFacts) else s for s in engine._stages
    )
    return calls


def assert_same(calls: list[tuple[CallView, CallView]]) -> None:
    assert calls
    for index, (carried, fresh) in enumerate(calls):
        assert carried.history == fresh.history, f"call {index}: the history differs"
        assert carried.outdated_marked == fresh.outdated_marked, f"call {index}: the marks differ"
        assert carried.warnings == fresh.warnings


@pytest.mark.skipif(not TAU.is_file(), reason=f"recording not found at {TAU} (set CTXPLUGIN_DATA)")
def test_a_recorded_conversation_gives_what_a_fresh_stage_gives_on_every_call() -> None:
    conversations = load_file(TAU).conversations[:12]
    marked = 0
    for conversation in conversations:
        engine = memory_engine(ContextConfig(encoding="cl100k_base"), clock=logical_clock())
        calls = checked(engine)
        scope = Scope(session_id=conversation.id)
        history: list[BaseMessage] = []
        indexes = set(conversation.call_indexes())
        for index, message in enumerate(conversation.messages):
            if index in indexes and isinstance(message, AIMessage):
                engine.prepare(history, scope=scope)
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, scope)
            history.append(message)
        assert_same(calls)
        marked += sum(carried.outdated_marked for carried, _ in calls)
    assert marked, "the recordings mark no message: the check checks nothing"


@pytest.mark.skipif(not SWE.is_dir(), reason=f"recordings not found at {SWE} (set CTXPLUGIN_DATA)")
def test_marks_carried_across_new_replacements_equal_fresh_marks_on_recorded_runs(mocker: MockerFixture) -> None:
    # coding-agent runs: tool outputs state values later outputs replace, so marks on earlier
    # messages change while the history grows; the marks carried (only the messages that may
    # read differently are read again) must be those a fresh stage makes
    carry = mocker.spy(outdated.Marking, "_carry")
    for path in sorted(SWE.glob("*.json"))[:4]:
        conversation = load_file(path).conversations[0]
        engine = memory_engine(ContextConfig(encoding="cl100k_base"), clock=logical_clock())
        calls = checked(engine)
        scope = Scope(session_id=conversation.id)
        history: list[BaseMessage] = []
        for index, message in enumerate(conversation.messages):
            if index > 0 and isinstance(message, AIMessage):
                engine.prepare(history, scope=scope)
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, scope)
            history.append(message)
        assert_same(calls)
    # (marks that stand, the first changed): a carry that changed marks before the new messages
    changed = [result for call, result in zip(carry.call_args_list, carry.spy_return_list, strict=True) if result[1] < call.args[3]]
    assert changed, "no mark made before a new replacement changed: the check checks nothing"


def test_a_value_replaced_late_marks_the_message_that_stated_it_early() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base"))
    calls = checked(engine)
    scope = Scope(session_id="late")
    history: list[BaseMessage] = [
        SystemMessage("You plan the team's work."),
        HumanMessage("The data team is on Project Alpha.", id="h0"),
    ]
    early = history[1]
    for turn in range(30):
        history.append(AIMessage(f"Noted, step {turn}.", id=f"a{turn}"))
        history.append(HumanMessage(f"Next we look at item {turn}.", id=f"h{turn + 1}"))
        prepared = engine.prepare(history, scope=scope)
        assert not any("[outdated" in str(m.content) for m in prepared.messages)
    history.append(AIMessage("Noted.", id="a-last"))
    history.append(HumanMessage("Actually, the data team moved to Project Beta.", id="h-late"))
    engine.prepare(history, scope=scope)  # reads the replacement
    history.append(AIMessage("Understood.", id="a-after"))
    history.append(HumanMessage("What is the data team on?", id="h-ask"))
    prepared = engine.prepare(history, scope=scope)
    first = next(m for m in prepared.messages if m.id == early.id)
    assert str(first.content).startswith("[outdated: data_team is now:") and "Project Beta" in str(first.content)
    assert early.content == "The data team is on Project Alpha.", "the transcript is never changed"
    assert_same(calls)
    # nothing changed since: the next call shows the very same marked copy
    history.append(AIMessage("Project Beta.", id="a-answer"))
    history.append(HumanMessage("Thanks.", id="h-thanks"))
    again = engine.prepare(history, scope=scope)
    assert next(m for m in again.messages if m.id == early.id) is first


def test_spans_the_user_opens_and_leaves_mark_the_messages_before_as_a_fresh_stage_does() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base"))
    calls = checked(engine)
    scope = Scope(session_id="spans")
    turns = [
        "Let's plan the offsite for the sales team.",
        "Let's brainstorm: what if the offsite is in Lisbon in May?",
        "Enough brainstorming for now, back to real commitments: the offsite is in Porto.",
        "Hold on - urgent call from Initech about their invoice.",
        "They want the invoice resent to their billing address.",
        "OK, back to the offsite.",
        "Which city is the offsite in?",
    ]
    _, prepared = chat(engine, turns, scope=scope, system="You plan events.")
    shown = {m.id: str(m.content) for m in prepared.messages}
    assert shown["h1"].startswith("[hypothetical: not a current fact]"), "the brainstorm, once no longer the latest"
    assert shown["h3"].startswith("[aside: an interruption, not the current task]"), "the interruption, once left"
    assert_same(calls)


def test_a_user_message_changed_in_place_is_read_again() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base"), clock=logical_clock())
    calls = checked(engine)
    scope = Scope(session_id="edited")
    turns = [
        "Let's plan the offsite for the sales team.",
        "Let's brainstorm: what if the offsite is in Lisbon in May?",
        "Which city is the offsite in?",
    ]
    history, _ = chat(engine, turns, scope=scope, system="You plan events.")
    history[3].content = "The offsite is in Lisbon in May."  # the host rewrote the brainstorm in place
    prepared = engine.prepare([*history, HumanMessage("And when?", id="h9")], scope=scope)
    assert_same(calls)
    shown = {m.id: str(m.content) for m in prepared.messages}
    assert not shown["h1"].startswith("[hypothetical"), "no longer a brainstorm"


@pytest.mark.parametrize("stores", ["memory", "embedded"])
def test_the_facts_in_force_are_read_again_only_after_a_write_that_can_change_them(
    stores: str, tmp_path: Path, mocker: MockerFixture
) -> None:
    # the in-memory store and an embedded Chroma store (written by this process alone) count
    # the writes that can change what is in force: the facts stage reads it only after one
    config = ContextConfig(encoding="cl100k_base", mode="whole")
    engine = memory_engine(config) if stores == "memory" else ContextEngine.embedded(tmp_path, config)
    scope = Scope(session_id="in-force")
    history: list[BaseMessage] = [SystemMessage("You plan the team's work."), HumanMessage("The data team is on Project Alpha.", id="h0")]
    engine.prepare(history, scope=scope)
    store: Any = engine.facts.store
    reads = mocker.spy(facts_stage, "in_force")
    for turn in range(4):  # nothing stated: the store is not written
        history += [AIMessage(f"Noted, step {turn}.", id=f"a{turn}"), HumanMessage(f"What should we look at in round {turn}?", id=f"h{turn + 1}")]
        engine.prepare(history, scope=scope)
    assert reads.call_count == 0
    written = store.generation
    history += [AIMessage("Noted.", id="a-new"), HumanMessage("The offsite budget is 12k. The venue is Lyon.", id="h-new")]
    engine.prepare(history, scope=scope)  # new facts, none replaced: what is in force stands
    assert store.generation != written, "the new facts were written"
    assert reads.call_count == 0
    history += [AIMessage("Noted.", id="a-late"), HumanMessage("Actually, the data team moved to Project Beta.", id="h-late")]
    engine.prepare(history, scope=scope)  # the replacement is written, then read
    history += [AIMessage("Understood.", id="a-ask"), HumanMessage("What is the data team on?", id="h-ask")]
    prepared = engine.prepare(history, scope=scope)
    assert reads.call_count >= 1
    assert str(next(m for m in prepared.messages if m.id == "h0").content).startswith("[outdated: data_team is now:")
