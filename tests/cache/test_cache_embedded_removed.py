"""The embedded Chroma directory removed while an engine with the answer cache runs on it: the
facts and the cached answers, which share the directory, are both opened again at its path."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import ChromaAnswerCacheStore
from ctxplugin.config import CacheConfig
from ctxplugin.errors import StoreError
from ctxplugin.facts import ChromaFactStore, Fact, FactQuery, HashingEmbedding
from ctxplugin.testing import ScriptedChatModel
from ctxplugin.testing.cache_contract import make_entry

S = Scope(session_id="removed", user_id="u1")
SYSTEM = SystemMessage("You help with releases. Be brief.")


def _step(engine: ContextEngine, model: ScriptedChatModel, history: list[BaseMessage], text: str) -> tuple[AIMessage, list[str], bool]:
    """One model call as a host makes it: the answer, the step's warnings, whether it was cached."""
    history.append(HumanMessage(text, id=f"h{len(history)}"))
    messages = [SYSTEM, *history]
    prepared = engine.prepare(messages, scope=S)
    cached = engine.cached_answer(messages, prepared, scope=S, model=model)
    if cached is None:
        reply = model.invoke(prepared.messages)
        assert isinstance(reply, AIMessage)
        engine.remember_answer(messages, prepared, reply, scope=S, model=model)
    else:
        reply = cached
    history.append(reply.model_copy(update={"id": f"a{len(history)}"}))
    return reply, list(prepared.report.warnings), cached is not None


def test_facts_and_cached_answers_work_again_after_the_directory_was_removed(tmp_path: Path) -> None:
    engine = ContextEngine.embedded(tmp_path, ContextConfig(cache=CacheConfig(enabled=True)))
    model = ScriptedChatModel(script=[AIMessage(f"Answer {i}.") for i in range(6)], default=None)
    try:
        _, warnings, _ = _step(engine, model, [], "The deploy target is eu-west-3.")
        assert warnings == []
        shutil.rmtree(tmp_path / "chroma")

        history: list[BaseMessage] = []
        _, warnings, cached = _step(engine, model, history, "The release deadline is Friday 5pm.")
        assert (warnings, cached) == ([], False)
        assert engine.facts.current("release_deadline", scope=S) is not None
        assert engine.facts.current("deploy_target", scope=S) is None  # gone with the directory
        # the answer just given is cached in the directory opened again, and found there
        _, warnings, cached = _step(engine, model, history[:1], "The release deadline is Friday 5pm.")
        assert (warnings, cached) == ([], True)
    finally:
        engine.close()
    again = ContextEngine.embedded(tmp_path, ContextConfig(cache=CacheConfig(enabled=True)))
    try:
        assert again.facts.current("release_deadline", scope=S) is not None
        assert again.cache is not None and isinstance(again.cache.store, ChromaAnswerCacheStore)
        assert again.cache.store.count() == 1
    finally:
        again.close()


def test_the_cache_seeing_the_directory_removed_first_opens_it_again_for_both(tmp_path: Path) -> None:
    with ChromaFactStore.persistent(tmp_path / "chroma") as facts, ChromaAnswerCacheStore.persistent(tmp_path / "chroma") as answers:
        facts.add([Fact(text="The deploy target is eu-west-3.", owner=S)])
        answers.put(make_entry("what is the deploy target"))
        shutil.rmtree(tmp_path / "chroma")

        answers.put(make_entry("when is the release deadline"))  # the cache is first to see it
        assert answers.count() == 1
        kept = Fact(text="The release deadline is Friday 5pm.", owner=S)
        facts.add([kept])
        assert [f.id for f, _ in facts.search("release deadline", FactQuery(reader=S), n=5)] == [kept.id]
    with ChromaFactStore.persistent(tmp_path / "chroma") as facts, ChromaAnswerCacheStore.persistent(tmp_path / "chroma") as answers:
        assert [f.id for f in facts.get([kept.id], reader=S)] == [kept.id]
        assert answers.count() == 1


class _HeldQuery(HashingEmbedding):
    """The offline embedding, holding a question's embedding until let go (a slow embedding API)."""

    def __init__(self) -> None:
        super().__init__()
        self.held, self.go = threading.Event(), threading.Event()

    def embed_query(self, text: str) -> list[float]:
        if text == "when is the release":
            self.held.set()
            self.go.wait(30)
        return super().embed_query(text)


def test_a_facts_search_under_way_when_the_cache_opens_the_directory_again_fails_as_a_store_error(tmp_path: Path) -> None:
    embedding = _HeldQuery()
    with ChromaFactStore.persistent(tmp_path / "chroma", embedding=embedding) as facts, ChromaAnswerCacheStore.persistent(tmp_path / "chroma") as answers:
        facts.add([Fact(text="The deploy target is eu-west-3.", owner=S)])
        answers.put(make_entry("what is the deploy target"))
        failed: list[BaseException] = []

        def search() -> None:
            try:
                facts.search("when is the release", FactQuery(reader=S), n=5)
            except BaseException as exc:  # what the host's call would raise
                failed.append(exc)

        thread = threading.Thread(target=search)
        thread.start()
        assert embedding.held.wait(30)  # the search has its collection, and embeds the question
        shutil.rmtree(tmp_path / "chroma")
        answers.put(make_entry("when is the release deadline"))  # the cache opens the directory again
        embedding.go.set()
        thread.join(30)
        assert [type(exc) for exc in failed] in ([], [StoreError]), failed
        kept = Fact(text="The release deadline is Friday 5pm.", owner=S)
        facts.add([kept])  # the next call works on the directory opened again
        assert [f.id for f, _ in facts.search("release deadline", FactQuery(reader=S), n=5)] == [kept.id]
