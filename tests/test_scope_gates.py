"""The order of a scope's clear and its prepares (``ScopeGates``) within one thread."""

from __future__ import annotations

import logging
import threading

import pytest

from ctxplugin._scope_gates import ScopeGates


def test_a_clear_inside_a_prepare_of_its_scope_does_not_wait_for_it(caplog: pytest.LogCaptureFixture) -> None:
    gates = ScopeGates(wait=1.0)  # a wait would end in a warning
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        with gates.preparing("s1"), gates.preparing("s1"), gates.clearing("s1"), gates.clearing("s1"), gates.preparing("s1"):
            pass  # the last: a prepare the clear itself makes
        with gates.clearing("s1"):  # all let go: the next clear passes at once
            pass
    assert caplog.records == []


def test_other_scopes_pass_while_one_is_cleared(caplog: pytest.LogCaptureFixture) -> None:
    gates = ScopeGates(wait=1.0)  # a wait would end in a warning
    with caplog.at_level(logging.WARNING, logger="ctxplugin"), gates.clearing("s1"), gates.preparing("s2"), gates.clearing("s2"):
        pass
    assert caplog.records == []


class _Watched(threading.Condition):
    """A condition that tells which threads have started waiting on it."""

    def __init__(self) -> None:
        super().__init__()
        self.waiting: dict[str, threading.Event] = {}

    def wait(self, timeout: float | None = None) -> bool:
        self.waiting.setdefault(threading.current_thread().name, threading.Event()).set()
        return super().wait(timeout)

    def waits(self, name: str) -> threading.Event:
        with self:
            return self.waiting.setdefault(name, threading.Event())


def test_a_prepare_asked_for_while_a_clear_waits_passes_after_the_clear() -> None:
    gates = ScopeGates(wait=60.0)  # only against a hang: every step below waits on an event
    changed = _Watched()
    gates._here()
    gates._changed = changed
    order: list[str] = []
    release, entered = threading.Event(), threading.Event()

    def first() -> None:  # a prepare running as the clear is asked for
        with gates.preparing("s1"):
            entered.set()
            assert release.wait(60.0)
            with gates.preparing("s1"):  # its own nested prepare passes
                order.append("first")

    def clear() -> None:
        with gates.clearing("s1"):
            order.append("clear")

    second_in = threading.Event()

    def second() -> None:  # a prepare asked for while the clear waits
        with gates.preparing("s1"):
            second_in.set()
            order.append("second")

    threads = [threading.Thread(target=first, name="first"), threading.Thread(target=clear, name="clear"),
               threading.Thread(target=second, name="second")]
    threads[0].start()
    assert entered.wait(60.0)
    threads[1].start()
    assert changed.waits("clear").wait(60.0)
    threads[2].start()
    blocked = changed.waits("second")
    while not (second_in.is_set() or blocked.is_set()):
        blocked.wait(0.01)
    release.set()
    for thread in threads:
        thread.join(60.0)
        assert not thread.is_alive()
    assert order == ["first", "clear", "second"]


def test_a_clear_made_inside_a_prepare_another_clear_waits_for_does_not_wait_for_that_clear(caplog: pytest.LogCaptureFixture) -> None:
    gates = ScopeGates(wait=5.0)  # a wait for each other would end in a warning
    changed = _Watched()
    gates._here()
    gates._changed = changed
    order: list[str] = []
    release, entered = threading.Event(), threading.Event()

    def preparing() -> None:  # a prepare whose callback clears the conversation
        with gates.preparing("s1"):
            entered.set()
            assert release.wait(60.0)
            with gates.clearing("s1"):
                order.append("inner")

    def clear() -> None:
        with gates.clearing("s1"):
            order.append("clear")

    threads = [threading.Thread(target=preparing, name="first"), threading.Thread(target=clear, name="clear")]
    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        threads[0].start()
        assert entered.wait(60.0)
        threads[1].start()
        assert changed.waits("clear").wait(60.0)
        release.set()
        for thread in threads:
            thread.join(60.0)
            assert not thread.is_alive()
    assert order == ["inner", "clear"]
    assert caplog.records == []
