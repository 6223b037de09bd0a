"""ctxplugin in a custom LangGraph ``StateGraph``: a prepare node before the model node, and a
capturing tool node. Two agents of one graph share the engine, each in its own scope.

    uv run --all-packages python examples/state_graph.py
"""

from __future__ import annotations

import json
from typing import Annotated, Any, TypedDict

from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import tools_condition

from ctxplugin import ContextEngine, RefNotFoundError, Scope
from ctxplugin.testing import ScriptedChatModel, tool_call


@tool
def list_orders(user_id: str) -> str:
    """List a user's orders."""
    return json.dumps([{"order_id": f"#W{1000 + i}", "user_id": user_id, "total": round(10.5 * i, 2)} for i in range(70)])


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]  # the prepared view; overwritten before every model call


def agent(model: ScriptedChatModel, hooks: ContextHooks) -> Any:
    def call_model(state: State, config: RunnableConfig) -> dict[str, Any]:
        view = state["llm_input_messages"]
        return {"messages": [hooks.bind(model, view).invoke(view, config)]}

    graph = StateGraph(State)
    graph.add_node("prepare", hooks.prepare_node())  # <- added
    graph.add_node("model", call_model)
    graph.add_node("tools", hooks.tool_node())  # <- ToolNode(tools, wrap_tool_call=...)
    graph.add_edge(START, "prepare")
    graph.add_edge("prepare", "model")
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    graph.add_edge("tools", "prepare")
    return graph.compile(checkpointer=InMemorySaver())


def script(user: str) -> ScriptedChatModel:
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("list_orders", {"user_id": user})]),
        AIMessage(content=f"{user} has 70 orders; the largest is #W1069."),
    ])


def main() -> None:
    engine = ContextEngine()
    sales = agent(script("yusuf_1"), ContextHooks(engine, [list_orders], namespace="sales"))
    support = agent(script("mia_2"), ContextHooks(engine, [list_orders], namespace="support"))
    config: Any = {"configurable": {"thread_id": "account-9"}}
    for name, graph, user in [("sales", sales, "yusuf_1"), ("support", support, "mia_2")]:
        reply = graph.invoke({"messages": [("user", f"How many orders does {user} have?")]}, config)
        print(f"{name}: {reply['messages'][-1].content}")

    state = sales.get_state(config).values["messages"]
    ref = state[2].additional_kwargs["ctxplugin"]["ref"]
    text = engine.expand_ref(ref, scope=Scope(session_id="account-9/sales"))
    print(f"sales stored the order list as {ref} and reads it back ({len(text):,} chars)")
    try:
        raise SystemExit(f"support read sales' ref: {engine.expand_ref(ref, scope=Scope(session_id='account-9/support'))}")
    except RefNotFoundError:
        print("support cannot read it: on one thread and one engine, each agent keeps its own refs")


if __name__ == "__main__":
    main()
