"""ctxplugin in a LangChain ``create_agent`` agent: one middleware line.

Offline: a scripted chat model makes real tool calls.

    uv run --all-packages python examples/create_agent.py
"""

from __future__ import annotations

import json
import tempfile
from typing import Any

from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing import ScriptedChatModel, tool_call


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search direct flights between two airports."""
    return json.dumps([{"flight_number": f"HAT{i:03d}", "origin": origin, "destination": destination,
                        "departure": f"{6 + i % 14:02d}:{i * 7 % 60:02d}", "price": 90 + 7 * i} for i in range(60)])


@tool
def get_reservation(reservation_id: str) -> str:
    """Get a reservation by id."""
    return json.dumps({"reservation_id": reservation_id, "flights": ["HAT004"], "status": "confirmed"})


model = ScriptedChatModel(script=[
    AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
    AIMessage(content="60 flights; HAT000 at $90 is the cheapest."),
    AIMessage(content="", tool_calls=[tool_call("get_reservation", {"reservation_id": "4WQ150"})]),
    AIMessage(content="4WQ150 is confirmed on HAT004."),
])


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = ContextEngine.embedded(path=tmp)  # SQLite CAS + Chroma facts under tmp
        agent = create_agent(model, [search_flights, get_reservation], system_prompt="Be brief.",
                             middleware=[ContextMiddleware(engine)],  # <- the one line
                             checkpointer=InMemorySaver())
        config: Any = {"configurable": {"thread_id": "trip-42"}}
        for turn in ["Flights from SFO to JFK?", "And my reservation 4WQ150?"]:
            reply = agent.invoke({"messages": [HumanMessage(turn)]}, config)["messages"][-1]
            report = reply.response_metadata["ctxplugin"]
            print(f"> {turn}\n  {reply.content}   "
                  f"[{report['ctxplugin.tokens_before']:,} -> {report['ctxplugin.tokens_after']:,} tokens]")

        state = agent.get_state(config).values["messages"]
        original = next(m for m in state if isinstance(m, ToolMessage))
        seen = next(m for m in model.calls[-1].messages if isinstance(m, ToolMessage))
        ref = original.additional_kwargs["ctxplugin"]["ref"]
        print(f"the state keeps the tool output ({len(original.content):,} chars); "
              f"the model saw {len(seen.text):,} chars:\n  {seen.text[:160]}...")
        assert engine.expand_ref(ref, scope=Scope(session_id="trip-42")) == original.content
        print(f"{ref} expands back to the original")


if __name__ == "__main__":
    main()
