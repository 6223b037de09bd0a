"""ctxplugin in an LCEL chain: ``engine.as_runnable()`` between the prompt and the model.

The scope comes from ``configurable.thread_id``; the conversation stays yours.

    uv run --all-packages python examples/lcel_pipe.py
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.tools import tool

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel, tool_call


@tool
def get_weather_history(city: str) -> str:
    """Daily weather of the last 90 days for a city."""
    return json.dumps([{"day": f"2026-{8 + d // 30:02d}-{d % 30 + 1:02d}", "city": city,
                        "high_c": 18 + d % 11, "rain_mm": (d * 7) % 13} for d in range(90)])


model = ScriptedChatModel(script=[
    AIMessage(content="", tool_calls=[tool_call("get_weather_history", {"city": "Lisbon"})]),
    AIMessage(content="Lisbon stayed between 18 and 28 °C."),
    AIMessage(content="The wettest days had 12 mm."),
])


def main() -> None:
    engine = ContextEngine()
    prompt = ChatPromptTemplate.from_messages([("system", "Be brief."), MessagesPlaceholder("messages")])
    chain = prompt | engine.as_runnable() | model.bind_tools([get_weather_history])  # <- the pipe
    config: Any = {"configurable": {"thread_id": "weather-1"}}

    messages: list[BaseMessage] = []
    for question in ["How warm was Lisbon lately?", "And the rain?"]:
        messages.append(HumanMessage(question))
        reply = chain.invoke({"messages": messages}, config)
        messages.append(reply)
        while reply.tool_calls:
            messages.extend(get_weather_history.invoke(call) for call in reply.tool_calls)
            reply = chain.invoke({"messages": messages}, config)
            messages.append(reply)
        print(f"> {question}\n  {reply.content}")

    kept = next(m for m in messages if isinstance(m, ToolMessage))
    seen = next(m for m in model.calls[-1].messages if isinstance(m, ToolMessage))
    print(f"your list keeps {len(kept.content):,} chars of weather; the model saw {len(seen.content):,}:")
    print("  " + str(seen.content)[:160].replace("\n", "\n  "))


if __name__ == "__main__":
    main()
