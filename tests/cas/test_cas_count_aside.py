"""A long output's tokens counted on a worker thread while capture() summarizes it."""

from __future__ import annotations

import multiprocessing
import threading
import warnings
from typing import Any

import pytest

from ctxplugin import _aside
from ctxplugin._aside import ASIDE_CHARS, count_aside
from ctxplugin.cas import MemoryCASStore, capture
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope
from ctxplugin.tokens import ApproxCounter, TiktokenCounter, cached_count, get_counter

_counter = get_counter()[0]
assert isinstance(_counter, TiktokenCounter)
BASE: TiktokenCounter = _counter
SCOPE = Scope(session_id="aside")


class Recording(TiktokenCounter):
    """The default encoding, noting the thread each count of a long text ran on."""

    def __init__(self, gate: threading.Event | None = None) -> None:
        super().__init__(BASE._encoding, BASE.name)
        self.threads: list[str] = []
        self.gate = gate

    def count(self, text: str) -> int:
        if len(text) >= ASIDE_CHARS:
            self.threads.append(threading.current_thread().name)
            if self.gate is not None and threading.current_thread().name.startswith("ctxplugin-count"):
                assert self.gate.wait(10)
        return super().count(text)


def log(lines: int, tag: str) -> str:
    return "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO {tag} worker step {i} wrote /srv/out/{i}.json" for i in range(lines))


def test_a_long_output_is_counted_on_a_worker_and_the_count_is_exact() -> None:
    counter = Recording()
    text = log(400, "exact")
    assert len(text) > ASIDE_CHARS
    captured = capture(text, store=MemoryCASStore(), scope=SCOPE, config=CASConfig(), counter=counter, tool_name="tail")
    assert not captured.passthrough
    assert captured.original_tokens == BASE.count(text)
    assert f"{BASE.count(text):,} tokens stored" in captured.text
    assert counter.threads and all(name.startswith("ctxplugin-count") for name in counter.threads)
    # the count is in the memo prepare reads: the same text is not encoded again
    assert cached_count(text, counter) == BASE.count(text)


def test_short_texts_and_other_counters_are_counted_by_the_caller() -> None:
    short = log(5, "short")
    assert len(short) < ASIDE_CHARS
    counter = Recording()
    assert count_aside(short, counter).done()
    approx = ApproxCounter()
    long_text = log(400, "approx")
    future = count_aside(long_text, approx)
    assert future.done() and future.result() == approx.count(long_text)


def test_a_long_text_of_few_tokens_still_passes_through() -> None:
    # the summary is made while the count runs; the count then says the output is small
    text = "start" + " " * 12_000 + "end"
    assert BASE.count(text) <= CASConfig().passthrough_tokens
    store = MemoryCASStore()
    captured = capture(text, store=store, scope=SCOPE, config=CASConfig(), counter=Recording(), tool_name="tail")
    assert captured.passthrough and captured.text == text and captured.ref_id is None
    assert captured.original_tokens == BASE.count(text)


def test_with_every_worker_busy_the_caller_counts() -> None:
    gate = threading.Event()
    counter = Recording(gate)
    texts = [log(400, f"busy{i}") for i in range(_aside._WORKERS + 1)]
    try:
        held = [count_aside(text, counter) for text in texts[:-1]]
        assert not any(f.done() for f in held)
        last = count_aside(texts[-1], counter)
        assert last.done() and last.result() == BASE.count(texts[-1])
        assert counter.threads[-1] == threading.current_thread().name
        gate.set()
        assert [f.result(timeout=10) for f in held] == [BASE.count(t) for t in texts[:-1]]
    finally:
        gate.set()


def _child(text: str, queue: Any) -> None:
    queue.put(count_aside(text, Recording()).result(timeout=5))


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_forked_child_counts_with_its_own_workers() -> None:
    # the parent's pool exists (and its worker is idle); a child must not hand work to it
    assert count_aside(log(400, "parent"), Recording()).result(timeout=10) > 0
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
