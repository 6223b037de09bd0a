"""Reading Anthropic Messages API recordings: blocks, requests per call, responses between them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin.replay import _anthropic, load_file

IMAGE = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}}
TOOL = {"name": "read_file", "description": "Read a file.", "input_schema": {"type": "object", "properties": {"path": {"type": "string"}}}}


def write(tmp_path: Path, name: str, *items: Any) -> Path:
    path = tmp_path / name
    path.write_text("\n".join(json.dumps(item) for item in items) + "\n")
    return path


def call(call_id: str, path: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": "read_file", "input": {"path": path}}


def result(call_id: str, content: Any, **extra: Any) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content, **extra}


def request(*messages: dict[str, Any], system: Any = "You fix bugs.") -> dict[str, Any]:
    return {"model": "claude-sonnet-4-5", "max_tokens": 1024, "system": system, "tools": [TOOL], "messages": list(messages)}


QUESTION = {"type": "text", "text": "Why does app.py crash?"}
ASK = {"role": "user", "content": [QUESTION, IMAGE]}
READ = {"role": "assistant", "content": [{"type": "text", "text": "Reading both."}, call("toolu_1", "app.py"), call("toolu_2", "cfg.py")]}
RESULTS = {
    "role": "user",
    "content": [
        result("toolu_1", [{"type": "text", "text": "import cfg"}, {"type": "text", "text": "cfg.run()"}]),
        result("toolu_2", "No such file: cfg.py", is_error=True),
        {"type": "text", "text": "It is in lib/ now."},
    ],
}
ANSWER = {"role": "assistant", "content": [{"type": "text", "text": "Move cfg.py back to the root."}]}


def test_blocks_become_the_messages_a_langchain_agent_holds(tmp_path: Path) -> None:
    system = [{"type": "text", "text": "You fix bugs.", "cache_control": {"type": "ephemeral"}}]
    loaded = load_file(write(tmp_path, "one.json", request(ASK, READ, RESULTS, ANSWER, system=system)))
    assert loaded.format == "anthropic" and not loaded.errors
    [conversation] = loaded.conversations
    messages = conversation.messages
    assert [type(m) for m in messages] == [SystemMessage, HumanMessage, AIMessage, ToolMessage, ToolMessage, HumanMessage, AIMessage]
    assert messages[0].content == "You fix bugs."
    assert messages[1].content == [{"type": "text", "text": "Why does app.py crash?"}, IMAGE]  # the image is kept
    read = messages[2]
    assert isinstance(read, AIMessage) and read.content == "Reading both."
    assert [(c["id"], c["name"], c["args"]) for c in read.tool_calls] == [
        ("toolu_1", "read_file", {"path": "app.py"}),
        ("toolu_2", "read_file", {"path": "cfg.py"}),
    ]
    first, second = messages[3], messages[4]
    assert isinstance(first, ToolMessage) and isinstance(second, ToolMessage)
    assert (first.tool_call_id, first.name, first.content, first.status) == ("toolu_1", "read_file", "import cfg\ncfg.run()", "success")
    assert (second.tool_call_id, second.content, second.status) == ("toolu_2", "No such file: cfg.py", "error")
    assert messages[5].content == "It is in lib/ now."  # the user's words, not a tool result
    assert [m.id for m in messages] == [f"msg-{i}" for i in range(7)]
    assert [t["function"]["name"] for t in conversation.tools] == ["read_file"]
    assert conversation.tools[0]["function"]["parameters"] == TOOL["input_schema"]


def test_a_tool_result_with_an_image_keeps_it(tmp_path: Path) -> None:
    shot = {"role": "user", "content": [result("toolu_1", [{"type": "text", "text": "screen:"}, IMAGE])]}
    [conversation] = load_file(write(tmp_path, "shot.json", request(ASK, READ, shot))).conversations
    assert conversation.messages[3].content == [{"type": "text", "text": "screen:"}, IMAGE]


def test_requests_logged_per_call_with_responses_make_one_conversation(tmp_path: Path) -> None:
    # One request per call; the client moves its cache_control marker to the newest turn.
    marked = {"role": "user", "content": [{**QUESTION, "cache_control": {"type": "ephemeral"}}, IMAGE]}
    response = {"id": "msg_01", "type": "message", "role": "assistant", "content": ANSWER["content"], "stop_reason": "end_turn"}
    first_reply = {"id": "msg_00", "type": "message", "role": "assistant", "content": READ["content"], "stop_reason": "tool_use"}
    path = write(tmp_path, "log.jsonl", request(marked), first_reply, request(ASK, READ, RESULTS), response)
    loaded = load_file(path)
    assert loaded.format == "anthropic" and not loaded.errors
    [conversation] = loaded.conversations
    assert conversation.id == "log"
    assert isinstance(conversation.messages[-1], AIMessage)
    assert conversation.messages[-1].content == "Move cfg.py back to the root."  # the last call counts
    assert len(conversation.call_indexes()) == 2


def test_requests_whose_system_prompt_changes_per_call_make_one_conversation(tmp_path: Path) -> None:
    # a host that puts the time in its system prompt sends a new prompt on every call
    first_reply = {"id": "msg_00", "type": "message", "role": "assistant", "content": READ["content"], "stop_reason": "tool_use"}
    response = {"id": "msg_01", "type": "message", "role": "assistant", "content": ANSWER["content"], "stop_reason": "end_turn"}
    first = request(ASK, system="You fix bugs. It is 10:00.")
    path = write(tmp_path, "timed.jsonl", first, first_reply, request(ASK, READ, RESULTS, system="You fix bugs. It is 10:01."), response)
    [conversation] = load_file(path).conversations
    assert conversation.messages[0].content == "You fix bugs. It is 10:01."  # the prompt of its latest call
    assert len(conversation.call_indexes()) == 2


def test_dataset_rows_under_other_system_prompts_stay_apart(tmp_path: Path) -> None:
    # rows of a data set ({"system", "messages"}, no model): one conversation per prompt variant
    rows = [{"system": f"You fix bugs in {lang}.", "messages": [ASK, ANSWER]} for lang in ("Python", "Go")]
    path = write(tmp_path, "variants.jsonl", *rows)
    assert [c.messages[0].content for c in load_file(path).conversations] == ["You fix bugs in Python.", "You fix bugs in Go."]


def test_interleaved_conversations_in_one_log_stay_apart(tmp_path: Path) -> None:
    other = {"role": "user", "content": "List the open issues."}
    path = write(tmp_path, "two.jsonl", request(ASK), request(other), request(other, ANSWER), request(ASK, READ, RESULTS, ANSWER))
    conversations = load_file(path).conversations
    assert [(c.id, len(c.messages)) for c in conversations] == [("two#0", 7), ("two#1", 3)]


def test_a_bare_message_list_with_tool_blocks_is_read_as_anthropic(tmp_path: Path) -> None:
    loaded = load_file(write(tmp_path, "bare.json", [ASK, READ, RESULTS, ANSWER]))
    assert loaded.format == "anthropic"
    assert [type(m) for m in loaded.conversations[0].messages][:4] == [HumanMessage, AIMessage, ToolMessage, ToolMessage]
    assert loaded.conversations[0].tools == ()


def test_the_usage_of_each_response_is_read_as_the_providers_own_figures(tmp_path: Path) -> None:
    # input_tokens excludes the cached prompt: the prompt is input + cache reads + cache writes.
    first = {"type": "message", "role": "assistant", "content": READ["content"],
             "usage": {"input_tokens": 40, "cache_creation_input_tokens": 900, "cache_read_input_tokens": 0, "output_tokens": 30}}
    second = {"type": "message", "role": "assistant", "content": ANSWER["content"],
              "usage": {"input_tokens": 25, "cache_creation_input_tokens": 60, "cache_read_input_tokens": 900, "output_tokens": 12}}
    no_figures = {"type": "message", "role": "assistant", "content": ANSWER["content"], "usage": {"output_tokens": 5}}
    other = {"role": "user", "content": "List the open issues."}
    path = write(tmp_path, "log.jsonl", request(ASK), first, request(other), no_figures, request(ASK, READ, RESULTS), second)
    [main, side] = load_file(path).conversations
    assert [(u.prompt_tokens, u.cached_tokens) for u in main.usage] == [(940, 0), (985, 900)]
    assert side.usage == ()  # a response without input figures adds none


def test_usage_that_is_not_a_count_is_left_out(tmp_path: Path) -> None:
    odd = {"type": "message", "role": "assistant", "content": ANSWER["content"],
           "usage": {"input_tokens": "12", "cache_read_input_tokens": 3}}
    negative = {"type": "message", "role": "assistant", "content": ANSWER["content"],
                "usage": {"input_tokens": 12, "cache_read_input_tokens": -3}}
    [one] = load_file(write(tmp_path, "odd.jsonl", request(ASK), odd)).conversations
    [two] = load_file(write(tmp_path, "neg.jsonl", request(ASK), negative)).conversations
    assert one.usage == () and two.usage == ()


def test_a_file_of_many_anthropic_conversations_is_read_without_comparing_each_with_every_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_key: Any
) -> None:
    count = 300
    bodies = [
        {"system": "You are helpful.", "messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": [{"type": "text", "text": f"a{i}"}]}]}
        for i in range(count)
    ]
    real_key = _anthropic._plain
    monkeypatch.setattr(_anthropic, "_plain", lambda value: counted_key(real_key(value)))
    counted_key.compared = 0

    loaded = load_file(write(tmp_path, "dataset.jsonl", *bodies))

    assert [len(c.messages) for c in loaded.conversations] == [3] * count
    assert [c.messages[1].content for c in loaded.conversations] == [f"q{i}" for i in range(count)]
    assert counted_key.compared <= 10 * count  # linear in the file, not in pairs of conversations
