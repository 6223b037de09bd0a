"""The archive note against an aim below the room (``history.max_tokens``), on a recorded
airline conversation whose last tool outputs are large (shared data; skipped when absent)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
from langchain_core.messages import BaseMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._layout import synthetic_kind
from ctxplugin.history import HistoryBudget, compress_history
from ctxplugin.replay import Conversation, load_file
from ctxplugin.replay.metrics import Meter, occurs, pair_expected_actions
from ctxplugin.replay.runner import load_tools_file
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text, count_message, get_counter

ROOT = Path(__file__).resolve().parents[2]
TAU = ROOT / ".." / "shared" / "data" / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
TOOLS = ROOT / ".." / "shared" / "data" / "tools" / "tau-airline-tools.json"
CONVERSATION = "task-2-trial-1"  # the user's payment ids come early; the last outputs are whole reservations
PAYMENT = "credit_card_9525117"  # from the profile read first, used by a refund many calls later

pytestmark = pytest.mark.skipif(not TAU.exists(), reason=f"shared data not found at {TAU}")


def _conversation() -> Conversation:
    return next(c for c in load_file(str(TAU), "auto").conversations if c.id == CONVERSATION)


def _history_at(call: int) -> list[BaseMessage]:
    return [m for m in _conversation().messages[:call] if not isinstance(m, SystemMessage)]


def _archive(messages: list[BaseMessage]) -> list[BaseMessage]:
    return [m for m in messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]


def test_the_archive_keeps_its_cap_while_the_room_holds_it() -> None:
    counter = get_counter()[0]
    config = ContextConfig(mode="whole").history  # the defaults: aim at 1,000 tokens once tiered
    assert config.max_tokens == 1000
    history = _history_at(60)

    aimed = compress_history(history, config=config, counter=counter, budget=HistoryBudget(total=1000, room=20_000))
    text = "\n".join(content_text(m.content) for m in aimed.messages)
    notes = _archive(aimed.messages)
    assert notes and count_message(notes[0], counter) > config.archive_tokens // 2, "the archive kept its full cap"
    assert occurs(PAYMENT, text), "the payment id read first is still listed"

    # with nothing but the aim, the archive is halved to meet it and the payment id falls out
    alone = compress_history(history, config=config, counter=counter, budget=HistoryBudget(total=1000))
    assert sum(count_message(m, counter) for m in alone.messages) <= 1000
    assert not occurs(PAYMENT, "\n".join(content_text(m.content) for m in alone.messages))


def test_the_archive_is_made_smaller_to_fit_the_room() -> None:
    counter = get_counter()[0]
    config = ContextConfig(mode="whole").history
    history = _history_at(60)
    roomy = compress_history(history, config=config, counter=counter, budget=HistoryBudget(total=1000, room=20_000))
    room = sum(count_message(m, counter) for m in roomy.messages) - 100  # the full archive no longer fits

    tight = compress_history(history, config=config, counter=counter, budget=HistoryBudget(total=1000, room=room))
    assert sum(count_message(m, counter) for m in tight.messages) <= room
    assert count_message(_archive(tight.messages)[0], counter) < count_message(_archive(roomy.messages)[0], counter)


def test_the_values_of_the_expected_actions_stay_in_view_when_the_conversation_outgrows_the_budget() -> None:
    conversation = _conversation()
    messages = list(conversation.messages)
    tools = list(load_tools_file(TOOLS))
    engine = memory_engine(ContextConfig(mode="whole", budget={"total": 8000}))
    meter = Meter(engine.counter)
    expected = pair_expected_actions(messages, conversation.actions)
    eligible = visible = 0
    compressed = False
    for index in conversation.call_indexes():
        history = messages[:index]
        prepared = engine.prepare(history, tools=tools, scope=Scope(session_id=CONVERSATION))
        compressed = compressed or prepared.report.tokens_after < prepared.report.tokens_before - 2000
        earlier = meter.text(history)
        wanted = [value for value in expected.get(index, ()) if occurs(value, earlier)]
        shown = meter.text(prepared.messages)
        eligible += len(wanted)
        visible += sum(1 for value in wanted if occurs(value, shown))
    assert compressed, "the conversation outgrew the budget and was tiered"
    assert eligible >= 40
    assert visible / eligible >= 0.9


def test_the_facts_block_stays_in_the_cached_prefix_when_a_block_note_is_added() -> None:
    swe = ROOT / ".." / "shared" / "data" / "trajectories" / "swe" / "sqlfluff__sqlfluff-1517.traj.json"
    conversation = load_file(str(swe), "auto").conversations[0]
    engine = memory_engine(ContextConfig(mode="whole"))
    previous: list[BaseMessage] = []
    before: Sequence[str | None] = []  # the kinds of the previous view's messages
    kept = 0
    for index in conversation.call_indexes():
        view = engine.prepare(list(conversation.messages[:index]), scope=Scope(session_id="swe")).messages
        kinds = [synthetic_kind(m) for m in view]
        lookups = [k for k in kinds if k in ("notes", "facts")]
        if "facts" in lookups and lookups.count("notes") >= 2:
            # the archive note, then the facts, then the block notes
            assert lookups.index("facts") == 2, lookups
            if "facts" in before and before.count("notes") >= 2:
                at = kinds.index("facts")
                if before.count("notes") < kinds.count("notes"):
                    # a block note was added since the previous call: everything up to the facts is as it was
                    assert [m.content for m in view[: at + 1]] == [m.content for m in previous[: at + 1]]
                    kept += 1
        previous, before = view, kinds
    assert kept >= 3
