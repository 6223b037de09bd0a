"""Reading recordings: every input format, detection, and clear errors for bad input."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import (
    AIMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
    messages_to_dict,
)

from ctxplugin.errors import InvalidInputError
from ctxplugin.replay import detect, discover, load_file, load_tools_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDINGS = FIXTURES / "recordings"
BAD = FIXTURES / "bad"


def read(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def roles(raw: list[dict[str, Any]]) -> list[str]:
    return [m["role"] for m in raw]


KIND = {"system": SystemMessage, "user": HumanMessage, "assistant": AIMessage, "tool": ToolMessage}


def assert_same_as_openai(messages: tuple[Any, ...], raw: list[dict[str, Any]]) -> None:
    assert [type(m) for m in messages] == [KIND[r] for r in roles(raw)]
    for message, source in zip(messages, raw, strict=True):
        assert message.content == (source.get("content") or "")
        if source["role"] == "assistant":
            expected = [(c["id"], c["function"]["name"], json.loads(c["function"]["arguments"])) for c in source.get("tool_calls") or []]
            assert [(c["id"], c["name"], c["args"]) for c in message.tool_calls] == expected
        if source["role"] == "tool":
            assert message.tool_call_id == source["tool_call_id"]


def test_tau_list_gives_one_conversation_per_record() -> None:
    raw = read(RECORDINGS / "tau-excerpt.json")
    loaded = load_file(RECORDINGS / "tau-excerpt.json")
    assert loaded.format == "tau"
    assert [c.id for c in loaded.conversations] == [f"task-{r['task_id']}-trial-{r['trial']}" for r in raw]
    for conversation, record in zip(loaded.conversations, raw, strict=True):
        assert_same_as_openai(conversation.messages, record["traj"])
        assert len(conversation.call_indexes()) == sum(1 for m in record["traj"][1:] if m["role"] == "assistant")


def test_openai_json_and_jsonl() -> None:
    doc = read(RECORDINGS / "openai-chat.json")
    loaded = load_file(RECORDINGS / "openai-chat.json")
    assert (loaded.format, [c.id for c in loaded.conversations]) == ("openai", [doc["id"]])
    assert_same_as_openai(loaded.conversations[0].messages, doc["messages"])
    lines = [json.loads(line) for line in (RECORDINGS / "openai-chat.jsonl").read_text().splitlines()]
    jsonl = load_file(RECORDINGS / "openai-chat.jsonl")
    assert jsonl.format == "openai"
    assert_same_as_openai(jsonl.conversations[0].messages, lines)


@pytest.mark.parametrize("name", ["langchain-messages.json", "langchain-dumpd.json"])
def test_langchain_dumps(name: str) -> None:
    raw = read(RECORDINGS / name)
    loaded = load_file(RECORDINGS / name)
    assert loaded.format == "langchain"
    messages = loaded.conversations[0].messages
    assert len(messages) == len(raw)
    tool_results = [m for m in messages if isinstance(m, ToolMessage)]
    calls = [c for m in messages if isinstance(m, AIMessage) for c in m.tool_calls]
    assert tool_results and sorted(t.tool_call_id for t in tool_results) == sorted(str(c["id"]) for c in calls)


def test_langsmith_export_uses_the_longest_llm_run_of_the_trace() -> None:
    runs = read(RECORDINGS / "langsmith-runs.json")
    loaded = load_file(RECORDINGS / "langsmith-runs.json")
    assert loaded.format == "langsmith"
    assert [c.id for c in loaded.conversations] == [runs[0]["trace_id"]]
    # The root chain run's outputs hold the whole conversation; the llm runs rebuild it up to
    # the last model reply (the user's closing message came after the last model call).
    whole = runs[0]["outputs"]["messages"]
    messages = loaded.conversations[0].messages
    assert [m.content for m in messages] == [m["kwargs"]["content"] for m in whole[: len(messages)]]
    assert [m["kwargs"]["type"] for m in whole[len(messages) :]] == ["human"]
    assert len(loaded.conversations[0].call_indexes()) == sum(1 for r in runs if r["run_type"] == "llm")


def test_swe_trajectory_drops_the_exit_record_and_reads_calls_from_the_response() -> None:
    raw = read(RECORDINGS / "marshmallow-1359-excerpt.traj.json")
    loaded = load_file(RECORDINGS / "marshmallow-1359-excerpt.traj.json")
    assert loaded.format == "swe"
    conversation = loaded.conversations[0]
    assert conversation.id == raw["instance_id"]
    chat = [m for m in raw["messages"] if m["role"] != "exit"]
    assert len(conversation.messages) == len(chat) == len(raw["messages"]) - 1
    assistants = [m for m in chat if m["role"] == "assistant"]
    assert "tool_calls" not in assistants[3]  # this one has its calls only in extra.response
    loaded_assistants = [m for m in conversation.messages if isinstance(m, AIMessage)]
    for source, message in zip(assistants, loaded_assistants, strict=True):
        expected = [a["command"] for a in source["extra"]["actions"]]
        assert [c["args"]["command"] for c in message.tool_calls] == expected
    usage = [a["extra"]["response"]["usage"] for a in assistants]
    assert [(u.prompt_tokens, u.cached_tokens) for u in conversation.usage] == [
        (u["prompt_tokens"], u["prompt_cache_hit_tokens"]) for u in usage
    ]


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("tau-excerpt.json", "tau"),
        ("openai-chat.json", "openai"),
        ("langchain-dumpd.json", "langchain"),
        ("langsmith-runs.json", "langsmith"),
        ("marshmallow-1359-excerpt.traj.json", "swe"),
    ],
)
def test_explicit_format_reads_the_same_as_detection(name: str, fmt: Any) -> None:
    assert detect(read(RECORDINGS / name)) == fmt
    auto, explicit = load_file(RECORDINGS / name), load_file(RECORDINGS / name, fmt)
    assert [c.messages for c in auto.conversations] == [c.messages for c in explicit.conversations]


def test_wrong_explicit_format_names_the_file() -> None:
    with pytest.raises(InvalidInputError, match=r"openai-chat\.json: a tau-bench file is a list"):
        load_file(RECORDINGS / "openai-chat.json", "tau")


def test_truncated_file() -> None:
    with pytest.raises(InvalidInputError, match=r"truncated\.json: not valid JSON .*truncated"):
        load_file(BAD / "truncated.json")


def test_truncated_jsonl_names_the_line_and_keeps_the_others(tmp_path: Path) -> None:
    lines = (RECORDINGS / "openai-chat.jsonl").read_text().splitlines()
    whole = tmp_path / "whole.jsonl"
    whole.write_text("\n".join(lines[:4]) + "\n")
    path = tmp_path / "cut.jsonl"
    path.write_text("\n".join(lines[:4]) + "\n" + lines[4][:30])
    loaded = load_file(path)
    assert [e for e in loaded.errors if e.startswith("line 5 ")] == [
        "line 5 is not valid JSON (Unterminated string starting at), left out; the file looks truncated"
    ]
    assert [c.messages for c in loaded.conversations] == [c.messages for c in load_file(whole).conversations]
    assert loaded.conversations, "the lines before the cut are read"


def test_a_jsonl_cut_at_its_start_names_the_first_line_and_keeps_the_others(tmp_path: Path) -> None:
    # what `tail -c` of a long log gives: the first line begins mid-object
    lines = (RECORDINGS / "openai-chat.jsonl").read_text().splitlines()
    rest = tmp_path / "rest.jsonl"
    rest.write_text("\n".join(lines[1:]) + "\n")
    path = tmp_path / "tail.jsonl"
    path.write_text(lines[0][7:] + "\n" + "\n".join(lines[1:]) + "\n")

    loaded = load_file(path)

    [error] = [e for e in loaded.errors if e.startswith("line 1 ")]
    assert error.startswith("line 1 is not valid JSON (") and error.endswith("), left out; the file looks cut at its start")
    assert [c.messages for c in loaded.conversations] == [c.messages for c in load_file(rest).conversations]
    assert loaded.conversations


def test_a_request_log_cut_at_its_start_leaves_out_the_reply_whose_request_was_cut(tmp_path: Path) -> None:
    messages = json.loads((RECORDINGS / "openai-chat.json").read_text())["messages"]
    calls = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    log = []
    for at in calls:
        log += [{"model": "gpt-4o", "messages": messages[:at]}, {"object": "chat.completion", "choices": [{"message": messages[at]}]}]
    lines = [json.dumps(item) for item in log]
    path = tmp_path / "tail.jsonl"
    path.write_text(lines[0][9:] + "\n" + "\n".join(lines[1:]) + "\n")

    loaded = load_file(path)

    assert loaded.errors[1:] == ["line 2 is a response to a request on the cut first line, left out"]
    [conversation] = loaded.conversations
    assert len(conversation.messages) == calls[-1] + 1


def test_a_broken_json_document_is_not_read_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "pretty.json"
    path.write_text('[\n{"role": "user", "content": "hi"},\n{"role": "assistant", "content": "ok"}\n')
    with pytest.raises(InvalidInputError, match=r"pretty\.json: not valid JSON .*truncated"):
        load_file(path)


def test_a_bad_line_in_the_middle_of_a_jsonl_is_left_out_not_called_a_truncation(tmp_path: Path) -> None:
    lines = (RECORDINGS / "openai-chat.jsonl").read_text().splitlines()
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join([*lines[:2], "{not json", *lines[2:]]) + "\n")
    loaded = load_file(path)
    assert [e for e in loaded.errors if e.startswith("line 3 ")] == ["line 3 is not valid JSON (Expecting property name enclosed in double quotes), left out"]
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(lines) + "\n")
    assert [c.messages for c in loaded.conversations] == [c.messages for c in load_file(clean).conversations]


def test_json_nested_past_any_recording_is_a_clear_error(tmp_path: Path) -> None:
    for name, text in (("deep.json", "[" * 5000 + "]" * 5000), ("deep.jsonl", '{"a": 1}\n' + '{"b":' * 3000 + "1" + "}" * 3000)):
        path = tmp_path / name
        path.write_text(text)
        with pytest.raises(InvalidInputError, match=name.replace(".", r"\.") + ": JSON nested deeper than 100 levels"):
            load_file(path)


def test_unknown_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match=r"unknown\.json: unknown format.*--format"):
        load_file(BAD / "unknown.json")
    binary = tmp_path / "image.json"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\xff")
    with pytest.raises(InvalidInputError, match=r"image\.json: not UTF-8 text"):
        load_file(binary)
    empty = tmp_path / "empty.json"
    empty.write_text("  \n")
    with pytest.raises(InvalidInputError, match=r"empty\.json: the file is empty"):
        load_file(empty)


def test_a_tools_file_given_as_a_recording_says_to_pass_it_with_tools(tmp_path: Path) -> None:
    openai = FIXTURES / "tau-airline-tools.json"
    anthropic = tmp_path / "anthropic-tools.json"
    anthropic.write_text(json.dumps({"tools": [{"name": "get_weather", "description": "Weather.",
                                                "input_schema": {"type": "object", "properties": {}}}]}))
    for path in (openai, anthropic):
        assert load_tools_file(path), "a tools file --tools reads"
        with pytest.raises(InvalidInputError, match=path.name.replace(".", r"\.") + r": .*tool schemas.*--tools"):
            load_file(path)


def test_a_stray_item_in_a_message_list_is_the_one_named(tmp_path: Path) -> None:
    raw = read(RECORDINGS / "openai-chat.json")["messages"][:4]
    path = tmp_path / "stray.json"
    path.write_text(json.dumps([*raw, {"note": "exported by hand"}]))
    with pytest.raises(InvalidInputError, match=r"stray\.json: item 4 is an object with keys \['note'\]"):
        load_file(path)


def test_conversations_that_share_an_id_get_one_each(tmp_path: Path) -> None:
    conversation = read(RECORDINGS / "openai-chat.json")
    path = tmp_path / "twice.jsonl"
    path.write_text(json.dumps(conversation) + "\n" + json.dumps(conversation) + "\n")
    ids = [c.id for c in load_file(path).conversations]
    assert ids == [conversation["id"], f"{conversation['id']}#1"]


def test_unanswered_tool_call_is_reported_per_conversation() -> None:
    loaded = load_file(BAD / "orphan-call.json")
    assert loaded.conversations == []
    assert loaded.errors == [
        "conversation orphan-call: tool call 'call_1' (get_reservation_details) in message 2 was never "
        "answered (message 3 follows without its result)"
    ]


def test_tool_result_without_a_call_is_reported() -> None:
    loaded = load_file(BAD / "orphan-result.json")
    assert loaded.conversations == []
    assert len(loaded.errors) == 1
    assert "message 1 is a tool result for tool_call_id='call_9'" in loaded.errors[0]


def test_a_call_still_running_at_the_end_is_not_an_orphan() -> None:
    raw = read(RECORDINGS / "marshmallow-1359-excerpt.traj.json")
    # the recording ends with the submit call, whose result was never recorded
    last = [m for m in raw["messages"] if m["role"] != "exit"][-1]
    assert last["role"] == "assistant" and last["tool_calls"]
    assert load_file(RECORDINGS / "marshmallow-1359-excerpt.traj.json").errors == []


def test_one_broken_conversation_does_not_hide_the_others(tmp_path: Path) -> None:
    records = read(RECORDINGS / "tau-excerpt.json")
    broken = json.loads(json.dumps(records[0]))
    broken["trial"] = 9
    broken["traj"] = [m for m in broken["traj"] if m["role"] != "tool"]
    path = tmp_path / "mixed.json"
    path.write_text(json.dumps([broken, records[1]]))
    loaded = load_file(path)
    assert [c.id for c in loaded.conversations] == [f"task-{records[1]['task_id']}-trial-{records[1]['trial']}"]
    assert len(loaded.errors) == 1 and loaded.errors[0].startswith(f"conversation task-{broken['task_id']}-trial-9: tool call")


def test_discover_sorts_directories_and_reports_missing_paths(tmp_path: Path) -> None:
    found, missing = discover([RECORDINGS, tmp_path / "nope.json", tmp_path])
    assert found == sorted(p.as_posix() for p in RECORDINGS.iterdir())
    assert missing == [(str(tmp_path / "nope.json"), "no such file or directory"), (str(tmp_path), "directory holds no .json, .jsonl or .ndjson file")]


def test_tools_file(tmp_path: Path) -> None:
    tools = load_tools_file(FIXTURES / "tau-airline-tools.json")
    assert [t["function"]["name"] for t in tools] == [t["function"]["name"] for t in read(FIXTURES / "tau-airline-tools.json")]
    bad = tmp_path / "tools.json"
    bad.write_text(json.dumps([{"description": "no name"}]))
    with pytest.raises(InvalidInputError, match=r"tools\.json: item 0 is neither an OpenAI-format nor an Anthropic tool"):
        load_tools_file(bad)
    bad.write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(InvalidInputError, match=r"tools\.json: JSON nested deeper than 100 levels"):
        load_tools_file(bad)


def test_a_tools_file_of_anthropic_tools_is_read_as_an_anthropic_request_reads_its_tools(tmp_path: Path) -> None:
    body = read(RECORDINGS / "anthropic-messages.json")
    web = {"type": "web_search_20250305", "name": "web_search"}  # defined by the provider, no schema
    bare = {"name": "think", "input_schema": {"type": "object", "properties": {"thought": {"type": "string"}}}}
    [conversation] = load_file(RECORDINGS / "anthropic-messages.json").conversations
    path = tmp_path / "tools.json"
    for document in ([*body["tools"], web], {"tools": [*body["tools"], web]}):
        path.write_text(json.dumps(document))
        assert load_tools_file(path) == conversation.tools
    path.write_text(json.dumps([bare]))
    assert load_tools_file(path) == ({"type": "function", "function": {"name": "think", "description": "", "parameters": bare["input_schema"]}},)


@pytest.mark.parametrize(
    ("item", "error"),
    [
        ({"name": "x", "input_schema": "any"}, "item 0 (x) has an input_schema that is not an object"),
        ({"name": "", "input_schema": {"type": "object"}}, "item 0 has no name"),
        ({"function": {"name": "x", "parameters": {}}}, "item 0 is neither an OpenAI-format nor an Anthropic tool"),
        ({"type": "function", "name": "x", "parameters": {}}, "item 0 is neither an OpenAI-format nor an Anthropic tool"),
        ({"type": "function", "function": {"parameters": {}}}, "item 0 is neither an OpenAI-format nor an Anthropic tool"),
        ({"name": "x", "parameters": "any"}, "item 0 is neither an OpenAI-format nor an Anthropic tool"),
    ],
)
def test_a_tools_file_item_that_is_no_tool_is_named(tmp_path: Path, item: dict[str, Any], error: str) -> None:
    path = tmp_path / "tools.json"
    path.write_text(json.dumps([item]))
    with pytest.raises(InvalidInputError) as caught:
        load_tools_file(path)
    assert str(caught.value).startswith(f"{path.as_posix()}: {error}")


def test_tool_call_arguments_nested_past_any_call_are_kept_as_text(tmp_path: Path) -> None:
    deep = '{"q":' * 3000 + '"x"' + "}" * 3000
    recording = [
        {"role": "user", "content": "find it"},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "search", "arguments": deep}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "found"},
        {"role": "assistant", "content": "done"},
    ]
    path = tmp_path / "deep-args.json"
    path.write_text(json.dumps({"messages": recording}))
    (conversation,) = load_file(path).conversations
    call = conversation.messages[1]
    assert isinstance(call, AIMessage) and call.tool_calls[0]["args"] == {"input": deep}


def test_messages_to_dict_of_streamed_chunks_reads_as_their_messages(tmp_path: Path) -> None:
    from langchain_core.messages import (
        AIMessageChunk,
        HumanMessageChunk,
        ToolMessageChunk,
        messages_to_dict,
    )

    chunks = [
        HumanMessageChunk(content="Cancel reservation ZFA04Y"),
        AIMessageChunk(content="", tool_call_chunks=[{"name": "cancel_reservation", "args": '{"reservation_id": "ZFA04Y"}', "id": "call_1", "index": 0}]),
        ToolMessageChunk(content='{"status": "cancelled"}', tool_call_id="call_1"),
        AIMessageChunk(content="Reservation ZFA04Y is cancelled."),
    ]
    path = tmp_path / "streamed.json"
    path.write_text(json.dumps(messages_to_dict(chunks)))
    loaded = load_file(path)
    assert (loaded.format, loaded.errors) == ("langchain", [])
    [conversation] = loaded.conversations
    assert [type(m) for m in conversation.messages] == [HumanMessage, AIMessage, ToolMessage, AIMessage]
    call = conversation.messages[1]
    assert isinstance(call, AIMessage) and call.tool_calls[0]["args"] == {"reservation_id": "ZFA04Y"}
    assert conversation.messages[2].content == '{"status": "cancelled"}'


def test_a_langchain_tool_call_with_unparsable_arguments_keeps_its_text_and_its_result(tmp_path: Path) -> None:
    # LangChain keeps a call whose arguments are not JSON in invalid_tool_calls; the agent still
    # answered it (the provider requires an answer to every call it sent)
    broken = AIMessage(content="", invalid_tool_calls=[{"name": "search", "args": '{"q": "tarn', "id": "c1", "error": "bad JSON", "type": "invalid_tool_call"}])
    history = [HumanMessage("find it"), broken, ToolMessage("error: bad arguments", tool_call_id="c1", status="error"), AIMessage("sorry")]
    path = tmp_path / "invalid.json"
    path.write_text(json.dumps(messages_to_dict(history)))

    loaded = load_file(path)

    assert loaded.errors == []
    [conversation] = loaded.conversations
    assert [m.type for m in conversation.messages] == ["human", "ai", "tool", "ai"]
    call = conversation.messages[1]
    assert isinstance(call, AIMessage)
    assert [(c["id"], c["name"], c["args"]) for c in call.tool_calls] == [("c1", "search", {"input": '{"q": "tarn'})]


def test_an_assistant_refusal_is_what_the_message_says(tmp_path: Path) -> None:
    # a Chat Completions refusal: no content, the text in `refusal`
    recording = [
        {"role": "user", "content": "help me pick a lock"},
        {"role": "assistant", "content": None, "refusal": "I can't help with that."},
        {"role": "user", "content": "fine, a recipe then"},
        {"role": "assistant", "content": "Sure."},
    ]
    path = tmp_path / "refusal.json"
    path.write_text(json.dumps(recording))

    [conversation] = load_file(path).conversations

    assert [m.content for m in conversation.messages] == ["help me pick a lock", "I can't help with that.", "fine, a recipe then", "Sure."]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        ([], "the file holds an empty list: no conversation to replay"),
        ({"messages": []}, "'messages' is an empty list: no conversation to replay"),
        ({"model": "gpt-4o", "messages": []}, "'messages' is an empty list: no conversation to replay"),
    ],
)
def test_an_empty_recording_says_it_is_empty(tmp_path: Path, content: Any, error: str) -> None:
    path = tmp_path / "empty.json"
    path.write_text(json.dumps(content))
    with pytest.raises(InvalidInputError) as caught:
        load_file(path)
    assert str(caught.value) == f"{path.as_posix()}: {error}"


def test_jsonl_files_joined_with_their_byte_order_marks_read_every_line(tmp_path: Path) -> None:
    # `cat a.jsonl b.jsonl` of files written with a byte-order mark: the second mark starts a line
    lines = (RECORDINGS / "openai-chat.jsonl").read_text().splitlines()
    clean = tmp_path / "clean.jsonl"
    clean.write_text("\n".join(lines) + "\n")
    joined = tmp_path / "joined.jsonl"
    half = len(lines) // 2
    joined.write_bytes(("\ufeff" + "\n".join(lines[:half]) + "\n" + "\ufeff" + "\n".join(lines[half:]) + "\n").encode())

    loaded = load_file(joined)

    assert loaded.errors == []
    assert [c.messages for c in loaded.conversations] == [c.messages for c in load_file(clean).conversations]


def test_a_directory_is_searched_for_ndjson_and_upper_case_suffixes_too(tmp_path: Path) -> None:
    for name in ("a.JSON", "b.ndjson", "c.jsonl", "d.Jsonl", "notes.txt"):
        (tmp_path / name).write_text("{}\n", encoding="utf-8")
    found, missing = discover([tmp_path])
    assert [Path(f).name for f in found] == ["a.JSON", "b.ndjson", "c.jsonl", "d.Jsonl"] and missing == []
