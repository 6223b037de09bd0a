"""Context notes are remembered by the content of the exchanges they stand for, across engines
and scopes of one process: two conversations whose messages differ only where the note's values
come from (a provider's tool blocks, a tool's name, a result's status, the role that said it)
never share a note."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextEngine, HistoryConfig, Scope
from ctxplugin.history._digests import Digests
from ctxplugin.testing import context_notes, web_fetch_turn
from ctxplugin.tokens import get_counter

FETCH = {
    "type": "function",
    "function": {"name": "fetch_page", "description": "Fetch a web page.", "parameters": {
        "type": "object", "properties": {"url": {"type": "string"}}}},
}


def fetched(owner: str, i: int) -> AIMessage:
    """An assistant turn in which the provider's own ``web_fetch`` read one of ``owner``'s pages:
    its text is the same for every owner, the page only in the tool's blocks."""
    page = f"Statement {owner.upper()}-ACCT-{i}: balance {owner.upper()}-BAL-{i}. " + "row " * 300
    return web_fetch_turn(f"https://bank.example/{owner}/{i}", page, text="Page read.", use_id=f"srvtoolu_{i}")


def conversation(owner: str) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You read statements."), HumanMessage("Read my statements, please.")]
    for i in range(30):
        messages += [HumanMessage("Next statement, please."), fetched(owner, i)]
    return [*messages, HumanMessage("What was the first balance?")]


@pytest.mark.parametrize("bound", [True, False], ids=["tools", "no-tools"])
def test_a_conversation_is_never_shown_another_ones_notes(tmp_path: Path, bound: bool) -> None:
    """Alice and Bob run the same agent in one process, on engines of their own: the words of
    their conversations are the same, the pages the provider's tool fetched are not. Notes were
    remembered by the text of the exchanges only, so Bob's view listed Alice's pages and ids."""
    tools = [FETCH] if bound else None
    alice = ContextEngine.embedded(path=tmp_path / "alice")
    bob = ContextEngine.embedded(path=tmp_path / "bob")
    seen = alice.prepare(conversation("alice"), tools=tools, scope=Scope(session_id="a", user_id="alice")).messages
    assert any("bank.example/alice" in note for note in context_notes(seen)), "Alice's notes list her pages"
    view = bob.prepare(conversation("bob"), tools=tools, scope=Scope(session_id="b", user_id="bob")).messages
    notes = "\n".join(context_notes(view))
    assert "bank.example/bob" in notes
    assert "alice" not in notes.lower()


def _note_keys(exchanges: list[tuple[BaseMessage, ...]]) -> tuple[str, ...]:
    spans = [[n] for n in range(len(exchanges))]
    made = Digests(exchanges, spans, [50] * len(spans), "the task", HistoryConfig(), get_counter("cl100k_base")[0])
    return made.keys().keys


def _lookup(name: str = "lookup", status: str = "success", result: type[BaseMessage] = ToolMessage) -> tuple[BaseMessage, ...]:
    call = AIMessage("", tool_calls=[{"name": name, "args": {"id": "W1"}, "id": "c1"}])
    said = ToolMessage("W1: shipped", tool_call_id="c1", name=name, status=status) if result is ToolMessage else result("W1: shipped")
    return (HumanMessage("Check W1."), call, said)


def _asked(content: str | list[str | dict[str, Any]]) -> tuple[BaseMessage, ...]:
    return (HumanMessage(content), AIMessage("W1 shipped."))


_BLOCKS: list[str | dict[str, Any]] = [{"type": "text", "text": "Check W1."}]


def _provider_fetch(url: str) -> tuple[BaseMessage, ...]:
    block = {"type": "server_tool_use", "id": "s1", "name": "web_fetch", "input": {"url": url}}
    return (HumanMessage("Check W1."), AIMessage([{"type": "text", "text": "Done."}, block]))


@pytest.mark.parametrize(
    ("one", "other"),
    [
        (_lookup(), _lookup(name="refund_lookup")),
        (_lookup(), _lookup(status="error")),
        (_lookup(), _lookup(result=HumanMessage)),
        (_lookup(), _lookup(result=AIMessage)),
        (_provider_fetch("https://a.example"), _provider_fetch("https://b.example")),
        # a text that spells out another message's blocks is not those blocks: its note lists it whole
        (_asked(_BLOCKS), _asked(json.dumps(_BLOCKS, sort_keys=True, ensure_ascii=False))),
    ],
    ids=["tool-name", "status", "user-role", "assistant-role", "provider-tool-blocks", "blocks-or-their-text"],
)
def test_what_labels_or_gives_a_notes_values_is_in_its_key(one: tuple[BaseMessage, ...], other: tuple[BaseMessage, ...]) -> None:
    assert _note_keys([one]) != _note_keys([other])
    assert _note_keys([one]) == _note_keys([tuple(m.model_copy(deep=True) for m in one)]), "equal messages share notes"
