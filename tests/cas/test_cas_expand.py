"""expand / expand_for_model: whole, fields, offset/limit, pattern, regex, paging, errors."""

from __future__ import annotations

import json

import pytest

from ctxplugin.cas import MemoryCASStore, expand, expand_for_model, parse_path, select
from ctxplugin.errors import InvalidInputError, RefNotFoundError
from ctxplugin.scope import Scope
from ctxplugin.testing.cas_contract import make_item
from ctxplugin.tokens import count_tool_schemas, get_counter

COUNTER = get_counter()[0]
SCOPE = Scope(session_id="s1")
USER = {
    "user_id": "mia_li_3668",
    "reservations": [
        {"reservation_id": "NO6JO3", "flights": [{"flight_number": "HAT136", "date": "2024-05-20"}, {"flight_number": "HAT039", "date": "2024-05-20"}]},
        {"reservation_id": "AIXC49", "flights": [{"flight_number": "HAT001", "date": "2024-05-22"}]},
    ],
    "payment methods": {"credit_card_4421486": {"brand": "visa"}},
}
FLIGHTS = [{"flight_number": f"HAT{i:03d}", "price": 100 + i} for i in range(80)]
LOG = "\n".join(f"line {i}: {'ERROR disk' if i % 25 == 0 else 'ok'}" for i in range(300)) + "\n"


@pytest.fixture
def store() -> MemoryCASStore:
    return MemoryCASStore()


def put(store: MemoryCASStore, content: str) -> str:
    item = make_item(content)
    store.put(item, SCOPE)
    return item.ref_id


def test_no_options_returns_the_original_exactly(store: MemoryCASStore) -> None:
    for content in (LOG, json.dumps(FLIGHTS, indent=2), "a\r\nb\r\n"):
        assert expand(store, put(store, content), SCOPE) == content


def test_fields_paths(store: MemoryCASStore) -> None:
    ref = put(store, json.dumps(USER))
    assert json.loads(expand(store, ref, SCOPE, fields=["reservations[0].flights[1].flight_number"])) == "HAT039"
    assert json.loads(expand(store, ref, SCOPE, fields=["reservations[*].reservation_id"])) == ["NO6JO3", "AIXC49"]
    assert json.loads(expand(store, ref, SCOPE, fields=["reservations[*].flights[*].flight_number"])) == [["HAT136", "HAT039"], ["HAT001"]]
    both = json.loads(expand(store, ref, SCOPE, fields=["user_id", "reservations[-1].reservation_id"]))
    assert both == {"user_id": "mia_li_3668", "reservations[-1].reservation_id": "AIXC49"}
    assert json.loads(expand(store, ref, SCOPE, fields=['["payment methods"].credit_card_4421486.brand'])) == "visa"
    assert json.loads(expand(store, ref, SCOPE, fields=["$.reservations.1.reservation_id"])) == "AIXC49"


def test_field_errors_say_what_is_there(store: MemoryCASStore) -> None:
    ref = put(store, json.dumps(USER))
    with pytest.raises(InvalidInputError, match=r"no key 'flight_no' at reservations\[0\]\.flights\[0\] \(keys there: flight_number, date\)"):
        expand(store, ref, SCOPE, fields=["reservations[0].flights[0].flight_no"])
    with pytest.raises(InvalidInputError, match="out of range"):
        expand(store, ref, SCOPE, fields=["reservations[5]"])
    with pytest.raises(InvalidInputError, match="not an array"):
        expand(store, ref, SCOPE, fields=["user_id[0]"])
    with pytest.raises(InvalidInputError, match="is not JSON"):
        expand(store, put(store, LOG), SCOPE, fields=["a"])
    with pytest.raises(InvalidInputError, match="cannot read field path"):
        parse_path("a..b[")


def test_wildcard_skips_items_without_the_key() -> None:
    assert select([{"id": 1}, {"x": 2}, {"id": 3}], "[*].id") == [1, 3]
    assert select({"a": {"id": 1}, "b": {"id": 2}}, "*.id") == [1, 2]


def test_offset_limit_count_items_of_json_arrays(store: MemoryCASStore) -> None:
    ref = put(store, json.dumps(FLIGHTS))
    assert json.loads(expand(store, ref, SCOPE, offset=5, limit=2)) == FLIGHTS[5:7]
    assert json.loads(expand(store, ref, SCOPE, offset=78)) == FLIGHTS[78:]
    assert json.loads(expand(store, ref, SCOPE, offset=500)) == []
    assert json.loads(expand(store, ref, SCOPE, fields=["[*].flight_number"], offset=10, limit=3)) == ["HAT010", "HAT011", "HAT012"]


def test_offset_limit_count_lines_of_text(store: MemoryCASStore) -> None:
    ref = put(store, LOG)
    assert expand(store, ref, SCOPE, offset=10, limit=3) == "line 10: ok\nline 11: ok\nline 12: ok"
    assert expand(store, ref, SCOPE, offset=299) == "line 299: ok"


def test_pattern_and_regex_filters(store: MemoryCASStore) -> None:
    ref = put(store, LOG)
    errors = expand(store, ref, SCOPE, pattern="error")  # substring, case-insensitive
    assert errors.split("\n") == [f"line {i}: ERROR disk" for i in range(0, 300, 25)]
    assert expand(store, ref, SCOPE, pattern="error", offset=1, limit=1) == "line 25: ERROR disk"
    assert expand(store, ref, SCOPE, pattern=r"^line 1\d\d: ERROR", regex=True).split("\n") == ["line 100: ERROR disk", "line 125: ERROR disk", "line 150: ERROR disk", "line 175: ERROR disk"]
    assert expand(store, ref, SCOPE, pattern="(", regex=False) == ""  # literal, no match
    flights = put(store, json.dumps(FLIGHTS))
    assert [f["flight_number"] for f in json.loads(expand(store, flights, SCOPE, pattern='"price": 17'))] == ["HAT070", "HAT071", "HAT072", "HAT073", "HAT074", "HAT075", "HAT076", "HAT077", "HAT078", "HAT079"]


def test_a_pattern_that_backtracks_without_end_is_refused_in_bounded_time(store: MemoryCASStore) -> None:
    ref = put(store, "\n".join("a" * 40 + "!" for _ in range(300)))
    # 2**40 ways to fail on each line: before, the read never returned
    with pytest.raises(InvalidInputError, match=r"pattern '\(a\|aa\)\+b' took over 1 s"):
        expand(store, ref, SCOPE, pattern="(a|aa)+b", regex=True)
    told = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=COUNTER, pattern="(a|aa)+b", regex=True)
    assert told.startswith("expand_ref: ") and "simpler expression" in told
    assert expand(store, ref, SCOPE, pattern=r"a{40}!$", regex=True).count("\n") == 299  # an ordinary one still matches


@pytest.mark.parametrize("pattern", ["a{5000000}", "(ab{1000}){5000}", "(?:x|y{3000}){3000}z", "[ab]{200000,}?", "(?=a{300000})"])
def test_a_pattern_that_would_build_a_huge_program_is_refused_before_it_is_built(store: MemoryCASStore, pattern: str) -> None:
    # the regex module writes out each counted repeat: a{1000000000} took gigabytes, until the
    # process was killed, before the first search (and its deadline) began
    ref = put(store, LOG)
    with pytest.raises(InvalidInputError, match="repeats too many times"):
        expand(store, ref, SCOPE, pattern=pattern, regex=True)
    assert expand(store, ref, SCOPE, pattern=r"(?:ERROR ){1}d\w{3}", regex=True).count("\n") == 11  # counts a model writes are fine


def test_a_regular_expression_longer_than_a_model_writes_is_refused(store: MemoryCASStore) -> None:
    # compiling a 1,000,000-character expression took seconds no deadline bounded
    ref = put(store, LOG)
    with pytest.raises(InvalidInputError, match="longer than"):
        expand(store, ref, SCOPE, pattern="|".join(f"line {i}:" for i in range(20_000)), regex=True)
    assert expand(store, ref, SCOPE, pattern="|".join(f"line {i}:" for i in range(0, 300, 25)), regex=True).count("\n") == 11
    # a substring that long is a plain search: read, not refused
    assert expand(store, ref, SCOPE, pattern="x" * 200_000) == ""


@pytest.mark.parametrize("run", ["a" * 2000, "(?i)" + "a" * 2000, "(?:a)" * 2000, "[a]" * 2000, "(a)" * 1000 + "a" * 1000])
def test_a_long_run_of_plain_characters_is_refused_before_a_search_that_no_deadline_bounds(store: MemoryCASStore, run: str) -> None:
    # the regex module readied 3,000 "a"s in a row for its search for 6 s, 9,000 for five
    # minutes, past the searches' deadline, whether the output held them or not
    ref = put(store, "a" * 5000)
    with pytest.raises(InvalidInputError, match="plain characters in a row"):
        expand(store, ref, SCOPE, pattern=run, regex=True)
    told = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=COUNTER, pattern=run, regex=True)
    assert told.startswith("expand_ref: ") and "plain substring" in told
    assert expand(store, ref, SCOPE, pattern="a" * 500, regex=True) == "a" * 5000  # a run a model writes still matches
    assert expand(store, ref, SCOPE, pattern="a" * 2000) == "a" * 5000  # and a substring of any length


def test_fields_past_what_one_read_walks_are_refused_with_a_sentence(store: MemoryCASStore) -> None:
    # 5,000 "*" paths walked a 100,000-item array 5,000 times: over a minute; a 5,000-digit
    # index, or "²" on an array, raised ValueError out of the tool
    ref = put(store, json.dumps({"items": [{"id": i} for i in range(50)]}))
    with pytest.raises(InvalidInputError, match="field paths in one read"):
        expand(store, ref, SCOPE, fields=[f"items[{i}].id" for i in range(101)])
    assert json.loads(expand(store, ref, SCOPE, fields=["items[*].id"] * 5000)) == list(range(50))  # one path, read once
    with pytest.raises(InvalidInputError, match="past the end of any array"):
        expand(store, ref, SCOPE, fields=["items[" + "9" * 5000 + "]"])
    for key in ("9" * 5000, "\u00b2"):
        with pytest.raises(InvalidInputError, match=r"out of range|not an object"):
            expand(store, ref, SCOPE, fields=[f"items.{key}"])
    told = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=COUNTER, fields=["items[" + "9" * 5000 + "]"])
    assert told.startswith("expand_ref: ")


def test_bad_options_and_refs(store: MemoryCASStore) -> None:
    ref = put(store, LOG)
    with pytest.raises(InvalidInputError):
        expand(store, ref, SCOPE, offset=-1)
    with pytest.raises(InvalidInputError):
        expand(store, ref, SCOPE, limit=-2)
    with pytest.raises(InvalidInputError):
        expand(store, ref, SCOPE, pattern="(", regex=True)
    for pattern in ("(" * 1000, "a{99999999999}"):  # the parser recurses too deep, the count overflows
        with pytest.raises(InvalidInputError, match="is not a valid regular expression"):
            expand(store, ref, SCOPE, pattern=pattern, regex=True)
    flights = put(store, json.dumps(FLIGHTS))
    for odd in ({"pattern": 5}, {"pattern": b"ERROR"}, {"fields": [1]}, {"fields": ["[0]", None]}):  # from untyped callers
        with pytest.raises(InvalidInputError, match="is a string"):
            expand(store, flights, SCOPE, **odd)
    with pytest.raises(RefNotFoundError):
        expand(store, ref, Scope(session_id="intruder"))
    with pytest.raises(InvalidInputError):
        expand(store, "not-a-ref", SCOPE)
    with pytest.raises(InvalidInputError) as raised:  # a model may pass a whole output as the ref
        expand(store, "x" * 100_000, SCOPE)
    assert len(str(raised.value)) < 200


def test_model_output_is_capped_with_a_paging_note(store: MemoryCASStore) -> None:
    ref = put(store, json.dumps(FLIGHTS))
    out = expand_for_model(store, ref, SCOPE, max_tokens=200, counter=COUNTER)
    assert COUNTER.count(out) <= 200
    header, *body, note = out.split("\n")
    assert header.startswith(f"[{ref} · items 0–")
    assert json.loads(body[0]) == FLIGHTS[0]
    nxt = len(body)
    assert f"offset={nxt}" in note and "more items" in note
    follow = expand_for_model(store, ref, SCOPE, max_tokens=200, counter=COUNTER, offset=nxt)
    assert json.loads(follow.split("\n")[1]) == FLIGHTS[nxt]


def test_model_output_of_small_content_is_the_original(store: MemoryCASStore) -> None:
    content = json.dumps(USER)
    assert expand_for_model(store, put(store, content), SCOPE, max_tokens=2000, counter=COUNTER) == content


def test_model_output_reads_a_ref_written_inside_other_text(store: MemoryCASStore) -> None:
    content = json.dumps(USER)
    ref = put(store, content)
    for written in (f" {ref} ", f"`{ref}`", f"{ref}.", f"'{ref}'", f"see {ref} above", f"[{ref}]"):
        assert expand_for_model(store, written, SCOPE, max_tokens=2000, counter=COUNTER) == content, written
    other = put(store, json.dumps(FLIGHTS[:2]))
    two = expand_for_model(store, f"{ref} or {other}", SCOPE, max_tokens=2000, counter=COUNTER)
    assert two.startswith("expand_ref:") and "is not a ref id" in two, "two refs: none is guessed"
    longer = expand_for_model(store, f"{ref}0", SCOPE, max_tokens=2000, counter=COUNTER)
    assert "is not a ref id" in longer, "a longer hash is not cut down to a ref"


def test_model_output_with_pattern_numbers_the_matches(store: MemoryCASStore) -> None:
    out = expand_for_model(store, put(store, LOG), SCOPE, max_tokens=2000, counter=COUNTER, pattern="error")
    assert "12 of 300 lines match 'error'" in out
    assert "[25] line 25: ERROR disk" in out
    # the number is the line's offset, not the 1-based L-number a log summary shows for it
    assert "each prefixed with its offset (a summary's L-number less one)" in out, out[:300]
    assert expand_for_model(store, put(store, LOG), SCOPE, max_tokens=2000, counter=COUNTER, offset=25, limit=1).split("\n")[1] == (
        "line 25: ERROR disk"
    )


def test_a_long_pattern_or_field_list_is_not_repeated_back(store: MemoryCASStore) -> None:
    """A model that sends a 100,000-character pattern must not get it back: the reply would be
    far over ``expand_max_tokens``, and a continuation call quoting it as long again."""
    ref = put(store, LOG)
    out = expand_for_model(store, ref, SCOPE, max_tokens=2000, counter=COUNTER, pattern="x" * 100_000)
    assert "match the pattern given (100,000 characters)" in out and len(out) < 300
    wide = "line|" * 100 + "line"
    paged = expand_for_model(store, ref, SCOPE, max_tokens=200, counter=COUNTER, pattern=wide, regex=True)
    assert wide not in paged and "pattern=<the same pattern>, regex=True, offset=" in paged
    assert COUNTER.count(paged) <= 260


def test_model_output_cuts_one_huge_line(store: MemoryCASStore) -> None:
    out = expand_for_model(store, put(store, "word " * 200_000), SCOPE, max_tokens=300, counter=COUNTER)
    assert COUNTER.count(out) <= 300 + 40
    assert "cut" in out and "pattern=" in out


def test_model_errors_are_sentences_not_exceptions(store: MemoryCASStore) -> None:
    ref = put(store, json.dumps(USER))
    assert expand_for_model(store, ref, Scope(session_id="other"), max_tokens=500, counter=COUNTER).startswith("expand_ref: no such ref visible here")
    assert "not a ref id" in expand_for_model(store, "bogus", SCOPE, max_tokens=500, counter=COUNTER)
    assert "keys there" in expand_for_model(store, ref, SCOPE, max_tokens=500, counter=COUNTER, fields=["nope"])
    store.close()
    closed = expand_for_model(store, ref, SCOPE, max_tokens=500, counter=COUNTER)
    assert "store is closed" in closed and "will not help" in closed and "try again later" not in closed


def test_expand_ref_tool_sends_a_compact_schema_and_still_validates() -> None:
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.utils.function_calling import convert_to_openai_tool
    from pydantic import ValidationError

    from ctxplugin._messages import annotation
    from ctxplugin.langchain import make_expand_ref_tool
    from ctxplugin.testing import memory_engine

    engine = memory_engine()
    tool = make_expand_ref_tool(engine)
    sent = convert_to_openai_tool(tool)["function"]
    params = sent["parameters"]
    assert list(params["properties"]) == ["ref_id", "fields", "offset", "limit", "pattern", "regex"]
    assert params["required"] == ["ref_id"]
    assert all(set(p) <= {"type", "items"} for p in params["properties"].values()), params
    for option in ("fields", "offset/limit", "pattern", "regex"):
        assert option in sent["description"], "the description explains every option"
    # every tiered call carries it: a word more is paid on each of them
    assert count_tool_schemas([convert_to_openai_tool(tool)], COUNTER) <= 137

    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    captured = engine.capture_tool_result(ToolMessage(content=LOG, tool_call_id="c1", name="logs"), scope=Scope(session_id="t"))
    ref = annotation(captured)["ref"]
    assert ref.startswith("ref:logs:") and ref in str(captured.content)
    out = tool.invoke({"ref_id": ref, "offset": 50, "limit": 2}, config=config)
    assert out.splitlines()[1:3] == ["line 50: ERROR disk", "line 51: ok"]
    with pytest.raises(ValidationError):
        tool.invoke({"ref_id": ref, "offset": "fifty"}, config=config)


def test_expand_ref_tool_takes_null_options_and_one_field_as_given_by_models() -> None:
    """Models often send ``null`` for options they do not use, and one path as a string:
    ``load_tools`` takes both, and ``expand_ref`` reads them as the option left out and a
    one-path list rather than costing the model a round trip on a validation error. The sent
    schema stays as lean as before."""
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from ctxplugin._messages import annotation
    from ctxplugin.langchain import make_expand_ref_tool
    from ctxplugin.testing import memory_engine

    engine = memory_engine()
    tool = make_expand_ref_tool(engine)
    params = convert_to_openai_tool(tool)["function"]["parameters"]
    assert all(set(p) <= {"type", "items"} for p in params["properties"].values()), params
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    record = json.dumps({"user_id": "u1", "items": [{"id": i} for i in range(300)]})
    captured = engine.capture_tool_result(ToolMessage(content=record, tool_call_id="c1", name="user"), scope=Scope(session_id="t"))
    ref = annotation(captured)["ref"]
    nulls = {"fields": None, "offset": None, "limit": None, "pattern": None, "regex": None}
    assert tool.invoke({"ref_id": ref, **nulls}, config=config) == record
    one = tool.invoke({"ref_id": ref, "fields": "user_id"}, config=config)
    assert one == tool.invoke({"ref_id": ref, "fields": ["user_id"]}, config=config)
    assert one.splitlines()[-1] == '"u1"'


def test_a_limit_of_0_is_no_limit_for_code_and_for_the_tool_alike() -> None:
    """The tool reads ``limit: 0`` as the option left out (a model sends 0 for an option it does
    not use); the engine method, with the same options, reads it the same way."""
    from langchain_core.messages import ToolMessage
    from langchain_core.runnables import RunnableConfig

    from ctxplugin._messages import annotation
    from ctxplugin.langchain import make_expand_ref_tool
    from ctxplugin.testing import memory_engine

    engine = memory_engine()
    scope = Scope(session_id="t")
    record = json.dumps(FLIGHTS)
    ref = annotation(engine.capture_tool_result(ToolMessage(content=record, tool_call_id="c1", name="flights"), scope=scope))["ref"]
    tool = make_expand_ref_tool(engine)
    config: RunnableConfig = {"configurable": {"thread_id": "t"}}
    assert tool.invoke({"ref_id": ref, "offset": 70, "limit": 0}, config=config) == tool.invoke({"ref_id": ref, "offset": 70}, config=config)
    assert engine.expand_ref(ref, scope=scope, limit=0) == record
    assert json.loads(engine.expand_ref(ref, scope=scope, offset=70, limit=0)) == FLIGHTS[70:]


def test_a_pattern_shows_its_match_in_a_line_too_long_to_show_whole(store: MemoryCASStore) -> None:
    # a web page fetched as one line: the price is far past what one answer can show
    page = "<div>filler</div>" * 3000 + "<span>Total price: 1,234.56 EUR</span>" + "<p>tail</p>" * 500
    ref = put(store, f"HTTP/1.1 200 OK\n{page}\n")
    for pattern, regex in (("total price", False), (r"price: [\d,.]+ EUR", True)):
        out = expand_for_model(store, ref, SCOPE, max_tokens=300, counter=COUNTER, pattern=pattern, regex=regex)
        assert "Total price: 1,234.56 EUR" in out, out
        assert out.splitlines()[1].startswith("[1] …")
        assert COUNTER.count(out) <= 300 + 40
    # not JSON: the note offers what works on text
    head = expand_for_model(store, ref, SCOPE, max_tokens=300, counter=COUNTER, offset=1)
    assert "cut" in head and "pattern=" in head and "fields" not in head


def test_meta_tools_take_a_fixed_scope_and_refuse_anything_else_when_made() -> None:
    from langchain_core.messages import ToolMessage

    from ctxplugin._messages import annotation
    from ctxplugin.langchain import make_expand_ref_tool
    from ctxplugin.testing import memory_engine
    from ctxplugin.tools.resolve import make_load_tools_tool

    engine = memory_engine()
    mine = Scope(session_id="agent-7")
    captured = engine.capture_tool_result(ToolMessage(content=LOG, tool_call_id="c1", name="logs"), scope=mine)
    ref = annotation(captured)["ref"]
    tool = make_expand_ref_tool(engine, mine)
    # no thread id in the config: the fixed scope is the one read
    assert "line 50: ERROR disk" in tool.invoke({"ref_id": ref, "offset": 50, "limit": 1}, config={})
    assert "Give the exact names" in make_load_tools_tool(engine.registry, mine).invoke({"names": []}, config={})
    for bad in ("agent-7", 7):
        with pytest.raises(InvalidInputError, match="takes a Scope or a function"):
            make_expand_ref_tool(engine, bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError, match="takes a Scope or a function"):
            make_load_tools_tool(engine.registry, bad)  # type: ignore[arg-type]


def test_a_line_between_two_matches_is_shown_once(store: MemoryCASStore) -> None:
    diff = "diff --git a/src/app.py b/src/app.py\nindex 3f2a1b0..9c8d7e0 100644\n--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1 @@\n-a\n+b\n"
    out = expand_for_model(store, put(store, diff), SCOPE, max_tokens=2000, counter=COUNTER, pattern="src/app.py")
    assert "3 of 7 lines match" in out
    assert out.count("index 3f2a1b0..9c8d7e0") == 1, out
    assert out.count("@@ -1 +1 @@") == 1, out


def test_lines_ending_in_crlf_are_read_as_lines_without_their_carriage_return(store: MemoryCASStore) -> None:
    # csv.writer ends rows with "\r\n", as do HTTP bodies and Windows tools
    table = "".join(f"W{i:04d},pending,{10 + i}.00\r\n" for i in range(200))
    ref = put(store, table)
    assert expand(store, ref, SCOPE, offset=5, limit=2) == "W0005,pending,15.00\nW0006,pending,16.00"
    assert expand(store, ref, SCOPE, pattern=r"W0007,.*\.00$", regex=True) == "W0007,pending,17.00"
    out = expand_for_model(store, ref, SCOPE, max_tokens=2000, counter=COUNTER, pattern=r"^W0012,.*00$", regex=True)
    assert "1 of 200 lines match" in out and "W0012,pending,22.00" in out and "\r" not in out, out
    assert expand(store, ref, SCOPE) == table  # the original stays byte-exact
