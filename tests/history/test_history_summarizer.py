from __future__ import annotations

import threading
from collections.abc import Callable, Iterator

import pytest
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.runnables import Runnable, RunnableLambda

from ctxplugin import ContextConfig, ContextEngine, HistoryConfig, InvalidInputError, Scope
from ctxplugin.config import SummarizerConfig
from ctxplugin.history import (
    GIST_PREFIX,
    BackgroundSummarizer,
    compress_history,
    identifiers,
    is_boundary_call,
)
from ctxplugin.history.identifiers import missing
from ctxplugin.testing import ScriptedChatModel, memory_engine
from ctxplugin.tokens import content_text, get_counter

COUNTER = get_counter()[0]
Builder = Callable[..., list[BaseMessage]]
WAIT = 30.0  # generous: only reached when something is broken


class Recorder:
    """A plain summarizer function that records what it was asked, optionally held on a gate."""

    def __init__(self, reply: str = "Checked the handlers; nothing unusual.", gate: threading.Event | None = None) -> None:
        self.reply = reply
        self.gate = gate
        self.started = threading.Event()
        self.texts: list[str] = []

    def __call__(self, text: str) -> str:
        self.started.set()
        if self.gate is not None and not self.gate.wait(WAIT):
            raise TimeoutError("gate never opened")
        self.texts.append(text)
        return self.reply


@pytest.fixture
def make() -> Iterator[Callable[..., BackgroundSummarizer]]:
    made: list[BackgroundSummarizer] = []

    def build(summarizer: object, **config: object) -> BackgroundSummarizer:
        instance = BackgroundSummarizer(summarizer, config=SummarizerConfig(**config), counter=COUNTER)  # type: ignore[arg-type]
        made.append(instance)
        return instance

    yield build
    for instance in made:
        instance.close()


TEXT = "The listing shows handler_3_1 in /repo/src/module_3.py at line 104. " + "More detail follows. " * 40


def test_summary_is_cached_by_content_hash(make: Callable[..., BackgroundSummarizer]) -> None:
    fake = Recorder()
    summarizer = make(fake)
    assert summarizer.lead(TEXT, session="s", upgrade=False) is None, "nothing ready yet: zero-LLM gist"
    assert summarizer.drain(WAIT)
    summarizer.prefetch(TEXT, session="s")
    summarizer.prefetch(TEXT, session="other")
    assert summarizer.drain(WAIT)
    assert fake.texts == [TEXT], "one summary per distinct text"
    assert summarizer.stats.completed == 1


def test_request_path_never_waits(make: Callable[..., BackgroundSummarizer], agent_session: Builder) -> None:
    gate = threading.Event()
    fake = Recorder(gate=gate)
    summarizer = make(fake)
    body = agent_session(20)
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER, summarizer=summarizer)
    assert fake.started.wait(WAIT), "a summary was requested"
    assert not gate.is_set() and fake.texts == [], "compress_history returned while the summarizer was still blocked"
    gists = [m for m in view.messages if content_text(m.content).startswith(GIST_PREFIX)]
    assert gists and all(fake.reply not in content_text(m.content) for m in gists)
    gate.set()
    assert summarizer.drain(WAIT)


def test_queue_is_bounded(make: Callable[..., BackgroundSummarizer]) -> None:
    gate = threading.Event()
    fake = Recorder(gate=gate)
    summarizer = make(fake, queue_size=2)
    summarizer.prefetch("first text " * 30, session="s")
    assert fake.started.wait(WAIT)  # the worker holds the first job
    for i in range(4):
        summarizer.prefetch(f"text number {i} " * 30, session="s")
    assert summarizer.stats.dropped_queue_full == 2
    assert summarizer.pending() == 3
    gate.set()
    assert summarizer.drain(WAIT)
    assert len(fake.texts) == 3
    summarizer.prefetch("text number 3 " * 30, session="s")  # dropped requests can be asked again
    assert summarizer.drain(WAIT)
    assert len(fake.texts) == 4


def test_session_quota(make: Callable[..., BackgroundSummarizer]) -> None:
    fake = Recorder(reply="short")
    summarizer = make(fake, session_tokens=400, artifact_tokens=20)
    for i in range(10):
        summarizer.prefetch(f"text {i} " + "word " * 100, session="a")
        assert summarizer.drain(WAIT)
    used_by_a = len(fake.texts)
    assert 1 <= used_by_a < 10, "the session quota stops summaries"
    assert summarizer.stats.skipped_quota > 0
    summarizer.prefetch("another session " + "word " * 100, session="b")
    assert summarizer.drain(WAIT)
    assert len(fake.texts) == used_by_a + 1, "other sessions have their own quota"


def test_daily_quota_resets_next_day(make: Callable[..., BackgroundSummarizer]) -> None:
    now = [1_700_000_000.0]
    fake = Recorder(reply="short")
    summarizer = BackgroundSummarizer(
        fake, config=SummarizerConfig(daily_tokens=300, artifact_tokens=20), counter=COUNTER, clock=lambda: now[0]
    )
    try:
        for i in range(6):
            summarizer.prefetch(f"day one {i} " + "word " * 100, session=f"s{i}")
            assert summarizer.drain(WAIT)
        first_day = len(fake.texts)
        assert 1 <= first_day < 6
        now[0] += 86_400
        summarizer.prefetch("day two " + "word " * 100, session="s9")
        assert summarizer.drain(WAIT)
        assert len(fake.texts) == first_day + 1
    finally:
        summarizer.close()


def test_each_summary_is_capped(make: Callable[..., BackgroundSummarizer]) -> None:
    summarizer = make(Recorder(reply="very long summary " * 200), artifact_tokens=30)
    summarizer.prefetch(TEXT, session="s")
    assert summarizer.drain(WAIT)
    lead = summarizer.lead(TEXT, session="s", upgrade=False)
    assert lead is not None and COUNTER.count(lead) <= 30


def test_a_late_summary_replaces_a_gist_once_and_only_on_a_boundary_call(make: Callable[..., BackgroundSummarizer]) -> None:
    gate = threading.Event()
    summarizer = make(Recorder(gate=gate))
    assert summarizer.lead(TEXT, session="s", upgrade=False) is None
    assert summarizer.stats.requested == 0, "reading a lead asks for no summary"
    summarizer.prefetch(TEXT, session="s")  # asked for once the gist is shown
    gate.set()
    assert summarizer.drain(WAIT)
    assert summarizer.lead(TEXT, session="s", upgrade=False) is None, "not between boundary moves"
    upgraded = summarizer.lead(TEXT, session="s", upgrade=True)
    assert upgraded == "Checked the handlers; nothing unusual."
    assert summarizer.lead(TEXT, session="s", upgrade=False) == upgraded
    assert summarizer.stats.upgraded == 1


def test_failures_become_warnings_and_stop_after_max_attempts(make: Callable[..., BackgroundSummarizer]) -> None:
    calls: list[str] = []

    def broken(text: str) -> str:
        calls.append(text)
        raise RuntimeError("model unavailable")

    summarizer = make(broken, max_attempts=2)
    for _ in range(4):
        summarizer.prefetch(TEXT, session="s")
        assert summarizer.drain(WAIT)
    assert len(calls) == 2
    warnings = summarizer.take_warnings("s")
    assert len(warnings) == 2 and "model unavailable" in warnings[0]
    assert summarizer.take_warnings("s") == []
    assert summarizer.lead(TEXT, session="s", upgrade=True) is None


async def test_async_function_summarizer(make: Callable[..., BackgroundSummarizer]) -> None:
    async def summarize(text: str) -> str:
        return "async summary of " + text.split()[1]

    summarizer = make(summarize)
    summarizer.prefetch(TEXT, session="s")
    assert summarizer.drain(WAIT)
    assert summarizer.lead(TEXT, session="s", upgrade=False) == "async summary of listing"


@pytest.mark.parametrize("wrap", ["alone", "piped", "retried"])
def test_a_runnable_built_on_an_async_function_summarizes(make: Callable[..., BackgroundSummarizer], wrap: str) -> None:
    async def summarize(prompt: str) -> str:
        return "async runnable summary" if TEXT in prompt else "no text"

    lambda_: Runnable[str, str] = RunnableLambda(summarize)
    runnable: Runnable[str, str] = {
        "alone": lambda_,
        "piped": RunnableLambda(lambda prompt: prompt) | lambda_,
        "retried": lambda_.with_retry(),
    }[wrap]
    summarizer = make(runnable)
    summarizer.prefetch(TEXT, session="s")
    assert summarizer.drain(WAIT)
    assert summarizer.take_warnings("s") == []
    assert summarizer.lead(TEXT, session="s", upgrade=False) == "async runnable summary"


@pytest.mark.parametrize("returned", [None, {"summary": "Listed handlers."}, 42])
def test_a_runnable_returning_no_text_fails_instead_of_leading_the_gist(
    make: Callable[..., BackgroundSummarizer], returned: object
) -> None:
    summarizer = make(RunnableLambda(lambda prompt: returned))
    summarizer.prefetch(TEXT, session="s")
    assert summarizer.drain(WAIT)
    assert summarizer.lead(TEXT, session="s", upgrade=True) is None, "the zero-LLM gist stays"
    warnings = summarizer.take_warnings("s")
    assert warnings and "expected str or a message" in warnings[0]


def test_chat_model_summarizer_gets_a_prompt(make: Callable[..., BackgroundSummarizer]) -> None:
    model = ScriptedChatModel(script=[AIMessage(content="Listed handlers of module_3.")])
    summarizer = make(model)
    summarizer.prefetch(TEXT, session="s")
    assert summarizer.drain(WAIT)
    assert summarizer.lead(TEXT, session="s", upgrade=False) == "Listed handlers of module_3."
    sent = content_text(model.calls[0].messages[0].content)
    assert TEXT in sent and "exactly as written" in sent


def test_a_summarizer_must_be_callable() -> None:
    with pytest.raises(InvalidInputError, match="summarizer must be"):
        BackgroundSummarizer(42)  # type: ignore[arg-type]


def _led_at_a_boundary(agent_session: Builder, reply: str, session: str) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """The gists a summarizer answering ``reply`` leads in a view prepared at a boundary call past
    step 20 of a long agent session (every summary asked for written before each call), and the
    session's messages."""
    config = ContextConfig(
        budget={"total": 100_000, "header": 1000, "history": 90_000, "facts": 600, "summaries": 90_000},
        history={"summarizer": {"session_tokens": 10**6, "daily_tokens": 10**7}},
        cas={"enabled": False},  # keep the long tool outputs in the history, to be summarized
    )
    engine = ContextEngine(config=config, summarizer=Recorder(reply=reply))
    assert engine.summarizer is not None
    try:
        body = agent_session(40)
        scope = Scope(session_id=session)
        steps = 8
        for steps in range(8, 40):
            engine.prepare(body[: 1 + 2 * steps], scope=scope)
            assert engine.summarizer.drain(WAIT)
            if steps > 20 and is_boundary_call(steps + 1, config.history):
                break
        prepared = engine.prepare(body[: 1 + 2 * steps], scope=scope)
        return [m for m in prepared.messages if content_text(m.content).startswith(GIST_PREFIX + reply[:40])], body
    finally:
        engine.summarizer.close()


def test_engine_uses_summaries_at_a_boundary_and_keeps_values(agent_session: Builder) -> None:
    led, body = _led_at_a_boundary(agent_session, "Listed the request handlers.", "sum")
    assert led, "summaries lead the gists"
    originals = {m.id: m for m in body}
    for message in led:
        original = content_text(originals[message.id].content)
        assert missing(identifiers(original), content_text(message.content)) == []


def test_a_summary_within_its_cap_leads_the_gist_whole(agent_session: Builder) -> None:
    # the prompt asks for up to artifact_tokens (120); gist_tokens (60) bounds only the zero-LLM lead
    reply = (
        "The grep listed forty request handlers of the module, each returning render(request); the one the "
        "traceback names differs from the others in neither signature, decorators nor return type, so the "
        "fix belongs in that single function and nowhere else in the module; the next step is to read that "
        "function whole, compare its handling of the request with the handlers around it, and run the failing "
        "test again once it is changed."
    )
    history = ContextConfig().history
    assert history.gist_tokens < COUNTER.count(reply) <= history.summarizer.artifact_tokens
    led, _ = _led_at_a_boundary(agent_session, reply, "whole-lead")
    assert led, "summaries lead the gists"
    assert all(content_text(m.content).startswith(GIST_PREFIX + reply + " |") for m in led), "cut mid-sentence"


def test_engine_accepts_a_plain_function() -> None:
    engine = memory_engine()
    assert engine.summarizer is None
    with_fn = ContextEngine(summarizer=lambda text: text[:20])
    assert isinstance(with_fn.summarizer, BackgroundSummarizer)
    with_fn.summarizer.close()


def test_close_waits_for_a_summarizer_that_never_returns_at_most_its_timeout() -> None:
    """A summarizer stuck in a call (a model client without a timeout on a stalled connection)
    does not hold ``close()`` forever; nor the end of an engine's ``with`` block."""
    release = threading.Event()
    started = threading.Event()

    def stuck(text: str) -> str:
        started.set()
        release.wait()
        return "too late"

    summarizer = BackgroundSummarizer(stuck)
    try:
        summarizer.prefetch("An old message about the deploy of build 4411.", session="s1")
        assert started.wait(WAIT)
        summarizer.close(timeout=0.1)
        assert summarizer.pending() == 0
        started.clear()
        with ContextEngine(summarizer=stuck) as engine:
            assert engine.summarizer is not None
            engine.summarizer.prefetch("Another old message, about build 4412.", session="s1")
            assert started.wait(WAIT)  # its worker is in the call when the block ends
        assert engine.closed
    finally:
        release.set()


def test_a_summary_that_returns_after_close_gave_up_waiting_is_dropped() -> None:
    """``close(timeout=...)`` leaves a stuck job's worker running; what it returns later is not
    kept (nor counted as completed), as ``close`` says."""
    release = threading.Event()
    started = threading.Event()
    text = "An old message about the deploy of build 4411."

    def stuck(text: str) -> str:
        started.set()
        release.wait()
        return "too late"

    summarizer = BackgroundSummarizer(stuck)
    summarizer.prefetch(text, session="s1")
    assert started.wait(WAIT)
    summarizer.close(timeout=0.1)
    worker = summarizer._thread
    release.set()
    assert worker is not None
    worker.join(WAIT)
    assert not worker.is_alive()
    assert summarizer.stats.completed == 0
    assert summarizer.lead(text, session="s1", upgrade=True) is None
