"""``create_agent`` polling a tool twice with the same arguments: the later status replaces the
earlier one in the facts, though the output has no id field to key it by."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, Scope
from ctxplugin.facts import FactQuery
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

STATUSES: Iterator[dict[str, Any]] = iter(
    [
        {"status": "processing", "carrier": None, "eta": "2026-12-04"},
        {"status": "shipped", "carrier": "UPS", "eta": "2026-12-02"},
        {"status": "shipped", "carrier": "UPS", "eta": "2026-12-02"},
    ]
)


@tool
def get_order_status(order: str) -> str:
    """The status of an order."""
    return json.dumps(next(STATUSES))


def test_a_tool_polled_twice_leaves_one_current_status() -> None:
    engine = memory_engine(ContextConfig(mode="compact"))
    model = ScriptedChatModel(
        script=[
            AIMessage("", tool_calls=[tool_call("get_order_status", {"order": "7731"})]),
            AIMessage("It is processing."),
            AIMessage("", tool_calls=[tool_call("get_order_status", {"order": "7731"})]),
            AIMessage("It shipped."),
            AIMessage("", tool_calls=[tool_call("get_order_status", {"order": "7731"})]),
            AIMessage("Still shipped."),
        ]
    )
    agent = create_agent(model, [get_order_status], middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "poll"}}
    for turn in ("Where is order 7731?", "Check again.", "And now?"):
        agent.invoke({"messages": [{"role": "user", "content": turn}]}, config)
    scope = Scope(session_id="poll")
    facts = [f for f in engine.facts.store.find(FactQuery(reader=scope)) if f.from_tool]
    assert sorted(f.text for f in facts if f.is_valid) == ["order_status: status=shipped, carrier=UPS, eta=2026-12-02"]
    assert len(engine.facts.superseded(scope=scope)) == 1, "the unchanged third output replaced nothing"
    # the model's last request: the earlier lookup is marked, the later one is not
    sent = model.calls[-1].messages
    outputs = [str(m.content) for m in sent if m.type == "tool"]
    assert outputs[0].startswith("[outdated: this is now: see the tool result"), outputs
    assert not any(o.startswith("[outdated") for o in outputs[1:]), outputs
