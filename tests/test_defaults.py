"""The defaults a user gets with ``ContextConfig()``: the conversation as it was while it fits,
hard compression once it does not (``mode="whole"``)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.tools import tool

from ctxplugin import ContextConfig, Scope
from ctxplugin._names import META_TOOL_MARK
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

SCOPE = Scope(session_id="defaults")


@pytest.fixture(autouse=True)
def _no_pinned_mode(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)
    yield


@tool
def search(q: str) -> str:
    """Search flights."""
    return q


@tool
def expand_ref(ref_id: str) -> str:
    """Read a stored tool output."""
    return ref_id


expand_ref.metadata = {META_TOOL_MARK: True}  # stands in for ctxplugin's own meta-tool


def conversation(turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(content="You are a travel agent."), HumanMessage(content="Find flights SFO to JFK")]
    for i in range(turns):
        rows = [{"flight_number": f"HAT{i:02d}{j:02d}", "price": 100 + j, "seats": j % 7} for j in range(60)]
        messages.append(AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": f"day {i}"}, "id": f"c{i}"}]))
        messages.append(ToolMessage(content=json.dumps(rows), tool_call_id=f"c{i}", name="search"))
        messages.append(AIMessage(content=f"Cheapest on day {i} is HAT{i:02d}00."))
        messages.append(HumanMessage(content=f"And for day {i + 1}?"))
    return messages


def test_a_section_given_as_its_config_class_keeps_the_whole_modes_defaults_for_what_it_leaves_unset() -> None:
    from ctxplugin.config import BudgetConfig, CASConfig, FactsConfig, HistoryConfig

    as_dicts = ContextConfig(
        budget={"total": 12000}, history={"block_size": 3}, cas={"error_passthrough_tokens": 900}, facts={"k": 5}
    )
    as_classes = ContextConfig(
        budget=BudgetConfig(total=12000), history=HistoryConfig(block_size=3),
        cas=CASConfig(error_passthrough_tokens=900), facts=FactsConfig(k=5),
    )
    assert as_classes.model_dump() == as_dicts.model_dump()
    assert as_classes.budget.resolve() == {"total": 12000, "header": 6000, "history": 11000, "facts": 320, "summaries": 11000}
    assert (as_classes.history.compress, as_classes.history.verbatim_exchanges, as_classes.history.block_size) == ("over_budget", 1, 3)
    assert (as_classes.facts.placement, as_classes.facts.skip_shown, as_classes.facts.k) == ("window", True, 5)
    assert as_classes.cas.passthrough_tokens == 500
    # a total left unset is still the default one, which yields to a long system prompt
    assert ContextConfig(budget=BudgetConfig(header=1000)).budget.elastic
    assert "total" not in ContextConfig(budget=BudgetConfig(header=1000)).budget.model_fields_set


def test_the_default_mode_is_whole_and_explicit_fields_win() -> None:
    config = ContextConfig()
    assert config.mode == "whole"
    assert config.budget.resolve() == {"total": 7500, "header": 3750, "history": 6875, "facts": 200, "summaries": 6875}
    assert (config.history.compress, config.history.max_tokens, config.cas.passthrough_tokens) == ("over_budget", 1000, 500)
    assert config.history.block_size == 2
    assert (config.history.archive_tokens, config.history.digest_tokens) == (850, 100)
    assert (config.history.solo_exchanges, config.history.solo_tool_tokens) == (8, 1500)
    assert (config.facts.placement, config.facts.skip_shown) == ("window", True)
    # a field set explicitly is kept; sections not set follow the total given
    mine = ContextConfig(budget={"total": 24000}, history={"verbatim_exchanges": 3}, cas={"passthrough_tokens": 50})
    assert mine.budget.resolve()["history"] == 22000
    assert (mine.history.verbatim_exchanges, mine.history.trimmed_exchanges) == (3, 3)
    assert mine.cas.passthrough_tokens == 50
    # the compact mode keeps every field's own default
    compact = ContextConfig(mode="compact")
    assert compact.budget.resolve()["total"] == 3000 and compact.history.compress == "always"


def test_the_mode_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "8000")
    assert ContextConfig().budget.resolve()["history"] == 7333
    monkeypatch.setenv("CTXPLUGIN_MODE", "compact")
    assert ContextConfig().history.compress == "always"


def test_a_short_conversation_reaches_the_model_as_it_was() -> None:
    engine = memory_engine()
    messages = conversation(4)
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    assert prepared.messages[1:] == messages[1:]  # the header only gains the tool directory, if any
    assert prepared.report.refs_used == [] and "expand_ref" not in prepared.report.tools_bound


def test_a_long_conversation_is_compressed_within_the_budget() -> None:
    engine = memory_engine()
    messages = conversation(30)
    prepared = engine.prepare(messages, tools=[search, expand_ref], scope=SCOPE)
    assert prepared.report.tokens_before > 7500
    assert prepared.report.within_budget and prepared.report.tokens_after <= 7500
    assert prepared.report.refs_used and "expand_ref" in prepared.report.tools_bound
    # the latest exchange is still there as it was
    assert prepared.messages[-1] == messages[-1]


def long_prompt_session(steps: int) -> list[BaseMessage]:
    """A coding agent whose system prompt alone is over the default total."""
    rules = " ".join(f"Rule {i}: always read src/module_{i}.py before editing it." for i in range(700))
    messages: list[BaseMessage] = [SystemMessage(content=f"You are a careful coding agent. {rules}"), HumanMessage(content="Fix user 48213's login in app/main.py.")]
    for i in range(steps):
        messages.append(AIMessage(content="", tool_calls=[{"name": "bash", "args": {"command": f"cat app/mod_{i}.py"}, "id": f"c{i}"}]))
        messages.append(ToolMessage(content="\n".join(f"def f_{i}_{j}(x): return x + {j}" for j in range(30)), tool_call_id=f"c{i}", name="bash"))
    return messages


def test_a_system_prompt_over_the_default_total_is_sent_whole_with_the_history() -> None:
    assert ContextConfig().budget.elastic
    messages = long_prompt_session(6)
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    assert prepared.report.tokens_before > 7500, "the prompt alone is over the default total"
    assert prepared.messages == messages, "nothing is cut: the prompt, the task and every exchange"
    assert prepared.report.within_budget and prepared.report.budget_total > 7500
    assert any("the total grows to" in w for w in prepared.report.warnings)


def test_a_total_somebody_set_stays_a_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    messages = long_prompt_session(6)
    capped = memory_engine(ContextConfig(budget={"total": 7500})).prepare(messages, scope=SCOPE)
    assert not ContextConfig(budget={"total": 7500}).budget.elastic
    assert capped.report.tokens_after <= 7500 and len(capped.messages) < len(messages)
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "7500")
    assert not ContextConfig().budget.elastic
    assert not ContextConfig(mode="compact").budget.elastic


def test_a_system_prompt_of_a_few_thousand_tokens_is_not_reported_on_every_call() -> None:
    counter = get_counter("cl100k_base")[0]
    policy = "Airline policy: refunds need the reservation id and the user's id. " * 100
    assert 1000 < counter.count(policy) < 3750
    history: list[BaseMessage] = [SystemMessage(content=policy), HumanMessage(content="Cancel reservation ZFA04Y.")]
    engine = memory_engine(ContextConfig(mode="whole"))
    warnings = engine.prepare(history, scope=Scope(session_id="policy")).report.warnings
    assert not [w for w in warnings if w.startswith("header is")]
    capped = memory_engine(ContextConfig(mode="whole", budget={"total": 7500, "header": 625}))
    warnings = capped.prepare(history, scope=Scope(session_id="policy")).report.warnings
    assert [w for w in warnings if w.startswith("header is")], "a header budget set by hand still reports"
