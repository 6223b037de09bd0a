"""The host's system prompt under the last resort: a total nobody set is no reason to cut it."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

RULES = "".join(f"Rule {i}: always check booking class C{i:04d} before changing it. " for i in range(300))
"""About 4,500 tokens of instructions: over half of whole mode's default total, over compact's."""


def conversation(log_lines: int = 1500) -> list[BaseMessage]:
    log = "Here is the log: " + " ".join(f"line{i} status=ok" for i in range(log_lines))
    return [SystemMessage(RULES), HumanMessage(log), AIMessage("I read it."), HumanMessage("Now summarize " * 800)]


def sent_prompt(config: ContextConfig) -> tuple[str, list[str], bool]:
    prepared = memory_engine(config).prepare(conversation(), scope=Scope(session_id="s"))
    return content_text(prepared.messages[0].content), prepared.report.warnings, prepared.report.within_budget


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_long_system_prompt_is_sent_whole_when_nobody_set_the_total(mode: str) -> None:
    prompt, warnings, _ = sent_prompt(ContextConfig(mode=mode))
    assert prompt == RULES
    assert any(w.startswith("header is") and "never rewritten" in w for w in warnings), warnings
    assert any(w.startswith("context trimmed to the minimum viable view") for w in warnings), "the rest was cut instead"


def test_a_prompt_over_a_default_total_makes_the_view_over_it_and_says_why() -> None:
    prompt, warnings, within = sent_prompt(ContextConfig(mode="compact"))  # 3,000 tokens by default
    assert prompt == RULES and not within
    [over] = [w for w in warnings if w.startswith("the view is")]
    assert "the system prompt under a total not set" in over, over


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_total_the_user_set_stays_a_cap_that_cuts_the_prompt(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    prompt, warnings, _ = sent_prompt(ContextConfig(mode=mode, budget={"total": 4000}))
    assert len(prompt) < len(RULES)
    assert any("the system prompt was cut at head and tail" in w for w in warnings), warnings
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "4000")
    prompt, warnings, _ = sent_prompt(ContextConfig(mode=mode))
    assert len(prompt) < len(RULES), "a total set from the environment is set too"


def test_a_prompt_that_yields_is_held_under_a_total_set_with_elastic() -> None:
    prompt, _, _ = sent_prompt(ContextConfig(budget={"total": 4000, "elastic": True}))
    assert prompt == RULES


def test_a_default_total_that_does_not_grow_still_holds_the_prompt(monkeypatch: pytest.MonkeyPatch) -> None:
    # CTXPLUGIN_BUDGET__ELASTIC=false (docs/getting-started.md) turns off the growth of the whole
    # mode's default total; nobody set that total, so it is no cap either, as in compact mode
    for config in (ContextConfig(mode="whole", budget={"elastic": False}), ContextConfig(mode="compact", budget={"elastic": False})):
        prompt, warnings, _ = sent_prompt(config)
        assert prompt == RULES, (config.mode, warnings)
    monkeypatch.setenv("CTXPLUGIN_BUDGET__ELASTIC", "false")
    prompt, _, _ = sent_prompt(ContextConfig(mode="whole"))
    assert prompt == RULES
    assert ContextConfig(mode="whole").budget.total == 7500, "the whole mode's default total stays its total"


def test_the_mode_from_the_environment_chooses_the_budget_of_a_validated_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_MODE", "compact")
    config = ContextConfig.model_validate({"history": {"block_size": 2}})
    assert (config.mode, config.budget.total) == ("compact", 3000)
    monkeypatch.setenv("CTXPLUGIN_MODE", "whole")
    config = ContextConfig.model_validate({"history": {"block_size": 2}})
    assert (config.mode, config.budget.total) == ("whole", 7500) and "total" not in config.budget.model_fields_set
