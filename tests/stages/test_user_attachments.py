"""A user's image or document that leaves the view stays named and readable: the note standing for
its message says what was attached and the ref its blocks are stored under, and ``expand_ref``
gives the blocks back. Before, the note kept the user's words alone and the attachment was gone."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore, SQLiteCASStore
from ctxplugin.errors import RefNotFoundError, StoreUnavailableError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.testing import note_values
from ctxplugin.tokens import content_text

B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
IMAGE = {"type": "image", "base64": B64, "mime_type": "image/png"}
PDF = {"type": "document", "source": {"type": "base64", "media_type": "application/pdf", "data": "JVBERi0xLjQK" * 20}}
REF = re.compile(r"ref:user:[0-9a-f]{16}")
SCOPE = Scope(session_id="passport")


@pytest.fixture(params=["memory", "sqlite"])
def make_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[..., ContextEngine]:
    def build(**settings: Any) -> ContextEngine:
        config = ContextConfig(mode="compact", budget={"total": 3000}, **settings)
        cas = MemoryCASStore() if request.param == "memory" else SQLiteCASStore(tmp_path / "cas.sqlite3")
        return ContextEngine(config=config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))

    return build


def _conversation(attachment: dict[str, Any], pages: int = 30) -> list[BaseMessage]:
    history: list[BaseMessage] = [
        HumanMessage("Help me renew my passport, case PR-20931."),
        AIMessage("Sure, send me a copy of it."),
        HumanMessage(content=[{"type": "text", "text": "Here is my passport"}, attachment]),
        AIMessage("Thanks, I have it."),
    ]
    for i in range(pages):
        history += [
            HumanMessage(f"now check page {i} " + "carefully " * 60),
            AIMessage(f"page {i} " + "ok " * 60, tool_calls=[{"name": "lookup", "args": {"q": f"Q{i}"}, "id": f"c{i}"}]),
            ToolMessage("result " * 50 + f"R-{i}00", tool_call_id=f"c{i}", name="lookup"),
            AIMessage("done"),
        ]
    return history


def _attached(messages: list[BaseMessage]) -> list[str]:
    """The ``user attached`` values of the notes in a view."""
    return [value for m in messages for value in note_values(content_text(m.content)).get("user attached", [])]


def _media(content: Any) -> list[Any]:
    return [b for b in content if isinstance(b, dict) and b.get("type") != "text"] if isinstance(content, list) else []


@pytest.mark.parametrize(("attachment", "what"), [(IMAGE, "1 image"), (PDF, "1 PDF document")], ids=["image", "pdf"])
def test_a_condensed_attachment_is_named_with_a_ref_that_gives_it_back(
    make_engine: Callable[..., ContextEngine], attachment: dict[str, Any], what: str,
) -> None:
    engine = make_engine()
    prepared = engine.prepare(_conversation(attachment), tools=engine.tools_for_model(), scope=SCOPE)
    assert not any(_media(m.content) for m in prepared.messages), "the message is condensed"
    attached = _attached(prepared.messages)
    assert len(attached) == 1 and attached[0].startswith(f"{what}, ref:user:"), attached
    ref = REF.findall(attached[0])[0]
    assert json.loads(engine.expand_ref(ref, scope=SCOPE))[1] == attachment
    tool = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
    read = tool.invoke({"type": "tool_call", "name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"},
                       config={"configurable": {"thread_id": SCOPE.session_id}})
    assert isinstance(read, ToolMessage) and _media(read.content) == [attachment]
    assert ref in prepared.report.refs_used and ref in prepared.report.refs_created
    with pytest.raises(RefNotFoundError):
        engine.expand_ref(ref, scope=Scope(session_id="someone-else"))
    again = engine.prepare(_conversation(attachment), tools=engine.tools_for_model(), scope=SCOPE)
    assert _attached(again.messages) == attached and ref not in again.report.refs_created, "stored once"


def test_an_attachment_still_shown_is_not_stored(make_engine: Callable[..., ContextEngine]) -> None:
    engine = make_engine()
    prepared = engine.prepare(_conversation(IMAGE, pages=1), tools=engine.tools_for_model(), scope=SCOPE)
    assert any(_media(m.content) == [IMAGE] for m in prepared.messages)
    assert _attached(prepared.messages) == [] and prepared.report.refs_created == []


def test_an_attachment_the_budget_drops_is_named_by_the_note_of_the_drop(make_engine: Callable[..., ContextEngine]) -> None:
    engine = make_engine(history={"enabled": False})
    prepared = engine.prepare(_conversation(IMAGE), tools=engine.tools_for_model(), scope=SCOPE)
    assert not any(_media(m.content) for m in prepared.messages)
    note = next(content_text(m.content) for m in prepared.messages if "earlier exchanges are not shown" in content_text(m.content))
    refs = REF.findall(note)
    assert "user attached: 1 image, ref:user:" in note and len(refs) == 1, note
    assert json.loads(engine.expand_ref(refs[0], scope=SCOPE))[1] == IMAGE
    assert refs[0] in prepared.report.refs_used


def test_when_the_store_is_down_the_note_still_names_the_attachment(
    make_engine: Callable[..., ContextEngine], mocker: MockerFixture,
) -> None:
    engine = make_engine()
    put = mocker.patch.object(engine.cas, "put", side_effect=StoreUnavailableError("database is locked"))
    prepared = engine.prepare(_conversation(IMAGE), tools=engine.tools_for_model(), scope=SCOPE)
    attached = _attached(prepared.messages)
    assert attached == ["1 image (not stored, not readable)"], attached
    assert not any(REF.search(content_text(m.content)) for m in prepared.messages)
    assert any("attachment" in w and "database is locked" in w for w in prepared.report.warnings), prepared.report.warnings
    mocker.stop(put)
    back = engine.prepare(_conversation(IMAGE), tools=engine.tools_for_model(), scope=SCOPE)
    assert len(_attached(back.messages)) == 1 and REF.search(_attached(back.messages)[0]), "stored once the store is back"


def test_the_view_with_a_condensed_attachment_is_accepted_by_the_providers() -> None:
    pytest.importorskip("langchain_anthropic")
    pytest.importorskip("langchain_openai")
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    config = ContextConfig(mode="compact", budget={"total": 3000})
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(MemoryFactStore(), config.facts))
    view = engine.prepare(_conversation(IMAGE), tools=engine.tools_for_model(), scope=SCOPE).messages
    anthropic = ChatAnthropic(model="claude-sonnet-4-5", api_key="x")
    openai = ChatOpenAI(model="gpt-4o", api_key="x")
    for payload in (anthropic._get_request_payload(view), openai._get_request_payload(view)):
        assert "ref:user:" in json.dumps(payload)


def test_an_attachment_sent_after_earlier_calls_is_named_once_its_message_is_condensed(make_engine: Callable[..., ContextEngine]) -> None:
    # the conversation is prepared call after call, growing, as a host sends it: the check for
    # media reads only the messages each call adds, and must still see the one added late
    engine = make_engine()
    messages = _conversation(IMAGE)
    view = []
    for end in range(1, len(messages) + 1):
        if isinstance(messages[end - 1], HumanMessage) or end == len(messages):
            view = engine.prepare(messages[:end], scope=SCOPE).messages
    (value,) = _attached(view)
    assert value.startswith("1 image, ") and REF.search(value)
