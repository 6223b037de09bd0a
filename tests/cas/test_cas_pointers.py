"""What a summary points at is what ``expand_ref`` returns for that pointer, used literally."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ctxplugin.cas import SQLiteCASStore, capture, expand
from ctxplugin.config import CASConfig
from ctxplugin.scope import Scope
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]
SCOPE = Scope(session_id="s1")


def _orders(blank_every: int = 0) -> str:
    lines = ["order_id,customer,amount,currency,status,created_at"]
    for i in range(300):
        status = "CHARGEBACK" if i == 155 else ("PAID", "PAID", "SHIPPED")[i % 3]
        lines.append(f"ORD-{i},cust_{i:04d},{i * 1.5:.2f},EUR,{status},2026-11-{i % 28 + 1:02d}")
        if blank_every and i % blank_every == 0:
            lines.append("")
    return "\n".join(lines)


def _pods() -> str:
    lines = ["NAME                 READY   STATUS             RESTARTS   AGE"]
    for i in range(60):
        status = "CrashLoopBackOff" if i == 40 else "Running"
        lines.append(
            f"web-{i:03d}-abcde        1/1     {status:<16}   {7 if i == 40 else 0}          3d"
        )
    return "\n".join(lines)


def _pipe_table() -> str:
    lines = ["| id | name | state | description |", "|----|------|-------|-------------|"]
    lines += [
        f"| {i} | item{i} | {'FAILED' if i == 25 else 'ok'} | some longer description text {i} |"
        for i in range(80)
    ]
    return "\n".join(lines)


def _json_lines() -> str:
    lines = []
    for i in range(60):
        lines.append(
            json.dumps({"i": i, "level": "ERROR" if i == 45 else "INFO", "msg": f"step {i} done"})
        )
        if i % 10 == 0:
            lines.append("")
    return "\n".join(lines)


def _cells(row: str) -> list[str]:
    return re.findall(r"[^\s|,]+", row)


def _wrapped(body: str) -> str:
    return f"<returncode>0</returncode>\n<output>\n{body}\n</output>"


CASES = {
    "csv": (_orders(), "ORD-155,"),
    "csv with blank lines": (_orders(blank_every=20), "ORD-155,"),
    "csv in command output": (_wrapped(_orders()), "ORD-155,"),
    "kubectl get": (_pods(), "web-040-"),
    "kubectl get in command output": (_wrapped(_pods()), "web-040-"),
    "pipe table": (_pipe_table(), "item25 |"),
    "JSON Lines": (_json_lines(), '"i": 45,'),
    "JSON Lines in command output": (_wrapped(_json_lines()), '"i": 45,'),
}


@pytest.mark.parametrize("name", list(CASES))
def test_a_rare_row_is_labelled_with_the_offset_that_reads_it(name: str, tmp_path: Path) -> None:
    text, needle = CASES[name]
    store = SQLiteCASStore(tmp_path / "cas.db")
    captured = capture(
        text, store=store, scope=SCOPE, config=CASConfig(), counter=COUNTER, tool_name="bash"
    )
    assert captured.ref_id is not None
    labelled = [line for line in captured.text.splitlines() if needle in line]
    assert len(labelled) == 1, captured.text
    offset = int(re.match(r"\[(\d+)\] ", labelled[0]).group(1))  # type: ignore[union-attr]
    row = expand(store, captured.ref_id, SCOPE, offset=offset, limit=1)
    assert needle in row
    # the first row shown is labelled the same way
    first = [
        line
        for line in captured.text.splitlines()
        if re.match(r"\[\d+\] ", line) and needle not in line
    ]
    for line in first:
        at = int(line[1 : line.index("]")])
        shown = line[line.index("] ") + 2 :]
        assert _cells(expand(store, captured.ref_id, SCOPE, offset=at, limit=1)) == _cells(shown)
    store.close()


def test_the_rows_left_of_a_table_start_at_the_offset_it_names(tmp_path: Path) -> None:
    body = "\n".join(["a,b,c"] + [f"{i},x{i},y{i}" for i in range(200)])
    store = SQLiteCASStore(tmp_path / "cas.db")
    for text in (body, _wrapped(body), body.replace("\n", "\n\n", 1)):
        captured = capture(
            text, store=store, scope=SCOPE, config=CASConfig(), counter=COUNTER, tool_name="bash"
        )
        assert captured.ref_id is not None
        shown = [
            line for line in captured.text.splitlines() if re.fullmatch(r"\d+,x\d+,y\d+", line)
        ]
        hint = re.search(r"… (\d+) more rows \(expand_ref offset=(\d+)\)", captured.text)
        assert hint is not None and int(hint.group(1)) == 200 - len(shown)
        nxt = expand(store, captured.ref_id, SCOPE, offset=int(hint.group(2)), limit=1)
        assert nxt == f"{len(shown)},x{len(shown)},y{len(shown)}", captured.text
    store.close()


def test_an_error_line_of_an_html_page_has_its_line_number_in_the_page(tmp_path: Path) -> None:
    script = "\n".join(f"  var a{i} = {i};" for i in range(30))
    paras = "\n".join(f"<p>Paragraph {i} about the order.</p>" for i in range(40))
    page = (
        f"<!doctype html>\n<html>\n<head>\n<title>Checkout</title>\n<script>\n{script}\n</script>\n"
        f'<style>\nbody {{\n  color: red;\n}}\n</style>\n</head>\n<body>\n<div\n  class="banner">\n{paras}\n'
        "<div class='err'>Error: payment declined for ORD-9</div>\n</body>\n</html>"
    )
    store = SQLiteCASStore(tmp_path / "cas.db")
    captured = capture(
        page, store=store, scope=SCOPE, config=CASConfig(), counter=COUNTER, tool_name="fetch"
    )
    assert captured.ref_id is not None
    found = re.search(r"^L(\d+): Error: payment declined", captured.text, re.M)
    assert found is not None, captured.text
    line = expand(store, captured.ref_id, SCOPE, offset=int(found.group(1)) - 1, limit=1)
    assert "payment declined for ORD-9" in line
    store.close()


def test_a_unittest_report_names_its_totals_failing_tests_and_a_pattern_that_finds_them(
    tmp_path: Path,
) -> None:
    lines = [f"test_ok_{i} (tests.test_orders.OrderTests) ... ok" for i in range(40)]
    lines += [
        "test_refund (tests.test_orders.OrderTests) ... FAIL",
        "test_totals (tests.test_orders.OrderTests) ... ERROR",
    ]
    lines += [f"test_more_{i} (tests.test_users.UserTests) ... ok" for i in range(30)]
    for kind, name, line, exc in (
        ("FAIL", "test_refund", 10, "AssertionError: 1 != 2"),
        ("ERROR", "test_totals", 20, "NameError: name 'total' is not defined"),
    ):
        lines += ["", "=" * 70, f"{kind}: {name} (tests.test_orders.OrderTests)", "-" * 70]
        lines += ["Traceback (most recent call last):"]
        lines += [f'  File "/repo/tests/test_orders.py", line {line}, in {name}', "    ...", exc]
    lines += ["", "-" * 70, "Ran 72 tests in 0.123s", "", "FAILED (failures=1, errors=1)"]
    store = SQLiteCASStore(tmp_path / "cas.db")
    captured = capture(
        _wrapped("\n".join(lines)).replace("<returncode>0", "<returncode>1"),
        store=store,
        scope=SCOPE,
        config=CASConfig(),
        counter=COUNTER,
        tool_name="bash",
    )
    assert captured.ref_id is not None
    assert "(test report)" in captured.text.split("\n", 1)[0]
    assert "Ran 72 tests in 0.123s; FAILED (failures=1, errors=1)" in captured.text
    assert "test_refund (tests.test_orders.OrderTests)" in captured.text
    assert "test_totals (tests.test_orders.OrderTests)" in captured.text
    pattern = re.search(r"expand_ref pattern='([^']+)'", captured.text)
    assert pattern is not None
    found = expand(store, captured.ref_id, SCOPE, pattern=pattern.group(1))
    assert "test_refund (tests.test_orders.OrderTests) ... FAIL" in found
    assert "FAIL: test_refund (tests.test_orders.OrderTests)" in found
    store.close()


def test_a_pytest_report_names_each_failing_parameter_case(tmp_path: Path) -> None:
    failing = {17: "EUR", 118: "JPY", 203: "CHF"}
    lines = ["============================= test session starts ==============================", "collected 300 items", ""]
    for i in range(300):
        case = f"tests/test_rates.py::test_convert[{i}-{failing.get(i, 'USD')}]"
        lines.append(f"{case} {'FAILED' if i in failing else 'PASSED'} [{(i + 1) * 100 // 300:3d}%]")
    lines += ["", "=========================== short test summary info ============================"]
    lines += [f"FAILED tests/test_rates.py::test_convert[{i}-{cur}] - AssertionError: rate for {cur}" for i, cur in failing.items()]
    lines += ["======================== 3 failed, 297 passed in 4.20s ========================="]
    store = SQLiteCASStore(tmp_path / "cas.db")
    captured = capture("\n".join(lines), store=store, scope=SCOPE, config=CASConfig(), counter=COUNTER, tool_name="bash")
    assert captured.ref_id is not None and "test report" in captured.text.split("\n", 1)[0]
    for i, cur in failing.items():
        assert f"test_convert[{i}-{cur}]" in captured.text  # each failing case, not only the first
    assert captured.text.count("test_convert[17-EUR]") == 1  # named once, though reported twice
    store.close()
