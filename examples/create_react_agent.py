"""ctxplugin in a LangGraph ``create_react_agent`` agent: a pre-model hook, a model callable
and a tool node. (LangGraph 1.x deprecates ``create_react_agent`` in favour of
``create_agent``; existing agents keep working, and so does ctxplugin with them.)

    uv run --all-packages python examples/create_react_agent.py
"""

from __future__ import annotations

import warnings
from typing import Any

from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from langgraph.warnings import LangGraphDeprecatedSinceV10

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel, tool_call


@tool
def read_log(service: str) -> str:
    """Read the last lines of a service's log."""
    lines = [f"10:{i // 60:02d}:{i % 60:02d} INFO {service} request id=req-{i:05d} ok" for i in range(600)]
    lines[217] = f"10:03:37 ERROR {service} TimeoutError: payments-api did not answer in 30s"
    return "\n".join(lines)


model = ScriptedChatModel(script=[
    AIMessage(content="", tool_calls=[tool_call("read_log", {"service": "checkout"})]),
    AIMessage(content="checkout timed out on payments-api at 10:03:37."),
    AIMessage(content="The failure is line 218 of the log; expand_ref can show the lines around it."),
])


def main() -> None:
    warnings.filterwarnings("ignore", category=LangGraphDeprecatedSinceV10)
    engine = ContextEngine()  # in memory; ContextEngine.embedded(path=...) keeps refs on disk
    hooks = ContextHooks(engine, [read_log], prompt="You are an on-call assistant.")
    agent = create_react_agent(hooks.model(model), hooks.tool_node(),
                               pre_model_hook=hooks.pre_model_hook, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "incident-7"}}
    for turn in ["Why did checkout fail?", "Where is it in the log?"]:
        reply = agent.invoke({"messages": [("user", turn)]}, config)["messages"][-1]
        print(f"> {turn}\n  {reply.content}")

    state = agent.get_state(config).values["messages"]
    kept = next(m for m in state if isinstance(m, ToolMessage))
    seen = next(m for m in model.calls[-1].messages if isinstance(m, ToolMessage))
    print(f"state: {len(state)} messages, the log in full ({len(kept.content):,} chars)")
    print(f"model: {len(model.calls[-1].messages)} messages, the log as a ref ({len(seen.text):,} chars):")
    print("  " + seen.text[:200].replace("\n", "\n  "))
    assert seen.text.startswith("[ref:read_log:"), "a log over the budget reaches the model as a ref"
    assert "ERROR" in seen.text, "the error line survives compression"


if __name__ == "__main__":
    main()
