"""A long output's tokens counted by capture() while a worker thread summarizes it."""

from __future__ import annotations

import contextvars
import multiprocessing
import threading
import warnings
from typing import Any

import pytest

from ctxplugin import _aside
from ctxplugin._aside import ASIDE_CHARS, count_beside, counts_beside
from ctxplugin.cas import MemoryCASStore, capture
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope
from ctxplugin.tokens import ApproxCounter, TiktokenCounter, cached_count, get_counter

_counter = get_counter()[0]
assert isinstance(_counter, TiktokenCounter)
BASE: TiktokenCounter = _counter
SCOPE = Scope(session_id="aside")
WORKER = "ctxplugin-aside"


class Recording(TiktokenCounter):
    """The default encoding, noting the thread each count ran on. With ``hold``, a count of a
    long text waits until a short text (a summary's line) has been counted on a worker."""

    def __init__(self, *, hold: bool = False) -> None:
        super().__init__(BASE._encoding, BASE.name)
        self.long: list[str] = []
        self.short: list[str] = []
        self.hold = hold
        self.summarizing = threading.Event()

    def count(self, text: str) -> int:
        name = threading.current_thread().name
        if len(text) >= ASIDE_CHARS:
            self.long.append(name)
            if self.hold:
                assert self.summarizing.wait(10)
        else:
            self.short.append(name)
            if name.startswith(WORKER):
                self.summarizing.set()
        return super().count(text)


def log(lines: int, tag: str) -> str:
    return "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO {tag} worker step {i} wrote /srv/out/{i}.json" for i in range(lines))


def test_a_long_output_is_counted_by_the_caller_while_a_worker_summarizes_it() -> None:
    counter = Recording(hold=True)  # the count waits for the summary to start on a worker
    text = log(400, "exact")
    assert len(text) > ASIDE_CHARS
    captured = capture(text, store=MemoryCASStore(), scope=SCOPE, config=CASConfig(), counter=counter, tool_name="tail")
    assert not captured.passthrough
    assert counter.long == [threading.current_thread().name]
    assert any(name.startswith(WORKER) for name in counter.short)
    assert captured.original_tokens == BASE.count(text)
    assert f"{BASE.count(text):,} tokens stored" in captured.text
    # counted before, the text is captured again by the caller alone: the same compact form
    worker_counts = len(counter.short)
    again = capture(text, store=MemoryCASStore(), scope=SCOPE, config=CASConfig(), counter=counter, tool_name="tail")
    assert again == captured
    assert len(counter.long) == 1 and not any(name.startswith(WORKER) for name in counter.short[worker_counts:])
    # the count is in the memo prepare reads: the same text is not encoded again
    assert cached_count(text, counter) == BASE.count(text)


def test_short_texts_and_other_counters_are_counted_then_worked_on_by_the_caller() -> None:
    here = threading.current_thread().name
    short = log(5, "short")
    assert len(short) < ASIDE_CHARS and not counts_beside(short, BASE)
    assert count_beside(short, Recording(), lambda: threading.current_thread().name) == (BASE.count(short), here)
    approx = ApproxCounter()
    long_text = log(400, "approx")
    assert not counts_beside(long_text, approx)
    assert count_beside(long_text, approx, lambda: threading.current_thread().name) == (approx.count(long_text), here)


def test_a_text_counted_before_is_not_counted_beside() -> None:
    text = log(400, "known")
    counter = Recording()
    assert counts_beside(text, counter)
    count_beside(text, counter, lambda: None)
    assert not counts_beside(text, counter)
    assert count_beside(text, counter, lambda: threading.current_thread().name) == (BASE.count(text), threading.current_thread().name)


def test_a_long_text_of_few_tokens_still_passes_through() -> None:
    # the summary is made while the count runs; the count then says the output is small
    text = "start" + " " * 12_000 + "end"
    assert BASE.count(text) <= CASConfig().passthrough_tokens
    store = MemoryCASStore()
    captured = capture(text, store=store, scope=SCOPE, config=CASConfig(), counter=Recording(), tool_name="tail")
    assert captured.passthrough and captured.text == text and captured.ref_id is None
    assert captured.original_tokens == BASE.count(text)


def test_with_every_worker_busy_the_caller_does_the_work_itself() -> None:
    gate = threading.Event()
    started = threading.Semaphore(0)

    def busy() -> None:
        started.release()
        assert gate.wait(10)

    held = [_aside._workers.submit(busy) for _ in range(_aside._WORKERS)]
    try:
        for _ in held:
            assert started.acquire(timeout=10)
        text = log(400, "busy")
        tokens, name = count_beside(text, Recording(), lambda: threading.current_thread().name)
        assert (tokens, name) == (BASE.count(text), threading.current_thread().name)
    finally:
        gate.set()
    for future in held:
        assert future is not None
        future.result(timeout=10)


def test_what_the_work_raises_is_raised_to_the_caller() -> None:
    def fails() -> None:
        raise KeyError("from the work")

    counter = Recording(hold=True)

    def counted_then_fails() -> None:
        counter.count("a line")
        fails()

    with pytest.raises(KeyError, match="from the work"):
        count_beside(log(400, "raises"), counter, counted_then_fails)  # raised on the worker
    with pytest.raises(KeyError, match="from the work"):
        count_beside(log(5, "raises"), counter, fails)  # raised in the caller


def test_the_work_sees_the_callers_context() -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("aside_test", default="unset")
    token = var.set("the caller's")
    try:
        counter = Recording(hold=True)

        def work() -> tuple[str, str]:
            counter.count("a line")
            return var.get(), threading.current_thread().name

        _, (value, name) = count_beside(log(400, "context"), counter, work)
    finally:
        var.reset(token)
    assert value == "the caller's" and name.startswith(WORKER)


def _child(text: str, queue: Any) -> None:
    queue.put(count_beside(text, Recording(), lambda: "done")[0])


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_works_with_its_own_workers() -> None:
    # the parent's pool exists (and its worker is idle); a child must not hand work to it
    counter = Recording(hold=True)
    assert count_beside(log(400, "parent"), counter, lambda: counter.count("a line"))[0] > 0
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    text = log(400, "child")
    child = context.Process(target=_child, args=(text, queue))
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a process with threads may deadlock: that is the case
        # this test makes, on purpose
        warnings.simplefilter("ignore", DeprecationWarning)
        child.start()
    child.join(20)
    if child.is_alive():
        child.kill()
    assert child.exitcode == 0
    assert queue.get(timeout=5) == BASE.count(text)
