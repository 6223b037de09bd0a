"""Shape-aware summaries keep what an agent acts on, within the token budget."""

from __future__ import annotations

import importlib.util
import json
import re
import threading
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin.cas import parse_json, summarize
from ctxplugin.cas._budget import appears
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]
BUDGET = 120


def summary(text: str, budget: int = BUDGET, **kwargs: bool) -> tuple[str, str]:
    result = summarize(text, parse_json(text), COUNTER, budget, **kwargs)
    return result.label, result.text


def test_json_object_keeps_ids_and_scalars_within_budget() -> None:
    order = {
        "order_id": "ORD-88231", "customer_id": "cust_4421", "status": "shipped", "total": 318.4,
        "items": [{"sku": f"SKU-{i:04d}", "name": f"Widget model {i}", "qty": i % 3 + 1, "price": 10 + i} for i in range(12)],
        "shipping": {"carrier": "UPS", "tracking_number": "1Z999AA10123456784", "address": {"city": "Austin", "zip": "78750"}},
        "notes": "Leave at the front desk. " * 20,
    }
    label, text = summary(json.dumps(order))
    assert label == "JSON object, 7 keys"
    for value in ("ORD-88231", "cust_4421", "shipped", "1Z999AA10123456784", "SKU-0000", "SKU-0011"):
        assert value in text
    assert COUNTER.count(text) <= BUDGET + 10


def test_json_object_whose_identifiers_fill_the_budget_still_names_its_keys() -> None:
    doc = {
        "user": {"profile": {"name": "Ann", "user_id": "u_991"}, "settings": {"theme": "dark"}},
        "app.version": "1.2.3",
        "orders": {"inner id": "X-77", "list": [{"order_id": f"O{i}", "total": i} for i in range(30)]},
        "notes": "lorem ipsum " * 60,
    }
    label, text = summary(json.dumps(doc))
    assert label == "JSON object, 4 keys"
    assert "O29" in text and "u_991" in text
    assert all(key in text for key in ("user", "app.version", "orders", "notes")), text


def test_json_array_counts_items_and_lists_every_primary_id_that_fits() -> None:
    rows = [{"id": f"user_{i}", "email": f"u{i}@example.com", "active": i % 2 == 0, "score": i * 3} for i in range(15)]
    label, text = summary(json.dumps(rows))
    assert label == "JSON array, 15 items"
    assert "JSON array of 15 objects" in text
    assert all(f"user_{i}" in text for i in range(15))
    assert "columns: id, email, active, score" in text
    assert "[0] user_0, u0@example.com, true, 0" in text
    big = [{"id": f"rec-{i:05d}", "payload": "x" * 50} for i in range(5000)]
    _, text = summary(json.dumps(big))
    assert "rec-00000" in text and "more" in text and COUNTER.count(text) <= BUDGET + 10


def test_json_array_lists_a_numeric_id_that_only_occurs_inside_the_item_count() -> None:
    # "300 records" holds the digits 0 and 3, but no record with id 0 or 3 is named by it
    rows = [{"id": i, "name": f"item {i}"} for i in range(300)]
    _, text = summary(json.dumps(rows), budget=200)
    id_line = next(line for line in text.splitlines() if line.startswith("id: "))
    assert id_line.startswith("id: 0, 1, 2, 3, 4, 5,"), text


def test_json_nested_lists_keep_inner_ids() -> None:
    pairs = [[{"flight_number": f"HAT{i}{j}", "origin": "JFK", "destination": "ATL", "price": 100 + i} for j in range(2)] for i in range(6)]
    _, text = summary(json.dumps(pairs))
    assert all(f"HAT{i}{j}" in text for i in range(6) for j in range(2))


def test_json_object_too_large_to_read_whole_says_its_id_counts_are_of_the_part_read() -> None:
    """Past the identifier walk's cap the '+N more' is not the output's count: the summary says so."""
    doc = {"data": {"items": [{"id": i, "blob": "z" * 20} for i in range(45000)]}, "meta": {"next": "cur_1"}}
    _, text = summary(json.dumps(doc))
    assert "identifiers read from the first 20,000 values only" in text
    small = {"data": {"items": [{"id": i, "blob": "z" * 20} for i in range(300)]}, "meta": {"next": "cur_1"}}
    assert "values only" not in summary(json.dumps(small))[1]


def test_command_output_keeps_exit_status_head_tail_and_every_error_line() -> None:
    body = "\n".join(
        ["collecting ... collected 240 items"]
        + [f"tests/test_mod{i}.py::test_case PASSED" for i in range(200)]
        + ["tests/test_mod7.py::test_edge FAILED", "E   AssertionError: expected 3, got 4", "WARNING: deprecated option --foo"]
        + [f"tests/test_more{i}.py::test_case PASSED" for i in range(30)]
        + ["==== 1 failed, 230 passed, 1 warning in 3.21s ===="]
    )
    label, text = summary(f"<returncode>1</returncode>\n<output>\n{body}\n</output>")
    assert label == "command output (test report)"
    assert text.startswith("exit 1, 235 lines")
    for line in ("failed: tests/test_mod7.py::test_edge", "E   AssertionError: expected 3, got 4", "WARNING: deprecated option --foo", "1 failed, 230 passed"):
        assert line in text
    assert "L203:" in text  # line numbers to page from
    assert "collecting ... collected 240 items" in text  # head


def test_python_traceback_keeps_exception_and_project_frames() -> None:
    frames = "\n".join(f'  File "/srv/app/pkg/mod{i}.py", line {10 + i}, in handler{i}\n    step{i}()' for i in range(12))
    log = f"starting job 7\nTraceback (most recent call last):\n{frames}\nKeyError: 'reservation_id'\n"
    _, text = summary(log * 2)
    assert "KeyError: 'reservation_id'" in text
    assert "Traceback (most recent call last):" in text
    assert "/srv/app/pkg/mod11.py" in text  # the innermost frame


def test_source_code_outline_with_line_numbers() -> None:
    code = "\n".join(
        ["import os", "", "class Store:", '    """Keeps things."""', ""]
        + [line for i in range(12) for line in (f"    def method_{i}(self, x):", f"        return x + {i}", "")]
        + ["def main():", "    Store().method_0(1)"]
    )
    label, text = summary(code)
    assert label == "source code"
    assert "3: class Store:" in text
    assert "6:     def method_0(self, x):" in text and "9:     def method_1(self, x):" in text
    assert "def main():" in text or "more definitions" in text


def test_numbered_listing_uses_the_printed_line_numbers() -> None:
    lines = [f"{n:6d}\t{text}" for n, text in enumerate(["class A:", "    def f(self):", "        pass", "", "def g():", "    return 1"] * 8, start=300)]
    _, text = summary("<returncode>0</returncode>\n<output>\n" + "\n".join(lines) + "\n</output>")
    assert "300: class A:" in text and "301:     def f(self):" in text


def test_grep_output_groups_line_numbers_by_file() -> None:
    out = "\n".join(f"src/pkg/{name}.py:{n}:    value = compute({n})" for name in ("alpha", "beta", "gamma") for n in range(10, 200, 17))
    label, text = summary(out)
    assert label == "search matches"
    assert "src/pkg/alpha.py: 10, 27, 44" in text and "src/pkg/gamma.py" in text
    assert "36 matches in 3 files" in text


def test_grep_context_lines_are_not_counted_as_matches() -> None:
    out = "\n".join(
        f"src/{name}.py-{n - 1}-    before\nsrc/{name}.py:{n}:    hit = match({n})\nsrc/{name}.py-{n + 1}-    after\n--"
        for name in ("alpha", "beta")
        for n in range(10, 300, 20)
    )
    label, text = summary(out)
    assert label == "search matches"
    assert "30 matches in 2 files" in text
    assert "src/alpha.py: 10, 30, 50" in text


def test_file_list_and_ls_listing() -> None:
    paths = "\n".join(f"./src/module_{i}/file_{i}.py" for i in range(80))
    label, text = summary(paths)
    assert label == "file list" and "80 entries" in text and "./src/module_0/file_0.py" in text
    listing = "\n".join(f"-rw-r--r-- 1 root root {100 + i:5d} May  6  2025 file_{i}.txt" for i in range(40))
    _, text = summary("total 184\n" + listing)
    assert "file_0.txt" in text and "entries" in text


def test_csv_table_columns_rows_and_first_rows() -> None:
    csv_text = "id,name,city,amount\n" + "\n".join(f"{i},Person {i},City {i % 5},{i * 10}" for i in range(300))
    label, text = summary(csv_text)
    assert label == "table"
    assert "300 rows × 4 columns" in text and "columns: id, name, city, amount" in text
    assert "0,Person 0,City 0,0" in text and "more rows" in text


def test_plain_text_keeps_lead_and_identifiers() -> None:
    text = (
        "The deployment of service billing-api finished with warnings. Version v2.14.3 is live in eu-west-1. "
        + "Background: " + "the rollout proceeded in stages across regions and was monitored. " * 40
        + "See https://status.example.com/incidents/INC-20240501 and /var/log/billing/deploy.log for details."
    )
    label, out = summary(text)
    assert label == "text"
    assert out.startswith("The deployment of service billing-api finished with warnings.")
    for ident in ("v2.14.3", "https://status.example.com/incidents/INC-20240501", "/var/log/billing/deploy.log"):
        assert ident in out


def test_summaries_respect_smaller_budgets() -> None:
    rows = json.dumps([{"id": f"item-{i}", "v": i} for i in range(500)])
    for budget in (50, 80, 120):
        _, text = summary(rows, budget=budget)
        assert COUNTER.count(text) <= budget + 10


def test_a_record_summary_names_only_the_expand_ref_options_that_read_it() -> None:
    from ctxplugin.cas import MemoryCASStore, expand_for_model
    from ctxplugin.scope import Scope
    from ctxplugin.testing.cas_contract import make_item

    records = [{"id": f"req_{i:03d}", "level": "ERROR" if i == 77 else "INFO", "ms": i} for i in range(120)]
    outputs = {
        "JSON": json.dumps({"service": "api", "records": records}),
        "JSON Lines": "\n".join(json.dumps(r) for r in records),
        "CSV": "id,level,ms\n" + "\n".join(f"{r['id']},{r['level']},{r['ms']}" for r in records),
    }
    store, scope = MemoryCASStore(), Scope(session_id="s")
    for shape, content in outputs.items():
        _, text = summary(content)
        hint = text.splitlines()[-1]
        assert "expand_ref pattern='ERROR'" in hint, shape
        item = make_item(content)
        store.put(item, scope)
        # every option the hint names reads this output
        if "fields=" in hint:
            out = expand_for_model(store, item.ref_id, scope, max_tokens=500, counter=COUNTER, fields=["records[77]"])
            assert "req_077" in out and not out.startswith("expand_ref:"), shape
        assert shape == "JSON" or "fields=" not in hint, f"{shape}: fields take JSON paths, not lines"


def test_diff_counts_removed_and_added_lines_that_start_like_file_headers() -> None:
    hunks = []
    for i in range(10):
        hunks += [
            f"diff --git a/sql/q{i}.sql b/sql/q{i}.sql",
            "index 1234567..89abcde 100644",
            f"--- a/sql/q{i}.sql",
            f"+++ b/sql/q{i}.sql",
            "@@ -1,4 +1,4 @@",
            " select id",
            "--- a/legacy comment",
            "+++ b/new comment",
            " from orders",
            " where amount > 0",
        ]
    label, text = summary("\n".join(hunks))
    assert label == "diff"
    assert "10 files changed, +10 -10" in text, text
    assert "sql/q0.sql +1 -1" in text and "legacy" not in text.split("\n", 2)[1]


def test_python_source_with_a_license_header_gets_the_code_outline() -> None:
    spec = importlib.util.find_spec("grpc.beta._metadata")  # Apache header: 13 lines of "# ..."
    assert spec is not None and spec.origin is not None
    source = Path(spec.origin).read_text()
    assert source.startswith("# Copyright")
    label, text = summary(source)
    assert label == "source code"
    assert "def beta(metadata):" in text and "def unbeta(beta_metadata):" in text
    script = "# Copyright 2024 Example Corp.\n#\n# SPDX-License-Identifier: MIT\n\n" + "\n".join(
        [f"# step {i}\nrun_step({i})" for i in range(4)]
    )
    assert summary("#!/usr/bin/env bash\n" + script)[0] != "document"
    assert summary(script)[0] != "document"


def test_markdown_with_code_blocks_and_short_sections_is_still_a_document() -> None:
    readme = "\n".join(
        [
            "# Ledger service",
            "",
            "Keeps the facts of a session.",
            "",
            "## Install",
            "",
            "```python",
            "import ledger",
            "from ledger import Store",
            "",
            "def main():",
            "    Store().run()",
            "```",
            "",
            "## Usage",
            "",
            "Run `ledger serve` and open port 8080.",
            "",
            "### Cabin: Economy",
            "### Insurance: Yes",
        ]
    )
    label, text = summary(readme)
    assert label == "document"
    assert "Install" in text and "Usage" in text


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="ab3.-_ é²/", max_size=5), st.text(alphabet="ab3.-_ é²/\n", max_size=60))
def test_appears_is_a_whole_token_match(value: str, text: str) -> None:
    expected = re.search(rf"(?<![\w.-]){re.escape(value)}(?![\w.-])", text) is not None
    assert appears(value, text) is expected


def test_a_large_array_of_records_lists_its_ids_not_in_the_summary() -> None:
    records = [{"id": f"user-{i}", "email": f"u{i}@example.com", "score": i / 7} for i in range(20_000)]
    text = json.dumps(records)
    label, shown = summary(text)
    assert label.startswith("JSON array, 20000 ")
    assert "user-0" in shown and "user-1" in shown
    assert shown.count("user-0") == 1  # an id already in the summary's lines is not listed again


def test_a_repeated_warning_is_counted_over_the_whole_log_and_shown_once() -> None:
    """A log of one warning repeated: the summary says how often it occurs, also past the
    number of warning lines the scan collects, and does not show it again as the log's head
    and tail (those copies said nothing the count did not)."""
    line = "WARN disk usage high on /dev/sda1 (91%)"
    for repeats in (50, 12_000):
        kind, text = summary("\n".join([line] * repeats))
        assert kind == "log"
        assert f"L1: {line} (×{repeats:,})" in text
        assert text.count(line) == 1
    kind, text = summary("\n".join(["starting", *[line] * 20, "done"]))
    assert "(×20)" in text and text.count(line) == 1 and "L22: done" in text and "L1: starting" in text


def test_grep_lists_a_line_matched_twice_once_in_first_seen_order() -> None:
    out = "\n".join(f"src/a.py:{n}:    hit({n})" for n in (40, 12, 40, 7, 12, 90))
    _, text = summary(out + "\nsrc/b.py:3:    hit(3)")
    assert "7 matches in 2 files" in text
    assert "src/a.py: 40, 12, 7, 90" in text


def test_a_large_record_set_whose_records_each_carry_a_key_of_their_own_is_summarized() -> None:
    # read column by column, every key gathered its value from every record: keys times
    # records, 40,000 squared here (minutes), where the items are only 80,000
    text = json.dumps([{"id": i, f"field_{i}": "x"} for i in range(40_000)])
    done: list[str] = []
    worker = threading.Thread(target=lambda: done.append(summary(text)[1]), daemon=True)
    worker.start()
    worker.join(120)  # a hang detector, not a measure: the item by item scan takes about a second
    assert done, "the summary did not finish"
    assert "JSON array of 40000 records; keys: id, field_0" in done[0]


def test_every_records_id_is_listed_or_counted_even_where_it_reads_like_a_count() -> None:
    # "2 keys", "300 records", "true×150": an id is left out only when its record is shown whole
    wrapped = {"meta": {"page": 1, "of": 1}, "items": [{"id": i, "name": f"n{i}", "tags": ["a"]} for i in range(300)]}
    flagged = [{"id": 100 + i, "qty": i % 7, "name": f"row {i}", "flag": i % 2 == 0} for i in range(300)]
    for value, first, hint in (
        (wrapped, 0, ' (expand_ref fields=["items"] offset/limit)'),
        (flagged, 100, " (expand_ref offset/limit)"),
    ):
        _, text = summary(json.dumps(value), budget=400)
        [line] = [line for line in text.splitlines() if line.startswith("id: ")]
        listed, _, rest = line.removeprefix("id: ").partition(", … +")
        ids = [int(i) for i in listed.split(", ")]
        assert ids == list(range(first, first + len(ids))), "no id skipped"
        assert rest == f"{300 - len(ids)} more{hint}", "the count is of the others"
