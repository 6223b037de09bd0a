"""A table too large to parse whole: every row counted, the summary says which rows its values
come from, and the stored output pages back to its last row."""

from __future__ import annotations

import pytest
from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._text_shapes import table_rows
from ctxplugin.cas import MemoryCASStore, capture, expand
from ctxplugin.cas._text_summary import table_row_count
from ctxplugin.config import CASConfig
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]
ROWS = 120_000


def huge_csv(sep: str = ",") -> str:
    rows = (sep.join((str(i), f"item {i % 97}", "open" if i % 3 else "closed", f"{i * 13 % 999}.{i % 90 + 10}")) for i in range(ROWS))
    return sep.join(("id", "name", "status", "amount")) + "\n" + "\n".join(rows) + "\n"


@pytest.mark.parametrize("sep", [",", "\t"])
def test_a_huge_table_states_every_row_and_where_its_values_come_from(sep: str) -> None:
    text = huge_csv(sep)
    store = MemoryCASStore()
    scope = Scope(session_id="huge")
    got = capture(text, store=store, scope=scope, config=CASConfig(), counter=COUNTER, tool_name="query")
    assert got.ref_id is not None and got.shape == "table"
    assert f"{ROWS} rows × 4 columns" in got.text
    assert "in the first " in got.text and " rows only" in got.text
    parsed = int(got.text.split("in the first ", 1)[1].split(" rows only", 1)[0].replace(",", ""))
    assert 0 < parsed < ROWS
    assert expand(store, got.ref_id, scope) == text
    last = expand(store, got.ref_id, scope, offset=ROWS, limit=1)
    assert last == sep.join((str(ROWS - 1), f"item {(ROWS - 1) % 97}", "open" if (ROWS - 1) % 3 else "closed", f"{(ROWS - 1) * 13 % 999}.{(ROWS - 1) % 90 + 10}"))


def test_a_huge_table_through_the_engine_is_stored_whole() -> None:
    text = huge_csv()
    engine = ContextEngine(ContextConfig())
    scope = Scope(session_id="huge-engine")
    out = engine.capture_tool_result(ToolMessage(content=text, tool_call_id="c1", name="query"), scope)
    shown = str(out.content)
    assert f"{ROWS} rows × 4 columns" in shown and " rows only" in shown


def test_a_table_of_ordinary_size_is_parsed_whole() -> None:
    text = "id,status\n" + "\n".join(f"{i},{'open' if i % 3 else 'closed'}" for i in range(300))
    got = capture(text, store=MemoryCASStore(), scope=Scope(session_id="s"), config=CASConfig(), counter=COUNTER, tool_name="query")
    assert "300 rows × 2 columns" in got.text and "rows only" not in got.text


@pytest.mark.parametrize(
    "body",
    [
        "a,b\n1,2\n\n3,4\n   \n5,6\n",
        'a,b\n1,"two\nlines"\n3,4\n\n"5, five",6',
        "a\tb\r\n1\t2\r\n\t\r\n3\t4",
        "| a | b |\n|---|---|\n| 1 | 2 |\n\n| 3 | 4 |\n+---+---+\n(2 rows)\n",
        " a | b \n---+---\n 1 | 2 \n 3 | 4 \n(2 rows)",
        "a,b\n",
    ],
)
def test_rows_counted_are_the_rows_parsed(body: str) -> None:
    _, rows, sep, _ = table_rows(body)
    assert table_row_count(body, sep) == len(rows)


def test_huge_json_lines_state_every_line_and_page_back_to_the_last() -> None:
    lines = [f'{{"id": {i}, "region": "eu-{i % 5}", "ok": {"true" if i % 2 else "false"}}}' for i in range(60_000)]
    text = "\n".join(lines)
    store = MemoryCASStore()
    scope = Scope(session_id="jsonl")
    got = capture(text, store=store, scope=scope, config=CASConfig(), counter=COUNTER, tool_name="query")
    assert got.ref_id is not None and got.shape == "jsonl"
    assert "60,000 lines; the first " in got.text and " are summarized" in got.text
    assert expand(store, got.ref_id, scope, offset=59_999, limit=1) == lines[-1]
