"""``engine.history(session_id)`` kept by the host (one object per session, as a
``RunnableWithMessageHistory`` factory often keeps them): its view follows the stored
conversation, whoever rewrote it."""

from __future__ import annotations

from pathlib import Path

from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin import ContextEngine
from ctxplugin.testing import conversation_messages


def test_a_kept_history_shows_a_conversation_another_object_rewrote(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(path=tmp_path)
    try:
        kept = engine.history("mia")
        kept.add_messages([HumanMessage("My card is 4111 1111 1111 1111."), AIMessage("Noted.")])
        assert any("4111 1111" in m.text for m in kept.messages)

        # a PII filter rewrites the stored conversation through a history object of its own:
        # as many messages as before, one of them masked
        other = engine.history("mia")
        full = other.full_messages
        other.clear()
        other.add_messages([HumanMessage("My card is [card]."), full[1]])

        # the conversation the model is sent (the facts ledger is not the conversation)
        assert [m.text for m in conversation_messages(kept.messages)] == ["My card is [card].", "Noted."]
    finally:
        engine.close()


def test_a_kept_history_shows_a_turn_another_process_replaced(tmp_path: Path) -> None:
    first, second = ContextEngine.embedded(path=tmp_path), ContextEngine.embedded(path=tmp_path)
    try:
        kept = first.history("ops")
        kept.add_messages([HumanMessage("Restart checkout-7."), AIMessage("Restarted checkout-7.")])
        assert any("checkout-7" in m.text for m in kept.messages)

        # another process on the same path starts the session over with one turn of as many messages
        again = second.history("ops")
        again.clear()
        again.add_messages([HumanMessage("Restart billing-3."), AIMessage("Restarted billing-3.")])

        assert [m.text for m in conversation_messages(kept.messages)] == [
            "Restart billing-3.", "Restarted billing-3."
        ]
    finally:
        first.close()
        second.close()
