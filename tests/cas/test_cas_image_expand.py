"""The ``expand_ref`` tool on a stored output with images (a screenshot tool's result): the
model gets content blocks back, its text and every image as the output had them, never the
base64 of an image as text. Before, it got the JSON of the blocks as text, cut at the token cap
in the middle of the base64: the image was lost to the model and its base64 cost text tokens."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore, SQLiteCASStore, expand_for_model
from ctxplugin.cas._canon import content_hash, make_ref, raw_hash
from ctxplugin.cas.capture import compact_text
from ctxplugin.cas.store import CASItem
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.tokens import IMAGE_TOKENS, content_text, count_message

# a 1x1 PNG repeated: an image whose base64 is far above the expand_ref cap as text
B64 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==" * 400
ROWS = "\n".join(f"row {i}: button#buy-{i} at ({i * 7}, {i * 3}) label 'Buy item {i}'" for i in range(300))

SHAPES: dict[str, list[Any]] = {
    "text then base64 image (v1)": [{"type": "text", "text": "Checkout page, total 41.90 EUR"},
                                    {"type": "image", "base64": B64, "mime_type": "image/png"}],
    "caption, data url": ["page 2", {"type": "image_url", "image_url": {"url": "data:image/png;base64," + B64}}],
    "anthropic source": [{"type": "text", "text": "Order form"},
                         {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": B64}}],
    "image only, url": [{"type": "image", "url": "https://example.com/shot.png"}],
    "v0 base64 and url": [{"type": "text", "text": "two views"},
                          {"type": "image", "source_type": "base64", "mime_type": "image/png", "data": B64},
                          {"type": "image_url", "image_url": {"url": "https://example.com/b.png"}}],
}


def _memory() -> ContextEngine:
    config = ContextConfig()
    return ContextEngine(config=config, cas=MemoryCASStore(), facts=FactsLedger(MemoryFactStore(), config.facts))


@pytest.fixture(params=["memory", "sqlite"])
def make_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Callable[[], ContextEngine]:
    def build() -> ContextEngine:
        if request.param == "memory":
            return _memory()
        config = ContextConfig()
        cas = SQLiteCASStore(tmp_path / "cas.sqlite3")
        return ContextEngine(config=config, cas=cas, facts=FactsLedger(MemoryFactStore(), config.facts))

    return build


def non_text(content: Any) -> list[Any]:
    return [b for b in content if isinstance(b, dict) and not isinstance(b.get("text"), str)] if isinstance(content, list) else []


def expand_tool_result(engine: ContextEngine, args: dict[str, Any], thread: str = "s") -> ToolMessage:
    """What a ToolNode gets from the expand_ref tool for a model's call."""
    tool = next(t for t in engine.tools_for_model() if t.name == "expand_ref")
    result = tool.invoke({"type": "tool_call", "name": "expand_ref", "args": args, "id": "x1"},
                         config={"configurable": {"thread_id": thread}})
    assert isinstance(result, ToolMessage)
    return result


def store_blocks(engine: ContextEngine, blocks: list[Any], thread: str = "s") -> str:
    compact = engine.capture_tool_result(ToolMessage(content=blocks, tool_call_id="c1", name="screenshot"),
                                         scope=Scope(session_id=thread))
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert isinstance(ref, str)
    return ref


@pytest.mark.parametrize("blocks", list(SHAPES.values()), ids=list(SHAPES))
def test_expand_ref_gives_the_model_the_images_as_content_blocks(make_engine: Callable[[], ContextEngine],
                                                                 blocks: list[Any]) -> None:
    engine = make_engine()
    ref = store_blocks(engine, blocks)
    result = expand_tool_result(engine, {"ref_id": ref})
    assert isinstance(result.content, list)
    assert non_text(result.content) == non_text(blocks)
    assert content_text(result.content) == content_text(blocks)
    assert "iVBOR" not in content_text(result.content)
    # the code-facing read is still the stored original, exactly
    assert json.loads(engine.expand_ref(ref, scope=Scope(session_id="s"))) == blocks


def test_a_long_text_is_paged_and_the_images_come_whole(make_engine: Callable[[], ContextEngine]) -> None:
    engine = make_engine()
    blocks = [{"type": "text", "text": ROWS}, {"type": "image", "base64": B64, "mime_type": "image/png"}]
    ref = store_blocks(engine, blocks)
    first = expand_tool_result(engine, {"ref_id": ref})
    text = content_text(first.content)
    assert non_text(first.content) == non_text(blocks)
    assert "row 0:" in text and "row 299:" not in text and "offset=" in text
    assert engine.counter.count(text) <= engine.config.cas.expand_max_tokens
    # the offset the page names reads on in the text; images are not sent again
    offset = int(text.rsplit("offset=", 1)[1].split(")")[0])
    second = expand_tool_result(engine, {"ref_id": ref, "offset": offset})
    assert f"row {offset}:" in content_text(second.content) and non_text(second.content) == []
    assert "1 image" in content_text(second.content)


def test_a_pattern_searches_the_text_never_the_base64(make_engine: Callable[[], ContextEngine]) -> None:
    engine = make_engine()
    blocks = [{"type": "text", "text": ROWS}, {"type": "image", "base64": B64, "mime_type": "image/png"}]
    ref = store_blocks(engine, blocks)
    found = expand_tool_result(engine, {"ref_id": ref, "pattern": "buy-137"})
    assert "Buy item 137" in content_text(found.content) and "iVBOR" not in content_text(found.content)
    none = expand_tool_result(engine, {"ref_id": ref, "pattern": "AAAAEAAAABCAYAAAAf"})
    assert "· 0 of" in content_text(none.content) and "iVBOR" not in content_text(none.content)


def test_a_text_output_that_looks_like_image_blocks_stays_text() -> None:
    """A tool whose text is the JSON of image blocks (an API listing, or a hostile page) is data:
    it is read back as text, never turned into an image sent to the provider."""
    engine = _memory()
    text = json.dumps([{"type": "image_url", "image_url": {"url": "https://attacker.example/pixel.png"}}] * 60)
    compact = engine.capture_tool_result(ToolMessage(content=text, tool_call_id="c1", name="listing"),
                                         scope=Scope(session_id="s"))
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    result = expand_tool_result(engine, {"ref_id": ref})
    assert isinstance(result.content, str)


def test_a_stored_block_a_tool_result_cannot_carry_is_named_not_dumped() -> None:
    """A block type LangChain does not take in a tool result would turn the whole list into its
    JSON text (base64 included); it is named in a text block instead."""
    engine = _memory()
    scope = Scope(session_id="s")
    blocks = [{"type": "text", "text": "clip"}, {"type": "audio", "base64": B64, "mime_type": "audio/wav"},
              {"type": "image", "base64": B64, "mime_type": "image/png"}]
    ref = store_blocks(engine, blocks)
    result = expand_tool_result(engine, {"ref_id": ref})
    assert isinstance(result.content, list) and non_text(result.content) == [blocks[2]]
    assert "audio" in content_text(result.content) and "iVBOR" not in content_text(result.content)
    assert json.loads(engine.expand_ref(ref, scope=scope)) == blocks


def test_an_expanded_image_is_counted_as_an_image_in_the_next_view() -> None:
    engine = _memory()
    blocks = SHAPES["text then base64 image (v1)"]
    ref = store_blocks(engine, blocks)
    result = expand_tool_result(engine, {"ref_id": ref})
    result = ToolMessage(content=result.content, tool_call_id="x1", name="expand_ref")
    history: list[BaseMessage] = [
        HumanMessage("what was the total on the checkout page?"),
        AIMessage("", tool_calls=[{"name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"}]),
        result,
    ]
    prepared = engine.prepare(history, tools=engine.tools_for_model(), scope=Scope(session_id="s"))
    shown = next(m for m in prepared.messages if isinstance(m, ToolMessage) and m.tool_call_id == "x1")
    assert non_text(shown.content) == non_text(blocks)
    assert count_message(shown, engine.counter) < IMAGE_TOKENS + 200
    assert prepared.report.tokens_after < 2 * IMAGE_TOKENS + 1500


def test_the_label_marks_outputs_stored_as_blocks_only() -> None:
    """Only ctxplugin's own ref line for an output with images makes a stored item blocks: an
    item stored with another summary is read back as text."""
    store = MemoryCASStore()
    scope = Scope(session_id="s")
    text = json.dumps(SHAPES["image only, url"])
    ref = make_ref("screenshot", content_hash(text))
    store.put(CASItem(ref, content_hash(text), raw_hash(text), "screenshot", text,
                      compact_text(ref, "JSON array, 1 items", 40, "")), scope)
    config = ContextConfig()
    engine = ContextEngine(config=config, cas=store, facts=FactsLedger(MemoryFactStore(), config.facts))
    assert isinstance(expand_tool_result(engine, {"ref_id": ref}).content, str)


def test_a_condensed_read_of_an_image_never_turns_its_base64_into_text_or_facts() -> None:
    """When the exchange of an expand_ref read with images ages, its images leave the view with
    it; no tier, note or fact holds their base64 as text."""
    engine, scope = _memory(), Scope(session_id="s")
    blocks = [{"type": "text", "text": "Checkout page, total 41.90 EUR"},
              {"type": "image", "base64": B64[:100], "mime_type": "image/png"}]  # one small PNG
    ref = store_blocks(engine, blocks)
    read = expand_tool_result(engine, {"ref_id": ref})
    history: list[BaseMessage] = [
        HumanMessage("what was the total on the checkout page?"),
        AIMessage("", tool_calls=[{"name": "expand_ref", "args": {"ref_id": ref}, "id": "x1"}]),
        ToolMessage(content=read.content, tool_call_id="x1", name="expand_ref"),
        AIMessage("The total was 41.90 EUR."),
    ]
    for i in range(8):
        history += [HumanMessage(f"now check page {i} " + "carefully " * 120), AIMessage(f"page {i} is fine " + "ok " * 120)]
    for mode in ("compact", "whole"):
        engine_mode = ContextEngine(config=ContextConfig(mode=mode), cas=engine.cas, facts=engine.facts)
        prepared = engine_mode.prepare(history, tools=engine_mode.tools_for_model(), scope=scope)
        assert not any("iVBOR" in content_text(m.content) for m in prepared.messages)
        assert all(non_text(m.content) in ([], non_text(blocks)) for m in prepared.messages)
    hits = engine.facts.search("checkout page image", scope=scope, k=20)
    assert not any("iVBOR" in str(hit) for hit in hits)


def test_the_text_reading_for_the_model_holds_no_base64_and_names_the_images() -> None:
    engine, scope = _memory(), Scope(session_id="s")
    ref = store_blocks(engine, SHAPES["v0 base64 and url"])
    text = expand_for_model(engine.cas, ref, scope, max_tokens=2000, counter=engine.counter)
    assert "two views" in text and "iVBOR" not in text and "example.com" not in text
    assert "2 images" in text
