"""Hostile tool outputs through the engine: nothing raises out of capture or prepare, every
stored output expands back exactly, and every compact form holds its bound."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._untrusted import (
    MAX_INT_DIGITS,
    MAX_JSON_DEPTH,
    InexactJSON,
    inexact_json,
    load_json,
    parse_once,
    storable_text,
)
from ctxplugin.cas import MemoryCASStore
from ctxplugin.cas.capture import SUMMARY_BOUND
from ctxplugin.errors import InvalidInputError
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.langchain import make_expand_ref_tool
from ctxplugin.tokens import content_text

SCOPE = Scope(session_id="hostile", user_id="u1")
_rng = random.Random(24)
_BINARY = bytes(_rng.randrange(256) for _ in range(6000)).decode("utf-8", "surrogateescape")
_DENSE = "".join(_rng.choice("abcdefghijklmnopqrstuvwxyz0123456789/+=_-") for _ in range(7600))

HOSTILE: dict[str, tuple[Any, str]] = {
    "lone surrogates": ("user_id: u\udcff1\nname: B\udcfeob\n" + "row \udcff undecodable\n" * 400, "success"),
    "surrogates in JSON": (json.dumps({"user_id": "u1", "items": [{"id": f"x{i}", "v": "\udcff"} for i in range(300)]}, ensure_ascii=False), "success"),
    "binary-ish bytes": (_BINARY, "success"),
    "nested lists 1200 deep": ("[" * 1200 + "]" * 1200, "success"),
    "nested objects 1200 deep": ('{"a":' * 1200 + "1" + "}" * 1200, "success"),
    "integer of 5,000 digits": ('{"n": ' + "7" * 5000 + ', "rows": [' + ",".join(map(str, range(800))) + "]}", "success"),
    "failed call, 7,600 dense characters": ("Error: " + _DENSE[:7593], "error"),
    "failed call, error lines": ("\n".join(f"ERROR {_DENSE[i:i + 60]}" for i in range(0, 7600, 60)), "error"),
    "CJK text": ("".join(chr(_rng.randint(0x4E00, 0x9FFF)) for _ in range(7600)), "success"),
    "content blocks": ([{"type": "text", "text": "block one\n" * 300}, {"type": "text", "text": "block \udcff two\n" * 300}], "success"),
    "empty": ("", "success"),
    "empty block list": ([], "success"),
    "NUL bytes": ("a\x00b\x00" * 3000, "success"),
    "TSV with a 200 KB cell": ("id\tname\tblob\n" + "".join(f"{i}\tn{i}\tshort\n" for i in range(100)) + "101\tbig\t" + "y" * 200_000, "success"),
    "CSV with a quote left open": ("id,name,blob\n" + "".join(f"{i},n{i},short\n" for i in range(60)) + '61,big,"' + "z" * 140_000, "success"),
}


def _plain_bound(engine: ContextEngine) -> int:
    return SUMMARY_BOUND * engine.config.cas.summary_tokens + 40  # the ref line is about 25


def _bound(engine: ContextEngine) -> int:
    return _plain_bound(engine) + engine.config.cas.error_passthrough_tokens


@pytest.fixture(params=["memory", "sqlite"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ContextEngine]:
    if request.param == "memory":
        config = ContextConfig()
        yield ContextEngine(config, cas=MemoryCASStore(), facts=FactsLedger(MemoryFactStore(), config.facts))
    else:
        engine = ContextEngine.embedded(tmp_path / "store")  # SQLite CAS and embedded Chroma facts
        yield engine
        engine.cas.close()


@pytest.mark.parametrize("name", list(HOSTILE))
def test_hostile_output_is_captured_stored_exactly_and_bounded(engine: ContextEngine, name: str) -> None:
    content, status = HOSTILE[name]
    message = ToolMessage(content=content, tool_call_id="call-1", name="get_user_details", status=status)
    compact, report = engine.capture_with_report(message, SCOPE)
    original = content_text(content) if isinstance(content, list) else content
    if report.ref_id is None:
        assert compact.content == content  # passed through untouched
    else:
        assert engine.expand_ref(report.ref_id, SCOPE) == original
        text = compact.content
        assert isinstance(text, str) and storable_text(text) == text
        assert engine.counter.count(text) <= _bound(engine)
        if status != "error":
            assert engine.counter.count(text) <= _plain_bound(engine)
    assert not [w for w in report.warnings if "unavailable" in w]
    call = AIMessage(content="", tool_calls=[{"name": "get_user_details", "args": {}, "id": "call-1"}])
    prepared = engine.prepare([HumanMessage(content="look me up"), call, compact, HumanMessage(content="and now?")], scope=SCOPE)
    assert prepared.messages


def test_a_ten_megabyte_output_round_trips(engine: ContextEngine) -> None:
    text = "".join(f"{i:08d} {_DENSE[i % 7000:i % 7000 + 50]} \udcff\n" for i in range(170_000))
    assert len(text) > 10_000_000
    compact, report = engine.capture_with_report(ToolMessage(content=text, tool_call_id="big", name="dump"), SCOPE)
    assert report.ref_id is not None and engine.expand_ref(report.ref_id, SCOPE) == text
    assert engine.counter.count(str(compact.content)) <= _plain_bound(engine)


def test_the_safe_loader_turns_every_hostile_json_into_a_value_error() -> None:
    for text in ("[" * 5000 + "]" * 5000, '{"a":' * (MAX_JSON_DEPTH + 1) + "1" + "}" * (MAX_JSON_DEPTH + 1), "[" + "9" * 5000 + "]", "[1, 2"):
        with pytest.raises(ValueError):
            load_json(text)
    assert load_json('["[[[[", {"a": "}}}"}]') == ["[[[[", {"a": "}}}"}]
    nested = "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH
    assert isinstance(load_json(nested), list)


def test_the_safe_loader_reads_only_json_whose_value_says_what_it_says() -> None:
    assert load_json('{"a": 1.5, "b": 1e2, "c": 0.1, "d": 1.0000000000000002, "e": -0.0, "f": 2.5e-300}') == {
        "a": 1.5, "b": 100.0, "c": 0.1, "d": 1.0000000000000002, "e": -0.0, "f": 2.5e-300,
    }
    assert load_json('["0.1000000000000000055511151231257827", "1E400", {"a": {"a": 1}}]')[2] == {"a": {"a": 1}}
    for text, why in (
        ("[0.1000000000000000055511151231257827]", "does not fit a float"),
        ('{"x": [1E400]}', "does not fit a float"),
        ('[{"id": 1, "name": "a", "id": 2}]', "'id' twice"),
    ):
        with pytest.raises(ValueError, match=why):
            load_json(text)


def test_the_safe_loader_refuses_a_huge_integer_even_where_python_would_convert_it() -> None:
    limit = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # no limit of Python's own: the conversion would be quadratic
    try:
        with pytest.raises(ValueError, match="digits"):
            load_json("[" + "9" * (MAX_INT_DIGITS + 1) + "]")
        # as long in a string, the same run of digits is no integer
        assert load_json('["' + "9" * (MAX_INT_DIGITS + 1) + '", 7]')[1] == 7
        assert load_json("[" + "9" * MAX_INT_DIGITS + "]") == [int("9" * MAX_INT_DIGITS)]
    finally:
        sys.set_int_max_str_digits(limit)


def test_one_output_is_parsed_once_per_capture(engine: ContextEngine, mocker: Any) -> None:
    records = [{"reservation_id": f"R{i:05d}", "user_id": f"u{i % 9}", "status": "ok"} for i in range(400)]
    text = json.dumps(records)
    loads = mocker.spy(json, "loads")
    compact, report = engine.capture_with_report(ToolMessage(content=text, tool_call_id="records", name="reservations"), SCOPE)
    assert report.ref_id is not None and report.facts_extracted > 0  # the summary and the facts reader both read it
    assert "R00000" in str(compact.content)
    assert [call.args[0] for call in loads.call_args_list].count(text) == 1  # the stores read their own rows too


def test_a_refused_text_is_refused_again_within_one_capture() -> None:
    deep = "[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1)
    with parse_once():
        for _ in range(2):
            with pytest.raises(ValueError, match="nested"):
                load_json(deep)
        assert load_json("[1]") == [1]
        assert load_json("".join(["[", "2", "]"])) == [2]  # an equal text of another length is read


# JSON that parses to the value of another output: a number with more digits than a float keeps
# (a balance in wei-precise ETH, a figure past the float range), or one key twice in an object.
_ROWS = json.dumps([{"tx": f"0x{i:064x}", "memo": "transfer to the savings account"} for i in range(40)])
ALIKE = {
    "digits past a float": (
        '{"balance": 1.000000000000000001, "txs": ' + _ROWS + "}",
        '{"balance": 1.000000000000000002, "txs": ' + _ROWS + "}",
    ),
    "a key twice": (
        '{"status": "refunded", "txs": ' + _ROWS + "}",
        '{"status": "pending", "status": "refunded", "txs": ' + _ROWS + "}",
    ),
}


@pytest.mark.parametrize("name", list(ALIKE))
def test_json_outputs_that_parse_alike_keep_their_own_originals(engine: ContextEngine, name: str) -> None:
    first, second = ALIKE[name]
    refs = []
    for index, text in enumerate((first, second)):
        _, report = engine.capture_with_report(ToolMessage(content=text, tool_call_id=f"c{index}", name="wallet"), SCOPE)
        assert report.ref_id is not None
        assert engine.expand_ref(report.ref_id, SCOPE) == text  # its own original, not the other's
        refs.append(report.ref_id)
    assert refs[0] != refs[1]
    with pytest.raises(InvalidInputError, match="not JSON that reads back as written"):
        engine.expand_ref(refs[1], SCOPE, fields=["txs"])


def test_numbers_are_shown_as_the_output_wrote_them(engine: ContextEngine) -> None:
    text = json.dumps([{"account": f"acct-{i}", "balance": "BALANCE"} for i in range(60)])
    text = text.replace('"BALANCE"', "0.123456789012345678", 1).replace('"BALANCE"', "2.5")
    text = '{"limit": 1E400, "accounts": ' + text + "}"
    compact, report = engine.capture_with_report(ToolMessage(content=text, tool_call_id="n", name="wallet"), SCOPE)
    assert report.ref_id is not None
    assert "Infinity" not in str(compact.content) and "0.12345678901234568" not in str(compact.content)
    page = engine.expand_ref(report.ref_id, SCOPE, offset=0, limit=1)
    assert "0.123456789012345678" in page and "1E400" in page


def _pytest_report(color: bool) -> str:
    """A ``pytest -v`` report of 300 tests, two failing; with ``--color=yes`` escapes when ``color``."""
    def paint(text: str, *codes: int) -> str:
        return "".join(f"\x1b[{c}m" for c in codes) + text + "\x1b[0m" if color else text

    lines = [paint("=" * 29 + " test session starts " + "=" * 30, 1), "platform linux -- Python 3.12.3, pytest-8.3.2",
             "rootdir: /srv/shop", paint("collecting ... ", 1) + "collected 300 items", ""]
    for i in range(300):
        outcome = paint("FAILED", 31) if i in (41, 207) else paint("PASSED", 32)
        lines.append(f"tests/test_orders.py::test_total[{i}] {outcome}{paint(f'{(i + 1) * 100 // 300:>40}%]', 32 if i < 41 else 31)}")
    lines += ["", paint("=" * 35 + " FAILURES " + "=" * 35, 31), paint("_" * 28 + " test_total[41] " + "_" * 28, 31, 1), "",
              ">       assert order.total == 42", paint("E       AssertionError: ORD-41 total 41 != 42", 1, 31), "",
              paint("tests/test_orders.py", 1, 31) + ":12: AssertionError",
              paint("=" * 27 + " short test summary info " + "=" * 28, 36),
              paint("FAILED", 31) + " tests/test_orders.py::test_total[41] - AssertionError: ORD-41 total 41 != 42",
              paint("FAILED", 31) + " tests/test_orders.py::test_total[207] - AssertionError: ORD-207 total 207 != 208",
              paint("=" * 24 + " ", 31) + paint("2 failed", 31, 1) + ", " + paint("298 passed", 32) + paint(" in 2.31s " + "=" * 24, 31)]
    return "\n".join(lines)


def _build_log(color: bool) -> str:
    """A build's log, an error line among 400 with its path as a terminal link when ``color``."""
    ok, error = ("\x1b[32mok\x1b[0m", "\x1b[1;31merror\x1b[0m") if color else ("ok", "error")
    path = "src/pkg/module_233.py"
    link = f"\x1b]8;;file:///srv/{path}\x1b\\{path}\x1b]8;;\x1b\\" if color else path
    lines = [f"[{i:04d}] {ok} compiling src/pkg/module_{i}.py" for i in range(400)]
    lines[233] = f"[0233] {error}: {link}:17: undefined name 'ledger_id'"
    return "\n".join(lines)


@pytest.mark.parametrize("make", [_pytest_report, _build_log], ids=["pytest --color=yes", "build log with links"])
def test_terminal_colours_do_not_change_the_summary(engine: ContextEngine, make: Any) -> None:
    plain, coloured = make(False), make(True)
    assert "\x1b" in coloured and "\x1b" not in plain
    summaries = []
    for index, text in enumerate((plain, coloured)):
        compact, report = engine.capture_with_report(ToolMessage(content=text, tool_call_id=f"t{index}", name="bash"), SCOPE)
        assert report.ref_id is not None and engine.expand_ref(report.ref_id, SCOPE) == text  # stored as it came
        head, body = str(compact.content).split("\n", 1)
        summaries.append((head.split(" · ")[1], body))  # the shape's label and the summary
    assert summaries[1] == summaries[0]
    assert "\x1b" not in summaries[1][1]


@pytest.mark.parametrize("make", [_pytest_report, _build_log], ids=["pytest --color=yes", "build log with links"])
def test_expand_ref_shows_the_model_the_text_without_terminal_escapes(engine: ContextEngine, make: Any) -> None:
    """The model reads pages as the summary quoted them: no escape codes, the same line
    numbers (``L<n>`` is ``offset=n-1``), and a pattern copied from the summary finds its line.
    The original comes back from ``engine.expand_ref`` exactly."""
    coloured, plain = make(True), make(False)
    compact, report = engine.capture_with_report(ToolMessage(content=coloured, tool_call_id="t1", name="bash"), SCOPE)
    assert report.ref_id is not None
    ref = report.ref_id
    tool = make_expand_ref_tool(engine, lambda _config: SCOPE)
    quoted = [line for line in str(compact.content).split("\n") if line.startswith("L") and ": " in line]
    assert quoted
    for label in quoted:
        number, text = label.split(": ", 1)
        page = tool.invoke({"ref_id": ref, "offset": int(number[1:]) - 1, "limit": 1})
        assert "\x1b" not in page and page.split("\n")[1] == plain.split("\n")[int(number[1:]) - 1], label
        found = tool.invoke({"ref_id": ref, "pattern": text[:60]})
        assert f"[{int(number[1:]) - 1}] " in found, (label, found)
    whole = tool.invoke({"ref_id": ref})
    assert "\x1b" not in whole and "lines 0–" in whole.split("\n")[0]
    assert engine.expand_ref(ref, SCOPE) == coloured


_DATA_ROWS = [f"row {i}: value {i * 7} for account ACC-{i:05d}" for i in range(20_000)]


@pytest.mark.parametrize(
    "blocks",
    [
        [{"type": "json", "json": {"rows": _DATA_ROWS}}],
        [{"type": "text", "text": "found:"}, {"type": "search_result", "source": "s", "title": "t", "content": [{"type": "text", "text": "\n".join(_DATA_ROWS)}]}],
        [{"type": "mystery", "payload": _DATA_ROWS}, {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}],
    ],
    ids=["json block", "search_result block", "unknown block beside an image"],
)
def test_a_large_data_block_is_summarised_and_paged_like_text(engine: ContextEngine, blocks: list[Any]) -> None:
    """A block that is not text and not media (a ``json`` block, a search result, a block of a
    type LangChain does not know) holds data: a megabyte of it is not carried whole by the compact
    form, nor returned whole by the ``expand_ref`` tool. Media blocks stay in view."""
    compact, report = engine.capture_with_report(ToolMessage(content=blocks, tool_call_id="d1", name="query"), SCOPE)
    assert report.ref_id is not None
    assert json.loads(engine.expand_ref(report.ref_id, SCOPE)) == blocks  # the original, exactly
    shown: list[str | dict[str, Any]] = compact.content if isinstance(compact.content, list) else [compact.content]
    media = [b for b in blocks if b.get("type") == "image"]
    assert shown[1:] == media
    assert engine.counter.count(content_text(shown)) <= _plain_bound(engine)
    page = make_expand_ref_tool(engine, lambda _config: SCOPE).invoke({"ref_id": report.ref_id})
    cap = engine.config.cas.expand_max_tokens
    assert engine.counter.count(page if isinstance(page, str) else json.dumps(page)) <= cap + 200


def test_json_lines_are_not_one_json_value_however_long() -> None:
    lines = [json.dumps({"id": i, "note": "x" * 40}) for i in range(4000)]
    with pytest.raises(ValueError) as caught:
        load_json("\n".join(lines))
    assert not isinstance(caught.value, InexactJSON)
    # a first line the loader refuses is refused as before, whatever follows it
    with pytest.raises(InexactJSON):
        load_json('{"id": 1, "id": 2}\n' + "\n".join(lines))
    with pytest.raises(InexactJSON):
        load_json('{"v": 1.000000000000000001}\n' + "\n".join(lines))


def test_one_json_value_over_many_lines_still_loads() -> None:
    value = [{"id": i, "note": "x" * 40} for i in range(4000)]
    assert load_json(json.dumps(value, indent=2)) == value
    assert load_json(json.dumps(value[0]) + "\n" + " \n" * 40_000) == value[0]


def test_fields_on_json_read_as_text_for_its_depth_say_so(engine: ContextEngine) -> None:
    rows = json.dumps([{"id": i, "note": "x" * 40} for i in range(300)])
    deep = '{"k": ' * (MAX_JSON_DEPTH + 1) + rows + "}" * (MAX_JSON_DEPTH + 1)
    _, report = engine.capture_with_report(ToolMessage(content=deep, tool_call_id="d", name="tree"), SCOPE)
    assert report.ref_id is not None
    with pytest.raises(InvalidInputError, match=f"nested deeper than {MAX_JSON_DEPTH} levels"):
        engine.expand_ref(report.ref_id, SCOPE, fields=["k"])
    assert engine.expand_ref(report.ref_id, SCOPE) == deep


@pytest.mark.parametrize(
    "text",
    [
        "build log\n" + "[" * (MAX_JSON_DEPTH + 20) + " step 1 ok\n" * 3,  # brackets of a text, not JSON
        "[" + "9" * 5000 + ", then the text goes on",  # a long number, then no JSON
    ],
)
def test_a_text_that_is_no_json_is_not_said_to_be_json_read_as_text(text: str) -> None:
    assert inexact_json(text) is None  # expand_ref then says it is not JSON, with no reason
