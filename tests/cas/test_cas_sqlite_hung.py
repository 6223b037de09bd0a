"""The SQLite CAS blocked on its file (a hard network mount that stopped answering, a stalled
disk): SQLite's busy timeout does not end such a call, the deadline does. A capture, a
``prepare`` and an ``expand_ref`` return within ``stores.timeout`` with the output whole and a
warning, the hung call leaves no more threads behind, and the store is used again once it
returns."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.tokens import content_text

SCOPE = Scope(session_id="hung")
HANG_S = 10.0
"""How long a hung call blocks at most: far past ``stores.timeout``, so a step that waited for it
is seen (the hang still over when the step returned), yet the test ends if it does."""


def listing(i: int) -> str:
    return "\n".join(f"/mnt/share/pkg{i}/file_{j}.py  {j * 37} bytes  modified 2024-01-{j % 28 + 1:02d}" for j in range(300))


class Hang:
    """A side effect that blocks like a call on a dead mount, until :meth:`release`."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.released = threading.Event()
        self.ended = threading.Event()

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.entered.set()
        self.released.wait(HANG_S)
        self.ended.set()
        raise OSError("the mount came back")

    def release(self) -> None:
        self.released.set()


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    config = ContextConfig(stores={"timeout": 0.5}, history={"enabled": False}, budget={"total": 100_000})
    with ContextEngine.embedded(tmp_path / "stores", config) as made:
        yield made


@pytest.fixture
def hang() -> Iterator[Hang]:
    made = Hang()
    yield made
    made.release()


def store_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("ctxplugin-store") and t.is_alive()]


def capture(engine: ContextEngine, i: int) -> ToolMessage:
    return engine.capture_tool_result(ToolMessage(listing(i), tool_call_id=f"c{i}", name="ls"), SCOPE)


def until(check: Callable[[], bool]) -> None:
    for _ in range(400):
        if check():
            return
        time.sleep(0.05)
    raise AssertionError("not reached")


def test_a_capture_whose_put_hangs_passes_the_output_through_before_the_hang_ends(
    engine: ContextEngine, hang: Hang, mocker: MockerFixture
) -> None:
    mocker.patch.object(SQLiteCASStore, "put", side_effect=hang)
    compact = capture(engine, 1)
    assert hang.entered.is_set() and not hang.ended.is_set()  # returned while the put still hangs
    assert content_text(compact.content) == listing(1)
    warning = compact.additional_kwargs["ctxplugin"]["warning"]
    assert "SQLite CAS put: no answer within 0.5s (stores.timeout)" in warning


def test_calls_while_one_hangs_fail_at_once_without_a_thread_each_and_the_store_is_used_once_it_returns(
    engine: ContextEngine, hang: Hang, mocker: MockerFixture
) -> None:
    put = mocker.patch.object(SQLiteCASStore, "put", side_effect=hang)
    capture(engine, 1)
    assert not hang.ended.is_set()
    threads = len(store_threads())
    for i in range(2, 12):
        compact = capture(engine, i)
        assert content_text(compact.content) == listing(i)
        assert "has not returned" in compact.additional_kwargs["ctxplugin"]["warning"]
    assert not hang.ended.is_set()
    assert put.call_count == 1  # the file was not asked again while its call hangs
    assert len(store_threads()) == threads
    mocker.stopall()
    hang.release()
    until(lambda: "ref" in capture(engine, 20).additional_kwargs["ctxplugin"])
    ref = capture(engine, 21).additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=SCOPE) == listing(21)


def test_a_prepare_whose_store_hangs_keeps_the_output_whole_and_warns(engine: ContextEngine, hang: Hang, mocker: MockerFixture) -> None:
    put = mocker.patch.object(SQLiteCASStore, "put", side_effect=hang)
    messages = [
        HumanMessage("list the share", id="h0"),
        AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}], id="a0"),
        ToolMessage(listing(1), tool_call_id="c1", name="ls", id="t1"),
        HumanMessage("Which file is the largest?", id="h1"),
    ]
    prepared = engine.prepare(messages, scope=SCOPE)
    assert hang.entered.is_set() and not hang.ended.is_set()
    assert listing(1) in [content_text(m.content) for m in prepared.messages]
    assert any("CAS unavailable" in w and "no answer within 0.5s" in w for w in prepared.report.warnings)
    prepared = engine.prepare(messages, scope=SCOPE)  # the put still hangs: not asked again
    assert listing(1) in [content_text(m.content) for m in prepared.messages]
    assert any("CAS unavailable" in w for w in prepared.report.warnings)
    assert put.call_count == 1 and not hang.ended.is_set()
    mocker.stopall()
    hang.release()
    until(lambda: bool(engine.prepare(messages, scope=SCOPE).report.refs_created))  # stored once it is back


def test_an_expand_whose_get_hangs_tells_the_model_the_store_is_unavailable(
    engine: ContextEngine, hang: Hang, mocker: MockerFixture
) -> None:
    ref = capture(engine, 1).additional_kwargs["ctxplugin"]["ref"]
    mocker.patch.object(SQLiteCASStore, "get", side_effect=hang)
    with pytest.raises(StoreUnavailableError, match="SQLite CAS get: no answer within"):
        engine.expand_ref(ref, scope=SCOPE)
    assert hang.entered.is_set() and not hang.ended.is_set()
    tool = engine.tools_for_model()[0]
    shown = str(tool.invoke({"ref_id": ref}, config={"configurable": {"thread_id": SCOPE.session_id}}))
    assert "the store is unavailable right now" in shown
    assert not hang.ended.is_set()
