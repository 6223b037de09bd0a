"""``create_react_agent(..., response_format=...)`` with ``ContextHooks``: after the last agent
step, LangGraph asks the model callable (``hooks.model(llm)``) for the model once more, takes the
chat model out of what it returns (one ``RunnableBinding`` unwrapped) and asks it for the
structured response. A Claude model, whose requests ctxplugin marks for the prompt cache, must
still be found there."""

from __future__ import annotations

from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent
from pydantic import BaseModel

from ctxplugin import ContextConfig
from ctxplugin.testing import memory_engine, tool_call

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")


class Cheapest(BaseModel):
    flight_number: str


def claude(scenario: Any, payloads: list[dict[str, Any]]) -> Any:
    """A ``ChatAnthropic`` answered locally: the scenario's policy, and the structured answer
    when it is asked for one (its tool is the only one bound)."""
    from langchain_anthropic import ChatAnthropic

    class Local(ChatAnthropic):
        def _generate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            payload = self._get_request_payload(messages, stop=stop, **kw)
            payloads.append(payload)
            if [t["name"] for t in payload.get("tools", [])] == ["Cheapest"]:
                reply = AIMessage(content="", tool_calls=[tool_call("Cheapest", {"flight_number": "HAT000"})])
            else:
                reply = scenario.policy(messages, [])
            return ChatResult(generations=[ChatGeneration(message=reply)])

        async def _agenerate(self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any) -> ChatResult:
            return self._generate(messages, stop=stop, **kw)

    return Local(model="claude-sonnet-4-5", api_key="test-key")


def marks(payload: dict[str, Any]) -> int:
    return str(payload).count("cache_control")


@pytest.mark.parametrize("mode", ["whole", "compact"])
@pytest.mark.parametrize("run", ["sync", "async"])
async def test_a_claude_react_agent_gives_its_structured_response(scenario: Any, mode: str, run: str) -> None:
    payloads: list[dict[str, Any]] = []
    hooks = ContextHooks(memory_engine(ContextConfig(mode=mode)), scenario.tools)
    agent = create_react_agent(hooks.model(claude(scenario, payloads)), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                               response_format=Cheapest, checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": f"structured-{mode}-{run}"}}
    turn = {"messages": [("user", "flights SFO JFK")]}
    out = agent.invoke(turn, config) if run == "sync" else await agent.ainvoke(turn, config)
    assert out["structured_response"] == Cheapest(flight_number="HAT000")
    assert len(payloads) == 3
    assert all(marks(p) > 0 for p in payloads[:2]), "the agent's own calls are still marked for the cache"
