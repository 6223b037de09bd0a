"""Quickstart: add ctxplugin to an existing LangChain agent in one line.

Runs offline with a scripted chat model that makes real tool calls. With OPENAI_API_KEY or
ANTHROPIC_API_KEY set (and langchain-openai / langchain-anthropic installed), pass --real to use
a real model instead.

    uv run --all-packages python examples/quickstart.py
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel, tool_call
from ctxplugin.tokens import count_messages, get_counter


@tool
def search_flights(origin: str, destination: str, date: str) -> str:
    """Search direct flights between two airports on a date (YYYY-MM-DD)."""
    flights = [
        {"flight_number": f"HAT{100 + i:03d}", "origin": origin, "destination": destination,
         "date": date, "departure": f"{6 + i % 14:02d}:{(i * 7) % 60:02d}", "seats_left": (i * 5) % 9,
         "prices": {"basic_economy": 80 + i, "economy": 120 + 3 * i, "business": 400 + 11 * i}}
        for i in range(40)
    ]
    return json.dumps(flights)


@tool
def read_log(service: str) -> str:
    """Read the last lines of a service's log."""
    lines = [f"2026-11-22T10:{i // 60:02d}:{i % 60:02d}Z INFO {service} handled request id=req-{i:05d} in {i % 37} ms" for i in range(300)]
    lines[217] = f"2026-11-22T10:03:37Z ERROR {service} TimeoutError: upstream payments-api did not answer in 30s"
    return "\n".join(lines)


@tool
def get_reservation(reservation_id: str) -> str:
    """Get a reservation by id."""
    return json.dumps({"reservation_id": reservation_id, "user_id": "mia_li_3668", "flights": ["HAT107"], "status": "confirmed"})


TURNS = [
    "Find me flights from SFO to JFK on 2026-12-03.",
    "Why did the checkout service fail this morning?",
    "Check reservation 4WQ150 for me.",
    "Which flight was the cheapest economy fare again?",
]


def scripted_model() -> ScriptedChatModel:
    """A model that calls one tool per user turn, then answers."""

    def answer(text: str) -> Any:
        return lambda messages, tools: AIMessage(content=text)

    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK", "date": "2026-12-03"})]),
        answer("I found 40 direct flights; HAT100 is the cheapest economy fare at $120."),
        AIMessage(content="", tool_calls=[tool_call("read_log", {"service": "checkout"})]),
        answer("At 10:03:37 the checkout service hit TimeoutError: payments-api did not answer in 30s."),
        AIMessage(content="", tool_calls=[tool_call("get_reservation", {"reservation_id": "4WQ150"})]),
        answer("Reservation 4WQ150 (mia_li_3668) is confirmed on HAT107."),
        answer("HAT100, at $120 in economy."),
    ])


def real_model() -> BaseChatModel | None:
    if "--real" not in sys.argv:
        return None
    from langchain.chat_models import init_chat_model

    if os.environ.get("OPENAI_API_KEY"):
        return init_chat_model("openai:gpt-4o-mini")
    if os.environ.get("ANTHROPIC_API_KEY"):
        return init_chat_model("anthropic:claude-haiku-4-5")
    print("--real needs OPENAI_API_KEY or ANTHROPIC_API_KEY set (run without --real for the offline model)",
          file=sys.stderr)
    raise SystemExit(2)


def run(model: BaseChatModel, middleware: list[Any]) -> list[BaseMessage]:
    tools = [search_flights, read_log, get_reservation]
    agent = create_agent(model, tools, system_prompt="You are a concise travel and ops assistant.",
                         middleware=middleware, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "quickstart"}}
    for turn in TURNS:
        agent.invoke({"messages": [{"role": "user", "content": turn}]}, config)
    return list(agent.get_state(config).values["messages"])


def main() -> None:
    counter, _ = get_counter("cl100k_base")
    with tempfile.TemporaryDirectory() as tmp:
        engine = ContextEngine.embedded(path=os.path.join(tmp, ".ctxplugin"))

        plain = real_model() or scripted_model()
        run(plain, middleware=[])
        withctx = real_model() or scripted_model()
        state = run(withctx, middleware=[ContextMiddleware(engine)])  # <- the one line

        if isinstance(plain, ScriptedChatModel) and isinstance(withctx, ScriptedChatModel):
            print(f"{'call':>4}  {'without ctxplugin':>18}  {'with ctxplugin':>15}")
            total_a = total_b = 0
            for i, (a, b) in enumerate(zip(plain.calls, withctx.calls, strict=False), 1):
                ta, tb = count_messages(a.messages, counter), count_messages(b.messages, counter)
                total_a, total_b = total_a + ta, total_b + tb
                print(f"{i:>4}  {ta:>18,}  {tb:>15,}")
            print(f"{'sum':>4}  {total_a:>18,}  {total_b:>15,}   ({1 - total_b / total_a:.0%} fewer input tokens)")
        print(f"the agent's state still holds all {len(state)} original messages")
        ref = next(m.additional_kwargs["ctxplugin"]["ref"] for m in state if m.additional_kwargs.get("ctxplugin", {}).get("ref"))
        original = engine.expand_ref(ref, scope=__import__("ctxplugin").Scope(session_id="quickstart"))
        print(f"{ref} expands back to the original ({len(original):,} characters)")


if __name__ == "__main__":
    main()
