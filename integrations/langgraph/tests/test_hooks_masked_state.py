"""Tool outputs masked in the state after capture, on the hosts without middleware
(``create_react_agent``, custom ``StateGraph``s): an operator erasing an address with
``update_state``, or a redaction node of the user's graph. The annotation ctxplugin put on the
output holds a compact form made from the unmasked content, where the mask does not look: the
next model step saves the thread without it, as ``ContextMiddleware.after_model`` does for
``create_agent``."""

from __future__ import annotations

import json
import re
from typing import Annotated, Any, TypedDict

import pytest
from ctxplugin_langgraph import ContextHooks
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.prebuilt import create_react_agent, tools_condition

from ctxplugin import RefNotFoundError, Scope
from ctxplugin.cas import withheld
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

EMAIL = "jane.doe@corp-mail.com"


@tool
def customer_record(customer: str) -> str:
    """A customer's record."""
    orders = [f"order {i}: shipped to the customer's address" for i in range(300)]
    return "\n".join([f"customer: {customer}", f"email: {EMAIL}", *orders])


class State(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]
    llm_input_messages: list[AnyMessage]


def build(host: str, hooks: ContextHooks, model: ScriptedChatModel) -> Any:
    if host == "create_react_agent":
        return create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                                  checkpointer=InMemorySaver())
    graph = StateGraph(State)
    if host == "prepare_node":
        def call_model(state: State) -> dict[str, Any]:
            view = state["llm_input_messages"]
            return {"messages": [hooks.bind(model, view).invoke(view)]}

        graph.add_node("prepare", hooks.prepare_node())
        graph.add_node("model", call_model)
        graph.add_edge(START, "prepare")
        graph.add_edge("prepare", "model")
        graph.add_edge("tools", "prepare")
    else:
        graph.add_node("model", hooks.model_node(model))
        graph.add_edge(START, "model")
        graph.add_edge("tools", "model")
    graph.add_node("tools", hooks.tool_node())
    graph.add_conditional_edges("model", tools_condition, {"tools": "tools", END: END})
    return graph.compile(checkpointer=InMemorySaver())


def saved_text(messages: list[BaseMessage]) -> str:
    return json.dumps([m.model_dump() for m in messages], default=str)


@pytest.mark.parametrize("host", ["create_react_agent", "prepare_node", "model_node"])
@pytest.mark.parametrize("keep_originals", [True, False])
@pytest.mark.parametrize("run", ["sync", "async"])
async def test_an_output_masked_in_the_state_is_saved_without_an_unmasked_copy(host: str, keep_originals: bool, run: str) -> None:
    engine = memory_engine()
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})])], default="Noted."
    )
    hooks = ContextHooks(engine, [customer_record], keep_originals=keep_originals)
    app = build(host, hooks, model)
    thread = f"masked-{host}-{keep_originals}-{run}"
    config: Any = {"configurable": {"thread_id": thread}}

    async def invoke(text: str) -> None:
        turn = {"messages": [("user", text)]}
        if run == "sync":
            app.invoke(turn, config)
        else:
            await app.ainvoke(turn, config)

    await invoke("Show the record of customer c1")
    output = next(m for m in app.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    ref = re.search(r"ref:customer_record:[0-9a-f]{16}", json.dumps(output.additional_kwargs))
    assert ref is not None and EMAIL in saved_text([output])
    before = len(model.calls)
    # the operator erases the address from the thread (the message keeps its id)
    app.update_state(config, {"messages": [output.model_copy(update={"content": str(output.content).replace(EMAIL, "[REDACTED_EMAIL]")})]})
    await invoke("What is on it?")
    state = app.get_state(config).values
    saved = state["messages"]
    assert "[REDACTED_EMAIL]" in str(next(m for m in saved if isinstance(m, ToolMessage)).content)
    assert EMAIL not in saved_text(saved), "an unmasked copy was saved"
    assert EMAIL not in saved_text(state.get("llm_input_messages", []))
    assert not any(EMAIL in str([m.content for m in call.messages]) for call in model.calls[before:])
    assert withheld(ref.group(0), saved)
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref.group(0), scope=Scope(session_id=thread))
    assert [m.type for m in saved] == ["human", "ai", "tool", "ai", "human", "ai"], "nothing else changed"
