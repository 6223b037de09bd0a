"""History compression on a real coding-agent trajectory (shared data; skipped when absent)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.replay import load_file
from ctxplugin.replay.metrics import Meter, action_identifiers, leading_system_count, occurs
from ctxplugin.testing import memory_engine

ROOT = Path(__file__).resolve().parents[2]
TRAJECTORY = ROOT / ".." / "shared" / "data" / "trajectories" / "swe" / "sqlfluff__sqlfluff-2419.traj.json"
BENCHMARK_CONFIG = ROOT / "benchmarks" / "history_swe.json"

pytestmark = pytest.mark.skipif(not TRAJECTORY.exists(), reason=f"shared data not found at {TRAJECTORY}")


def test_swe_trajectory_views_are_small_valid_cache_friendly_and_grounded() -> None:
    conversation = load_file(str(TRAJECTORY), "auto").conversations[0]
    settings = json.loads(BENCHMARK_CONFIG.read_text())
    settings["facts"] = {**settings.get("facts", {}), "enabled": False}
    config = ContextConfig(**settings)
    engine = memory_engine(config)
    meter = Meter(engine.counter)
    messages = conversation.messages
    head = leading_system_count(messages)
    scope = Scope(session_id="swe")
    full_tokens = view_tokens = eligible = visible = 0
    reused: list[float] = []
    for index in conversation.call_indexes():
        history = messages[:index]
        prepared = engine.prepare(history, scope=scope)
        view = prepared.messages
        calls = {c["id"] for m in view if isinstance(m, AIMessage) for c in m.tool_calls}
        assert calls == {m.tool_call_id for m in view if isinstance(m, ToolMessage)}
        assert view[1] is history[1] or view[1].content == history[1].content, "the task is kept"
        report = prepared.report
        assert report.within_budget and report.tokens_after <= 8000
        full_tokens += meter.count(history)
        view_tokens += report.tokens_after
        if len(reused) or index > conversation.call_indexes()[0]:
            reused.append(report.unchanged_prefix_tokens / report.tokens_after)
        earlier, shown = meter.text(messages[head:index]), meter.text(view)
        for identifier in action_identifiers(messages[index]):  # type: ignore[arg-type]
            if occurs(identifier, earlier):
                eligible += 1
                visible += occurs(identifier, shown)
    assert view_tokens < 0.45 * full_tokens
    assert sum(1 for share in reused if share >= 0.5) >= 0.7 * len(reused)
    assert visible >= 0.85 * eligible
