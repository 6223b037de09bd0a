"""Fixtures of the stage tests."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine
from ctxplugin.testing import memory_engine


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContextEngine]:
    """A whole-mode engine on in-memory stores, then on the embedded SQLite CAS with Chroma on
    disk: a test taking ``engine`` runs on both."""
    config = ContextConfig(mode="whole")
    if request.param == "memory":
        with memory_engine(config) as eng:
            yield eng
    else:
        with ContextEngine.embedded(tmp_path / "stores", config) as eng:
            yield eng


def _reservation_lookup(call_id: str, cabin: str, *, output_id: str | None = None) -> tuple[AIMessage, ToolMessage]:
    """An assistant turn calling ``get_reservation_details`` for reservation OBUT9V and the
    call's output (message id ``output_id``): the route and ``cabin`` as JSON, which the facts
    ledger reads as the current value of ``reservation:OBUT9V``."""
    args = {"reservation_id": "OBUT9V"}
    payload = {**args, "origin": "IAH", "destination": "DEN", "cabin": cabin}
    ask = AIMessage("", tool_calls=[{"name": "get_reservation_details", "args": args, "id": call_id}])
    return ask, ToolMessage(json.dumps(payload), tool_call_id=call_id, name="get_reservation_details", id=output_id)


@pytest.fixture
def reservation_lookup() -> Callable[..., tuple[AIMessage, ToolMessage]]:
    """``reservation_lookup(call_id, cabin, *, output_id=None)``: a lookup of reservation
    OBUT9V and its output, the reservation's value changing with ``cabin``."""
    return _reservation_lookup
