"""Code blocks of the user guide run as written, with the names they take as given defined.

A block is found by the heading it follows; each runs in a fresh namespace holding only what
the page says comes from the reader's own code (an engine, a scope, messages)."""

from __future__ import annotations

import json
import re
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import same_specifics
from ctxplugin.testing import ScriptedChatModel, tool_call

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_block(page: str, heading: str, nth: int = 0) -> str:
    """The ``nth`` ```python block after ``heading`` on ``page`` (the first by default), without
    lines that stand for arguments the reader fills in (``(...)``)."""
    text = "\n" + (DOCS / page).read_text(encoding="utf-8")
    start = text.index(f"\n{heading}\n")
    found = re.findall(r"```python\n(.*?)```", text[start:], re.S)
    assert len(found) > nth, f"no python block {nth} after {heading!r} in {page}"
    return "\n".join(line for line in found[nth].splitlines() if "(...)" not in line)


def run(code: str, **given: Any) -> dict[str, Any]:
    namespace: dict[str, Any] = dict(given)
    exec(compile(code, "<docs>", "exec", dont_inherit=True), namespace)
    return namespace


def test_facts_state_api_block_runs_and_replaces_by_key() -> None:
    engine, scope = ContextEngine(), Scope(session_id="docs")
    run(python_block("facts.md", "## State API for callers who know their state"), engine=engine, scope=scope)
    assert engine.facts.current("vendor", scope=scope).text == "Vendor is Globex"  # type: ignore[union-attr]
    assert engine.facts.current("status", scope=scope).text == "Status is cancelled"  # type: ignore[union-attr]


def test_facts_ledger_block_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # the block opens ContextEngine.embedded(path=".ctxplugin")
    done = run(python_block("facts.md", "## Using it"), messages=[HumanMessage("My booking is 4WQ150.")])
    try:
        assert done["hits"][0].fact.text == "Data Team reallocated to Project Beta"
    finally:
        done["engine"].close()


# The pages' snippets below run as a reader pastes them, with the offline scripted model of
# ctxplugin.testing in place of a hosted one.


@tool
def search_flights(origin: str, destination: str) -> str:
    """Search direct flights between two airports."""
    return json.dumps([{"flight_number": f"HAT{i:03d}", "origin": origin, "destination": destination,
                        "price": 90 + 7 * i} for i in range(60)])


TOOLS: list[BaseTool] = [search_flights]


def searching_model() -> ScriptedChatModel:
    """A model that searches once, then answers."""
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})]),
        AIMessage(content="HAT000 at $90 is the cheapest."),
    ])


@pytest.fixture
def in_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[ContextEngine]]:
    """Run in a fresh directory (the blocks open ``.ctxplugin``); engines listed are closed after."""
    monkeypatch.chdir(tmp_path)
    opened: list[ContextEngine] = []
    yield opened
    for engine in opened:
        engine.close()


def test_getting_started_engine_block_stores_and_expands_a_tool_output(in_tmp: list[ContextEngine]) -> None:
    output = search_flights.invoke({"origin": "SFO", "destination": "JFK"})
    message = ToolMessage(output, tool_call_id="c1", name="search_flights")
    done = run(python_block("getting-started.md", "## The engine"), messages=[HumanMessage("Flights?")],
               tools=TOOLS, model=searching_model(), tool_message=message)
    in_tmp.append(done["engine"])
    assert done["ref"].startswith("ref:search_flights:")
    assert done["engine"].expand_ref(done["ref"], scope=done["scope"]) == output


def test_getting_started_engine_block_runs_for_a_short_tool_output(in_tmp: list[ContextEngine]) -> None:
    # a short output is under the pass-through threshold: it comes back as it was, with no ref
    message = ToolMessage('{"flight_number": "HAT004", "status": "on time"}', tool_call_id="c1", name="flight_status")
    done = run(python_block("getting-started.md", "## The engine"), messages=[HumanMessage("Status of HAT004?")],
               tools=TOOLS, model=searching_model(), tool_message=message)
    in_tmp.append(done["engine"])
    assert done["ref"] is None
    assert done["compact"].content == message.content


def _replies(agent: Any, thread: str) -> list[Any]:
    return list(agent.get_state({"configurable": {"thread_id": thread}}).values["messages"])


def test_create_agent_block_runs_the_agent_with_the_middleware(in_tmp: list[ContextEngine]) -> None:
    model = searching_model()
    done = run(python_block("hosts/create-agent.md", "# LangChain `create_agent`"),
               model=model, tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    state = _replies(done["agent"], "thread-1")
    assert state[-1].content == "HAT000 at $90 is the cheapest."
    assert "ctxplugin" in state[-1].response_metadata
    assert state[2].additional_kwargs["ctxplugin"]["ref"].startswith("ref:search_flights:")


def test_create_react_agent_block_runs_the_agent_with_the_hooks(in_tmp: list[ContextEngine]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # create_react_agent is deprecated in LangGraph 1.x
        done = run(python_block("hosts/create-react-agent.md", "# LangGraph `create_react_agent`"),
                   llm=searching_model(), tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    state = _replies(done["agent"], "thread-1")
    assert state[-1].content == "HAT000 at $90 is the cheapest."
    assert state[2].additional_kwargs["ctxplugin"]["ref"].startswith("ref:search_flights:")


def test_state_graph_block_builds_a_graph_that_captures_and_answers(in_tmp: list[ContextEngine]) -> None:
    done = run(python_block("hosts/state-graph.md", "# Custom LangGraph `StateGraph`"),
               llm=searching_model(), tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    out = done["app"].invoke({"messages": [HumanMessage("Flights from SFO to JFK?")]},
                             {"configurable": {"thread_id": "g1"}})
    assert out["messages"][-1].content == "HAT000 at $90 is the cheapest."
    assert out["messages"][2].additional_kwargs["ctxplugin"]["ref"].startswith("ref:search_flights:")


def test_state_graph_time_travel_block_shows_no_fact_of_the_branch_left(in_tmp: list[ContextEngine]) -> None:
    llm = ScriptedChatModel(default="Noted.")
    done = run(python_block("hosts/state-graph.md", "# Custom LangGraph `StateGraph`"), llm=llm, tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    run(python_block("hosts/state-graph.md", "## Time travel"), app=done["app"])
    assert "Any museums" in str(llm.calls[-1].messages[-1].content)
    assert "$900" not in str([m.content for m in llm.calls[-1].messages])


def test_lcel_blocks_prepare_bind_and_call_the_model(in_tmp: list[ContextEngine]) -> None:
    page, title = "hosts/lcel.md", "# LCEL chains: `engine.as_runnable()`"
    messages = [HumanMessage("Flights from SFO to JFK?", id="h1")]
    llm = searching_model()
    done = run(python_block(page, title), llm=llm, tools=TOOLS, messages=messages)
    in_tmp.append(done["engine"])
    assert llm.calls[0].messages[-1].content == "Flights from SFO to JFK?"
    config = {"configurable": {"thread_id": "thread-2"}}
    planned = run(python_block(page, title, nth=1), engine=done["engine"], llm=llm, tools=TOOLS,
                  messages=messages, config=config)
    assert planned["reply"].content == "HAT000 at $90 is the cheapest."
    answering = ScriptedChatModel(script=[AIMessage("Paris.")])
    step = run(python_block(page, "## The model step: `engine.as_model(llm)`"), prompt=done["prompt"],
               engine=done["engine"], llm=answering, tools=TOOLS, messages=messages)
    assert step["reply"].content == "Paris."


def test_message_history_blocks_keep_the_conversation_and_run_tool_calls(in_tmp: list[ContextEngine]) -> None:
    page = "hosts/message-history.md"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # RunnableWithMessageHistory is deprecated
        done = run(python_block(page, "# `RunnableWithMessageHistory`: `engine.history(session_id)`"),
                   llm=ScriptedChatModel(script=[AIMessage("Noted.")]))
        engine = done["engine"]
        in_tmp.append(engine)
        assert [m.content for m in engine.history("mia").full_messages] == ["...", "Noted."]
        llm = searching_model()
        chain = RunnableWithMessageHistory(llm.bind_tools(TOOLS), engine.history)
        looped = run(python_block(page, "## Tool calls"), chain=chain, engine=engine,
                     question="Flights from SFO to JFK?", session_id="ana", tools={t.name: t for t in TOOLS},
                     config={"configurable": {"session_id": "ana"}})
    assert looped["reply"].content == "HAT000 at $90 is the cheapest."
    kinds = [type(m).__name__ for m in engine.history("ana").full_messages]
    assert kinds == ["HumanMessage", "AIMessage", "ToolMessage", "AIMessage"]


def test_message_history_user_block_keeps_each_user_s_conversation(in_tmp: list[ContextEngine]) -> None:
    page = "hosts/message-history.md"
    engine = ContextEngine.embedded(path=".ctxplugin")
    in_tmp.append(engine)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # RunnableWithMessageHistory is deprecated
        done = run(python_block(page, "## Where conversations live"), engine=engine,
                   RunnableWithMessageHistory=RunnableWithMessageHistory,
                   llm=ScriptedChatModel(script=[AIMessage("Noted."), AIMessage("Noted, Ana."), AIMessage("Noted, Bo.")]))
        for user, said in [("ana", "I am Ana."), ("bo", "I am Bo.")]:
            done["chain"].invoke([HumanMessage(said)], {"configurable": {"session_id": "s1", "user_id": user}})
    assert [m.text for m in engine.history("s1", user_id="ana").full_messages] == ["I am Ana.", "Noted, Ana."]
    assert [m.text for m in engine.history("s1", user_id="bo").full_messages] == ["I am Bo.", "Noted, Bo."]
    assert [m.text for m in engine.history("s1", user_id="mia").full_messages] == ["...", "Noted."]


def test_message_history_expand_ref_block_reads_a_ref_of_the_session(in_tmp: list[ContextEngine]) -> None:
    page = "hosts/message-history.md"
    engine = ContextEngine.embedded(path=".ctxplugin")
    in_tmp.append(engine)
    asked = AIMessage("", tool_calls=[tool_call("search_flights", {"origin": "SFO", "destination": "JFK"})])
    engine.history("ana").add_messages([HumanMessage("Flights?"), asked, TOOLS[0].invoke(asked.tool_calls[0])])
    ref = engine.history("ana").full_messages[-1].additional_kwargs["ctxplugin"]["ref"]
    reply = AIMessage("", tool_calls=[tool_call("expand_ref", {"ref_id": ref, "limit": 1})])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # RunnableWithMessageHistory is deprecated
        run(python_block(page, "## Tool calls", nth=1), engine=engine, llm=ScriptedChatModel(script=[]),
            RunnableWithMessageHistory=RunnableWithMessageHistory,
            my_tools=TOOLS, reply=reply, session_id="ana", config={"configurable": {"session_id": "ana"}})
    read = engine.history("ana").full_messages[-1]
    assert read.name == "expand_ref" and read.text.startswith(f"[{ref} ·")


def test_callbacks_block_counts_the_run(in_tmp: list[ContextEngine]) -> None:
    from ctxplugin_langgraph import ContextMiddleware
    from langchain.agents import create_agent

    engine = ContextEngine.embedded(path=".ctxplugin")
    in_tmp.append(engine)
    agent = create_agent(searching_model(), TOOLS, middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    done = run(python_block("hosts/callbacks.md", "# Callbacks: `ContextCallbackHandler`"), agent=agent)
    assert done["handler"].summary.calls == 2 and done["handler"].summary.captures == 1
    inputs = {"messages": [HumanMessage("And back?")]}
    agent = create_agent(searching_model(), TOOLS, middleware=[ContextMiddleware(engine)], checkpointer=InMemorySaver())
    whole = run(python_block("budgets.md", "### Over a whole run"), engine=engine, agent=agent, inputs=inputs)
    assert len(whole["handler"].reports) == 2


def test_cache_blocks_serve_the_second_ask_and_take_a_guard(in_tmp: list[ContextEngine]) -> None:
    engine = ContextEngine.embedded(".ctxplugin", ContextConfig(cache={"enabled": True}))
    in_tmp.append(engine)
    around = python_block("cache.md", "## In the hosts")
    given = {"engine": engine, "tools": TOOLS, "scope": Scope(session_id="c1"),
             "messages": [HumanMessage("What is the capital of France?", id="q1")]}
    llm = ScriptedChatModel(script=[AIMessage("Paris.")], default=None)
    first = run(around, llm=llm, **given)
    second = run(around, llm=llm, **given)
    assert first["reply"].content == second["reply"].content == "Paris."
    assert second["reply"].response_metadata["ctxplugin_cache"]["hit"] is True
    assert len(llm.calls) == 1
    guarded = run(python_block("cache.md", "## Near-duplicates: the guard"), my_embeddings=DeterministicFakeEmbedding(size=32))
    in_tmp.append(guarded["engine"])
    try:
        assert guarded["engine"].cache is guarded["cache"] and guarded["cache"].guard is same_specifics
    finally:
        guarded["cache"].store.close()


def test_tools_block_builds_an_agent_with_pinned_tools(in_tmp: list[ContextEngine]) -> None:
    done = run(python_block("tools.md", "## Using it"), model=searching_model(), tools=TOOLS, checkpointer=InMemorySaver())
    in_tmp.append(done["engine"])
    out = done["agent"].invoke({"messages": [HumanMessage("Flights?")]}, {"configurable": {"thread_id": "t"}})
    assert out["messages"][-1].content == "HAT000 at $90 is the cheapest."
    assert done["engine"].config.tools.pinned == ["think"]


def test_facts_storage_names_the_collection_a_default_engine_makes(in_tmp: list[ContextEngine]) -> None:
    text = (DOCS / "facts.md").read_text(encoding="utf-8")
    storage = text[text.index("\n## Storage\n") :]
    shown = re.findall(r"`(ctxplugin_facts_\w+)`", storage.split("\n\n", 3)[2])
    engine = ContextEngine.embedded(path=".ctxplugin")
    in_tmp.append(engine)
    engine.facts.write("Budget is 900 EUR", key="budget", scope=Scope(session_id="docs"))
    made = engine.facts.store.collection_name(None)  # type: ignore[attr-defined]
    assert shown[0] == made


@pytest.mark.parametrize("flights", [60, 1], ids=["stored", "passed-through"])
def test_cas_block_expands_a_stored_output_and_runs_for_a_short_one(in_tmp: list[ContextEngine], flights: int) -> None:
    output = json.dumps([{"flight_number": f"HAT{i:03d}", "price": 90 + 7 * i} for i in range(flights)])
    done = run(python_block("cas.md", "## Using it"), tool_message=ToolMessage(output, tool_call_id="c1", name="search_flights"))
    in_tmp.append(done["engine"])
    if flights > 1:
        assert done["engine"].expand_ref(done["ref"], scope=Scope(session_id="thread-1")) == output
    else:
        assert done["ref"] is None and done["compact"].content == output


def test_caching_block_turns_the_marks_off(in_tmp: list[ContextEngine]) -> None:
    done = run(python_block("caching.md", "## Claude with `create_agent`"))
    in_tmp.append(done["engine"])
    assert done["engine"].config.prompt_cache_marks is False


def test_history_configuration_block_is_the_benchmark_s_configuration() -> None:
    # the page imports ContextConfig in an earlier block
    shown = run("value = " + python_block("history.md", "## Configuration").strip(), ContextConfig=ContextConfig)["value"]
    benchmark = DOCS.parent / "benchmarks" / "history_swe.json"
    assert shown == ContextConfig.model_validate_json(benchmark.read_text(encoding="utf-8"))
