"""Needle checks on a generated corpus of large tool outputs, each hiding one thing that matters (the needle).

``case(shape, seed)`` builds one output of a shape from a seed: the same seed gives the same
text. Every case names its needle (a string that must appear in the compact form), the pattern
a reader would pass to ``expand_ref`` to find it, and, for JSON, keys the compact form must name.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass

import pytest

from ctxplugin.cas import Captured, MemoryCASStore, capture, expand, expand_for_model
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope
from ctxplugin.tokens import get_counter

SHAPES = (
    "json_logs_object", "json_logs_array", "json_lines", "text_log", "csv_orders", "kubectl_pods",
    "pytest_report", "api_page", "build_traceback", "diff", "html_page", "markdown_doc",
)
TUNE_SEEDS = range(0, 6)
"""Seeds the summaries were tuned on."""
HELD_OUT_SEEDS = range(100, 112)
"""Seeds never looked at while tuning: the checks must hold on them too."""
FRESH_SEEDS = range(9000, 9012)
"""Seeds first drawn once the summaries and the record search were settled, and checked
without any change made for them."""

_SERVICES = ("payments", "checkout", "ledger", "search", "notify", "auth")
_WORDS = ("cache", "queue", "worker", "batch", "session", "index", "shard", "replica", "token", "upload")


@dataclass(frozen=True)
class Case:
    shape: str
    seed: int
    text: str
    needle: str
    pattern: str
    keys: tuple[str, ...] = ()


def _hex(rng: random.Random, n: int) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(n))


def _log_records(rng: random.Random, n: int) -> tuple[list[dict[str, object]], str]:
    at = rng.randrange(n // 4, n - 5)
    needle = f"ord_{_hex(rng, 10)}"
    service = rng.choice(_SERVICES)
    out: list[dict[str, object]] = []
    for i in range(n):
        record: dict[str, object] = {
            "ts": f"2026-11-23T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}Z",
            "level": "INFO",
            "service": service,
            "request_id": f"req_{_hex(rng, 8)}",
            "msg": f"{rng.choice(_WORDS)} {rng.choice(('refreshed', 'flushed', 'served', 'opened'))} in {rng.randrange(2, 90)} ms",
            "duration_ms": rng.randrange(2, 400),
        }
        if i == at:
            record["level"] = "ERROR"
            record["msg"] = f"charge failed for {needle}: gateway returned 502"
        out.append(record)
    return out, needle


def case(shape: str, seed: int) -> Case:
    """One output of ``shape`` generated from ``seed``."""
    rng = random.Random(f"{shape}:{seed}")
    if shape in ("json_logs_object", "json_logs_array", "json_lines"):
        records, needle = _log_records(rng, 200)
        keys = ("level", "request_id", "msg")
        if shape == "json_logs_object":
            doc = {"service": records[0]["service"], "count": len(records), "records": records}
            return Case(shape, seed, json.dumps(doc, indent=rng.choice((None, 2))), needle, "ERROR", ("records", *keys))
        if shape == "json_logs_array":
            return Case(shape, seed, json.dumps(records), needle, "ERROR", keys)
        return Case(shape, seed, "\n".join(json.dumps(r) for r in records), needle, "ERROR", keys)
    if shape == "text_log":
        at = rng.randrange(100, 590)
        needle = f"job-{_hex(rng, 6)}"
        lines = []
        for i in range(600):
            stamp = f"2026-11-22 09:{(14 + i // 60) % 60:02d}:{i % 60:02d},{rng.randrange(1000):03d}"
            if i == at:
                lines.append(f"{stamp} ERROR [worker-{rng.randrange(8)}] {needle} aborted: disk quota exceeded on /var/data")
            else:
                lines.append(f"{stamp} INFO [worker-{rng.randrange(8)}] {rng.choice(_WORDS)} step {i} done, {rng.randrange(50)} items")
        return Case(shape, seed, "\n".join(lines), needle, "ERROR")
    if shape == "csv_orders":
        at = rng.randrange(20, 290)
        needle = f"ORD-{rng.randrange(10**6, 10**7)}"
        rows = ["order_id,customer,amount,currency,status,created_at"]
        for i in range(300):
            order = needle if i == at else f"ORD-{rng.randrange(10**6, 10**7)}"
            status = "CHARGEBACK" if i == at else rng.choice(("PAID", "PAID", "PAID", "SHIPPED"))
            rows.append(f"{order},cust_{_hex(rng, 6)},{rng.randrange(5, 900)}.{rng.randrange(100):02d},EUR,{status},2026-11-{rng.randrange(1, 28):02d}")
        return Case(shape, seed, "\n".join(rows), needle, "CHARGEBACK")
    if shape == "kubectl_pods":
        at = rng.randrange(10, 195)
        needle = f"api-{_hex(rng, 9)}-{_hex(rng, 5)}"
        rows = [f"{'NAME':<40}{'READY':<8}{'STATUS':<20}{'RESTARTS':<10}AGE"]
        for i in range(200):
            name = needle if i == at else f"{rng.choice(('web', 'api', 'worker', 'cron'))}-{_hex(rng, 9)}-{_hex(rng, 5)}"
            status, ready, restarts = ("CrashLoopBackOff", "0/1", str(rng.randrange(12, 40))) if i == at else ("Running", "1/1", "0")
            rows.append(f"{name:<40}{ready:<8}{status:<20}{restarts:<10}{rng.randrange(1, 30)}d")
        return Case(shape, seed, "\n".join(rows), needle, "CrashLoopBackOff")
    if shape == "pytest_report":
        at = rng.randrange(30, 290)
        needle = f"test_{rng.choice(_WORDS)}_{_hex(rng, 4)}"
        lines = ["============================= test session starts ==============================",
                 "platform linux -- Python 3.12.3, pytest-8.3.2, pluggy-1.5.0", "collected 300 items", ""]
        for i in range(300):
            module = f"tests/test_{_WORDS[i % len(_WORDS)]}.py"
            name = needle if i == at else f"test_case_{i}"
            outcome = "FAILED" if i == at else "PASSED"
            lines.append(f"{module}::{name} {outcome} [{(i + 1) * 100 // 300:3d}%]")
        lines += ["", "=================================== FAILURES ===================================",
                  f"____________________________ {needle} ____________________________", "",
                  "    def test():", ">       assert total == 3", "E       assert 4 == 3", "",
                  f"tests/test_x.py:{rng.randrange(10, 300)}: AssertionError",
                  "=========================== short test summary info ============================",
                  f"FAILED tests/test_x.py::{needle} - assert 4 == 3",
                  "======================== 1 failed, 299 passed in 12.31s ========================"]
        return Case(shape, seed, "\n".join(lines), needle, "FAILED")
    if shape == "api_page":
        needle = f"cur_{_hex(rng, 24)}"
        data = [{"id": f"cus_{_hex(rng, 14)}", "object": "customer", "email": f"user{rng.randrange(10**5)}@example.com",
                 "name": f"Customer {i}", "created": 1_760_000_000 + i * 977, "currency": "eur", "balance": rng.randrange(0, 5000),
                 "metadata": {"segment": rng.choice(("smb", "enterprise"))}} for i in range(rng.randrange(40, 80))]
        doc = {"object": "list", "url": "/v1/customers", "data": data, "has_more": True, "next_cursor": needle}
        return Case(shape, seed, json.dumps(doc, indent=rng.choice((None, 2))), needle, "next_cursor", ("has_more", "next_cursor", "data"))
    if shape == "build_traceback":
        needle = f"KeyError: '{rng.choice(_WORDS)}_{_hex(rng, 4)}'"
        lines = [f"[{i:04d}] compiling src/pkg/module_{i}.py ... ok" for i in range(rng.randrange(300, 500))]
        lines += ["Traceback (most recent call last):", '  File "/work/build/run.py", line 88, in <module>', "    main()",
                  '  File "/work/build/steps.py", line 41, in main', "    cfg = settings[name]", needle, "build failed"]
        return Case(shape, seed, "\n".join(lines), needle, "error")
    if shape == "diff":
        files = [f"src/{rng.choice(_WORDS)}/mod_{i}.py" for i in range(30)]
        at = rng.randrange(5, 28)
        needle = files[at]
        parts = []
        for i, name in enumerate(files):
            if i == at:
                parts.append(f"diff --git a/{name} b/{name}\ndeleted file mode 100644\nindex {_hex(rng, 7)}..0000000\n--- a/{name}\n+++ /dev/null\n@@ -1,3 +0,0 @@\n-import os\n-def run():\n-    return os.getcwd()")
                continue
            body = "\n".join(f"-    value_{k} = {k}\n+    value_{k} = {k + 1}" for k in range(rng.randrange(3, 12)))
            parts.append(f"diff --git a/{name} b/{name}\nindex {_hex(rng, 7)}..{_hex(rng, 7)} 100644\n--- a/{name}\n+++ b/{name}\n@@ -10,6 +10,6 @@ def f():\n{body}")
        return Case(shape, seed, "\n".join(parts), needle, "deleted file")
    if shape == "html_page":
        needle = f"Payment declined: card ending {rng.randrange(1000, 9999)} expired"
        table = "\n".join(f"<tr><td>item {i}</td><td class=\"price\">{rng.randrange(5, 99)}.00</td></tr>" for i in range(300))
        html = (f"<!DOCTYPE html>\n<html><head><title>Checkout {_hex(rng, 6)}</title><style>td {{ padding: 2px }}</style></head>\n<body>\n"
                f"<h1>Your basket</h1>\n<table>\n{table}\n</table>\n<div class=\"alert alert-danger\">Error: {needle}</div>\n<h2>Help</h2>\n</body></html>")
        return Case(shape, seed, html, needle, "declined")
    if shape == "markdown_doc":
        needle = f"--{rng.choice(_WORDS)}-{_hex(rng, 4)}"
        sections = []
        for i in range(40):
            sections.append(f"## Section {i}: {rng.choice(_WORDS)}\n\n" + " ".join(rng.choice(_WORDS) for _ in range(60)) + ".\n")
        at = rng.randrange(10, 38)
        sections[at] += f"\n**Warning:** the flag `{needle}` is deprecated and will be removed.\n"
        return Case(shape, seed, "# Operations guide\n\n" + "\n".join(sections), needle, "deprecated")
    raise ValueError(f"unknown shape {shape!r}")


# ---------------------------------------------------------------------------- the checks
COUNTER = get_counter()[0]
SCOPE = Scope(session_id="corpus")
CONFIG = CASConfig()  # default thresholds and summary size


def _captured(c: Case, store: MemoryCASStore) -> Captured:
    return capture(c.text, store=store, scope=SCOPE, config=CONFIG, counter=COUNTER, tool_name=c.shape)


@pytest.mark.parametrize("seed", [*TUNE_SEEDS, *HELD_OUT_SEEDS, *FRESH_SEEDS])
@pytest.mark.parametrize("shape", SHAPES)
def test_compact_form_shows_the_needle_and_expand_ref_pattern_returns_it(shape: str, seed: int) -> None:
    c = case(shape, seed)
    store = MemoryCASStore()
    got = _captured(c, store)
    assert got.ref_id is not None and not got.passthrough, "a large output is stored, not passed through"
    assert c.needle in got.text, f"{shape}/{seed}: needle {c.needle!r} missing from\n{got.text}"
    for key in c.keys:
        assert key in got.text, f"{shape}/{seed}: key {key!r} not named in\n{got.text}"
    body = got.text.split("\n", 1)[1]
    assert COUNTER.count(body) <= CONFIG.summary_tokens, f"{shape}/{seed}: summary over its bound"
    assert "expand_ref" in got.text
    found = expand_for_model(store, got.ref_id, SCOPE, max_tokens=CONFIG.expand_max_tokens, counter=COUNTER, pattern=c.pattern)
    assert c.needle in found, f"{shape}/{seed}: expand_ref(pattern={c.pattern!r}) missed the needle:\n{found[:600]}"


def test_the_generator_is_deterministic_and_hides_one_needle_per_output() -> None:
    for shape in SHAPES:
        first, again, other = case(shape, 1), case(shape, 1), case(shape, 2)
        assert first == again and first.text != other.text
        # a report names its failing test in the run, the failure and the summary; a diff names a file thrice
        assert first.text.count(first.needle) == (3 if shape == "pytest_report" else 3 if shape == "diff" else 1), shape
        assert COUNTER.count(first.text) > 1000, f"{shape}: not a large output"


def test_a_comma_in_a_log_timestamp_does_not_make_a_table() -> None:
    got = _captured(case("text_log", 7), MemoryCASStore())
    assert "· log ·" in got.text.split("\n", 1)[0] and "rows ×" not in got.text


def test_json_list_on_one_line_is_searched_per_item() -> None:
    store = MemoryCASStore()
    records = [{"id": f"evt_{i}", "level": "ERROR" if i == 42 else "INFO"} for i in range(300)]
    text = "fetched events\n" + json.dumps(records) + "\ndone"
    got = _captured(Case("mixed", 0, text, "evt_42", "ERROR"), store)
    assert got.ref_id is not None
    plain = expand(store, got.ref_id, SCOPE, pattern='"level": "ERROR"')
    assert plain == json.dumps({"id": "evt_42", "level": "ERROR"})
    model = expand_for_model(store, got.ref_id, SCOPE, max_tokens=500, counter=COUNTER, pattern="ERROR")
    assert '[line 1 [42]] {"id": "evt_42", "level": "ERROR"}' in model and "evt_41" not in model


def test_text_matches_come_with_their_neighbouring_lines() -> None:
    store = MemoryCASStore()
    got = _captured(case("build_traceback", 3), store)
    assert got.ref_id is not None
    out = expand_for_model(store, got.ref_id, SCOPE, max_tokens=800, counter=COUNTER, pattern="KeyError")
    assert "- " in out and "cfg = settings[name]" in out, out


def test_a_rare_record_deep_in_a_large_set_is_found() -> None:
    records = [{"id": f"r{i}", "status": "ok" if i != 25_000 else "failed", "note": "x" * 20} for i in range(30_000)]
    got = _captured(Case("deep", 0, json.dumps(records), "r25000", "failed"), MemoryCASStore())
    assert '"id":"r25000"' in got.text and "status: ok×29999, failed×1" in got.text
