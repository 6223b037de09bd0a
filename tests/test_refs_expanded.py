"""What the report and the ``ctxplugin.expand`` event count as expanded: the refs the model's
``expand_ref`` calls really read, by the ref read; not a call answered with why the ref could
not be read (unknown, another session's, malformed)."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextEngine, Scope
from ctxplugin.langchain import make_expand_ref_tool
from ctxplugin.testing import memory_engine

SCOPE = Scope(session_id="expanded")
OTHER = Scope(session_id="someone-else")


def conversation(name: str) -> list[BaseMessage]:
    rows = json.dumps([{"order_id": f"#{name}{1000 + i}", "total": i * 3.5} for i in range(120)])
    return [
        HumanMessage(content="List my orders"),
        AIMessage(content="", tool_calls=[{"name": "list_orders", "args": {}, "id": "c1"}]),
        ToolMessage(content=rows, tool_call_id="c1", name="list_orders"),
    ]


class Events(BaseCallbackHandler):
    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []

    def on_custom_event(self, name: str, data: Any, **kwargs: Any) -> None:
        self.seen.append((name, data))


def answered(
    engine: ContextEngine, calls: dict[str, str], handler: Events, limit: int = 2
) -> list[BaseMessage]:
    """The model's turn calling ``expand_ref`` once per ``calls`` (call id -> ref as written),
    and the tool's answers."""
    tool = make_expand_ref_tool(engine, SCOPE)
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": "expand_ref", "args": {"ref_id": ref, "limit": limit}, "id": call}
            for call, ref in calls.items()
        ],
    )
    answers = [
        tool.invoke(
            {
                "type": "tool_call",
                "name": "expand_ref",
                "args": {"ref_id": ref, "limit": limit},
                "id": call,
            },
            {"callbacks": [handler]},
        )
        for call, ref in calls.items()
    ]
    assert all(isinstance(answer, ToolMessage) for answer in answers)
    return [turn, *answers]


def test_only_the_refs_really_read_count_as_expanded() -> None:
    engine = memory_engine()
    ref = engine.prepare(conversation("W"), scope=SCOPE).report.refs_used[0]
    foreign = engine.prepare(conversation("X"), scope=OTHER).report.refs_used[0]
    assert foreign != ref
    unknown = ref[:-4] + ("0000" if not ref.endswith("0000") else "1111")
    handler = Events()
    calls = {"c2": unknown, "c3": foreign, "c4": "not a ref", "c5": ref}
    messages = [*conversation("W"), *answered(engine, calls, handler)]
    assert [str(m.content).startswith("expand_ref: ") for m in messages[-4:]] == [
        True,
        True,
        True,
        False,
    ]
    report = engine.prepare(messages, scope=SCOPE).report
    assert report.refs_expanded == [ref]
    assert report.as_metadata()["ctxplugin.refs_expanded"] == [ref]
    assert [data["ref_id"] for name, data in handler.seen if name == "ctxplugin.expand"] == [ref]


def test_a_ref_the_model_wrote_inside_other_text_counts_as_the_ref_read() -> None:
    engine = memory_engine()
    ref = engine.prepare(conversation("W"), scope=SCOPE).report.refs_used[0]
    handler = Events()
    messages = [*conversation("W"), *answered(engine, {"c2": f"see `{ref}`."}, handler)]
    assert not str(messages[-1].content).startswith("expand_ref: "), (
        "the tool reads the ref it holds"
    )
    report = engine.prepare(messages, scope=SCOPE).report
    assert report.refs_expanded == [ref]
    assert [data["ref_id"] for name, data in handler.seen if name == "ctxplugin.expand"] == [ref]


def test_a_read_output_that_begins_as_an_unread_answer_counts_as_read() -> None:
    """The tool's answer is the output itself, whatever its first words: an output that begins
    ``expand_ref: `` (a log of the agent's own calls) is a ref read."""
    engine = memory_engine()
    lines = "\n".join(
        f"expand_ref: call {i} read ref:bash:{i:016x} in {i * 3} ms" for i in range(80)
    )
    messages: list[BaseMessage] = [
        HumanMessage(content="Show the tool log"),
        AIMessage(content="", tool_calls=[{"name": "read_log", "args": {}, "id": "c1"}]),
        ToolMessage(content=lines, tool_call_id="c1", name="read_log"),
    ]
    ref = engine.prepare(messages, scope=SCOPE).report.refs_used[0]
    handler = Events()
    messages += answered(engine, {"c2": ref}, handler, limit=0)
    assert messages[-1].content == lines, "the output, read whole"
    assert [data["ref_id"] for name, data in handler.seen if name == "ctxplugin.expand"] == [ref]
    assert engine.prepare(messages, scope=SCOPE).report.refs_expanded == [ref]


def test_an_answer_kept_without_its_artifact_is_judged_by_its_first_words() -> None:
    """A host that keeps only the text of the answers (a transcript replayed, a store of its
    own): an answer that begins ``expand_ref: `` read nothing."""
    engine = memory_engine()
    ref = engine.prepare(conversation("W"), scope=SCOPE).report.refs_used[0]
    turn = AIMessage(
        content="",
        tool_calls=[
            {"name": "expand_ref", "args": {"ref_id": ref}, "id": "c2"},
            {"name": "expand_ref", "args": {"ref_id": ref + "0"}, "id": "c3"},
        ],
    )
    answers = [
        ToolMessage(content="[...the output...]", tool_call_id="c2", name="expand_ref"),
        ToolMessage(
            content="expand_ref: no such ref visible here", tool_call_id="c3", name="expand_ref"
        ),
    ]
    report = engine.prepare([*conversation("W"), turn, *answers], scope=SCOPE).report
    assert report.refs_expanded == [ref]
