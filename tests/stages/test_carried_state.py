"""What a call carries over from the session's previous one never changes its view.

An engine that has served a session before is compared, call after call, with a fresh engine
making the same call from scratch, while the conversation grows and is also edited the ways
hosts edit it: a message replaced by a new one, a message removed, a message whose content is
changed in place. Facts are off (what the ledger learned on earlier calls legitimately changes
later views); everything else that keeps per-session state runs: validate, room, refs, history,
fit and the account of values.
"""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin.config import ContextConfig
from ctxplugin.replay.loaders import SWE_BASH_TOOL, load_file
from ctxplugin.scope import Scope
from ctxplugin.testing import memory_engine

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"
SWE = DATA / "trajectories" / "swe"

CONFIG = ContextConfig.model_validate({"budget": {"total": 4000}, "facts": {"enabled": False}, "orphan_tool_results": "pair"})


def _call(engine: object, history: list[BaseMessage], scope: Scope) -> tuple[object, ...]:
    prepared = engine.prepare(history, tools=[SWE_BASH_TOOL, *engine.tools_for_model()], scope=scope)  # type: ignore[attr-defined]
    report = prepared.report
    return (
        [(m.type, m.content, getattr(m, "tool_calls", None)) for m in prepared.messages],
        report.tokens_before,
        report.tokens_after,
        report.compressed_messages,
        report.dropped_exchanges,
        report.values_used,
        report.values_shown,
        report.values_behind_refs,
        report.values_left,
        sorted(report.refs_used),
    )


def _edit(history: list[BaseMessage], rng: random.Random) -> None:
    """One edit a host may make to the conversation it holds, somewhere before its end."""
    if len(history) < 6:
        return
    index = rng.randrange(1, len(history) - 2)
    message = history[index]
    kind = rng.choice(["replace", "remove", "in place"])
    if kind == "remove" and not isinstance(message, HumanMessage):
        del history[index]
    elif kind == "replace" or isinstance(message, HumanMessage):
        history[index] = message.model_copy(update={"content": f"(edited) {message.content}"[:4000]})
    elif isinstance(message.content, str):
        message.content = f"rewritten by the host: see /tmp/edited_{index}.py, EDITED_{index}_VALUE"


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_views_with_carried_state_equal_views_made_from_scratch(seed: int) -> None:
    rng = random.Random(seed)
    recording = sorted(SWE.glob("*.traj.json"))[seed % 4]
    messages = list(load_file(recording).conversations[0].messages)[:90]
    config = CONFIG
    engine = memory_engine(config)
    scope = Scope(session_id=f"carried-{seed}")
    history: list[BaseMessage] = []
    checked = 0
    for index, message in enumerate(messages):
        if index > 0 and isinstance(message, AIMessage):
            if rng.random() < 0.25:
                _edit(history, rng)
            fresh = memory_engine(config)
            assert _call(engine, history, scope) == _call(fresh, list(history), scope), f"call before message {index}"
            checked += 1
        if isinstance(message, ToolMessage):
            message = engine.capture_tool_result(message, scope)
        history.append(message)
    assert checked > 20
