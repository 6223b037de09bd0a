"""A run stopped before its tool step (``interrupt_before=["tools"]``, a human approving the
calls) and resumed by a new engine (after a restart): ``load_tools`` answers from the agent's
own tools, although no model call was prepared in the new process yet."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, TypedDict

from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition

from ctxplugin import ContextEngine
from ctxplugin.testing import ScriptedChatModel, tool_call


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def agent_tools() -> list[BaseTool]:
    def make(i: int) -> BaseTool:
        def run(account_id: str) -> str:
            return f"report {i} of {account_id}"

        return StructuredTool.from_function(run, name=f"report_{i}", description=f"Report number {i} of an account.")

    return [make(i) for i in range(12)]


def app_on(engine: ContextEngine, saver: InMemorySaver, model: ScriptedChatModel) -> Any:
    hooks = ContextHooks(engine, agent_tools())
    graph = StateGraph(State)
    graph.add_node("model", hooks.model_node(model))
    graph.add_node("tools", hooks.tool_node())
    graph.add_edge(START, "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "model")
    return graph.compile(checkpointer=saver, interrupt_before=["tools"])


def test_load_tools_resumed_by_a_new_engine_knows_the_agents_tools(tmp_path: Path) -> None:
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "resumed"}}
    first = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("load_tools", {"names": ["report_3"]})])])
    with ContextEngine.embedded(tmp_path / "ctx") as engine:
        app_on(engine, saver, first).invoke({"messages": [("user", "Run report 3 for account A-17.")]}, config)

    with ContextEngine.embedded(tmp_path / "ctx") as engine:  # the process after the restart
        app = app_on(engine, saver, ScriptedChatModel(script=[AIMessage(content="Done.")]))
        app.invoke(None, config)
        answer = next(m for m in app.get_state(config).values["messages"] if isinstance(m, ToolMessage))

    assert "no such tool" not in answer.text
    assert "report_3" in answer.text and "account_id" in answer.text
