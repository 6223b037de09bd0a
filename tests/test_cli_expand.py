"""``ctxplugin expand`` takes the options of the model's ``expand_ref`` tool: --fields,
--pattern (with --regex) and --offset/--limit, also on a JSON object stored on one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from langchain_core.messages import ToolMessage
from typer.testing import CliRunner, Result

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin._messages import annotation
from ctxplugin.cas.sqlite import SQLiteCASStore
from ctxplugin.cli import app

SCOPE = Scope(session_id="cli")
ORDERS = [{"order_id": f"#W{1000 + i}", "status": "delivered" if i % 3 else "pending", "total": 10 + i} for i in range(80)]
PROFILE = {"user_id": "yusuf_1", "address": {"city": "Austin", "zip": "78701"},
           "payment_methods": {f"card_{i}": {"brand": "visa", "last_four": f"{4000 + i}"} for i in range(40)}}


@pytest.fixture(scope="module")
def stored(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, str]:
    """An embedded store holding a JSON array and a one-line JSON object, and their refs."""
    tmp_path = tmp_path_factory.mktemp("store")
    # the CAS file ContextEngine.embedded(tmp_path) writes (test_replay_cli covers embedded itself)
    engine = ContextEngine(ContextConfig(facts={"extract": False}), cas=SQLiteCASStore(tmp_path / "cas.sqlite3"))
    refs = []
    for name, value in (("list_orders", ORDERS), ("get_user", PROFILE)):
        out = engine.capture_tool_result(ToolMessage(content=json.dumps(value), tool_call_id=name, name=name), scope=SCOPE)
        refs.append(annotation(out)["ref"])
    engine.cas.close()
    return tmp_path, refs[0], refs[1]


def stored_output(path: Path, text: str, call_id: str) -> str:
    """The ref of ``text`` captured as a bash output into a CAS under ``path``, closed again."""
    engine = ContextEngine(ContextConfig(facts={"extract": False}), cas=SQLiteCASStore(path / "cas.sqlite3"))
    out = engine.capture_tool_result(ToolMessage(content=text, tool_call_id=call_id, name="bash"), scope=SCOPE)
    engine.cas.close()
    return str(annotation(out)["ref"])


def expand(path: Path, ref: str, *options: str) -> Result:
    result = CliRunner().invoke(app, ["expand", ref, "--path", str(path), "--session", SCOPE.session_id, *options])
    assert result.exit_code == 0, result.output
    return result


def test_fields_select_json_paths(stored: tuple[Path, str, str]) -> None:
    path, orders, profile = stored
    assert json.loads(expand(path, profile, "--fields", "address.city").stdout) == "Austin"
    both = json.loads(expand(path, profile, "--fields", "user_id", "--fields", "address.zip").stdout)
    assert both == {"user_id": "yusuf_1", "address.zip": "78701"}
    ids = json.loads(expand(path, orders, "--fields", "[*].order_id", "--limit", "3").stdout)
    assert ids == ["#W1000", "#W1001", "#W1002"]


def test_pattern_filters_items_and_regex_reads_it_as_an_expression(stored: tuple[Path, str, str]) -> None:
    path, orders, _ = stored
    pending = json.loads(expand(path, orders, "--pattern", "PENDING").stdout)
    assert pending == [o for o in ORDERS if o["status"] == "pending"]
    some = json.loads(expand(path, orders, "--pattern", r"#W10[0-1]\d", "--regex", "--offset", "5", "--limit", "4").stdout)
    assert [o["order_id"] for o in some] == ["#W1005", "#W1006", "#W1007", "#W1008"]


def test_limit_pages_a_one_line_json_object(stored: tuple[Path, str, str]) -> None:
    path, _, profile = stored
    whole = expand(path, profile).stdout
    assert whole.count("\n") == 1 and json.loads(whole) == PROFILE, "without options: the original exactly"
    page = expand(path, profile, "--limit", "5").stdout.splitlines()
    assert page == json.dumps(PROFILE, indent=2).split("\n")[:5]
    later = expand(path, profile, "--offset", "5", "--limit", "2").stdout.splitlines()
    assert later == json.dumps(PROFILE, indent=2).split("\n")[5:7]


def test_a_bad_field_path_exits_with_the_reason(stored: tuple[Path, str, str]) -> None:
    path, _, profile = stored
    result = CliRunner().invoke(app, ["expand", profile, "--path", str(path), "--session", "cli", "--fields", "address.country"])
    assert result.exit_code == 1
    assert "no key 'country'" in result.stderr and "city" in result.stderr


def test_an_output_with_undecodable_bytes_is_printed_as_those_bytes(tmp_path: Path) -> None:
    raw = ("café 1\n".encode() + bytes(range(0x80, 0x100)) + b"\nlast line\n") * 40
    text = raw.decode("utf-8", "surrogateescape")  # how a host reads a process's bytes it cannot decode
    ref = stored_output(tmp_path, text, "bin")
    # a UTF-8 locale's stdout refuses lone surrogates; the bytes go out as they came in
    result = CliRunner().invoke(app, ["expand", ref, "--path", str(tmp_path), "--session", SCOPE.session_id])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == raw


def test_a_pattern_that_matches_no_line_says_so_on_stderr(tmp_path: Path) -> None:
    log = "\n".join(f"10:00:{i:02d} INFO request id=req-{i:04d} ok" for i in range(60))
    ref = stored_output(tmp_path, log, "log")
    # an empty stdout alone reads like an empty output; the model's tool says "0 of 60 lines match"
    result = expand(tmp_path, ref, "--pattern", "TimeoutError")
    assert result.stdout.strip() == ""
    assert "0 of 60 lines match 'TimeoutError'" in result.stderr
    past = expand(tmp_path, ref, "--offset", "100")
    assert past.stdout.strip() == "" and "60 lines" in past.stderr
    assert "0 of 60 lines match '[x]'" in expand(tmp_path, ref, "--pattern", "[x]").stderr
    assert expand(tmp_path, ref, "--pattern", "req-0007").stderr == ""


def test_json_items_that_select_nothing_print_an_empty_list(stored: tuple[Path, str, str]) -> None:
    path, orders, _ = stored
    none = expand(path, orders, "--pattern", "cancelled")
    assert json.loads(none.stdout) == [] and "0 of 80 items match 'cancelled'" in none.stderr
    past = expand(path, orders, "--offset", "100")
    assert json.loads(past.stdout) == [] and "80 items" in past.stderr


def test_messages_name_the_ref_once_and_the_pattern_as_typed(tmp_path: Path) -> None:
    log = "\n".join(f"10:00:{i:02d} INFO flight HAT1{i:02d} ok" for i in range(60))
    ref = stored_output(tmp_path, log, "log")
    # the pattern the user typed, not Python's repr of it with every backslash doubled
    assert "0 of 60 lines match 'HAT0\\d\\d'" in expand(tmp_path, ref, "--pattern", r"HAT0\d\d", "--regex").stderr
    for options in (["--fields", "user_id"], ["--session", "someone-else"]):
        result = CliRunner().invoke(app, ["expand", ref, "--path", str(tmp_path), "--session", SCOPE.session_id, *options])
        assert result.exit_code == 1
        assert result.stderr.count(ref) == 1, result.stderr


def test_a_ref_not_found_names_the_session_read_and_the_option_to_pass(stored: tuple[Path, str, str]) -> None:
    # stored under the thread's session; read without --session, the default one sees nothing
    path, ref, _ = stored
    result = CliRunner().invoke(app, ["expand", ref, "--path", str(path)])
    assert result.exit_code == 1
    assert "session 'default'" in result.stderr and "--session" in result.stderr, result.stderr
    assert "--user" in result.stderr, "a scope is more than its session"
    assert result.stderr.count(ref) == 1


def test_a_selection_of_nothing_leaves_stdout_empty(tmp_path: Path) -> None:
    # as the docs say: not even a blank line, so `expand ... | wc -l` counts 0 and `> file` writes nothing
    log = "\n".join(f"10:00:{i:02d} INFO request id=req-{i:04d} ok" for i in range(60))
    ref = stored_output(tmp_path, log, "log")
    assert expand(tmp_path, ref, "--pattern", "TimeoutError").stdout_bytes == b""
    assert expand(tmp_path, ref, "--offset", "100").stdout_bytes == b""
    assert expand(tmp_path, ref, "--pattern", "req-0007").stdout == log.splitlines()[7] + "\n"


@pytest.mark.parametrize("option", ["--offset", "--limit"])
def test_a_negative_offset_or_limit_is_a_usage_error(stored: tuple[Path, str, str], option: str) -> None:
    # exit 2 with the usage line, as every other bad option value of the command; before the store is read
    path, orders, _ = stored
    result = CliRunner().invoke(app, ["expand", orders, "--path", str(path), "--session", SCOPE.session_id, option, "-5"])
    assert result.exit_code == 2, result.output
    assert "Usage:" in result.output and option in result.output
