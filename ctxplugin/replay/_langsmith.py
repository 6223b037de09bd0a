"""LangSmith run exports: runs (``client.list_runs`` dumps, or a run read with its
``child_runs``) whose chat-model runs hold the history each call saw (``inputs.messages``) and
the reply (``outputs``). The runs of one trace form one conversation, read from the run that saw
the longest history.
"""

from __future__ import annotations

from typing import Any

from ctxplugin.errors import InvalidInputError
from ctxplugin.replay import _anthropic, _chat_logs
from ctxplugin.replay._conversation import Conversation, RecordedUsage
from ctxplugin.replay._messages import is_message, is_openai_message, to_messages

Builder = tuple[str, Any]


def is_run(value: Any) -> bool:
    """Whether ``value`` is a LangSmith run: ``inputs`` and a ``run_type`` or ``outputs``."""
    return isinstance(value, dict) and isinstance(value.get("inputs"), dict) and ("run_type" in value or "outputs" in value)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _describe(value: Any) -> str:
    if isinstance(value, dict):
        return f"an object with keys {sorted(value)[:6]}"
    return f"a {type(value).__name__}"


def parse(data: Any, stem: str) -> list[Builder]:
    """The conversations of a LangSmith export: per trace, the chat-model run that saw the longest
    history, with its reply."""
    runs = data.get("runs") if isinstance(data, dict) and "runs" in data else data
    if isinstance(runs, dict):
        runs = [runs]
    if not isinstance(runs, list):
        raise InvalidInputError("a LangSmith export is a list of runs (or {'runs': [...]})")
    best: dict[str, tuple[int, int, list[Any], dict[str, Any]]] = {}
    usage: dict[str, list[RecordedUsage]] = {}
    for index, run in enumerate(runs):
        if not is_run(run):
            raise InvalidInputError(f"item {index} is {_describe(run)}, not a LangSmith run")
    runs = _with_child_runs(runs)
    # Chat-model runs hold the exact history each call saw; chains only when there are none.
    only_llm = any(run.get("run_type") == "llm" for run in runs)
    for index, run in enumerate(runs):
        if only_llm and run.get("run_type") != "llm":
            continue
        raw = _run_messages(run, index)
        if raw is None:
            continue
        trace = str(run.get("trace_id") or run.get("id") or f"{stem}#{index}")
        figures = _run_usage(run)
        if figures is not None:
            usage.setdefault(trace, []).append(figures)
        if trace not in best or len(raw) > best[trace][1]:
            best[trace] = (best[trace][0] if trace in best else index, len(raw), raw, run)
    if not best:
        raise InvalidInputError("no run with inputs.messages (chat model runs) in this export")
    ordered = sorted(best.items(), key=lambda item: item[1][0])
    return [_builder(trace, raw, run, tuple(usage.get(trace, ()))) for trace, (_, _, raw, run) in ordered]


def _builder(trace: str, raw: list[Any], run: dict[str, Any], usage: tuple[RecordedUsage, ...]) -> Builder:
    return (trace, lambda: _run_conversation(trace, raw, run, usage))


def _run_conversation(trace: str, raw: list[Any], run: dict[str, Any], usage: tuple[RecordedUsage, ...]) -> Conversation:
    """The conversation of a chat-model run, with the provider's figures of every call of its
    trace: a traced Anthropic client call (its inputs are the request body) is read as an
    Anthropic request, with its ``system`` and tool blocks."""
    inputs = run["inputs"]
    if _anthropic.is_request(inputs) and all(is_openai_message(m) for m in inputs["messages"]):
        reply = raw[len(inputs["messages"]) :]
        body = {**inputs, "messages": [*inputs["messages"], *({"role": "assistant", "content": m.get("content")} for m in reply)]}
        return _anthropic.conversation(trace, body, usage)
    return Conversation(id=trace, messages=tuple(to_messages(raw)), tools=_run_tools(run), usage=usage)


def _run_usage(run: dict[str, Any]) -> RecordedUsage | None:
    """The provider's figures of one chat-model run: the reply's ``usage_metadata`` (LangChain's,
    cache hits in ``input_token_details.cache_read``), else the client response's ``usage``
    (OpenAI or Anthropic names), else ``llm_output.token_usage``."""
    outputs = _mapping(run.get("outputs"))
    reply = _run_output(outputs)
    if isinstance(reply, dict):
        data = _mapping(reply.get("kwargs") if reply.get("lc") == 1 else reply.get("data", reply))
        metadata = data.get("usage_metadata")
        if isinstance(metadata, dict) and isinstance(metadata.get("input_tokens"), int):
            cached = _mapping(metadata.get("input_token_details")).get("cache_read")
            return RecordedUsage(metadata["input_tokens"], cached if isinstance(cached, int) else 0)
    figures = outputs.get("usage")
    if isinstance(figures, dict):
        if "prompt_tokens" in figures or "input_tokens_details" in figures:
            return _chat_logs.openai_usage(figures)
        return _anthropic.recorded_usage(figures)
    return _chat_logs.openai_usage(_mapping(outputs.get("llm_output")).get("token_usage"))


def _run_tools(run: dict[str, Any]) -> tuple[dict[str, Any], ...]:
    """The tools a chat-model run was called with: ``inputs.tools`` (a traced client call) or
    the ``tools`` its model was bound with (``extra.invocation_params``), OpenAI or Anthropic
    definitions, as OpenAI-format schemas."""
    tools = run["inputs"].get("tools")
    if not isinstance(tools, list):
        tools = _mapping(_mapping(run.get("extra")).get("invocation_params")).get("tools")
    if not isinstance(tools, list):
        return ()
    if any(isinstance(t, dict) and "input_schema" in t for t in tools):
        return _anthropic.tools(tools)
    return _chat_logs.request_tools(tools)


def _with_child_runs(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The runs and, depth first, the runs nested in their ``child_runs`` (what
    ``read_run(..., load_child_runs=True)`` returns), each taking its trace from the top run
    when it names none."""
    out: list[dict[str, Any]] = []
    pending: list[tuple[dict[str, Any], Any]] = [(run, None) for run in reversed(runs)]
    while pending:
        run, trace = pending.pop()
        if trace is not None and not run.get("trace_id"):
            run = {**run, "trace_id": trace}
        out.append(run)
        children = run.get("child_runs")
        if isinstance(children, list):
            top = run.get("trace_id") or run.get("id") or trace
            pending.extend((child, top) for child in reversed(children) if is_run(child))
    return out


def _run_messages(run: dict[str, Any], index: int) -> list[Any] | None:
    """The history a chat-model run saw plus the message it produced."""
    messages = run["inputs"].get("messages")
    if not isinstance(messages, list) or not messages:
        return None
    if isinstance(messages[0], list):  # batched chat-model inputs: one list per prompt
        messages = messages[0]
    reply = _run_output(run.get("outputs"))
    if reply is None:
        return list(messages)
    return [*messages, reply]


def _run_output(outputs: Any) -> Any:
    if not isinstance(outputs, dict):
        return None
    if is_message(outputs):
        return outputs
    generations = outputs.get("generations")
    if isinstance(generations, list) and generations:
        first = generations[0][0] if isinstance(generations[0], list) and generations[0] else generations[0]
        if isinstance(first, dict) and is_message(first.get("message")):
            return first["message"]
    choices = outputs.get("choices")
    if isinstance(choices, list) and choices and isinstance(choices[0], dict):
        message = choices[0].get("message")
        if is_openai_message(message):
            return message
    message = outputs.get("message") or outputs.get("output")
    return message if is_message(message) else None


__all__ = ["is_run", "parse"]
