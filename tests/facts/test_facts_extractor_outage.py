"""A model-backed fact extractor that fails, or answers with no fact, degrades the facts of a
step instead of failing the agent's step."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.extract import FactDraft, as_extractor

CONVERSATION: list[BaseMessage] = [SystemMessage("You help with trips."), HumanMessage("My budget is $500."), AIMessage("Noted.")]


class Flaky:
    """An extractor calling a model that is down until ``up`` is set."""

    def __init__(self) -> None:
        self.up = False
        self.calls: list[str] = []

    def __call__(self, message: BaseMessage) -> list[FactDraft]:
        self.calls.append(str(message.content))
        if not self.up:
            raise ConnectionError("Connection error: the model API is down")
        return [FactDraft(text=str(message.content), key="my_budget")] if "budget" in str(message.content) else []


def test_an_extractor_whose_model_is_down_degrades_the_step_and_its_message_is_read_again() -> None:
    engine = ContextEngine(ContextConfig())
    extractor = Flaky()
    engine.facts.extractor = as_extractor(extractor)
    scope = Scope(session_id="s")
    prepared = engine.prepare(CONVERSATION, scope=scope)
    assert any("the fact extractor failed: ConnectionError" in w for w in prepared.report.warnings), prepared.report.warnings
    assert engine.facts.search("budget", scope=scope) == []
    extractor.up = True
    again = engine.prepare([*CONVERSATION, HumanMessage("Thanks.")], scope=scope)
    assert not any("extractor" in w for w in again.report.warnings)
    assert "My budget is $500." in [f.fact.text for f in engine.facts.search("budget", scope=scope)]


@pytest.mark.parametrize(
    "answer",
    [
        [{"nope": 1}],  # an item with unknown fields
        [{"text": "The budget is " + "very " * 120 + "large."}],  # over 500 characters: a model that rambles
        "- " + "The budget note. " * 40,  # one line of text, as long
        [{"text": "   "}],
        [{"text": "The budget is $500.", "key": 500}],
        [{"text": "The budget is $500.", "importance": 5}],
        [{"text": "The budget is $500.", "visibility": "user"}],  # the scope names no user
    ],
    ids=["unknown-fields", "long-text", "long-line", "blank-text", "key-a-number", "importance-above-1", "user-without-user-id"],
)
def test_an_extractor_answer_that_is_no_fact_leaves_that_message_out_and_keeps_the_others(
    answer: list[dict[str, object]] | str, caplog: pytest.LogCaptureFixture
) -> None:
    # all but the first passed as a draft and failed where the fact was built: prepare raised
    # InvalidInputError, on every later call too (the message was never marked read)
    asked: list[str] = []

    def model(message: BaseMessage) -> list[dict[str, object]] | str:
        asked.append(str(message.content))
        if "budget" in str(message.content):
            return answer
        return [{"text": str(message.content), "key": "my_seat"}]

    engine = ContextEngine(ContextConfig())
    engine.facts.extractor = as_extractor(model)
    scope = Scope(session_id="s")
    history = [*CONVERSATION, HumanMessage("My seat is 12A.")]
    with caplog.at_level(logging.WARNING, logger="ctxplugin.facts"):
        prepared = engine.prepare(history, scope=scope)
    assert not any("unavailable" in w for w in prepared.report.warnings), prepared.report.warnings
    assert "My seat is 12A." in [f.fact.text for f in engine.facts.search("seat", scope=scope)]
    assert any("no fact" in r.getMessage() for r in caplog.records)
    engine.prepare([*history, AIMessage("Done."), HumanMessage("Thanks.")], scope=scope)
    assert asked.count("My budget is $500.") == 1, "a message whose answer is no fact is not asked again"
    # a tool output read at capture: the same answer does not fail the capture either
    captured = engine.capture_tool_result(ToolMessage("The budget is $900 per the finance page.", tool_call_id="c1"), scope=scope)
    assert captured.tool_call_id == "c1"


def test_an_extractor_with_a_bug_raises_to_its_developer() -> None:
    def buggy(message: BaseMessage) -> list[FactDraft]:
        raise TypeError("unsupported operand")

    engine = ContextEngine(ContextConfig())
    engine.facts.extractor = as_extractor(buggy)
    with pytest.raises(TypeError):
        engine.prepare(CONVERSATION, scope=Scope(session_id="s"))
