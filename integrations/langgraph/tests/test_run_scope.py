"""Runs without a thread id share nothing: each gets a scope of its own, with a warning once."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from langchain_core.tools import StructuredTool
from langgraph.prebuilt import create_react_agent

from ctxplugin import ContextCallbackHandler, InvalidInputError, Scope, _run_scope
from ctxplugin._layout import synthetic_kind
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call


def lookup_booking(booking_id: str) -> str:
    """Look up a booking."""
    if "ALICE" in booking_id:
        return f'{{"booking_id": "{booking_id}", "address": "12 Rue de la Paix, Paris", "card_last4": "4242"}}'
    return f'{{"booking_id": "{booking_id}", "address": "3 Elm Street, Leeds", "card_last4": "9911"}}'


TOOL = StructuredTool.from_function(lookup_booking)


def _invoke(agent: Any, state: Any, config: Any = None) -> Any:
    return agent.invoke(state, config)


def _facts_shown(messages: list[BaseMessage]) -> str:
    return "\n".join(str(m.content) for m in messages if synthetic_kind(m) == "facts")


def _script() -> ScriptedChatModel:
    return ScriptedChatModel(script=[
        AIMessage(content="", tool_calls=[tool_call("lookup_booking", {"booking_id": "BK-ALICE-77"})]),
        AIMessage(content="Your booking is at 12 Rue de la Paix."),
        AIMessage(content="", tool_calls=[tool_call("lookup_booking", {"booking_id": "BK-BOB-01"})]),
        AIMessage(content="Done."),
    ])


@pytest.fixture(autouse=True)
def _fresh_warning() -> None:
    _run_scope._warned.clear()


def test_two_create_agent_runs_without_thread_id_share_nothing(caplog: pytest.LogCaptureFixture) -> None:
    engine, model, handler = memory_engine(), _script(), ContextCallbackHandler()
    agent = create_agent(model, [TOOL], middleware=[ContextMiddleware(engine)])
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        _invoke(agent, {"messages": [("user", "Where does booking BK-ALICE-77 ship to? My card ends 4242.")]},
                     {"callbacks": [handler]})
        _invoke(agent, {"messages": [("user", "Hi, I am Bob. Check BK-BOB-01 please.")]}, {"callbacks": [handler]})
    sessions = [r.session_id for r in handler.reports]
    assert all(s.startswith(_run_scope.RUN_PREFIX) for s in sessions)
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]  # one scope per run, for all its calls
    bob_calls = model.calls[2:]
    assert all("Rue de la Paix" not in _facts_shown(c.messages) and "4242" not in _facts_shown(c.messages) for c in bob_calls)
    warnings = [r for r in caplog.records if r.getMessage() == _run_scope.UNSCOPED_WARNING]
    assert len(warnings) == 1 and "thread_id" in warnings[0].getMessage() and "Scope" in warnings[0].getMessage()


def test_a_run_without_thread_id_can_expand_its_own_refs() -> None:
    engine = memory_engine()
    big = StructuredTool.from_function(
        lambda q: "\n".join(f"row {i}: flight HAT{i:03d} price {100 + i}" for i in range(400)),
        name="search", description="Search flights.",
    )
    seen: dict[str, Any] = {}

    def expand(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        ref = next(str(m.content).split("ref:")[1].split()[0].rstrip("]).,;") for m in messages if "ref:search:" in str(m.content))
        seen["ref"] = "ref:" + ref
        return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": seen["ref"], "pattern": "HAT123"})])

    def answer(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        seen["expanded"] = str(messages[-1].content)
        return AIMessage(content="HAT123")

    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("search", {"q": "x"})]), expand, answer])
    agent = create_agent(model, [big], middleware=[ContextMiddleware(engine)])
    _invoke(agent, {"messages": [("user", "Find flights")]})
    assert "price 223" in seen["expanded"]


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
def test_create_react_agent_runs_without_thread_id_get_their_own_scopes() -> None:
    engine, handler = memory_engine(), ContextCallbackHandler()
    hooks = ContextHooks(engine, [TOOL])
    model = _script()
    agent = create_react_agent(hooks.model(model), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook)
    _invoke(agent, {"messages": [("user", "Where does booking BK-ALICE-77 ship to?")]}, {"callbacks": [handler]})
    _invoke(agent, {"messages": [("user", "Bob here: BK-BOB-01.")]}, {"callbacks": [handler]})
    sessions = [r.session_id for r in handler.reports]
    assert sessions[0] == sessions[1] != sessions[2] == sessions[3]
    assert all("Rue de la Paix" not in _facts_shown(c.messages) for c in model.calls[2:])


def test_sharing_is_asked_for_with_a_scope() -> None:
    engine, model, handler = memory_engine(), _script(), ContextCallbackHandler()
    shared = Scope(session_id="support-desk")
    agent = create_agent(model, [TOOL], middleware=[ContextMiddleware(engine, scope=shared)])
    _invoke(agent, {"messages": [("user", "Where does booking BK-ALICE-77 ship to?")]}, {"callbacks": [handler]})
    _invoke(agent, {"messages": [("user", "Which address is on file?")]}, {"callbacks": [handler]})
    assert {r.session_id for r in handler.reports} == {"support-desk"}
    assert "Rue de la Paix" in _facts_shown(model.calls[2].messages)


def test_lcel_steps_without_thread_id() -> None:
    engine = memory_engine()
    step = engine.as_runnable()
    alice = [HumanMessage(content="I live at 12 Rue de la Paix, Paris.", id="a1")]
    bob = [HumanMessage(content="Where do I live?", id="b1")]
    first = step.invoke(alice)
    again = step.invoke([*alice, AIMessage(content="Noted."), HumanMessage(content="Where do I live?", id="a2")])
    other = step.invoke(bob)
    assert first and again and other
    assert "Rue de la Paix" not in _facts_shown(other)
    scoped = step.invoke(bob, {"configurable": {"ctxplugin_scope": Scope(session_id="s")}})
    assert scoped
    assert _run_scope.run_scope(alice) == _run_scope.run_scope([*alice, *bob])
    assert _run_scope.run_scope(alice) != _run_scope.run_scope(bob)


def test_lcel_conversations_without_message_ids_share_nothing() -> None:
    # messages a prompt template makes have no ids: two users opening with the same words are
    # still two conversations, and neither may be shown what the other said next
    engine = memory_engine()
    step = engine.as_runnable()
    opening = [HumanMessage(content="hi"), AIMessage(content="Hello! How can I help?")]
    step.invoke([*opening, HumanMessage(content="My account PIN is 4921 and my IBAN is DE89370400440532013000.")])
    other = step.invoke([*opening, HumanMessage(content="What is my PIN and IBAN?")])
    assert "4921" not in _facts_shown(other) and "DE89370400440532013000" not in _facts_shown(other)
    assert _run_scope.run_scope(opening) != _run_scope.run_scope(opening)


def summarized_run_model() -> ScriptedChatModel:
    """A model that reads a log per call until its fifth call, then reads two lines of the
    ref it is shown last, then answers with what it read."""
    calls = iter(range(100))

    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        n, last = next(calls), messages[-1]
        if last.type == "tool" and last.name == "expand_ref":
            return AIMessage(content="read: " + str(last.content))
        refs = re.findall(r"ref:read_log:[0-9a-f]{16}", str(last.content)) if last.type == "tool" else []
        if n >= 5 and refs:
            return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": refs[0], "limit": 2})])
        return AIMessage(content="", tool_calls=[tool_call("read_log", {"service": f"svc{n}"})])

    return ScriptedChatModel(script=[step] * 20, default=None)


def read_log(service: str) -> str:
    """Read the last lines of a service's log."""
    return "\n".join(f"2026-11-22T10:00:{i % 60:02d}Z INFO {service} handled request id=req-{i:05d}" for i in range(300))


@pytest.mark.parametrize("keep_originals", [True, False])
@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_run_without_thread_id_reads_its_refs_after_its_first_message_was_summarized(keep_originals: bool, mode: str) -> None:
    # the run's own scope is found from its first message: a summary that takes that message's
    # place mid-run must not cut the run off from the refs it stored before
    from langchain.agents.middleware import SummarizationMiddleware

    from ctxplugin import ContextConfig

    summarize = SummarizationMiddleware(ScriptedChatModel(default="Summary: logs were read."),
                                        trigger=("messages", 6), keep=("messages", 2))
    engine = memory_engine(ContextConfig(mode=mode))
    agent: Any = create_agent(summarized_run_model(), [StructuredTool.from_function(read_log)],
                         middleware=[summarize, ContextMiddleware(engine, keep_originals=keep_originals)])
    out = agent.invoke({"messages": [("user", "investigate the services")]})
    assert out["messages"][0].text.startswith("Here is a summary"), "the run was summarized"
    answer = out["messages"][-1].text
    assert answer.startswith("read: [ref:read_log:") and "lines 0–1 of 300" in answer and "no such ref" not in answer


@pytest.mark.filterwarnings("ignore::langgraph.warnings.LangGraphDeprecatedSinceV10")
@pytest.mark.parametrize("thread", [None, "t1"])
@pytest.mark.parametrize("given", ["support-desk", {"session_id": "support-desk"}])
def test_a_scope_in_the_config_that_is_not_a_scope_is_refused(given: object, thread: str | None) -> None:
    # silently ignored, the run would get the thread's scope or one of its own: nothing shared
    config: Any = {"configurable": {"ctxplugin_scope": given, **({"thread_id": thread} if thread else {})}}
    refused = r"configurable\.ctxplugin_scope takes a Scope, got .*configurable\.thread_id"
    agent = create_agent(_script(), [TOOL], middleware=[ContextMiddleware(memory_engine())])
    with pytest.raises(InvalidInputError, match=refused):
        _invoke(agent, {"messages": [("user", "Where does booking BK-ALICE-77 ship to?")]}, config)
    hooks = ContextHooks(memory_engine(), [TOOL])
    react = create_react_agent(hooks.model(_script()), hooks.tool_node(), pre_model_hook=hooks.pre_model_hook)
    with pytest.raises(InvalidInputError, match=refused):
        _invoke(react, {"messages": [("user", "Where does booking BK-ALICE-77 ship to?")]}, config)
    with pytest.raises(InvalidInputError, match=refused):
        memory_engine().as_runnable().invoke([HumanMessage("hi", id="h1")], config)
