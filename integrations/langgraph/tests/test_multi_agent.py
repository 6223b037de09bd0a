"""Several agents on one engine (one process, one engine, as the docs advise): two agents with
different tool sets serving different users, and agents sharing a thread under their own
namespaces. What one agent is told about its tools is true of its own tools, whatever the other
agents of the engine have."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.prebuilt import create_react_agent

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.config import CacheConfig
from ctxplugin.testing import ScriptedChatModel, tool_call
from ctxplugin.tools import LOAD_TOOLS_NAME

pytestmark = pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")

Step = Callable[[list[BaseMessage], list[dict[str, Any]]], AIMessage]


def make_tool(name: str, description: str, params: list[str]) -> BaseTool:
    """A tool taking the string arguments ``params``; it answers which tool ran."""
    schema = {"type": "object", "properties": {p: {"type": "string"} for p in params}, "required": params}
    return StructuredTool.from_function(func=lambda **kwargs: f"{name} ran with {json.dumps(kwargs, sort_keys=True)}",
                                        name=name, description=description, args_schema=schema)


def web_tools() -> list[BaseTool]:
    """The research agent's tools: its ``search`` takes a query."""
    return [make_tool("search", "Search the web.", ["query"]),
            *(make_tool(f"read_page_{i}", f"Read a web page, variant {i}.", ["url"]) for i in range(8))]


def travel_tools(extra: int = 8) -> list[BaseTool]:
    """The travel agent's tools: its ``search`` takes an origin and a destination, and it can book."""
    return [make_tool("search", "Search flights.", ["origin", "destination"]),
            make_tool("book_flight", "Book a flight.", ["flight_number"]),
            *(make_tool(f"travel_tool_{i:03d}", f"Travel helper number {i}.", ["code"]) for i in range(extra))]


def build(host: str, engine: ContextEngine, model: ScriptedChatModel, tools: list[BaseTool], namespace: str | None = None) -> Any:
    if host == "create_agent":
        return create_agent(model, tools, system_prompt="You help.",
                            middleware=[ContextMiddleware(engine, namespace=namespace)], checkpointer=InMemorySaver())
    hooks = ContextHooks(engine, tools, prompt="You help.", namespace=namespace)
    return create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                              checkpointer=InMemorySaver())


def run(agent: Any, thread: str, text: str = "help me") -> list[BaseMessage]:
    config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [{"role": "user", "content": text}]}, config)
    return list(agent.get_state(config).values["messages"])


def tool_results(state: list[BaseMessage], name: str) -> list[ToolMessage]:
    return [m for m in state if isinstance(m, ToolMessage) and m.name == name]


def schemas_in(answer: str) -> dict[str, dict[str, Any]]:
    """The JSON schemas a load_tools answer gives, by tool name."""
    return {s["name"]: s for s in (json.loads(line[2:]) for line in answer.splitlines() if line.startswith("- {"))}


@pytest.mark.parametrize("host", ["create_agent", "create_react_agent"])
@pytest.mark.parametrize(("travel_thread", "namespaces"), [
    ("thread-2", (None, None)),  # two users
    ("thread-1", ("research", "travel")),  # one thread, an agent per namespace
    ("thread-1", (None, None)),  # one thread, no namespaces: the agents share refs and facts
], ids=["two-users", "namespaces", "one-session"])
def test_load_tools_answers_from_the_calling_agents_own_tools(
    tmp_path: Path, host: str, travel_thread: str, namespaces: tuple[Any, Any]
) -> None:
    # one engine serves two agents: the travel agent runs (for another user, or on the same
    # thread) while the research agent's model is thinking, so the registry's latest "search" is
    # the travel agent's when the research agent loads its own
    engine = ContextEngine.embedded(tmp_path / "ctx")
    travel_model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["search"]})]),
                                             AIMessage(content="Found flights.")])
    travel = build(host, engine, travel_model, travel_tools(), namespaces[1])

    def research_first(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        run(travel, travel_thread, "flights SFO JFK")
        return AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["search", "book_flight", "bok_flight"]})])

    research_model = ScriptedChatModel(script=[research_first, AIMessage(content="Done.")])
    state = run(build(host, engine, research_model, web_tools(), namespaces[0]), "thread-1")

    answer = str(tool_results(state, LOAD_TOOLS_NAME)[0].content)
    schemas = schemas_in(answer)
    assert set(schemas) == {"search"}, answer
    assert schemas["search"]["parameters"]["properties"] == {"query": {"type": "string"}}, "its own search, not the travel agent's"
    assert "- book_flight: no such tool" in answer, "the other agent's tool is not bound for this one"
    assert "- bok_flight: no such tool" in answer and "did you mean book_flight" not in answer
    # the travel agent, for its part, was answered with its own search
    travel_state = travel.get_state({"configurable": {"thread_id": travel_thread}}).values["messages"]
    travel_search = schemas_in(str(tool_results(travel_state, LOAD_TOOLS_NAME)[0].content))["search"]
    assert set(travel_search["parameters"]["properties"]) == {"origin", "destination"}


@pytest.mark.parametrize("host", ["create_agent", "create_react_agent"])
def test_a_call_to_another_agents_tool_is_answered_with_this_agents_tools(tmp_path: Path, host: str) -> None:
    engine = ContextEngine.embedded(tmp_path / "ctx")
    run(build(host, engine, ScriptedChatModel(script=[AIMessage(content="Hello.")]), travel_tools()), "travel-user")
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("bok_flight", {"flight_number": "HAT001"})]),
                                      AIMessage(content="Done.")])
    state = run(build(host, engine, model, web_tools()), "research-user")
    answer = str(tool_results(state, "bok_flight")[0].content)
    assert "book_flight" not in answer and "travel_tool" not in answer, answer


@pytest.mark.parametrize("host", ["create_agent", "create_react_agent"])
def test_each_agent_is_answered_as_its_own_tools_are_bound(tmp_path: Path, host: str) -> None:
    # the default binding picks stubs for the research agent's nine tools and loaded schemas for
    # the travel agent's 122 (their stubs exceed directory_max_tokens); both have a "search"
    engine = ContextEngine.embedded(tmp_path / "ctx")
    research = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("search", {"q": "x"})]),
                                         AIMessage(content="Done.")])
    run(build(host, engine, research, web_tools()), "research-user")
    assert research.calls[0].tools[1:3] == [
        {"type": "function", "function": {"name": "search", "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}},
        {"type": "function", "function": {"name": "read_page_0", "parameters": {"type": "object", "properties": {}, "additionalProperties": True}}},
    ], "the research agent's tools are bound as stubs"

    travel = ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search", {"from": "SFO"})]),
        AIMessage(content="", tool_calls=[tool_call(LOAD_TOOLS_NAME, {"names": ["search"]})]),
        AIMessage(content="Done."),
    ])
    state = run(build(host, engine, travel, travel_tools(extra=120)), "travel-user")
    first = [t["function"]["name"] for t in travel.calls[0].tools]
    assert LOAD_TOOLS_NAME in first and "search" not in first, "the travel agent binds loaded schemas"
    assert "search" in [t["function"]["name"] for t in travel.calls[1].tools], "bound with its schema once called"
    wrong = str(tool_results(state, "search")[0].content)
    assert "The schema of search (bound from your next step on):" in wrong, wrong
    loaded = str(tool_results(state, LOAD_TOOLS_NAME)[0].content)
    assert loaded.splitlines() == ["Loaded; these tools are bound with their full schemas from your next step on:",
                                   "- search(origin: string, destination: string)"], loaded


def test_react_agents_told_apart_by_their_own_prompt_do_not_share_cached_answers(tmp_path: Path) -> None:
    # two create_react_agent agents on one engine with the answer cache on, the same tools, each
    # with the system prompt given to create_react_agent (not to ContextHooks): the model is sent
    # that prompt, so an answer written under one prompt is not the other agent's answer
    engine = ContextEngine.embedded(tmp_path / "ctx", config=ContextConfig(cache=CacheConfig(enabled=True, scope="global")))

    def agent(prompt: str, answer: str) -> tuple[ScriptedChatModel, Any]:
        model = ScriptedChatModel(script=[AIMessage(content=answer)], default=None)
        hooks = ContextHooks(engine, web_tools())
        return model, create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook,
                                         prompt=prompt, checkpointer=InMemorySaver())

    question = "What should the next paragraph of the report say?"
    writer_model, writer = agent("You write the report.", "The paragraph says: sales rose 12% in Q3.")
    critic_model, critic = agent("You criticise the report.", "The paragraph lacks a source for the 12%.")
    assert run(writer, "writer-1", question)[-1].content == "The paragraph says: sales rose 12% in Q3."
    assert "You write the report." in str(writer_model.calls[0].messages[0].content)
    answer = run(critic, "critic-1", question)[-1]
    assert answer.content == "The paragraph lacks a source for the 12%.", "the critic is not served the writer's answer"
    assert len(critic_model.calls) == 1
    # the same agent asked again is served from the cache, the model not called
    again = run(writer, "writer-2", question)[-1]
    assert again.content == "The paragraph says: sales rose 12% in Q3." and len(writer_model.calls) == 1


def shown_ref(messages: list[BaseMessage]) -> str:
    """The ref of the last tool output the model was shown."""
    text = str([m for m in messages if isinstance(m, ToolMessage)][-1].content)
    return "ref:" + text.split("ref:", 1)[1].split()[0].rstrip("];,.)'\"")


@pytest.mark.parametrize("host", ["create_agent", "create_react_agent"])
def test_a_namespaced_agent_run_without_a_thread_id_reads_its_own_refs(tmp_path: Path, host: str) -> None:
    # a worker agent invoked on its own (no checkpointer, no thread id: a run of its own) under
    # a namespace: its expand_ref must find the refs its own tool outputs were stored under
    engine = ContextEngine.embedded(tmp_path / "ctx")
    big = make_tool("fetch_rows", "Fetch the rows of a table.", ["table"])
    big.func = lambda table: json.dumps([{"row": i, "table": table, "value": f"v-{i:04d}"} for i in range(400)])

    def expand(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": shown_ref(messages), "offset": 7, "limit": 1})])

    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("fetch_rows", {"table": "sales"})]),
                                      expand, AIMessage(content="Row 7 read.")])
    if host == "create_agent":
        agent = create_agent(model, [big], middleware=[ContextMiddleware(engine, namespace="worker")])
    else:
        hooks = ContextHooks(engine, [big], namespace="worker")
        agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook)
    state = agent.invoke({"messages": [{"role": "user", "content": "read row 7 of sales"}]})["messages"]
    expanded = str(tool_results(state, "expand_ref")[0].content)
    assert '"value": "v-0007"' in expanded, expanded
