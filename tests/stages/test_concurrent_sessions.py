"""Per-session state under concurrency: calls made from several threads give the views a
single thread gives.

Every stage that carries work from one call to the next keeps it per session. Here four
threads replay recorded conversations through one engine at once, each its own session, and
every view must equal the view of the same call made alone on a fresh engine.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, ToolMessage

from ctxplugin.config import ContextConfig
from ctxplugin.replay.loaders import load_file
from ctxplugin.replay.runner import load_tools_file
from ctxplugin.scope import Scope
from ctxplugin.testing import logical_clock, memory_engine

ROOT = Path(__file__).resolve().parents[2]
DATA = Path(os.environ.get("CTXPLUGIN_DATA", ROOT.parent.parent / "shared" / "data"))
if not DATA.is_dir():
    DATA = ROOT.parent / "shared" / "data"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
TOOLS = DATA / "tools" / "tau-airline-tools.json"
_FACT_ID = re.compile(r"fact_[0-9a-f]{20}")


def _shape(messages: list[BaseMessage]) -> str:
    """A view as text, fact ids (random) left out."""
    return _FACT_ID.sub("fact", repr([(m.type, m.content, getattr(m, "tool_calls", None)) for m in messages]))


def _replay(engine: object, conversation: list[BaseMessage], scope: Scope, tools: list[object]) -> list[str]:
    views: list[str] = []
    history: list[BaseMessage] = []
    for index, message in enumerate(conversation):
        if index > 0 and isinstance(message, AIMessage):
            views.append(_shape(engine.prepare(history, tools=tools, scope=scope).messages))  # type: ignore[attr-defined]
        if isinstance(message, ToolMessage):
            message = engine.capture_tool_result(message, scope)  # type: ignore[attr-defined]
        history.append(message)
    return views


def test_views_made_from_several_threads_equal_views_made_alone() -> None:
    conversations = [list(c.messages) for c in load_file(TAU).conversations[:4]]
    tools = list(load_tools_file(TOOLS))
    config = ContextConfig(budget={"total": 2500})  # tight: history is tiered and condensed
    alone = []
    for number, conversation in enumerate(conversations):
        engine = memory_engine(config, clock=logical_clock())
        alone.append(_replay(engine, conversation, Scope(session_id=f"s{number}"), [*tools, *engine.tools_for_model()]))

    shared = memory_engine(config, clock=logical_clock())
    bound = [*tools, *shared.tools_for_model()]
    results: dict[int, list[str]] = {}
    errors: list[BaseException] = []

    def run(slot: int, number: int) -> None:
        try:
            results[slot] = _replay(shared, conversations[number], Scope(session_id=f"s{number}"), bound)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(number, number)) for number in range(len(conversations))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    for number in range(len(conversations)):
        assert results[number] == alone[number], f"conversation {number} differs when run beside others"
