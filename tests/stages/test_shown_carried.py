"""The shown stage carries its previous answer from call to call of a session: what it keeps is
always what a stage that never saw the session keeps."""

from __future__ import annotations

import threading
from dataclasses import replace

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin._messages import META_KEY
from ctxplugin.budget import FactLine
from ctxplugin.config import ContextConfig
from ctxplugin.scope import Scope
from ctxplugin.stages import CallView, SkipShown, Validate

SCOPE = Scope(session_id="s1")


def fresh_view(messages: list[BaseMessage]) -> CallView:
    budgets = ContextConfig(encoding="cl100k_base").budget.resolve()
    return CallView(scope=SCOPE, received=messages, tools_given=(), budgets=budgets, started=0.0)


def line(
    fact_id: str,
    statement: str,
    *,
    kind: str = "fact",
    source: str | None = None,
    key: str | None = None,
) -> FactLine:
    return FactLine(
        text=f"[{kind}] {statement}",
        score=1.0,
        fact_id=fact_id,
        source_ref=source,
        statement=statement,
        kind=kind,
        key=key,
        tracked=key is not None,
    )


def note(text: str) -> HumanMessage:
    return HumanMessage(
        content=f"[context note: {text}]", additional_kwargs={META_KEY: {"condensed": [0, 4]}}
    )


LINES = (
    line("f1", "W77 shipped to the warehouse", source="c7"),
    line("f2", "asked for the refund of order W12", key="refund"),
    line("f3", "src/parser/helpers.py", kind="entity"),
    line("f4", "the customer is a gold member since 2019"),
)


def calls() -> list[tuple[list[BaseMessage], tuple[BaseMessage, ...], tuple[FactLine, ...]]]:
    """(conversation, the history shown, the lines) of a session's calls in turn: the same call
    twice, a new output naming a line's source, a new user message restating a line, a note
    that lists a line's value, other lines, a message edited in the middle, the conversation
    cleared, and a rewind to an earlier turn."""
    system = SystemMessage(content="You help with orders.")
    asked = HumanMessage(content="Where is W77?", id="h1")
    call = AIMessage(
        content="",
        tool_calls=[{"name": "lookup", "args": {"order_id": "W77"}, "id": "c7"}],
        id="a1",
    )
    output = ToolMessage(content="W77 shipped to the warehouse", tool_call_id="c7", id="t1")
    told = HumanMessage(content="I asked for the refund of order W12 yesterday.", id="h2")
    reply = AIMessage(content="Noted.", id="a2")
    first = [system, asked]
    grown = [*first, call, output]
    said = [*grown, reply, told]
    listing = note("exchanges 1-2 used: src/parser/helpers.py")
    edited = [system, HumanMessage(content="Where is W78?", id="h1"), call, output, reply, told]
    out: list[tuple[list[BaseMessage], tuple[BaseMessage, ...], tuple[FactLine, ...]]] = []
    for messages, extra, lines in (
        (first, (), LINES),
        (first, (), LINES),
        (grown, (), LINES),
        (grown, (), LINES),
        (said, (), LINES),
        (said, (listing,), LINES),
        (said, (listing,), LINES),
        (said, (listing,), LINES[1:]),
        (said, (), LINES),
        (edited, (), LINES),
        ([system, HumanMessage(content="Hello", id="h9")], (), LINES),
        (grown, (), LINES),
    ):
        out.append((messages, extra, lines))
    return out


def fresh_lines(
    messages: list[BaseMessage], extra: tuple[BaseMessage, ...], lines: tuple[FactLine, ...]
) -> tuple[FactLine, ...]:
    """What a shown stage that never saw the session keeps of ``lines``."""
    view = Validate().apply(fresh_view(messages))
    return SkipShown().apply(view.override(history=(*extra, *view.history), facts=lines)).facts


def test_the_lines_kept_are_a_fresh_stages_on_every_call_of_a_session() -> None:
    validate, carried = Validate(), SkipShown()
    for number, (messages, extra, lines) in enumerate(calls()):
        view = validate.apply(fresh_view(messages))
        view = view.override(history=(*extra, *view.history), facts=lines)
        alone = Validate().apply(fresh_view(messages))
        alone = alone.override(history=(*extra, *alone.history), facts=lines)
        assert carried.apply(view).facts == SkipShown().apply(alone).facts, f"call {number}"


def test_a_call_showing_what_the_previous_one_showed_keeps_the_same_lines() -> None:
    validate, stage = Validate(), SkipShown()
    messages, _, lines = calls()[2]
    first = stage.apply(validate.apply(fresh_view(messages)).override(facts=lines)).facts
    reply = AIMessage(content="It shipped.", id="a9")
    again = stage.apply(validate.apply(fresh_view([*messages, reply])).override(facts=lines)).facts
    assert first == (LINES[1], LINES[2], LINES[3])
    assert again is first  # read once: nothing the lines are checked against changed


def test_a_user_message_given_as_blocks_edited_in_place_is_read_again() -> None:
    validate, carried = Validate(), SkipShown()
    asked = HumanMessage(content=[{"type": "text", "text": "Where is W77?"}], id="h1")
    messages: list[BaseMessage] = [SystemMessage(content="You help."), asked]
    blocks = asked.content
    assert isinstance(blocks, list)
    other = Scope(session_id="s2")
    kept = []
    for text in ("Where is W77?", "the customer is a gold member since 2019", "Where is W77?"):
        blocks[0] = {"type": "text", "text": text}  # the same message and list, another text
        for scope in (SCOPE, other):
            view = validate.apply(replace(fresh_view(list(messages)), scope=scope))
            kept.append(carried.apply(view.override(facts=LINES)).facts)
            assert kept[-1] == fresh_lines(list(messages), (), LINES), text
    assert LINES[3] in kept[0] and LINES[3] not in kept[2]  # the statement restated, then not


def test_concurrent_calls_of_one_session_and_of_others_keep_a_fresh_stages_lines() -> None:
    validate, carried = Validate(), SkipShown()
    sequence = calls()
    expected = [fresh_lines(messages, extra, lines) for messages, extra, lines in sequence]
    wrong: list[tuple[str, int]] = []

    def run(session: str) -> None:
        scope = Scope(session_id=session)
        for _ in range(20):
            for number, (messages, extra, lines) in enumerate(sequence):
                view = validate.apply(replace(fresh_view(messages), scope=scope))
                view = view.override(history=(*extra, *view.history), facts=lines)
                if carried.apply(view).facts != expected[number]:
                    wrong.append((session, number))

    threads = [
        threading.Thread(target=run, args=(session,)) for session in ("s1", "s1", "s2", "s3")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert wrong == []
