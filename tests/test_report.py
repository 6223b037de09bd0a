"""The per-call report: expanded refs, structured log records, run totals."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from pytest_mock import MockerFixture

from ctxplugin import (
    ContextCallbackHandler,
    ContextConfig,
    ContextEngine,
    RefNotFoundError,
    RunSummary,
    Scope,
)
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="report")


def conversation() -> list[BaseMessage]:
    rows = json.dumps([{"order_id": f"#W{1000 + i}", "total": i * 3.5} for i in range(120)])
    return [
        SystemMessage(content="You are a support agent."),
        HumanMessage(content="List my orders"),
        AIMessage(content="", tool_calls=[{"name": "list_orders", "args": {}, "id": "c1"}]),
        ToolMessage(content=rows, tool_call_id="c1", name="list_orders"),
    ]


def test_refs_expanded_since_the_previous_call_are_reported() -> None:
    engine = memory_engine()
    first = engine.prepare(conversation(), scope=SCOPE)
    assert first.report.refs_expanded == []
    ref = first.report.refs_used[0]
    messages = [
        *conversation(),
        AIMessage(content="", tool_calls=[{"name": "expand_ref", "args": {"ref_id": ref, "limit": 2}, "id": "c2"}]),
        ToolMessage(content=engine.expand_ref(ref, scope=SCOPE, limit=2), tool_call_id="c2", name="expand_ref"),
    ]
    second = engine.prepare(messages, scope=SCOPE)
    assert second.report.refs_expanded == [ref]
    assert second.report.as_metadata()["ctxplugin.refs_expanded"] == [ref]


def _twice_read(captured: bool, engine: ContextEngine, scope: Scope) -> list[BaseMessage]:
    """The same file read twice: two tool outputs with one content, so one content-addressed ref."""
    rows = json.dumps([{"order_id": f"#W{1000 + i}", "total": i * 3.5} for i in range(120)])
    messages: list[BaseMessage] = [SystemMessage("You are a support agent."), HumanMessage("List my orders, twice.")]
    for call in ("c1", "c2"):
        output = ToolMessage(content=rows, tool_call_id=call, name="list_orders")
        messages += [
            AIMessage(content="", tool_calls=[{"name": "list_orders", "args": {}, "id": call}]),
            engine.capture_tool_result(output, scope) if captured else output,
        ]
    return messages


@pytest.mark.parametrize("captured", [True, False], ids=["captured", "raw"])
def test_a_ref_shown_twice_is_one_ref_used(captured: bool) -> None:
    engine, scope = memory_engine(), Scope(session_id=f"twice-{captured}")
    prepared = engine.prepare(_twice_read(captured, engine, scope), scope=scope)
    notes = [m.additional_kwargs.get("ctxplugin", {}) for m in prepared.messages if isinstance(m, ToolMessage)]
    shown = [str(note["ref"]) for note in notes if "ref" in note]
    assert len(shown) == 2 and shown[0] == shown[1], "both outputs are shown, as one ref"
    report = prepared.report
    assert report.refs_used == shown[:1]
    assert report.as_metadata()["ctxplugin.refs_used"] == 1
    assert len(report.refs_created) == len(set(report.refs_created)) <= 1


def test_a_whole_conversation_that_keeps_compact_outputs_reports_the_refs_it_shows() -> None:
    # the default mode; the host keeps what capture_tool_result returned (keep_originals=False): the conversation
    # fits and goes whole, and shows the refs of those outputs, each once, in order
    engine, scope = memory_engine(ContextConfig(mode="whole")), Scope(session_id="whole-compact")
    messages = _twice_read(True, engine, scope)
    first = engine.capture_tool_result(ToolMessage(content=json.dumps([{"sku": f"P{i}", "stock": i} for i in range(120)]), tool_call_id="c0", name="stock"), scope)
    messages[2:2] = [AIMessage(content="", tool_calls=[{"name": "stock", "args": {}, "id": "c0"}]), first]
    prepared = engine.prepare(messages, scope=scope)
    assert [m.content for m in prepared.messages if isinstance(m, ToolMessage) and "synthetic" not in m.additional_kwargs.get("ctxplugin", {})] == [
        m.content for m in messages if isinstance(m, ToolMessage)
    ], "went whole"
    outputs = [m for m in prepared.messages if isinstance(m, ToolMessage) and "ref" in m.additional_kwargs.get("ctxplugin", {})]
    shown = [str(m.additional_kwargs["ctxplugin"]["ref"]) for m in outputs]
    assert len(outputs) == 3 and all(str(m.content).startswith(f"[{ref} ") for ref, m in zip(shown, outputs, strict=True))
    assert prepared.report.refs_used == list(dict.fromkeys(shown)) and len(set(shown)) == 2


def test_a_ref_the_model_expands_twice_in_one_turn_is_one_ref_expanded() -> None:
    engine = memory_engine()
    ref = engine.prepare(conversation(), scope=SCOPE).report.refs_used[0]
    pages = [(f"c{2 + page}", {"ref_id": ref, "offset": 2 * page, "limit": 2}) for page in range(2)]
    messages = [
        *conversation(),
        AIMessage(content="", tool_calls=[{"name": "expand_ref", "args": args, "id": call} for call, args in pages]),
        *(ToolMessage(content=engine.expand_ref(ref, scope=SCOPE, offset=int(args["offset"]), limit=2), tool_call_id=call,
                      name="expand_ref") for call, args in pages),
    ]
    report = engine.prepare(messages, scope=SCOPE).report
    assert report.refs_expanded == [ref]
    assert report.as_metadata()["ctxplugin.refs_expanded"] == [ref]


def test_a_tool_that_expands_a_ref_itself_is_counted_as_an_expand() -> None:
    engine, handler = memory_engine(), ContextCallbackHandler()
    prepared = engine.prepare(conversation(), scope=SCOPE)
    ref = prepared.report.refs_used[0]
    read = RunnableLambda(lambda ref_id: engine.expand_ref(ref_id, scope=SCOPE, limit=2))
    assert "#W1000" in read.invoke(ref, {"callbacks": [handler]})
    assert handler.expanded == [ref]
    assert handler.describe().endswith("1 expands, 0 cache hits")


def test_the_expand_ref_tool_counts_one_expand_per_call() -> None:
    engine, handler = memory_engine(), ContextCallbackHandler()
    ref = engine.prepare(conversation(), scope=SCOPE).report.refs_used[0]
    [expand_tool, _] = engine.tools_for_model()
    assert "#W1000" in str(expand_tool.invoke({"ref_id": ref, "limit": 2}, {"callbacks": [handler],
                                                                         "configurable": {"thread_id": "report"}}))
    assert handler.expanded == [ref]


@pytest.mark.parametrize("ref_id", ["ref:list_orders:0123456789abcdef", "other"], ids=["unknown", "other-scope"])
def test_an_expand_ref_tool_call_that_fails_is_not_counted(ref_id: str) -> None:
    # the tool tells the model a read failed, as engine.expand_ref raises: neither is an expand
    engine, handler = memory_engine(), ContextCallbackHandler()
    ref = engine.prepare(conversation(), scope=Scope(session_id="other")).report.refs_used[0]
    [expand_tool, _] = engine.tools_for_model()
    config: Any = {"callbacks": [handler], "configurable": {"thread_id": "report"}}
    answer = str(expand_tool.invoke({"ref_id": ref if ref_id == "other" else ref_id}, config))
    assert answer.startswith("expand_ref: no such ref visible here")
    assert str(expand_tool.invoke({"ref_id": ref, "offset": -1}, config)).startswith("expand_ref:")
    assert handler.expanded == []


async def test_reads_in_async_runs_are_counted_once_each() -> None:
    engine, handler = memory_engine(), ContextCallbackHandler()
    ref = engine.prepare(conversation(), scope=SCOPE).report.refs_used[0]
    [expand_tool, _] = engine.tools_for_model()
    config: Any = {"callbacks": [handler], "configurable": {"thread_id": "report"}}
    assert "#W1000" in str(await expand_tool.ainvoke({"ref_id": ref, "limit": 2}, config))

    async def read(ref_id: str) -> str:
        text: str = engine.expand_ref(ref_id, scope=SCOPE, limit=2)
        return text

    assert "#W1000" in await RunnableLambda(read).ainvoke(ref, config)
    assert handler.expanded == [ref, ref]


def test_an_expand_that_fails_is_not_counted() -> None:
    engine, handler = memory_engine(), ContextCallbackHandler()
    read = RunnableLambda(lambda ref_id: engine.expand_ref(ref_id, scope=SCOPE))
    with pytest.raises(RefNotFoundError):
        read.invoke("ref:list_orders:0123456789abcdef", {"callbacks": [handler]})
    assert handler.expanded == []


def test_each_prepare_logs_one_structured_record(caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    with caplog.at_level(logging.DEBUG, logger="ctxplugin"):
        prepared = engine.prepare(conversation(), scope=SCOPE)
    records = [r for r in caplog.records if r.getMessage().startswith("ctxplugin.prepare")]
    assert len(records) == 1
    meta = records[0].ctxplugin  # type: ignore[attr-defined]
    assert meta["ctxplugin.session_id"] == "report"
    assert meta["ctxplugin.tokens_after"] == prepared.report.tokens_after


def test_callback_handler_sums_reports_over_a_run() -> None:
    engine = memory_engine()
    handler = ContextCallbackHandler(engine)

    def step(messages: list[BaseMessage]) -> int:
        return int(engine.prepare(messages, scope=SCOPE).report.tokens_after)

    chain = RunnableLambda(step)
    sent = [chain.invoke(conversation(), {"callbacks": [handler]}) for _ in range(3)]
    assert handler.summary.calls == 3
    assert handler.summary.tokens_after == sum(sent)
    assert handler.summary.tokens_before > handler.summary.tokens_after
    assert 0 < handler.summary.reduction < 1
    assert [r.session_id for r in handler.reports] == ["report"] * 3


def test_no_callback_events_outside_a_run() -> None:
    handler = ContextCallbackHandler()
    memory_engine().prepare(conversation(), scope=SCOPE)
    assert handler.summary.calls == 0


def test_each_report_names_the_refs_its_call_stored_and_a_summary_counts_each_once() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base", budget={"total": 3000}))
    scope = Scope(session_id="refs-per-call")
    history: list[BaseMessage] = [SystemMessage("You read files."), HumanMessage("Read the files.")]
    summary = RunSummary()
    created: list[list[str]] = []
    for i in range(5):
        history.append(AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"cat f{i}.txt"}, "id": f"c{i}"}]))
        history.append(ToolMessage("\n".join(f"line {j} of f{i}: value_{i}_{j}" for j in range(300)), tool_call_id=f"c{i}", name="bash"))
        report = engine.prepare(history, scope=scope).report
        created.append(list(report.refs_created))
        summary.add(report)
    assert all(len(refs) == 1 for refs in created), created
    assert len({ref for refs in created for ref in refs}) == 5
    assert summary.refs_created == 5


def _runs_sent(client: object, name: str) -> list[dict[str, object]]:
    """The metadata of each run named ``name`` that was ended through ``client``."""
    return [
        call.kwargs["extra"]["metadata"]
        for call in client.update_run.call_args_list  # type: ignore[attr-defined]
        if call.kwargs.get("name") == name
    ]


def test_prepare_and_capture_report_to_a_traced_run(mocker: MockerFixture) -> None:
    from langsmith.run_helpers import trace, tracing_context

    client = mocker.MagicMock()  # the hosted LangSmith API: only what it is sent is looked at
    engine = memory_engine()
    with tracing_context(enabled=True, client=client, project_name="ctxplugin-tests"), trace("agent", client=client):
        prepared = engine.prepare(conversation(), scope=SCOPE)
        engine.capture_tool_result(ToolMessage(content="x" * 4000, tool_call_id="c9", name="bash"), SCOPE)
    [meta] = _runs_sent(client, "ctxplugin.prepare")
    assert meta["ctxplugin.tokens_after"] == prepared.report.tokens_after
    assert meta["ctxplugin.refs_used"] == len(prepared.report.refs_used) == 1
    assert meta["ctxplugin.values_left"] == len(prepared.report.values_left)
    timings = meta["ctxplugin.timings_ms"]
    assert isinstance(timings, dict) and set(timings) >= {"validate", "history", "total"}
    [captured] = _runs_sent(client, "ctxplugin.capture_tool_result")
    assert captured["ctxplugin.tool_call_id"] == "c9" and captured["ctxplugin.passthrough"] is False


def test_untraced_calls_make_no_trace_metadata(mocker: MockerFixture, caplog: pytest.LogCaptureFixture) -> None:
    from ctxplugin.report import CaptureReport, ContextReport

    made = mocker.spy(ContextReport, "as_metadata")
    made_capture = mocker.spy(CaptureReport, "as_metadata")
    engine = memory_engine()
    caplog.set_level(logging.INFO, logger="ctxplugin")
    engine.prepare(conversation(), scope=SCOPE)
    engine.capture_tool_result(ToolMessage(content="x" * 4000, tool_call_id="c9", name="bash"), SCOPE)
    assert made.call_count == 0 and made_capture.call_count == 0
    caplog.set_level(logging.DEBUG, logger="ctxplugin")
    engine.prepare(conversation(), scope=SCOPE)
    assert made.call_count == 1  # the debug record carries it


class _RaisingHandler(BaseCallbackHandler):
    """A handler that asks LangChain to raise its errors, and fails on every custom event."""

    raise_error = True

    def on_custom_event(self, name: str, data: object, **kwargs: object) -> None:
        raise ValueError(f"handler failed on {name}")


def test_a_handler_that_raises_on_an_event_never_fails_the_call(caplog: pytest.LogCaptureFixture) -> None:
    engine = memory_engine()
    handler = ContextCallbackHandler(engine)

    def step(messages: list[BaseMessage]) -> list[BaseMessage]:
        prepared = engine.prepare(messages, scope=SCOPE)
        engine.capture_tool_result(ToolMessage(content="x" * 4000, tool_call_id="c9", name="bash"), SCOPE)
        return list(prepared.messages)

    with caplog.at_level(logging.WARNING, logger="ctxplugin"):
        sent = RunnableLambda(step).invoke(conversation(), {"callbacks": [handler, _RaisingHandler()]})
    assert sent and handler.summary.calls == 1 and handler.summary.captures == 1
    assert any("handler failed on ctxplugin.report" in r.getMessage() for r in caplog.records)


async def test_a_handler_that_raises_on_an_event_never_fails_an_async_call() -> None:
    engine = memory_engine()

    async def step(messages: list[BaseMessage]) -> int:
        prepared = await engine.aprepare(messages, scope=SCOPE)
        await engine.acapture_tool_result(ToolMessage(content="x" * 4000, tool_call_id="c9", name="bash"), SCOPE)
        return len(prepared.messages)

    assert await RunnableLambda(step).ainvoke(conversation(), {"callbacks": [_RaisingHandler()]}) > 0


def test_a_trace_client_that_raises_never_fails_the_call(mocker: MockerFixture) -> None:
    from langsmith.run_helpers import tracing_context

    client = mocker.MagicMock()
    client.create_run.side_effect = RuntimeError("tracing backend refused the run")
    client.update_run.side_effect = RuntimeError("tracing backend refused the run")
    engine = memory_engine()
    with tracing_context(enabled=True, client=client, project_name="ctxplugin-tests"):
        prepared = engine.prepare(conversation(), scope=SCOPE)
        compact = engine.capture_tool_result(ToolMessage(content="x" * 4000, tool_call_id="c9", name="bash"), SCOPE)
    assert prepared.messages and compact.tool_call_id == "c9"


def test_a_trace_that_cannot_be_completed_leaves_the_callers_tracing_context(mocker: MockerFixture) -> None:
    from langsmith.run_helpers import get_current_run_tree, trace, tracing_context

    client = mocker.MagicMock()
    engine = memory_engine()
    with tracing_context(enabled=True, client=client, project_name="ctxplugin-tests"), trace("agent", client=client) as agent:
        client.update_run.side_effect = RuntimeError("tracing backend went away")
        prepared = engine.prepare(conversation(), scope=SCOPE)
        client.update_run.side_effect = None  # back for the agent's own run
        assert get_current_run_tree() is agent, "later runs of the agent are not nested under the failed one"
    assert prepared.messages
