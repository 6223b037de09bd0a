"""``ContextCallbackHandler``: savings to date, refs and cache hits, from any host's run.

Pass it in ``callbacks=[...]``; it works the same for ``create_agent``, ``create_react_agent``,
custom graphs, LCEL chains and ``RunnableWithMessageHistory``, in ``invoke``, ``stream`` and
``astream_events``.

    uv run --all-packages python examples/callbacks.py
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from ctxplugin import ContextCallbackHandler, ContextEngine, ContextReport
from ctxplugin.testing import ScriptedChatModel, tool_call


@tool
def list_tickets(queue: str) -> str:
    """List the open tickets of a support queue."""
    return json.dumps([{"ticket": f"T-{4000 + i}", "queue": queue, "priority": ["low", "high"][i % 2],
                        "title": f"Customer reports issue number {i} with checkout"} for i in range(50)])


def model() -> ScriptedChatModel:
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("list_tickets", {"queue": "billing"})]),
        AIMessage(content="25 high-priority billing tickets, oldest T-4001."),
    ])


async def main() -> None:
    engine = ContextEngine()
    handler = ContextCallbackHandler()
    for thread in ["ops-1", "ops-2"]:
        agent = create_agent(model(), [list_tickets], middleware=[ContextMiddleware(engine)])
        config: Any = {"configurable": {"thread_id": thread}, "callbacks": [handler]}  # <- the handler
        async for event in agent.astream_events({"messages": [HumanMessage("Open billing tickets?")]}, config, version="v2"):
            if event["event"] == "on_custom_event" and event["name"] == "ctxplugin.report":
                report: ContextReport = event["data"]  # type: ignore[assignment]
                print(f"{thread}: prepared a call, {report.tokens_before:,} -> {report.tokens_after:,} tokens")

    print(handler.describe())
    print(f"sessions: {sorted(handler.sessions())}; refs stored: {[c['ref_id'] for c in handler.captures]}")


if __name__ == "__main__":
    asyncio.run(main())
