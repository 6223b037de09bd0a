"""One engine, one agent, many sessions at once: 20 threads and 20 asyncio tasks, each its own
thread id; no ref or fact of one session reaches another."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextCallbackHandler, RefNotFoundError, Scope
from ctxplugin.testing import memory_engine

SESSIONS = 20


def turns(i: int) -> list[str]:
    tag = f"#{i:02d}"
    return [f"flights A{i:02d} JFK {tag}", f"log svc{i:02d} {tag}"]


def others(i: int) -> re.Pattern[str]:
    """Markers of every other session's data."""
    return re.compile("|".join(f"A{j:02d}|svc{j:02d}|K-{j:02d}-" for j in range(SESSIONS) if j != i))


def setup(scenario: Any) -> tuple[Any, Any, Any]:
    engine, model = memory_engine(), scenario.scripted(calls=SESSIONS * 4 + 10)
    agent = create_agent(model, scenario.tools, middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    return engine, model, agent


def remember_secret(engine: Any, i: int) -> None:
    engine.facts.write(f"The vault code of session {i} is K-{i:02d}-SECRET", key="vault_code",
                       scope=Scope(session_id=f"s-{i}"))


def verify(scenario: Any, engine: Any, model: Any, agent: Any, handler: ContextCallbackHandler) -> None:
    for i in range(SESSIONS):
        scope, config = Scope(session_id=f"s-{i}"), {"configurable": {"thread_id": f"s-{i}"}}
        state = agent.get_state(config).values["messages"]
        scenario.check(model, state, engine, scope, handler, tag=f"#{i:02d}", turns=len(turns(i)))
        foreign = others(i)
        for call in scenario.session_calls(model, f"#{i:02d}"):
            text = "\n".join(str(m.content) for m in call.messages)
            assert not foreign.search(text), f"session {i} saw another session's data"
        assert not any(foreign.search(hit.fact.text) for hit in engine.facts.search("vault code", scope=scope))
        assert any(f"K-{i:02d}-" in hit.fact.text for hit in engine.facts.search("vault code", scope=scope))
        # a ref of this session is unreadable from the next one
        ref = next(m.additional_kwargs["ctxplugin"]["ref"] for m in state if isinstance(m, ToolMessage))
        with pytest.raises(RefNotFoundError):
            engine.expand_ref(ref, scope=Scope(session_id=f"s-{(i + 1) % SESSIONS}"))
    assert handler.sessions() == {f"s-{i}" for i in range(SESSIONS)}


def test_twenty_threads(scenario: Any) -> None:
    engine, model, agent = setup(scenario)
    handler = ContextCallbackHandler()

    def session(i: int) -> None:
        remember_secret(engine, i)
        config: Any = {"configurable": {"thread_id": f"s-{i}"}, "callbacks": [handler]}
        for turn in turns(i):
            agent.invoke({"messages": [HumanMessage(turn)]}, config)

    with ThreadPoolExecutor(max_workers=SESSIONS) as pool:
        list(pool.map(session, range(SESSIONS)))
    verify(scenario, engine, model, agent, handler)


async def test_twenty_tasks(scenario: Any) -> None:
    engine, model, agent = setup(scenario)
    handler = ContextCallbackHandler()

    async def session(i: int) -> None:
        await asyncio.to_thread(remember_secret, engine, i)
        config: Any = {"configurable": {"thread_id": f"s-{i}"}, "callbacks": [handler]}
        for turn in turns(i):
            await agent.ainvoke({"messages": [HumanMessage(turn)]}, config)

    await asyncio.gather(*(session(i) for i in range(SESSIONS)))
    verify(scenario, engine, model, agent, handler)
