"""The original of a tool output its host masked after capture is revoked from the CAS: once per
scope and ref, never while the conversation still holds the same output whole, and a store that
fails or cannot revoke leaves the call working with a warning."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextEngine, Scope
from ctxplugin._messages import META_KEY, annotation
from ctxplugin.cas import (
    CASItem,
    CASRecord,
    CASStore,
    MemoryCASStore,
    SQLiteCASStore,
    content_marks,
)
from ctxplugin.errors import RefNotFoundError, StoreUnavailableError
from ctxplugin.stages.memos import Revocations
from ctxplugin.testing.cas_contract import make_item
from ctxplugin.tokens import content_text

LOG = "\n".join(f"2026-01-02 payment PAY-{i:04d} charged card 4111-1111-1111-{i:04d}" for i in range(60))
CARD = re.compile(r"4111-1111-\d{4}-\d{4}")


def kept(engine: ContextEngine, scope: Scope, call_id: str) -> ToolMessage:
    """The original output as a host keeps it: annotated with its ref, compact form and marks."""
    output = ToolMessage(LOG, tool_call_id=call_id, name="payments", id=f"t-{call_id}")
    note = {**annotation(engine.capture_tool_result(output, scope=scope)), **content_marks(LOG)}
    return output.model_copy(update={"additional_kwargs": {META_KEY: note}})


def masked(message: ToolMessage) -> ToolMessage:
    return message.model_copy(update={"content": CARD.sub("****-****-****-0000", content_text(message.content))})


def turn(call_id: str, output: ToolMessage) -> list[BaseMessage]:
    return [AIMessage("", tool_calls=[{"name": "payments", "args": {}, "id": call_id}], id=f"a-{call_id}"), output]


def test_prepare_revokes_the_original_of_an_output_masked_after_capture(tmp_path: Path) -> None:
    engine, scope = ContextEngine(cas=SQLiteCASStore(tmp_path / "cas.sqlite3")), Scope(session_id="rev-1")
    original = kept(engine, scope, "call_1")
    ref = annotation(original)["ref"]
    view = engine.prepare([HumanMessage("cards?", id="h1"), *turn("call_1", masked(original))], scope=scope)
    assert not CARD.search(str([m.content for m in view.messages]))
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=scope)
    assert not any("masked after capture" in w for w in view.report.warnings), view.report.warnings
    engine.close()


def test_an_output_the_conversation_still_holds_whole_is_not_revoked() -> None:
    # the same output captured twice is one ref: one copy masked, the other still shown whole
    engine, scope = ContextEngine(cas=MemoryCASStore()), Scope(session_id="rev-2")
    first, second = kept(engine, scope, "call_1"), kept(engine, scope, "call_2")
    assert annotation(first)["ref"] == annotation(second)["ref"]
    engine.prepare([HumanMessage("cards?", id="h1"), *turn("call_1", masked(first)), *turn("call_2", second)], scope=scope)
    assert engine.expand_ref(annotation(first)["ref"], scope=scope) == LOG


class RequiredOnlyCAS:
    """A CAS store with the required methods only (no ``revoke``)."""

    def __init__(self) -> None:
        self.inner = MemoryCASStore()

    def put(self, item: CASItem, scope: Scope, **kwargs: object) -> bool:
        return self.inner.put(item, scope, **kwargs)  # type: ignore[arg-type]

    def get(self, ref_id: str, scope: Scope) -> CASRecord:
        return self.inner.get(ref_id, scope)

    def purge_expired(self) -> int:
        return self.inner.purge_expired()

    def close(self) -> None:
        self.inner.close()


def test_a_store_that_cannot_revoke_is_named_in_one_warning() -> None:
    store: CASStore = RequiredOnlyCAS()
    engine, scope = ContextEngine(cas=store), Scope(session_id="rev-3")
    messages: list[BaseMessage] = [HumanMessage("cards?", id="h1"), *turn("call_1", masked(kept(engine, scope, "call_1")))]
    first = engine.prepare(messages, scope=scope)
    assert [w for w in first.report.warnings if "revoke(ref_id, scope)" in w], first.report.warnings
    again = engine.prepare([*messages, AIMessage("Masked.", id="a2"), HumanMessage("thanks", id="h2")], scope=scope)
    assert not [w for w in again.report.warnings if "revoke(ref_id, scope)" in w]


def test_a_ref_is_revoked_once_per_scope_until_it_is_granted_again(tmp_path: Path) -> None:
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    revocations, scope, item = Revocations(store), Scope(session_id="rev-4"), make_item("jane@example.com")
    store.put(item, scope)
    assert revocations.revoke([item.ref_id], scope)
    store.put(item, scope)  # stored again behind the memo's back
    assert revocations.revoke([item.ref_id], scope)
    assert store.get(item.ref_id, scope).content == item.content, "revoked once: not looked up again"
    revocations.forget(item.ref_id, scope)
    assert revocations.revoke([item.ref_id], scope)
    with pytest.raises(RefNotFoundError):
        store.get(item.ref_id, scope)
    store.close()


def test_a_failing_store_is_a_warning_and_the_ref_is_revoked_on_the_next_call(mocker: MockerFixture) -> None:
    engine, scope = ContextEngine(cas=MemoryCASStore()), Scope(session_id="rev-5")
    original = kept(engine, scope, "call_1")
    messages: list[BaseMessage] = [HumanMessage("cards?", id="h1"), *turn("call_1", masked(original))]
    mocker.patch.object(MemoryCASStore, "revoke", side_effect=StoreUnavailableError("CAS server down"))
    failed = engine.prepare(messages, scope=scope)
    assert any("CAS server down" in w and "masked after capture" in w for w in failed.report.warnings)
    assert failed.messages, "the call goes on"
    mocker.stopall()
    # the messages are not new any more: the ref the failure left is revoked all the same
    later = engine.prepare([*messages, AIMessage("Masked.", id="a2"), HumanMessage("thanks", id="h2")], scope=scope)
    assert not any("masked after capture" in w for w in later.report.warnings)
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(annotation(original)["ref"], scope=scope)


def test_an_output_seen_whole_again_after_its_revocation_is_stored_again() -> None:
    # a thread rewound to a checkpoint from before the mask shows the original whole again
    engine, scope = ContextEngine(cas=MemoryCASStore()), Scope(session_id="rev-6")
    original = kept(engine, scope, "call_1")
    question: list[BaseMessage] = [HumanMessage("cards?", id="h1")]
    engine.prepare([*question, *turn("call_1", masked(original))], scope=scope)
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(annotation(original)["ref"], scope=scope)
    engine.prepare([*question, *turn("call_1", original)], scope=scope)
    assert engine.expand_ref(annotation(original)["ref"], scope=scope) == LOG
