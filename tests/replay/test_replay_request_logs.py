"""Recordings as request logs: OpenAI Chat Completions request bodies, one per model call, and
LangSmith exports whose chat-model runs are nested under the trace's root run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from typer.testing import CliRunner

from ctxplugin.cli import app
from ctxplugin.replay import _chat_logs, load_file

FIXTURES = Path(__file__).resolve().parent / "fixtures"
RECORDINGS = FIXTURES / "recordings"
TOOLS = FIXTURES / "tau-airline-tools.json"


def replay_json(*args: str | Path) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["replay", *(str(a) for a in args), "--json", "-q", "--strategies", "full,ctxplugin"])
    assert result.exit_code == 0, result.output
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def conversation() -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = json.loads((RECORDINGS / "openai-chat.json").read_text())["messages"]
    return messages


def tools() -> list[dict[str, Any]]:
    schemas: list[dict[str, Any]] = json.loads(TOOLS.read_text())
    return schemas


def write_jsonl(path: Path, items: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


def requests(messages: list[dict[str, Any]], *, responses: bool) -> list[dict[str, Any]]:
    """What a logging proxy writes: one request body per assistant message (the history it was
    sent), each optionally followed by the chat.completion that answered it."""
    log: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        if message["role"] != "assistant":
            continue
        history = [dict(m) for m in messages[:index]]
        log.append({"model": "gpt-4o-2024-08-06", "messages": history, "tools": tools(), "tool_choice": "auto", "temperature": 0})
        if responses:
            reply = {"refusal": None, **message}
            log.append(
                {
                    "id": f"chatcmpl-{index}",
                    "object": "chat.completion",
                    "model": "gpt-4o-2024-08-06",
                    "choices": [{"index": 0, "message": reply, "finish_reason": "tool_calls" if message.get("tool_calls") else "stop"}],
                    "usage": {"prompt_tokens": 1000 + index, "completion_tokens": 20, "prompt_tokens_details": {"cached_tokens": 512}},
                }
            )
    return log


def test_a_request_log_is_one_conversation_with_the_tools_it_sent(tmp_path: Path) -> None:
    messages = conversation()
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    log = write_jsonl(tmp_path / "requests.jsonl", requests(messages, responses=False))
    # the last request's answer was never logged: the conversation is what that request held
    same = tmp_path / "same.json"
    same.write_text(json.dumps(messages[:last]), encoding="utf-8")

    loaded = load_file(log)
    assert (loaded.format, loaded.errors, len(loaded.conversations)) == ("openai", [], 1)
    assert len(loaded.conversations[0].tools) == len(tools())

    got, expected = replay_json(log), replay_json(same, "--tools", TOOLS)
    [conv] = got["files"][0]["conversations"]
    [want] = expected["files"][0]["conversations"]
    assert conv["calls"] == want["calls"] == sum(1 for m in messages[1:last] if m["role"] == "assistant")
    assert conv["strategies"] == want["strategies"]
    assert got["totals"]["full"]["tool_schema_tokens"] > 0


def test_a_request_log_with_its_responses_holds_the_last_reply_and_the_providers_figures(tmp_path: Path) -> None:
    messages = conversation()
    log = write_jsonl(tmp_path / "requests.jsonl", requests(messages, responses=True))
    same = tmp_path / "same.json"
    same.write_text(json.dumps(messages), encoding="utf-8")

    got, expected = replay_json(log), replay_json(same, "--tools", TOOLS)
    [conv] = got["files"][0]["conversations"]
    [want] = expected["files"][0]["conversations"]
    assert conv["strategies"] == want["strategies"]
    calls = sum(1 for m in messages[1:] if m["role"] == "assistant")
    recorded = got["files"][0]["recorded"]
    assert recorded["calls"] == calls
    assert recorded["cached_tokens"] == 512 * calls


def test_a_request_log_whose_system_prompt_changes_per_call_is_one_conversation(tmp_path: Path) -> None:
    # a host that puts the time in its system prompt sends a new prompt on every call
    messages = conversation()
    log = requests(messages, responses=True)
    for number, item in enumerate(i for i in log if "messages" in i):
        item["messages"][0] = {"role": "system", "content": f"{messages[0]['content']} The time is 10:{number:02d}."}
    last_prompt = next(i for i in reversed(log) if "messages" in i)["messages"][0]

    loaded = load_file(write_jsonl(tmp_path / "timed.jsonl", log))

    assert loaded.errors == []
    [one] = loaded.conversations
    assert [m.content for m in one.messages[1:]] == [m.content for m in load_file(write_jsonl(tmp_path / "plain.jsonl", requests(messages, responses=True))).conversations[0].messages[1:]]
    assert one.messages[0].content == last_prompt["content"]  # the prompt of its latest call


def test_conversations_that_differ_after_their_system_prompts_stay_apart(tmp_path: Path) -> None:
    first = [{"role": "system", "content": "You are A."}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
    other = [{"role": "system", "content": "You are B."}, {"role": "user", "content": "hi"}, {"role": "assistant", "content": "y"}]

    loaded = load_file(write_jsonl(tmp_path / "two.jsonl", [{"messages": first}, {"messages": other}]))

    assert [[m.content for m in c.messages] for c in loaded.conversations] == [["You are A.", "hi", "x"], ["You are B.", "hi", "y"]]


def test_dataset_rows_that_share_their_turns_under_other_system_prompts_stay_apart(tmp_path: Path) -> None:
    # a fine-tuning or evaluation set: the same turns under each prompt variant, no request bodies
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "x"}]
    rows = [{"messages": [{"role": "system", "content": f"You are {name}."}, *turns]} for name in "AB"]
    rows.append({"messages": [{"role": "system", "content": "You are C."}, *turns, {"role": "user", "content": "more"}]})

    loaded = load_file(write_jsonl(tmp_path / "variants.jsonl", rows))

    assert [c.messages[0].content for c in loaded.conversations] == ["You are A.", "You are B.", "You are C."]


def test_request_bodies_that_do_not_continue_one_another_are_separate_conversations(tmp_path: Path) -> None:
    messages = conversation()
    first = {"model": "gpt-4o", "messages": messages[:3]}
    other = {"model": "gpt-4o", "messages": [messages[0], {"role": "user", "content": "another task"}, {"role": "assistant", "content": "sure"}]}
    loaded = load_file(write_jsonl(tmp_path / "two.jsonl", [first, other]))
    assert [len(c.messages) for c in loaded.conversations] == [3, 3]


def test_a_second_run_of_the_same_task_in_a_log_keeps_its_first_call_and_reply(tmp_path: Path) -> None:
    # two runs of one task: the second's first request repeats the first run's opening messages
    # (a reply that repeats the first run's too is a retry: test_a_call_logged_twice...)
    messages = conversation()
    first_reply = next(i for i, m in enumerate(messages) if m["role"] == "assistant")
    reply = {"role": "assistant", "content": "Hello! How can I help you today?"}  # the same task, a new reply
    again = [*messages[:first_reply], reply, {"role": "user", "content": "another question"}, {"role": "assistant", "content": "sure"}]
    log = write_jsonl(tmp_path / "runs.jsonl", requests(messages, responses=True) + requests(again, responses=True))

    loaded = load_file(log)
    assert loaded.errors == []
    first, second = loaded.conversations
    last = max(i for i, m in enumerate(messages) if m["role"] == "assistant")
    assert len(first.messages) == last + 1  # the second run's reply is not added to the first
    assert len(second.messages) == len(again)
    assert (len(first.usage), len(second.usage)) == (
        sum(1 for m in messages if m["role"] == "assistant"),
        sum(1 for m in again if m["role"] == "assistant"),
    )


def test_a_log_of_the_older_function_calling_api_reads_its_calls_and_results(tmp_path: Path) -> None:
    # requests with `functions`, replies with `function_call`, results as `function` messages
    lookup = {"name": "lookup", "description": "Look a word up.", "parameters": {"type": "object", "properties": {"word": {"type": "string"}}}}
    history: list[dict[str, Any]] = [{"role": "system", "content": "Define words."}, {"role": "user", "content": "What is a tarn?"}]
    replies: list[dict[str, Any]] = [
        {"role": "assistant", "content": None, "function_call": {"name": "lookup", "arguments": '{"word": "tarn"}'}},
        {"role": "assistant", "content": "A small mountain lake."},
    ]
    log: list[dict[str, Any]] = []
    for position, reply in enumerate(replies):
        log.append({"model": "gpt-3.5-turbo-0613", "messages": list(history), "functions": [lookup]})
        log.append({"object": "chat.completion", "choices": [{"index": 0, "message": reply}], "usage": {"prompt_tokens": 50 + position}})
        history += [reply, {"role": "function", "name": "lookup", "content": "tarn: a small mountain lake"}] if position == 0 else [reply]

    loaded = load_file(write_jsonl(tmp_path / "legacy.jsonl", log))

    assert loaded.errors == []
    [conv] = loaded.conversations
    assert [m.type for m in conv.messages] == ["system", "human", "ai", "tool", "ai"]
    call, result = conv.messages[2], conv.messages[3]
    assert isinstance(call, AIMessage) and isinstance(result, ToolMessage)
    assert [(c["name"], c["args"]) for c in call.tool_calls] == [("lookup", {"word": "tarn"})]
    assert (result.tool_call_id, result.name, result.content) == (call.tool_calls[0]["id"], "lookup", "tarn: a small mountain lake")
    assert [t["function"]["name"] for t in conv.tools] == ["lookup"]
    assert len(conv.usage) == 2


def test_a_function_result_without_its_call_is_an_error_naming_the_message(tmp_path: Path) -> None:
    messages = [{"role": "user", "content": "hi"}, {"role": "function", "name": "lookup", "content": "x"}, {"role": "assistant", "content": "ok"}]
    path = tmp_path / "orphan.json"
    path.write_text(json.dumps(messages), encoding="utf-8")

    loaded = load_file(path)

    assert loaded.conversations == []
    assert loaded.errors == ["conversation orphan: message 1 is the result of function 'lookup', but no earlier assistant message called it"]


def test_a_call_logged_twice_with_its_response_is_read_once(tmp_path: Path) -> None:
    # a client that retried a call the server had answered: the proxy logged both exchanges
    messages = conversation()
    log = requests(messages, responses=True)
    once = write_jsonl(tmp_path / "once.jsonl", log)
    twice = write_jsonl(tmp_path / "twice.jsonl", [*log[:2], *log[:2], *log[2:]])

    loaded, expected = load_file(twice), load_file(once)

    assert loaded.errors == []
    assert [c.messages for c in loaded.conversations] == [c.messages for c in expected.conversations]


def test_a_file_of_many_conversations_is_read_without_comparing_each_with_every_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted_key: Any
) -> None:
    # a fine-tuning style JSONL: one conversation per line, all with the same system prompt
    count = 400
    lines = [
        {"messages": [{"role": "system", "content": "You are helpful."}, {"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]}
        for i in range(count)
    ]
    real_key = _chat_logs.message_key
    monkeypatch.setattr(_chat_logs, "message_key", lambda message: counted_key(real_key(message)))
    counted_key.compared = 0

    loaded = load_file(write_jsonl(tmp_path / "dataset.jsonl", lines))

    assert [len(c.messages) for c in loaded.conversations] == [3] * count
    assert [c.messages[1].content for c in loaded.conversations] == [f"q{i}" for i in range(count)]
    assert counted_key.compared <= 10 * count  # linear in the file, not in pairs of conversations


def nested_langsmith_root() -> dict[str, Any]:
    """The fixture's runs as `client.read_run(trace_id, load_child_runs=True)` returns them: the
    root run with its chat-model runs under ``child_runs``."""
    runs: list[dict[str, Any]] = json.loads((RECORDINGS / "langsmith-runs.json").read_text())
    [root] = [r for r in runs if r.get("parent_run_id") is None and r["run_type"] == "chain"]
    children = [r for r in runs if r is not root]
    agent = {**root, "id": "agent-node", "parent_run_id": root["id"], "name": "agent", "child_runs": children}
    return {**root, "child_runs": [agent]}


def test_a_langsmith_root_run_with_nested_child_runs_reads_its_chat_model_runs(tmp_path: Path) -> None:
    nested = tmp_path / "nested.json"
    nested.write_text(json.dumps(nested_langsmith_root()), encoding="utf-8")
    got, expected = replay_json(nested), replay_json(RECORDINGS / "langsmith-runs.json")
    assert got["files"][0]["status"] == "ok", got["files"][0]["errors"]
    assert got["files"][0]["conversations"] == expected["files"][0]["conversations"]


def test_the_tools_a_langsmith_chat_model_run_was_bound_with_are_sent(tmp_path: Path) -> None:
    runs: list[dict[str, Any]] = json.loads((RECORDINGS / "langsmith-runs.json").read_text())
    anthropic = [{"name": t["function"]["name"], "description": t["function"]["description"], "input_schema": t["function"]["parameters"]} for t in tools()]
    for run in runs:
        if run["run_type"] == "llm":
            run["extra"] = {"invocation_params": {"model": "gpt-4o", "tools": tools(), "tool_choice": "auto"}}
    openai_style = tmp_path / "openai-bound.json"
    openai_style.write_text(json.dumps(runs), encoding="utf-8")
    for run in runs:
        if run["run_type"] == "llm":
            run["extra"] = {"invocation_params": {"model": "claude-sonnet-4-5"}}
            run["inputs"] = {**run["inputs"], "tools": anthropic}
    anthropic_style = tmp_path / "anthropic-bound.json"
    anthropic_style.write_text(json.dumps(runs), encoding="utf-8")

    expected = replay_json(RECORDINGS / "langsmith-runs.json", "--tools", TOOLS)
    for path in (openai_style, anthropic_style):
        assert len(load_file(path).conversations[0].tools) == len(tools())
        got = replay_json(path)
        assert got["files"][0]["conversations"] == expected["files"][0]["conversations"]


def responses_items(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages (after the system prompt) as Responses API input items."""
    items: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "user":
            items.append({"role": "user", "content": [{"type": "input_text", "text": message["content"]}]})
        elif message["role"] == "assistant":
            if message.get("content"):
                items.append({"type": "message", "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": message["content"], "annotations": []}]})
            for call in message.get("tool_calls") or []:
                items.append({"type": "function_call", "call_id": call["id"], "name": call["function"]["name"], "arguments": call["function"]["arguments"], "status": "completed"})
        elif message["role"] == "tool":
            items.append({"type": "function_call_output", "call_id": message["tool_call_id"], "output": message["content"]})
    return items


def responses_tools() -> list[dict[str, Any]]:
    return [{"type": "function", **t["function"]} for t in tools()] + [{"type": "web_search_preview"}]


def test_a_responses_api_request_reads_as_the_chat_it_holds(tmp_path: Path) -> None:
    messages = conversation()
    assert messages[0]["role"] == "system"
    request = {"model": "gpt-4.1", "instructions": messages[0]["content"], "input": responses_items(messages[1:]), "tools": responses_tools()}
    path = tmp_path / "responses.json"
    path.write_text(json.dumps(request), encoding="utf-8")
    same = tmp_path / "same.json"
    same.write_text(json.dumps(messages), encoding="utf-8")
    got, expected = replay_json(path), replay_json(same, "--tools", TOOLS)
    assert got["files"][0]["format"] == "openai"
    assert got["files"][0]["conversations"][0]["strategies"] == expected["files"][0]["conversations"][0]["strategies"]


def test_a_responses_api_log_chained_by_previous_response_id_is_one_conversation(tmp_path: Path) -> None:
    messages = conversation()
    log: list[dict[str, Any]] = []
    sent = 1  # messages already in the conversation the next request continues
    for index, message in enumerate(messages):
        if message["role"] != "assistant" or index == 0:
            continue
        request: dict[str, Any] = {"model": "gpt-4.1", "instructions": messages[0]["content"], "input": responses_items(messages[sent:index]), "tools": responses_tools()}
        if log:
            request["previous_response_id"] = log[-1]["id"]
        reasoning = {"type": "reasoning", "id": f"rs_{index}", "summary": []}
        output = [reasoning, *responses_items([message])]
        usage = {"input_tokens": 900 + index, "input_tokens_details": {"cached_tokens": 256}, "output_tokens": 30}
        log += [request, {"id": f"resp_{index}", "object": "response", "status": "completed", "output": output, "usage": usage}]
        sent = index + 1
    path = write_jsonl(tmp_path / "responses.jsonl", log)
    same = tmp_path / "same.json"
    same.write_text(json.dumps(messages[:sent]), encoding="utf-8")

    loaded = load_file(path)
    assert (loaded.errors, len(loaded.conversations)) == ([], 1)
    got, expected = replay_json(path), replay_json(same, "--tools", TOOLS)
    assert got["files"][0]["conversations"][0]["strategies"] == expected["files"][0]["conversations"][0]["strategies"]
    calls = expected["files"][0]["conversations"][0]["calls"]
    assert got["files"][0]["recorded"]["cached_tokens"] == 256 * calls


def graph_messages() -> list[dict[str, Any]]:
    """The langchain fixture's messages as LangGraph's server API returns a thread's messages."""
    dumped: list[dict[str, Any]] = json.loads((RECORDINGS / "langchain-messages.json").read_text())
    return [{**m["data"], "type": m["type"]} for m in dumped]


def test_a_langgraph_thread_state_and_its_history_read_as_the_thread(tmp_path: Path) -> None:
    messages = graph_messages()
    config = {"configurable": {"thread_id": "thread-7", "checkpoint_ns": "", "checkpoint_id": "1ef-3"}}
    state = {"values": {"messages": messages}, "next": [], "checkpoint": config["configurable"], "metadata": {"step": 9}, "created_at": "2024-05-15T15:00:00+00:00"}
    # /threads/{id}/history: every checkpoint, newest first
    ends = [i + 1 for i, m in enumerate(messages) if m["type"] == "ai"]
    history = [{**state, "values": {"messages": messages[:end]}} for end in reversed(ends)]
    checkpoint = {"v": 1, "id": "1ef-3", "ts": "2024-05-15T15:00:00+00:00", "channel_values": {"messages": json.loads((RECORDINGS / "langchain-messages.json").read_text())}, "channel_versions": {}}
    expected = replay_json(RECORDINGS / "langchain-messages.json")["files"][0]["conversations"][0]["strategies"]
    for name, document in (("state", state), ("history", history), ("checkpoint", {"config": config, "checkpoint": checkpoint})):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(document), encoding="utf-8")
        loaded = load_file(path)
        assert (loaded.format, loaded.errors, len(loaded.conversations)) == ("langchain", [], 1), name
        got = replay_json(path)["files"][0]["conversations"][0]["strategies"]
        assert got == expected, name


def test_langsmith_runs_of_a_traced_anthropic_client_keep_the_system_prompt_and_tool_results(tmp_path: Path) -> None:
    # langsmith.wrappers.wrap_anthropic: each run's inputs are the request body, its outputs the response
    log = [json.loads(line) for line in (RECORDINGS / "anthropic-requests.jsonl").read_text().splitlines()]
    runs: list[dict[str, Any]] = [{"id": "root", "trace_id": "t1", "name": "agent", "run_type": "chain", "inputs": {"question": "..."}, "outputs": {}}]
    for index in range(0, len(log) - 1, 2):
        request, response = log[index], log[index + 1]
        runs.append({"id": f"r{index}", "trace_id": "t1", "parent_run_id": "root", "name": "ChatAnthropic", "run_type": "llm", "inputs": request, "outputs": response})
    path = tmp_path / "traced.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    [conv] = load_file(path).conversations
    assert type(conv.messages[0]).__name__ == "SystemMessage"
    assert "ToolMessage" in {type(m).__name__ for m in conv.messages}
    got, expected = replay_json(path), replay_json(RECORDINGS / "anthropic-requests.jsonl")
    assert got["files"][0]["conversations"][0]["strategies"] == expected["files"][0]["conversations"][0]["strategies"]


def test_every_chat_model_run_of_a_trace_gives_the_providers_figures_of_its_call(tmp_path: Path) -> None:
    log = [json.loads(line) for line in (RECORDINGS / "anthropic-requests.jsonl").read_text().splitlines()]
    traced = [{"id": f"r{i}", "trace_id": "t1", "run_type": "llm", "inputs": log[i], "outputs": log[i + 1]} for i in range(0, len(log) - 1, 2)]
    path = tmp_path / "traced.json"
    path.write_text(json.dumps(traced), encoding="utf-8")
    assert replay_json(path)["files"][0]["recorded"] == replay_json(RECORDINGS / "anthropic-requests.jsonl")["files"][0]["recorded"]

    runs: list[dict[str, Any]] = json.loads((RECORDINGS / "langsmith-runs.json").read_text())
    chat_runs = [r for r in runs if r["run_type"] == "llm"]
    for number, run in enumerate(chat_runs):
        message = run["outputs"]["generations"][0][0]["message"]
        message["kwargs"]["usage_metadata"] = {"input_tokens": 2000 + number, "output_tokens": 40, "total_tokens": 2040 + number, "input_token_details": {"cache_read": 1024}}
    path = tmp_path / "langchain-usage.json"
    path.write_text(json.dumps(runs), encoding="utf-8")
    recorded = replay_json(path)["files"][0]["recorded"]
    assert (recorded["calls"], recorded["cached_tokens"]) == (len(chat_runs), 1024 * len(chat_runs))
    assert recorded["prompt_tokens"] == sum(2000 + n for n in range(len(chat_runs)))
