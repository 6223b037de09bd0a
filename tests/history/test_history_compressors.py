from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pytest_mock import MockerFixture

from ctxplugin.history import GIST_PREFIX, alert_lines, gist_text, identifiers, trim_text
from ctxplugin.history.identifiers import missing, occurs
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]

LISTING = "\n".join(
    f"{n:4d}  value_{n} = compute(row[{n}])  # see https://example.org/docs/{n}" for n in range(100, 160)
)

TRACEBACK = """Running the reproduction script
Traceback (most recent call last):
  File "/testbed/astroid/raw_building.py", line 470, in object_build
    getattr(sys.modules[modname], name)
FutureWarning: In the future `np.long` will be defined as the corresponding NumPy scalar.
""" + "\n".join(f"noise line {i} with nothing special" for i in range(80)) + """
KeyError: 'HAT0042'
Done."""


def test_identifiers_finds_exact_values() -> None:
    text = (
        "Open /testbed/astroid/raw_building.py at line 470, see https://example.org/a?b=1. "
        "Booking HAT0042 costs 1,234.50 on 2024-05-01; sha 3f2a9c1e; ref:search:0123456789abcdef; "
        'call object_build_class() on InspectBuilder, os.path.join, a KeyError, "quoted value". '
        "Plain words like the and value are not ids, nor is 42."
    )
    found = identifiers(text)
    for value in (
        "/testbed/astroid/raw_building.py",
        "470",
        "https://example.org/a?b=1",
        "HAT0042",
        "1,234.50",
        "2024-05-01",
        "3f2a9c1e",
        "ref:search:0123456789abcdef",
        "object_build_class",
        "InspectBuilder",
        "os.path.join",
        "KeyError",
        "quoted value",
    ):
        assert value in found, value
    assert "the" not in found and "value" not in found and "42" not in found
    assert found == list(dict.fromkeys(found)), "deduplicated, first-seen order"


def test_occurs_matches_whole_tokens_only() -> None:
    assert occurs("470", "line 470,")
    assert not occurs("470", "line 4700")
    assert missing(["470", "471"], "see 470 and 4711") == ["471"]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(alphabet="ab1_.-/ é²", min_size=1, max_size=6), min_size=1, max_size=30),
    st.text(alphabet="ab1_.-/ é²\n", max_size=80),
)
def test_missing_through_the_runs_of_a_long_text_is_missing_one_by_one(values: list[str], text: str) -> None:
    long_text = text * 400  # past the size where values are found through the text's runs
    assert missing(values, long_text) == [v for v in values if not occurs(v, long_text)]


def test_missing_in_a_long_log_reads_the_text_once_not_once_per_value(mocker: MockerFixture) -> None:
    """Every line is an error line a gist keeps: one by one, each number found only inside
    longer numbers scanned the whole text, and a 1 MB log took half a minute. The values are
    looked up in the text's runs, read once (how long it takes is in the benchmarks)."""
    import sys

    module = sys.modules["ctxplugin.history.identifiers"]  # the package names its function so
    log = "".join(f"log line {i} value {i * 7} ERROR x\n" for i in range(30_000))
    scans = mocker.spy(module, "occurs")
    gist = gist_text(log, max_tokens=40, counter=COUNTER)
    whole = [call for call in scans.call_args_list if len(call.args[1]) >= len(log) // 2]
    assert len(whole) < 50, f"the whole log was scanned {len(whole)} times, once per value"
    assert "ERROR x" in gist
    many = [f"{i * 7}" for i in range(0, 30_000, 97)]
    assert missing([*many, "HAT0042", "4700000"], log) == ["HAT0042", "4700000"]


def test_alert_lines_keeps_errors_and_security_warnings() -> None:
    text = "ok\nERROR: disk full\nall good\nWARNING: insecure permissions on key.pem\nValueError: bad\nfine"
    assert alert_lines(text) == ["ERROR: disk full", "WARNING: insecure permissions on key.pem", "ValueError: bad"]


def test_trim_keeps_head_tail_and_every_value_of_the_middle() -> None:
    trimmed = trim_text(LISTING, max_tokens=120, counter=COUNTER)
    assert COUNTER.count(trimmed) < COUNTER.count(LISTING)
    assert trimmed.startswith(LISTING.splitlines()[0])
    assert trimmed.endswith(LISTING.splitlines()[-1])
    assert "tokens elided" in trimmed
    assert missing(identifiers(LISTING), trimmed) == []


def test_trim_keeps_error_lines_from_the_middle() -> None:
    trimmed = trim_text(TRACEBACK, max_tokens=40, counter=COUNTER)
    for line in alert_lines(TRACEBACK):
        assert line in trimmed
    assert "KeyError: 'HAT0042'" in trimmed
    assert COUNTER.count(trimmed) < COUNTER.count(TRACEBACK)


def test_trim_leaves_short_text_alone() -> None:
    assert trim_text("short text", max_tokens=50, counter=COUNTER) == "short text"


def test_trim_cuts_a_single_huge_line() -> None:
    line = " ".join("lorem ipsum dolor" if i % 50 else f"id_{i}" for i in range(400))
    trimmed = trim_text(line, max_tokens=60, counter=COUNTER)
    assert COUNTER.count(trimmed) < COUNTER.count(line)
    assert missing(identifiers(line), trimmed) == []


def test_gist_is_one_line_with_lead_errors_and_values() -> None:
    gist = gist_text(TRACEBACK, max_tokens=20, counter=COUNTER)
    assert gist.startswith(GIST_PREFIX + "Running the reproduction script")
    assert "\n" not in gist
    assert missing(identifiers(TRACEBACK), gist) == []
    for line in alert_lines(TRACEBACK):
        assert line in gist
    assert COUNTER.count(gist) < COUNTER.count(TRACEBACK)


def test_gist_uses_a_given_lead_and_keeps_what_it_lacks() -> None:
    gist = gist_text(TRACEBACK, max_tokens=30, counter=COUNTER, lead="Script failed on a missing booking.")
    assert gist.startswith(GIST_PREFIX + "Script failed on a missing booking.")
    assert missing(identifiers(TRACEBACK), gist) == []


def test_gist_keeps_a_ref() -> None:
    text = "Found 60 flights. " + "filler words here. " * 40
    gist = gist_text(text, max_tokens=10, counter=COUNTER, must_keep=["ref:search:00112233aabbccdd"])
    assert "ref:search:00112233aabbccdd" in gist


@pytest.mark.parametrize("compress", ["trim", "gist"])
def test_compression_never_returns_something_larger(compress: str) -> None:
    dense = " ".join(f"/p/{i}.py" for i in range(40))  # nothing but values: cannot shrink
    if compress == "trim":
        out = trim_text(dense, max_tokens=20, counter=COUNTER)
    else:
        out = gist_text(dense, max_tokens=8, counter=COUNTER)
    assert out == dense


def test_compression_is_deterministic() -> None:
    assert gist_text(TRACEBACK, max_tokens=20, counter=COUNTER) == gist_text(TRACEBACK, max_tokens=20, counter=COUNTER)
    assert trim_text(LISTING, max_tokens=90, counter=COUNTER) == trim_text(LISTING, max_tokens=90, counter=COUNTER)
