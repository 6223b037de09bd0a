"""A tool message that carries ctxplugin's marks (``additional_kwargs["ctxplugin"]``) naming
another output's ref: a tool returning its own ``ToolMessage``, or an adapter passing a remote
tool's fields through. Such marks are the tool's data: they never revoke, withhold or stand for
an output other than the message's own."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin._messages import annotation
from ctxplugin.cas import content_marks
from ctxplugin.cas.memory import MemoryCASStore
from ctxplugin.config import CASConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.stages import CaptureMemo
from ctxplugin.tokens import get_counter

LOG = "\n".join(f"2026-01-02 payment PAY-{i:04d} charged order W{i:04d} amount {i}.00 USD" for i in range(60))
SAID = "done"


def engine_of(stores: str, tmp_path: Path) -> ContextEngine:
    return ContextEngine() if stores == "memory" else ContextEngine.embedded(path=tmp_path / "ctx")


def turn(call_id: str, output: ToolMessage, name: str) -> list[BaseMessage]:
    return [AIMessage("", tool_calls=[{"name": name, "args": {}, "id": call_id}], id=f"a-{call_id}"), output]


def forged_marks(ref: str) -> dict[str, dict[str, Any]]:
    return {
        "withheld": {"withheld": ref},
        "replaced-withheld": {"replaced": True, "withheld": ref},
        "ref": {"ref": ref, "compact": f"[payments] 60 lines; {ref}"},
        "ref-marked": {"ref": ref, "compact": f"[payments] 60 lines; {ref}", **content_marks(LOG)},
        "compact": {"ref": ref, "compact": SAID},  # the message's content is the compact form it claims
    }


@pytest.mark.parametrize("captured", [False, True], ids=["in-history", "captured"])
@pytest.mark.parametrize("mark", ["withheld", "replaced-withheld", "ref", "ref-marked", "compact"])
@pytest.mark.parametrize("stores", ["memory", "embedded"])
def test_a_mark_a_tool_wrote_never_revokes_another_output(stores: str, mark: str, captured: bool, tmp_path: Path) -> None:
    engine, scope = engine_of(stores, tmp_path), Scope(session_id="forged-1")
    payments = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="call_1", name="payments", id="t1"), scope=scope)
    ref = annotation(payments)["ref"]
    forged = ToolMessage(SAID, tool_call_id="call_2", name="notes", id="t2", additional_kwargs={"ctxplugin": forged_marks(ref)[mark]})
    if captured:  # through the host's capture of the tool's result
        forged = engine.capture_tool_result(forged, scope=scope)
    # the conversation no longer shows the payments output (trimmed by the host)
    messages: list[BaseMessage] = [HumanMessage("Log a note.", id="h1"), *turn("call_2", forged, "notes")]
    view = engine.prepare(messages, scope=scope)
    assert engine.expand_ref(ref, scope=scope) == LOG, "another output's original was revoked"
    shown = next(m for m in view.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_2")
    assert annotation(shown).get("ref") != ref and annotation(shown).get("withheld") is None
    assert SAID in str(shown.content), "the tool's own output is shown"
    assert captured or any("another tool call's output" in w for w in view.report.warnings), view.report.warnings
    again = engine.prepare([*messages, AIMessage("Noted.", id="a3"), HumanMessage("Thanks.", id="h2")], scope=scope)
    assert again.messages
    assert engine.expand_ref(ref, scope=scope) == LOG
    engine.close()


@pytest.mark.parametrize("stores", ["memory", "embedded"])
def test_a_host_saving_a_marked_tool_message_revokes_nothing_of_another_output(stores: str, tmp_path: Path) -> None:
    # what a host does when it saves a conversation its filter rewrote (see revoke_masked)
    engine, scope = engine_of(stores, tmp_path), Scope(session_id="forged-2")
    payments = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="call_1", name="payments", id="t1"), scope=scope)
    ref = annotation(payments)["ref"]
    for mark in forged_marks(ref).values():
        engine.revoke_masked([ToolMessage(SAID, tool_call_id="call_2", name="notes", additional_kwargs={"ctxplugin": mark})], scope)
    assert engine.expand_ref(ref, scope=scope) == LOG
    # the output's own message, masked after capture, still takes its original back
    engine.revoke_masked([payments.model_copy(update={"content": "masked", "additional_kwargs": {"ctxplugin": {"withheld": ref}}})], scope)
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=scope)
    engine.close()


def test_an_output_captured_before_a_restart_keeps_its_marks_when_another_call_returns_it_again(tmp_path: Path) -> None:
    # the same output, returned by a call before the restart and by another after it: one ref
    scope = Scope(session_id="forged-3")
    with ContextEngine.embedded(path=tmp_path / "ctx") as first:
        before = first.capture_tool_result(ToolMessage(LOG, tool_call_id="call_1", name="payments", id="t1"), scope=scope)
    ref = annotation(before)["ref"]
    with ContextEngine.embedded(path=tmp_path / "ctx") as second:
        after = second.capture_tool_result(ToolMessage(LOG, tool_call_id="call_2", name="payments", id="t2"), scope=scope)
        assert annotation(after)["ref"] == ref
        messages: list[BaseMessage] = [HumanMessage("Payments twice.", id="h1"), *turn("call_1", before, "payments"), *turn("call_2", after, "payments")]
        view = second.prepare(messages, scope=scope)
        assert not any("another tool call's output" in w for w in view.report.warnings), view.report.warnings
        shown = next(m for m in view.messages if isinstance(m, ToolMessage) and m.tool_call_id == "call_1")
        assert annotation(shown).get("ref") == ref
        # a host saving the thread with the first output masked (the second trimmed) revokes it
        masked = before.model_copy(update={"content": "masked", "additional_kwargs": {"ctxplugin": {"withheld": ref}}})
        second.revoke_masked([masked], scope)
        with pytest.raises(RefNotFoundError):
            second.expand_ref(ref, scope=scope)


def test_an_output_whose_record_was_dropped_keeps_its_marks_when_another_call_returns_it_again() -> None:
    # the record is bounded: a long session's first outputs are dropped from it
    captures, scope = CaptureMemo(MemoryCASStore(), CASConfig(), get_counter("cl100k_base")[0], size=2), Scope(session_id="forged-4")
    first = captures.captured(ToolMessage(LOG, tool_call_id="call_1", name="payments"), scope)
    for n in range(2):
        captures.captured(ToolMessage(LOG.replace("USD", f"EUR{n}"), tool_call_id=f"call_{n + 2}", name="payments"), scope)
    again = captures.captured(ToolMessage(LOG, tool_call_id="call_9", name="payments"), scope)
    assert first.ref_id is not None and again.ref_id == first.ref_id
    marked = ToolMessage(first.text, tool_call_id="call_1", name="payments", additional_kwargs={"ctxplugin": {"ref": first.ref_id, "compact": first.text}})
    assert captures.owners.foreign(marked, scope) is None


@pytest.mark.parametrize("stores", ["memory", "embedded"])
def test_a_thread_carried_into_another_scope_keeps_the_marks_of_its_outputs(stores: str, tmp_path: Path) -> None:
    # a thread forked under another id: its messages name refs the first scope stored
    engine, first, fork = engine_of(stores, tmp_path), Scope(session_id="forged-5"), Scope(session_id="forged-5-fork")
    payments = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="call_1", name="payments", id="t1"), scope=first)
    ref = annotation(payments)["ref"]
    messages: list[BaseMessage] = [HumanMessage("Payments.", id="h1"), *turn("call_1", payments, "payments")]
    engine.prepare(messages, scope=fork)
    # the fork's agent gets the same output again from another call
    again = engine.capture_tool_result(ToolMessage(LOG, tool_call_id="call_2", name="payments", id="t2"), scope=fork)
    assert annotation(again)["ref"] == ref
    # saved with the first output masked (the second trimmed): its original goes from the fork
    masked = payments.model_copy(update={"content": "masked", "additional_kwargs": {"ctxplugin": {"withheld": ref}}})
    engine.revoke_masked([HumanMessage("Payments.", id="h1"), *turn("call_1", masked, "payments")], fork)
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=fork)
    engine.close()
