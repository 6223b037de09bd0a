"""Tool outputs with images (content blocks of type ``image`` / ``image_url``, base64 or URL):
the view keeps every image, and the whole output is stored under a ref, so that an exchange the
history later condenses away stays recoverable. Before, such outputs were never stored, and a
condensed exchange lost its images with no ref to get them back."""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine

B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
LONG = "Screenshot of the checkout page. " + " ".join(f"field_{i}=value_{i}" for i in range(400))

SHAPES: dict[str, list[Any]] = {
    "long text, base64 image, url image": [
        {"type": "text", "text": LONG},
        {"type": "image", "source_type": "base64", "mime_type": "image/png", "data": B64},
        {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
    ],
    "image only": [{"type": "image", "url": "https://example.com/b.png"}],
    "short caption, data url": ["page 2", {"type": "image_url", "image_url": {"url": "data:image/png;base64," + B64}}],
    "anthropic source": [{"type": "text", "text": LONG}, {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}],
}


def images(content: Any) -> list[Any]:
    return [b for b in content if isinstance(b, dict) and not isinstance(b.get("text"), str)] if isinstance(content, list) else []


@pytest.mark.parametrize("blocks", list(SHAPES.values()), ids=list(SHAPES))
def test_capture_keeps_images_in_view_and_stores_the_whole_output(blocks: list[Any]) -> None:
    engine, scope = memory_engine(), Scope(session_id="s")
    compact = engine.capture_tool_result(ToolMessage(content=blocks, tool_call_id="c1", name="screenshot"), scope=scope)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert isinstance(compact.content, list) and images(compact.content) == images(blocks)
    assert ref in str(compact.content[0])
    assert json.loads(engine.expand_ref(ref, scope=scope)) == blocks


def conversation(blocks: list[Any], turns: int) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage(content="check every page")]
    for i in range(turns):
        messages += [
            AIMessage(content="", tool_calls=[{"name": "screenshot", "args": {"page": i}, "id": f"c{i}"}]),
            ToolMessage(content=blocks, tool_call_id=f"c{i}", name="screenshot"),
            AIMessage(content=f"page {i} looks fine " + "detail " * 150),
            HumanMessage(content=f"next page after {i} " + "please " * 150),
        ]
    return messages


@pytest.mark.parametrize("mode", ["compact", "whole"])
@pytest.mark.parametrize("blocks", list(SHAPES.values()), ids=list(SHAPES))
def test_no_image_is_lost_from_a_prepared_view(mode: str, blocks: list[Any]) -> None:
    engine, scope = memory_engine(ContextConfig(mode=mode)), Scope(session_id="s")
    prepared = engine.prepare(conversation(blocks, 6), tools=[], scope=scope)
    shown = {m.tool_call_id for m in prepared.messages if isinstance(m, ToolMessage) and images(m.content) == images(blocks)}
    stored = {json.dumps(json.loads(engine.expand_ref(ref, scope=scope))) for ref in prepared.report.refs_used}
    for i in range(6):
        assert f"c{i}" in shown or json.dumps(blocks) in stored, f"the images of c{i} are neither in view nor stored"
    assert all(images(m.content) in ([], images(blocks)) for m in prepared.messages if isinstance(m, ToolMessage))


def test_a_compact_message_kept_in_the_state_shows_its_images_and_is_not_stored_again() -> None:
    engine, scope = memory_engine(ContextConfig(mode="whole")), Scope(session_id="s")  # whole: the exchange stays in view
    blocks = SHAPES["long text, base64 image, url image"]
    compact = engine.capture_tool_result(ToolMessage(content=blocks, tool_call_id="c0", name="screenshot"), scope=scope)
    messages = [*conversation(blocks, 1)[:2], compact, AIMessage(content="done"), HumanMessage(content="thanks")]
    prepared = engine.prepare(messages, tools=[], scope=scope)
    view = next(m for m in prepared.messages if isinstance(m, ToolMessage))
    assert images(view.content) == images(blocks) and prepared.report.refs_created == []


def test_a_view_showing_the_ref_of_an_output_with_images_offers_expand_ref() -> None:
    engine, scope = memory_engine(ContextConfig(mode="whole")), Scope(session_id="s")
    blocks = SHAPES["short caption, data url"]
    compact = engine.capture_tool_result(ToolMessage(content=blocks, tool_call_id="c0", name="screenshot"), scope=scope)
    messages = [*conversation(blocks, 1)[:2], compact, AIMessage(content="done"), HumanMessage(content="thanks")]
    prepared = engine.prepare(messages, tools=engine.tools_for_model(), scope=scope)
    assert "expand_ref" in prepared.report.tools_bound
