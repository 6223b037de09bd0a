"""A user message the budget cuts stays readable: its whole text is stored behind a ref that
the cut names, readable with ``expand_ref`` from the scope that may read its tool outputs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import SQLiteCASStore, expand_for_model
from ctxplugin.errors import RefNotFoundError, StoreUnavailableError
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

BUDGET = {"total": 2000, "header": 400, "history": 1000, "facts": 200, "summaries": 300}
REF = re.compile(r"ref:user:[0-9a-f]{16}")


def _log(lines: int = 3000) -> str:
    rows = [f"12:00:{i % 60:02d} worker-{i % 7} INFO request id=req-{i:06d} status=200" for i in range(lines)]
    rows[lines // 2] = f"12:00:00 worker-3 ERROR request id=req-{lines // 2:06d} NEEDLE-7731 upstream refused"
    return "Here is the whole log, what failed?\n" + "\n".join(rows)


def _engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine(config=ContextConfig(budget=BUDGET), cas=SQLiteCASStore(tmp_path / "cas.db"))


def _cut(messages: list[BaseMessage]) -> str:
    return next(content_text(m.content) for m in messages if isinstance(m, HumanMessage) and "tokens cut" in content_text(m.content))


def test_a_user_message_cut_to_fit_names_a_ref_to_its_whole_text(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    scope = Scope(session_id="pasted-log")
    text = _log()
    prepared = engine.prepare([HumanMessage(text, id="u1")], scope=scope)
    shown = _cut(prepared.messages)
    assert "NEEDLE-7731" not in shown, "the middle of the log is what the budget cut"
    refs = REF.findall(shown)
    assert len(refs) == 1, shown[-400:]
    ref = refs[0]
    assert engine.expand_ref(ref, scope=scope) == text
    found = expand_for_model(engine.cas, ref, scope, max_tokens=500, counter=engine.counter, pattern="NEEDLE-7731")
    assert "upstream refused" in found
    assert ref in prepared.report.refs_used and ref in prepared.report.refs_created
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=Scope(session_id="someone-else"))


def test_the_cut_is_the_same_text_on_every_call(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    scope = Scope(session_id="stable")
    text = _log()
    first = engine.prepare([HumanMessage(text, id="u1")], scope=scope)
    second = engine.prepare([HumanMessage(text, id="u1")], scope=scope)
    assert [m.content for m in first.messages] == [m.content for m in second.messages]
    assert REF.search(_cut(second.messages)) is not None
    assert second.report.refs_created == [], "stored once"


def test_a_task_cut_to_make_room_for_the_question_keeps_a_ref_to_the_original() -> None:
    engine = memory_engine(ContextConfig(budget=BUDGET))
    scope = Scope(session_id="task")
    task = _log()
    messages: list[BaseMessage] = [HumanMessage(task, id="u1"), AIMessage("It is the request of 12:00:00.", id="a1"),
                                   HumanMessage("Which worker?", id="u2")]
    prepared = engine.prepare(messages, scope=scope)
    ref = REF.findall(_cut(prepared.messages))
    assert len(ref) == 1 and engine.expand_ref(ref[0], scope=scope) == task
    assert content_text(prepared.messages[-1].content) == "Which worker?"


def test_a_user_message_that_fits_is_not_stored() -> None:
    engine = memory_engine(ContextConfig(budget=BUDGET))
    message = HumanMessage("Which worker failed at 12:00:00?", id="u1")
    prepared = engine.prepare([message], scope=Scope(session_id="small"))
    assert prepared.messages[-1].content == message.content
    assert prepared.report.refs_created == [] and prepared.report.refs_used == []


def test_when_the_store_fails_the_cut_says_so_and_the_view_is_made(tmp_path: Path, mocker: MockerFixture) -> None:
    engine = _engine(tmp_path)
    mocker.patch.object(engine.cas, "put", side_effect=StoreUnavailableError("database is locked"))
    prepared = engine.prepare([HumanMessage(_log(), id="u1")], scope=Scope(session_id="down"))
    assert REF.search(_cut(prepared.messages)) is None
    assert any("not stored" in w and "database is locked" in w for w in prepared.report.warnings), prepared.report.warnings


def test_values_of_a_cut_user_message_are_counted_behind_its_ref_not_as_left(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    prepared = engine.prepare([HumanMessage(_log(), id="u1")], scope=Scope(session_id="counted"))
    report = prepared.report
    assert "NEEDLE-7731" not in str([m.content for m in prepared.messages])
    assert "NEEDLE-7731" not in report.values_left_from_user and "NEEDLE-7731" not in report.values_left
    assert report.values_behind_refs >= 1
    assert not any("the user wrote left the view" in w for w in report.warnings), report.warnings
