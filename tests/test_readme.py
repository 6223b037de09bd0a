"""The README's code blocks run as a reader pastes them, offline.

Each Python block runs in a fresh namespace holding only what the README says comes from the
reader's own agent (a model, its tools, a checkpointer): a name the block uses but does not
import is an error here as it is for the reader."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.testing import ScriptedChatModel, tool_call

README = Path(__file__).resolve().parents[1] / "README.md"


def blocks(language: str, heading: str) -> list[str]:
    """The ``language`` blocks under ``heading`` of the README, up to the next heading of its level."""
    text = "\n" + README.read_text(encoding="utf-8")
    level = heading.split(" ", 1)[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    end = text.find(f"\n{level} ", start)
    section = text[start:] if end < 0 else text[start:end]
    return re.findall(rf"```{language}\n(.*?)```", section, re.S)


def run(code: str, **given: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(given)
    exec(compile(code, "<README.md>", "exec", dont_inherit=True), namespace)
    return namespace


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search direct flights between two airports."""
    return json.dumps([{"flight_number": f"HAT{i:03d}", "origin": origin, "destination": destination,
                        "price": 90 + 7 * i} for i in range(60)])


TOOLS: list[BaseTool] = [search_flights]


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ContextEngine]]:
    """Run in a fresh directory (the blocks open ``.ctxplugin``); engines listed are closed after."""
    monkeypatch.chdir(tmp_path)
    opened: list[ContextEngine] = []
    yield opened
    for engine in opened:
        engine.close()


def test_use_block_runs_the_agent_with_the_middleware(in_tmp: list[ContextEngine]) -> None:
    (code,) = blocks("python", "## Use")
    model = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
        AIMessage(content="HAT000 at $90 is the cheapest."),
    ])
    done = run(code, model=model, tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    state = done["agent"].get_state({"configurable": {"thread_id": "thread-1"}}).values["messages"]
    assert state[-1].content == "HAT000 at $90 is the cheapest."
    assert state[2].additional_kwargs["ctxplugin"]["ref"].startswith("ref:search_flights:")


def test_budget_block_runs_as_pasted(in_tmp: list[ContextEngine]) -> None:
    (code,) = blocks("python", "## Budget")
    done = run(code)  # nothing given: the block imports what it uses
    in_tmp.append(done["engine"])
    assert done["engine"].config.budget.total == 12000


def test_budget_variable_sets_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    (line,) = (ln for block in blocks("bash", "## Budget") for ln in block.splitlines() if ln.startswith("export "))
    name, value = line.removeprefix("export ").split("#", 1)[0].strip().split("=", 1)
    monkeypatch.setenv(name, value)
    assert ContextConfig().budget.total == 12000
