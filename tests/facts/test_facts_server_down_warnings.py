"""What the report says while the Chroma server is down: that facts were skipped, and nothing
that did not happen. A conversation that only went on (no message edited, no branch left) must
not be told that "facts of an abandoned branch stay current"."""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, SystemMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing.chroma_server import ChromaServer

pytestmark = [
    pytest.mark.chroma_server,
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]

S = Scope(session_id="went-on")


def test_a_conversation_that_went_on_is_not_told_of_an_abandoned_branch(
    fresh_chroma_server: Callable[[], ChromaServer], on_server: Callable[[ChromaServer, float], ContextEngine], say: Any
) -> None:
    server = fresh_chroma_server()
    engine = on_server(server, 0.25)
    messages: list[BaseMessage] = [SystemMessage("You help with releases.")]
    try:
        assert say(engine, messages, "The deploy target is eu-west-3.", S) == []
        server.process.kill()
        server.process.wait(timeout=15)
        for text in ("The release deadline is Friday 5pm.", "The owner is Dana.", "Thanks."):
            warnings = say(engine, messages, text, S)
            assert any(w.startswith("facts store unavailable") for w in warnings), warnings
            assert not [w for w in warnings if "abandoned branch" in w], warnings
    finally:
        engine.close()
        gc.collect()
