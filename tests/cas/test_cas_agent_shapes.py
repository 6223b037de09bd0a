"""What the summaries make of outputs LangChain tools commonly return: SQL result grids, web
search results, prose."""

from __future__ import annotations

import json

from langchain_core.messages import ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.cas import parse_json, summarize
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]
BUDGET = 120
SCOPE = Scope(session_id="shapes")

_ROWS = [(i, f"cust_{1000 + i}", ["Alice Lee", "Bob Jones", "Carol Smith"][i % 3], f"{10 + i * 7.25:.2f}", ["paid", "pending"][i % 2]) for i in range(40)]
_COLUMNS = ("order_id", "customer_id", "name", "total", "status")


def _mysql_grid() -> str:
    widths = [max(len(str(v)) for v in [c, *(r[k] for r in _ROWS)]) for k, c in enumerate(_COLUMNS)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def row(values: tuple[object, ...]) -> str:
        return "| " + " | ".join(str(v).ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    return "\n".join([rule, row(_COLUMNS), rule, *map(row, _ROWS), rule, f"{len(_ROWS)} rows in set (0.01 sec)"])


def _psql() -> str:
    header = " order_id | customer_id |    name     | total  | status"
    rule = "----------+-------------+-------------+--------+---------"
    body = [f" {r[0]:>8} | {r[1]:<11} | {r[2]:<11} | {r[3]:>6} | {r[4]}" for r in _ROWS]
    return "\n".join([header, rule, *body, f"({len(_ROWS)} rows)"])


def _summary(text: str) -> tuple[str, str]:
    result = summarize(text, parse_json(text), COUNTER, BUDGET)
    return result.label, result.text


def test_a_mysql_result_grid_is_summarized_as_a_table() -> None:
    label, text = _summary(_mysql_grid())
    assert label == "table"
    assert "40 rows × 5 columns" in text
    assert "columns: order_id, customer_id, name, total, status" in text
    assert "cust_1000" in text
    assert "+---" not in text  # the grid's rules are not rows


def test_a_psql_result_is_summarized_as_a_table() -> None:
    label, text = _summary(_psql())
    assert label == "table"
    assert "40 rows × 5 columns" in text
    assert "columns: order_id, customer_id, name, total, status" in text
    assert "cust_1000" in text


def test_the_line_a_grid_summary_points_at_is_the_first_row_not_shown() -> None:
    for mode in ("whole", "compact"):
        engine = memory_engine(ContextConfig(mode=mode))
        compact = engine.capture_tool_result(ToolMessage(content=_mysql_grid(), tool_call_id="c1", name="sql_db_query"), scope=SCOPE)
        text = str(compact.content)
        assert "· table ·" in text
        shown = [r for r in _ROWS if f"| {r[1]} |" in text]
        assert shown == _ROWS[: len(shown)] and shown
        offset = int(text.rsplit("expand_ref offset=", 1)[1].split(")")[0])
        ref = compact.additional_kwargs["ctxplugin"]["ref"]
        assert f"| {_ROWS[len(shown)][1]} " in engine.expand_ref(ref, scope=SCOPE, offset=offset, limit=1)


_SITES = ["Pinecone", "Weaviate", "Qdrant", "Milvus", "Chroma", "pgvector", "LanceDB"]


def _search_results() -> list[dict[str, object]]:
    """What a Tavily-style search tool returns: a few results, each with a long ``content``."""
    return [
        {
            "title": f"Vector DB Review {i}: {name}",
            "url": f"https://example{i}.com/blog/{name.lower()}-review",
            "content": f"{name} is a vector database with HNSW indexing and hybrid search. " * 4,
            "score": round(0.98 - i * 0.05, 4),
            "raw_content": None,
        }
        for i, name in enumerate(_SITES)
    ]


def test_search_results_keep_every_url_whole_beside_the_titles() -> None:
    results = _search_results()
    for mode in ("whole", "compact"):
        engine = memory_engine(ContextConfig(mode=mode))
        compact = engine.capture_tool_result(ToolMessage(content=json.dumps(results), tool_call_id="s1", name="tavily_search"), scope=SCOPE)
        text = str(compact.content)
        assert "ref:tavily_search:" in text
        for result in results:
            assert str(result["url"]) in text, (mode, text)
            assert str(result["title"]) in text, (mode, text)
        assert "keys: title, url, content, score" in text  # no row fits: what each holds is named


def test_sentences_with_a_comma_each_are_text_not_a_csv_table() -> None:
    english = "\n".join(
        f"Order {7000 + i} was shipped to Riyadh on Monday, and the customer paid {99 + i} SAR. Tracking code TRK{i:05d} was sent."
        for i in range(30)
    )
    arabic = "\n".join(f"مرحبا بكم في متجرنا. رقم الطلب {7000 + i} تم شحنه إلى الرياض. السعر {99 + i} ريال. שלום, ההזמנה {i} נשלחה." for i in range(30))
    for prose in (english, arabic):
        label, text = _summary(prose)
        assert label == "text", text
        assert "columns:" not in text and "rows ×" not in text


def test_a_csv_whose_header_cells_are_questions_is_still_a_table() -> None:
    survey = "How satisfied are you with the product overall?,Would you recommend it to a friend?,score\n" + "\n".join(
        f"{['Very satisfied', 'Satisfied', 'Unsatisfied'][i % 3]},{['Yes', 'No'][i % 2]},{i % 5}" for i in range(30)
    )
    label, text = _summary(survey)
    assert label == "table"
    assert "30 rows × 3 columns" in text


def test_a_fetched_page_keeps_its_lead_sentence_and_its_tables() -> None:
    markdown = (
        "# Quarterly Results Q2 2024\n\nRevenue grew in all regions. The board approved a dividend of $0.42 per share.\n\n"
        "## Regional breakdown\n\n| Region | Revenue ($M) | Manager |\n|---|---:|---|\n"
        + "\n".join(f"| Region {i} | {100 + i * 13.5:.1f} | Manager {i} |" for i in range(12))
        + "\n\n## Outlook\n\n" + "Management expects continued growth in the second half of the year. " * 12
    )
    label, text = _summary(markdown)
    assert label == "document"
    assert "dividend of $0.42 per share" in text
    assert "table (12 rows): Region, Revenue ($M), Manager" in text
    nav = "".join(f'<li><a href="/{k}">{k.title()}</a></li>' for k in ["home", "news", "sport", "weather", "business"] * 4)
    html = (
        f"<!DOCTYPE html><html><head><title>Acme Widget 3000</title><script>{'var a=1;' * 200}</script></head>"
        f"<body><nav><ul>{nav}</ul></nav>\n<main><h1>Acme Widget 3000</h1>\n"
        "<p>The Acme Widget 3000 is our flagship model, priced at $499.99, SKU AW-3000-BLK. It ships in 3-5 days.</p>\n"
        + "".join(f"<div><p>Review {i}: works as expected, rated {5 - i % 3}/5</p></div>\n" for i in range(20))
        + "</main></body></html>"
    )
    label, text = _summary(html)
    assert label == "document"
    assert "priced at $499.99" in text
    assert "Home News" not in text  # the menu is not the page's text
