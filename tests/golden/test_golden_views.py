"""Golden views: replaying the recorded runs gives, call for call, the views recorded in
``views.json``.

Every recording under ``../shared/data/trajectories`` is replayed as a host would run it: each
tool output goes through ``capture_tool_result`` when it arrives, and every model call gets
``prepare`` on the history so far, with a fixed configuration (defaults, ``cl100k_base``, a fresh
in-memory engine per conversation). The digest of each call's view (its messages and tools) must
equal the recorded one: a change meant to be invisible (a speedup, a refactoring) changes none.

A change that is meant to alter views regenerates the file, and the diff of ``views.json`` shows
which calls changed::

    uv run --all-packages python tests/golden/test_golden_views.py --write

By default the test checks a subset (:data:`QUICK`); ``CTXPLUGIN_GOLDEN=all`` checks every
recording in the file.

The same replays check that a host which rebuilds its history from a checkpoint on every call,
and so sends deep copies of the messages instead of the objects it sent before, is sent the
same views, and the same reports, as a host that sends the same objects: what the engine carries
from one call to the next when the messages are the very objects it read is an optimisation,
never a change of what the model sees. By default with two recordings (:data:`COPIED`), with
``CTXPLUGIN_GOLDEN=all`` with every one.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage, message_to_dict
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin.config import ContextConfig
from ctxplugin.replay.loaders import SWE_BASH_TOOL, Conversation, load_file
from ctxplugin.replay.runner import load_tools_file
from ctxplugin.report import ContextReport
from ctxplugin.scope import Scope
from ctxplugin.testing import logical_clock, memory_engine
from ctxplugin.testing.recordings import recordings_root

DATA = recordings_root()
TRAJECTORIES = DATA / "trajectories"
GOLDEN = Path(__file__).with_name("views.json")

QUICK = (
    "swe/marshmallow-code__marshmallow-1359.traj.json#",
    "swe/sqlfluff__sqlfluff-1517.traj.json#",
    "tau/gpt-4o-airline-dev.json#task-0-trial-0",
    "tau/gpt-4o-airline-dev.json#task-1-trial-0",
    "tau/gpt-4o-airline-dev.json#task-2-trial-0",
    "tau/gpt-4o-airline-dev.json#task-3-trial-0",
)
"""Recordings the default run checks (key prefixes); about 150 calls."""

COPIED = ("swe/marshmallow-code__marshmallow-1359.traj.json#", "tau/gpt-4o-airline-dev.json#task-3-trial-0")
"""Recordings the default run replays with copies of the history too."""

BASH_TOOL = SWE_BASH_TOOL


def golden_config(**values: Any) -> ContextConfig:
    """The fixed configuration: defaults (but ``values``), with ``CTXPLUGIN_*`` variables ignored."""
    saved = {k: os.environ.pop(k) for k in list(os.environ) if k.startswith("CTXPLUGIN_")}
    try:
        return ContextConfig(encoding="cl100k_base", **values)
    finally:
        os.environ.update(saved)


def recordings() -> Iterator[tuple[str, Conversation, list[dict[str, Any]]]]:
    """``(key, conversation, tool schemas)`` of every recording, in a stable order."""
    airline = list(load_tools_file(DATA / "tools" / "tau-airline-tools.json"))
    for path in sorted(TRAJECTORIES.rglob("*.json")):
        tools = [BASH_TOOL] if path.parent.name == "swe" else airline
        rel = path.relative_to(TRAJECTORIES).as_posix()
        for conversation in load_file(path).conversations:
            yield f"{rel}#{conversation.id if path.parent.name != 'swe' else ''}", conversation, tools


_FACT_ID = re.compile(r"fact_[0-9a-f]{20}")


def digest(messages: list[BaseMessage], tools: list[Any], fact_ids: dict[str, str], report: ContextReport | None = None) -> str:
    """A short digest of one view: every message as LangChain serialises it, and every tool's
    schema as sent (and ``report`` but for its timings, when given). Fact ids are random; each
    is replaced by its rank of first appearance in the conversation (``fact_ids`` holds the
    ranks so far)."""
    schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
    figures = {} if report is None else {"report": report.model_dump(exclude={"timings_ms"})}
    payload = json.dumps(
        {"messages": [message_to_dict(m) for m in messages], "tools": schemas, **figures},
        sort_keys=True,
        ensure_ascii=False,
        default=repr,
    )
    payload = _FACT_ID.sub(lambda m: fact_ids.setdefault(m.group(0), f"fact#{len(fact_ids)}"), payload)
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()[:20]


def replay_views(
    conversation: Conversation, tools: list[dict[str, Any]], config: ContextConfig, *, copies: bool = False, reports: bool = False
) -> list[str]:
    """The digest of every call's view (and report, with ``reports``), replaying ``conversation``
    through capture and prepare; with ``copies`` every call is given a deep copy of the history
    (a host that reads it back from a checkpoint), else the same objects."""
    engine = memory_engine(config, clock=logical_clock())
    scope = Scope(session_id=conversation.id)
    bound: list[Any] = [*tools, *engine.tools_for_model()]
    calls = set(conversation.call_indexes())
    history: list[BaseMessage] = []
    out: list[str] = []
    fact_ids: dict[str, str] = {}
    for index, message in enumerate(conversation.messages):
        if index in calls and isinstance(message, AIMessage):
            prepared = engine.prepare(copy.deepcopy(history) if copies else history, tools=bound, scope=scope)
            out.append(digest(prepared.messages, prepared.tools, fact_ids, prepared.report if reports else None))
        if isinstance(message, ToolMessage):
            message = engine.capture_tool_result(message, scope)
        history.append(message)
    return out


def _selected(keys: list[str], quick: tuple[str, ...] = QUICK) -> list[str]:
    if os.environ.get("CTXPLUGIN_GOLDEN") == "all":
        return keys
    return [k for k in keys if k in quick]


def _load_golden() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(GOLDEN.read_text(encoding="utf-8"))
    return data


pytestmark = pytest.mark.skipif(
    not TRAJECTORIES.is_dir(), reason=f"recordings not found at {TRAJECTORIES} (set CTXPLUGIN_DATA)"
)


def test_golden_file_covers_the_quick_subset() -> None:
    golden = _load_golden()
    assert set(QUICK) <= set(golden["views"]), "views.json lacks a recording of QUICK: regenerate it"


@pytest.mark.parametrize("key", _selected(list(_load_golden()["views"])) if GOLDEN.exists() else [])
def test_views_match_the_golden_file(key: str) -> None:
    expected = _load_golden()["views"][key]
    config = golden_config()
    found = {k: (c, t) for k, c, t in recordings() if k == key}
    assert key in found, f"recording {key} is gone: regenerate views.json"
    conversation, tools = found[key]
    views = replay_views(conversation, tools, config)
    assert len(views) == len(expected)
    changed = [i for i, (a, b) in enumerate(zip(views, expected, strict=True)) if a != b]
    assert not changed, f"{key}: the views of calls {changed[:10]} differ from views.json (of {len(views)})"


@pytest.mark.parametrize("mode", ["whole", "compact"])
@pytest.mark.parametrize("key", _selected(list(_load_golden()["views"]), COPIED) if GOLDEN.exists() else [])
def test_copies_of_the_history_get_the_views_of_the_same_messages(key: str, mode: Literal["whole", "compact"]) -> None:
    # compact, within 1,500 tokens: every call compresses, and the tiers move often
    config = golden_config() if mode == "whole" else golden_config(mode="compact", budget={"total": 1500})
    found = {k: (c, t) for k, c, t in recordings() if k == key}
    assert key in found, f"recording {key} is gone: regenerate views.json"
    conversation, tools = found[key]
    same = replay_views(conversation, tools, config, reports=True)
    copied = replay_views(conversation, tools, config, copies=True, reports=True)
    assert len(same) == len(copied) > 0
    changed = [i for i, (a, b) in enumerate(zip(same, copied, strict=True)) if a != b]
    assert not changed, f"{key} ({mode}): given copies, the views or reports of calls {changed[:10]} differ (of {len(same)})"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Record or check the golden views of the recordings.")
    parser.add_argument("--write", action="store_true", help="rewrite views.json from the current code")
    args = parser.parse_args(argv)
    config = golden_config()
    views: dict[str, list[str]] = {}
    for key, conversation, tools in recordings():
        views[key] = replay_views(conversation, tools, config)
        print(f"{key}: {len(views[key])} calls", file=sys.stderr)
    if args.write:
        GOLDEN.write_text(json.dumps({"views": views}, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"wrote {GOLDEN} ({sum(map(len, views.values()))} calls)", file=sys.stderr)
        return 0
    golden = _load_golden()["views"]
    bad = [k for k in views if golden.get(k) != views[k]]
    for key in bad:
        print(f"differs: {key}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
