"""The facts ledger's public methods answer an argument of the wrong type with a clear
InvalidInputError, not with whatever a helper trips over first."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import HumanMessage

from ctxplugin import ConfigError, ContextConfig, Scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts import ChromaFactStore, FactsLedger, MemoryFactStore
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="s1")


@pytest.fixture
def ledger() -> FactsLedger:
    facts: FactsLedger = memory_engine().facts
    facts.add("Max discount is 15%", key="max_discount", scope=SCOPE)
    return facts


# the ledger is taken as Any: the calls are wrong on purpose
CASES: list[tuple[str, Callable[[Any], Any], str]] = [
    ("add, text None", lambda f: f.add(None, scope=SCOPE), "a fact's text is a string, got NoneType"),
    ("add, scope a string", lambda f: f.add("Budget is 1,200 EUR", scope="s1"), r"takes scope=Scope\(session_id=...\), got str"),
    ("add, key a number", lambda f: f.add("Budget is 1,200 EUR", key=7, scope=SCOPE), "a fact's key is a string, got int"),
    ("get, id None", lambda f: f.get(None, scope=SCOPE), "a fact id is a string, got NoneType"),
    ("get, scope a string", lambda f: f.get("F-1", scope="s1"), r"takes scope=Scope"),
    ("current, scope None", lambda f: f.current("max_discount", scope=None), r"takes scope=Scope\(session_id=...\), got NoneType"),
    ("history, key a number", lambda f: f.history(5, scope=SCOPE), "a fact's key is a string, got int"),
    ("search, query None", lambda f: f.search(None, scope=SCOPE), "a facts search takes a text query, got NoneType"),
    ("search, scope a dict", lambda f: f.search("discount", scope={"session_id": "s1"}), r"takes scope=Scope"),
    ("superseded, scope a string", lambda f: f.superseded(scope="s1"), r"takes scope=Scope"),
    ("add, a tag None", lambda f: f.add("Budget is 1,200 EUR", tags=["budget", None], scope=SCOPE), "a fact's tags are strings, got NoneType"),
    ("search, k a float", lambda f: f.search("discount", scope=SCOPE, k=2.5), "k= a whole number of results, got 2.5"),
    ("search, k a string", lambda f: f.search("discount", scope=SCOPE, k="3"), "k= a whole number of results, got '3'"),
    # named as write() names them: not `scope` (the Scope argument) nor `type`
    ("add, unknown fact_scope", lambda f: f.add("Budget is 1,200 EUR", fact_scope="later", scope=SCOPE), r"^invalid fact: fact_scope: Input should be 'global'"),
    ("add, unknown source", lambda f: f.add("Budget is 1,200 EUR", source="tool:inspect", scope=SCOPE), r"^invalid fact: source: Input should be 'conversation'"),
    # read as nothing before, without a word
    ("ingest, a string", lambda f: f.ingest("My budget is $500.", scope=SCOPE), r"ingest\(\) takes a list of langchain-core messages, got str"),
    ("ingest, one message", lambda f: f.ingest(HumanMessage("My budget is $500."), scope=SCOPE), r"takes a list of langchain-core messages, got HumanMessage"),
    ("ingest, dicts", lambda f: f.ingest([{"role": "user", "content": "My budget is $500."}], scope=SCOPE), "message 0 is a dict, not a langchain-core BaseMessage"),
    ("ingest, scope a string", lambda f: f.ingest([HumanMessage("My budget is $500.")], scope="s1"), r"takes scope=Scope\(session_id=...\), got str"),
    ("withdraw, one call id", lambda f: f.withdraw("c1", scope=SCOPE), r"withdraw\(\) takes a mapping of tool call id -> output_digest\(s\).*got str"),
    ("withdraw, scope a string", lambda f: f.withdraw({"c1": ()}, scope="s"), r"takes scope=Scope\(session_id=...\), got str"),
    # matched nothing: an empty answer, as if there were no such fact
    ("search, unknown fact scope", lambda f: f.search("discount", scope=SCOPE, fact_scopes=("hypothetic",)), r"fact_scopes= takes names from \['global'.*got 'hypothetic'"),
    ("current, unknown fact scope", lambda f: f.current("max_discount", scope=SCOPE, fact_scopes=["globl"]), r"fact_scopes= takes names from .*got 'globl'"),
]


@pytest.mark.parametrize(("name", "call", "message"), CASES, ids=[c[0] for c in CASES])
def test_a_wrong_argument_is_a_clear_error(ledger: FactsLedger, name: str, call: Callable[[Any], Any], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        call(ledger)


def test_the_right_arguments_still_work(ledger: FactsLedger) -> None:
    current = ledger.current("Max Discount", scope=SCOPE)
    assert current is not None and current.text == "Max discount is 15%"
    assert [s.fact.text for s in ledger.search("discount", scope=SCOPE)] == ["Max discount is 15%"]
    assert [f.text for f in ledger.ingest((HumanMessage("My budget is $500."),), scope=SCOPE)] == ["My budget is $500."]


def test_one_string_is_one_tag_dependency_or_audience_entry(ledger: FactsLedger) -> None:
    fact = ledger.add(
        "Budget is 1,200 EUR", key="budget", tags="finance", depends_on="F-9", audience="role:manager", scope=SCOPE
    )
    assert "finance" in fact.tags and "f" not in fact.tags
    assert fact.depends_on == ("F-9",)
    assert fact.audience == ("role:manager",)
    assert ledger.search("discount", scope=SCOPE, tags="pricing")  # not a tag per character


def test_one_string_is_one_fact_scope(ledger: FactsLedger) -> None:
    # fact_scopes="hypothetical" was read letter by letter: no fact ever matched
    ledger.add("Budget is $80k", key="budget", fact_scope="hypothetical", scope=SCOPE)
    assert [s.fact.text for s in ledger.search("budget", scope=SCOPE, fact_scopes="hypothetical")] == ["Budget is $80k"]
    current = ledger.current("budget", scope=SCOPE, fact_scopes="hypothetical")
    assert current is not None and current.text == "Budget is $80k"
    assert ledger.current("budget", scope=SCOPE) is None  # not current by default


def test_a_context_config_given_for_the_facts_settings_gives_its_facts_settings(tmp_path: Path) -> None:
    # FactsLedger(store, config) and ChromaFactStore.persistent(path, config=config) with the
    # engine's ContextConfig failed with AttributeError ('... has no attribute max_per_message')
    config = ContextConfig(facts={"k": 2, "collection": "mine_facts"})
    store = ChromaFactStore.persistent(tmp_path / "facts", config=config)  # type: ignore[arg-type]
    try:
        assert store.config is config.facts and store.collection_name(None).startswith("mine_facts_")
        ledger = FactsLedger(store, config)  # type: ignore[arg-type]
        assert ledger.config is config.facts
        for text in ("Budget is $1", "Budget is $2 for hotels", "Budget is $3 for food"):
            ledger.add(text, scope=SCOPE)
        assert len(ledger.search("budget", scope=SCOPE)) == 2
    finally:
        store.close()
    with pytest.raises(ConfigError, match="must be a FactsConfig"):
        FactsLedger(MemoryFactStore(), {"k": 2})  # type: ignore[arg-type]
