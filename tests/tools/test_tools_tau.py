"""The directory on real tool sets and real conversations: tau-bench's airline and retail
tools, and GPT-4o's airline trajectories replayed call by call, with the default binding
(auto, which binds these tool sets as stubs) and with loaded schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, convert_to_messages

from ctxplugin.config import ToolsConfig
from ctxplugin.tokens import count_tool_schemas, get_counter
from ctxplugin.tools import (
    DIRECTORY_TITLE,
    LOAD_TOOLS_NAME,
    STUBS_TITLE,
    ToolRegistry,
    plan_tools,
    resolve_call,
    tool_name,
)

DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
COUNTER = get_counter()[0]

pytestmark = pytest.mark.skipif(not (DATA / "tools").is_dir(), reason=f"shared data not found at {DATA}")


def tools(name: str) -> list[dict[str, Any]]:
    return list(json.loads((DATA / "tools" / f"tau-{name}-tools.json").read_text()))


def trajectories() -> list[list[BaseMessage]]:
    path = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
    if not path.is_file():
        pytest.skip(f"trajectories not found at {path}")
    return [convert_to_messages(record["traj"]) for record in json.loads(path.read_text())]


@pytest.mark.parametrize(("domain", "count"), [("airline", 14), ("retail", 16)])
def test_directory_of_the_tau_tool_sets(domain: str, count: int) -> None:
    specs = tools(domain)
    plan = plan_tools(specs, [], config=ToolsConfig(binding="loaded"), counter=COUNTER, registry=ToolRegistry(COUNTER))
    lines = plan.directory_text.splitlines()[1:]
    assert plan.active and len(lines) == count and plan.directory_text.startswith(DIRECTORY_TITLE)
    assert lines == sorted(lines)
    for line in lines:
        assert line.startswith("- ") and len(line) < 120
    assert plan.schema_tokens_full == count_tool_schemas(specs, COUNTER)
    # the directory costs a small fraction of the schemas it replaces
    assert plan.directory_tokens + plan.schema_tokens_sent < plan.schema_tokens_full / 4


def test_every_real_gpt4o_call_validates_against_the_real_schemas() -> None:
    registry = ToolRegistry(COUNTER)
    registry.register_all(tools("airline"))
    checked = 0
    for conversation in trajectories():
        for message in conversation:
            for call in getattr(message, "tool_calls", []):
                resolution = resolve_call(call["name"], call["args"], registry)
                assert resolution.kind == "run", (call, resolution.errors)
                checked += 1
    assert checked > 600


def test_replayed_sessions_keep_used_tools_bound_and_send_far_fewer_schema_tokens() -> None:
    specs = tools("airline")
    registry = ToolRegistry(COUNTER)
    config = ToolsConfig(binding="loaded")
    full = sent = 0
    for conversation in trajectories()[:40]:
        body = conversation[1:]  # the policy system message is the header
        directory = None
        for i, message in enumerate(body):
            if not isinstance(message, AIMessage):
                continue
            plan = plan_tools(specs, body[:i], config=config, counter=COUNTER, registry=registry)
            directory = directory or plan.directory_text
            assert plan.directory_text == directory  # stable within the session
            bound = {tool_name(t) for t in plan.bound}
            assert LOAD_TOOLS_NAME in bound
            earlier = {c["name"] for m in body[:i] if isinstance(m, AIMessage) for c in m.tool_calls}
            if len(earlier) <= config.max_loaded:
                assert earlier <= bound  # everything used so far is still bound
            full += plan.schema_tokens_full
            sent += plan.schema_tokens_sent
    assert sent < full * 0.2


@pytest.mark.parametrize(("domain", "count"), [("airline", 14), ("retail", 16)])
def test_by_default_the_tau_tool_sets_are_bound_as_stubs(domain: str, count: int) -> None:
    specs = tools(domain)
    plan = plan_tools(specs, [], config=ToolsConfig(), counter=COUNTER, registry=ToolRegistry(COUNTER))
    assert [tool_name(t) for t in plan.bound] == [LOAD_TOOLS_NAME, *(s["function"]["name"] for s in specs)]
    stubs = plan.bound[1:]
    assert all(set(s["function"]) == {"name", "parameters"} for s in stubs)
    lines = plan.directory_text.splitlines()
    assert lines[0] == STUBS_TITLE and len(lines[1:]) == count and lines[1:] == sorted(lines[1:])
    # every tool bound, and still well under half of what the schemas cost
    assert plan.directory_tokens + plan.schema_tokens_sent < plan.schema_tokens_full / 2


def test_replayed_sessions_with_the_default_binding_send_one_unchanging_tool_list() -> None:
    specs = tools("airline")
    registry = ToolRegistry(COUNTER)
    first = plan_tools(specs, [], config=ToolsConfig(), counter=COUNTER, registry=registry)
    full = sent = 0
    for conversation in trajectories()[:40]:
        body = conversation[1:]
        for i, message in enumerate(body):
            if not isinstance(message, AIMessage):
                continue
            plan = plan_tools(specs, body[:i], config=ToolsConfig(), counter=COUNTER, registry=registry)
            assert plan.bound == first.bound and plan.directory_text == first.directory_text
            full += plan.schema_tokens_full
            sent += plan.schema_tokens_sent
    assert 0 < sent < full * 0.3
