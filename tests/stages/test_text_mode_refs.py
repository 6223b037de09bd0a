"""A view that does not bind ``expand_ref`` never points the model at it: a text-mode agent
(no tool calling) sees no ref it cannot read and is told to run an older command again, and a
chat whose view takes the tool out reads no note offering it."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.stages._unbound import rerun_output, unoffered, unshrunk
from ctxplugin.stages.fit import _unoffered
from ctxplugin.testing import logical_clock, memory_engine
from ctxplugin.tokens import content_text

REF = re.compile(r"ref:[a-z0-9_-]+:[0-9a-f]{16}")
SYSTEM = SystemMessage(
    content="You are a helpful assistant that can interact with a computer shell."
)
TASK = HumanMessage(content="Fix the failing tests of src/parser.py.")


@pytest.fixture(autouse=True)
def _defaults(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)
    yield


def printed(text: str) -> HumanMessage:
    return HumanMessage(content=f"<returncode>0</returncode>\n<output>\n{text}\n</output>")


def step(n: int) -> list[BaseMessage]:
    """A command and its output: a page of source, every fourth one a failing test run."""
    if n % 4 == 3:
        report = "\n".join(
            f"FAILED tests/test_parser.py::test_case_{n}_{i} - AssertionError: field_{i}"
            for i in range(60)
        )
        return [
            AIMessage(content="THOUGHT: run the tests.\n\n```bash\npytest -q tests\n```"),
            printed(f"{report}\n===== 60 failed, 12 passed in 3.1s ====="),
        ]
    page = "\n".join(
        f"{n * 40 + i}:    field_{n}_{i} = read_field(buffer, offset_{n}_{i})" for i in range(40)
    )
    return [
        AIMessage(
            content=f"THOUGHT: look at part {n}.\n\n```bash\nsed -n '{n * 40},{n * 40 + 39}p' src/parser.py\n```"
        ),
        printed(page),
    ]


def text_views(
    steps: int, *, tools: bool, config: ContextConfig | None = None
) -> tuple[list[BaseMessage], list[list[BaseMessage]]]:
    engine = memory_engine(config or ContextConfig(), clock=logical_clock())
    conversation: list[BaseMessage] = [SYSTEM, TASK]
    scope = Scope(session_id="text-refs")
    out = []
    for n in range(steps):
        conversation += step(n)
        prepared = engine.prepare(
            conversation, tools=engine.tools_for_model() if tools else None, scope=scope
        )
        assert not prepared.tools
        out.append(prepared.messages)
    return conversation, out


@pytest.mark.parametrize("tools", [True, False])
def test_a_text_mode_view_names_no_ref_and_no_expand_ref(tools: bool) -> None:
    _, views = text_views(30, tools=tools)
    texts = [content_text(m.content) for view in views for m in view]
    assert not [t for t in texts if "expand_ref" in t]  # a tool the agent is not given
    assert not [t for t in texts if REF.search(t)]  # an id it has nothing to read with


@pytest.mark.parametrize("tools", [True, False])
def test_a_text_mode_output_reduced_to_its_first_line_names_no_ref(tools: bool) -> None:
    """Under a total so small that outputs are reduced to their first line (the budget's third
    step), the line says to run the command again, not to call a tool the agent lacks."""
    _, views = text_views(4, tools=tools, config=ContextConfig(budget={"total": 380}))
    texts = [content_text(m.content) for view in views for m in view]
    assert any(t.startswith("[summary of ") and "rerun the command" in t for t in texts)
    assert not [t for t in texts if "expand_ref" in t]
    assert not [t for t in texts if REF.search(t)]


def test_an_older_output_shown_summarised_says_to_run_its_command_again() -> None:
    conversation, views = text_views(30, tools=True)
    originals = {content_text(m.content) for m in conversation}
    summarised = [  # the last two calls: with blocks of two, one shows an older output
        content_text(m.content)
        for view in views[-2:]
        for m in view
        if isinstance(m, HumanMessage)
        and content_text(m.content) not in originals
        and "context note" not in content_text(m.content)
    ]
    assert summarised
    assert all(
        re.match(r"(\[gist\] )?\[summary of [\d,]+ tokens; rerun the command to see it whole\]", t)
        for t in summarised
    )


CHAT = [
    "My name is Alice and my booking is BK-7781.",
    "I live in Lisbon and my budget is 900 EUR.",
    *(f"Tell me about topic {i} in detail please, for order W{1000 + i}." for i in range(20)),
]
ANSWER = "Sure. " + "Here is a long answer with details. " * 60


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_chat_given_expand_ref_with_nothing_to_read_reads_no_note_offering_it(mode: str) -> None:
    engine = memory_engine(ContextConfig(mode=mode))
    history: list[BaseMessage] = [HumanMessage("hi", id="h-hi"), AIMessage("Hello!", id="a-hi")]
    offered = []
    notes = 0
    for i, turn in enumerate(CHAT):
        history.append(HumanMessage(turn, id=f"h{i}"))
        prepared = engine.prepare(
            history, tools=engine.tools_for_model(), scope=Scope(session_id=f"chat-{mode}")
        )
        assert prepared.tools == []
        texts = [content_text(m.content) for m in prepared.messages]
        notes += sum("context note" in t or "earlier exchanges" in t for t in texts)
        offered += [t for t in texts if "expand_ref" in t]
        history.append(AIMessage(ANSWER, id=f"a{i}"))
    assert notes, "the chat is long enough for notes"
    assert not offered


def test_the_facts_block_of_a_text_mode_view_names_no_ref() -> None:
    engine = memory_engine(ContextConfig(), clock=logical_clock())
    checks = "\n".join(
        f"line {i}: checking module_{i} ok" for i in range(6000)
    )  # over the budget: stored as it arrives
    conversation: list[BaseMessage] = [
        SYSTEM,
        TASK,
        AIMessage(content="THOUGHT: which rule?\n\n```bash\npython check.py\n```"),
        printed(f"{checks}\nrule: L031"),
    ]
    blocks = []
    for n in range(1, 12):
        conversation += step(n + (n % 4 == 3))
        prepared = engine.prepare(conversation, scope=Scope(session_id="facts"))
        blocks += [
            content_text(m.content)
            for m in prepared.messages
            if "From tool outputs" in content_text(m.content)
        ]
    assert blocks, "facts read from the stored output are shown"
    assert not [b for b in blocks if REF.search(b)]
    assert any('\n- "line ' in b for b in blocks)  # a line without a key is its quoted text alone


def test_a_text_mode_task_cut_to_fit_names_no_ref() -> None:
    engine = memory_engine(
        ContextConfig(
            budget={"total": 2000, "header": 400, "history": 1000, "facts": 200, "summaries": 300}
        )
    )
    pasted = HumanMessage(
        "Fix the error in this log:\n"
        + "\n".join(f"12:00 worker INFO request id=req-{i:06d} ok" for i in range(3000))
    )
    conversation: list[BaseMessage] = [SYSTEM, pasted]
    for n in range(4):
        conversation += step(n)
        for tools in (engine.tools_for_model(), None):
            prepared = engine.prepare(
                conversation, tools=tools, scope=Scope(session_id=f"cut-task-{tools is None}")
            )
            texts = [content_text(m.content) for m in prepared.messages]
            assert any(re.search(r"tokens cut to fit the budget …\]", t) for t in texts)
            assert not [t for t in texts if "expand_ref" in t or REF.search(t)]


def _orders_session() -> list[BaseMessage]:
    listing = "\n".join(
        f'{{"id": "W{i:04d}", "status": "pending", "owner": "team-{i % 7}"}}' for i in range(400)
    )
    history: list[BaseMessage] = [HumanMessage("Which orders are pending?", id="q")]
    for n in range(6):
        history += [
            AIMessage(
                "",
                id=f"a{n}",
                tool_calls=[{"name": "list_orders", "args": {"page": n}, "id": f"c{n}"}],
            ),
            ToolMessage(f"[{listing}]", tool_call_id=f"c{n}", name="list_orders", id=f"t{n}"),
        ]
    return history


def test_hosts_that_bind_expand_ref_themselves_keep_its_hints() -> None:
    """An LCEL step (``as_runnable``) and ``RunnableWithMessageHistory`` prepare without the
    tools the model is bound: their docs bind ``expand_ref`` beside it, so the view still says
    how to read a stored output."""
    engine = memory_engine(ContextConfig())
    runnable = engine.as_runnable().invoke(
        _orders_session(), {"configurable": {"thread_id": "lcel"}}
    )
    chat = engine.history("kept")
    chat.add_messages(_orders_session())
    for view in (runnable, chat.messages):
        texts = [content_text(m.content) for m in view]
        assert any(REF.search(t) for t in texts)  # stored outputs shown summarised
        assert any("expand_ref" in t for t in texts if REF.search(t))


def test_what_the_user_wrote_about_expand_ref_is_sent_as_written() -> None:
    engine = memory_engine(ContextConfig())
    asked = "My agent printed `[ref:list_orders:0123456789abcdef · 900 tokens stored · expand_ref for more]` (expand_ref reads it?); expand_ref fails."
    history: list[BaseMessage] = [HumanMessage(asked, id="h")]
    prepared = engine.prepare(
        history, tools=engine.tools_for_model(), scope=Scope(session_id="asked")
    )
    assert not prepared.tools
    assert content_text(prepared.messages[-1].content) == asked


def test_an_older_output_keeps_its_own_lines_that_name_expand_ref() -> None:
    own = [
        "src/engine.py:279:    def expand_ref(self, ref_id); expand_ref reads it",
        "docs/tools.md:55: the model calls it (expand_ref reads refs) first",
    ]
    compact = "\n".join(
        [
            "[ref:command:0123456789abcdef · text · 3,607 tokens stored]",
            *own,
            "… 3 more rare lines; expand_ref pattern='ref' returns matching lines whole; offset/limit page",
        ]
    )
    shown = rerun_output(compact)
    assert shown.splitlines() == [
        "[summary of 3,607 tokens; rerun the command to see it whole]",
        *own,
        "… 3 more rare lines",
    ]
    alone = "expand_ref pattern='ref' returns matching lines whole; offset/limit page"
    assert "expand_ref" not in rerun_output(f"{compact.splitlines()[0]}\n{own[0][:20]}\n{alone}")


def test_an_output_reduced_to_its_first_line_in_a_view_without_expand_ref_keeps_its_ref_alone() -> (
    None
):
    ref = "ref:command:86e330857e76fa77"
    line = f"[{ref} · 40 lines · 775 tokens stored · expand_ref for more]"
    shrunk = f"{line} [{ref}; call expand_ref for the full output]"
    assert unshrunk(shrunk, ref=ref) == line
    assert unoffered(unshrunk(shrunk, ref=ref)) == f"[{ref} · 40 lines · 775 tokens stored]"
    assert unshrunk(
        f"collected 72 items [{ref}; call expand_ref for the full output]", ref=ref
    ) == (f"collected 72 items [{ref}]")
    assert (
        rerun_output(shrunk, ref=ref)
        == "[summary of 775 tokens; rerun the command to see it whole]"
    )
    assert rerun_output(
        f"collected 72 items [{ref}; call expand_ref for the full output]", ref=ref
    ) == ("collected 72 items [rerun the command to see the output whole]")


def test_a_tool_output_that_itself_ends_like_a_reduced_one_is_left_as_the_tool_wrote_it() -> None:
    """Only the form the budget writes, naming the message's own ref, is rewritten: a tool's
    text that merely looks like it (an output echoing an earlier view) is kept."""
    own = "see [ref:command:0123456789abcdef; call expand_ref for the full output]"
    echo = ToolMessage(content=own, tool_call_id="c1")
    assert _unoffered(echo).content == unoffered(own)
    assert unshrunk(own, ref=None) == own
    assert rerun_output(own, ref="ref:command:fedcba9876543210") == rerun_output(own)


def test_a_first_line_that_looks_like_another_outputs_ref_line_is_not_read_as_its_own() -> None:
    ref, other = "ref:command:86e330857e76fa77", "ref:command:0123456789abcdef"
    first = f"[{other} · 5 tokens stored]"  # the tool's own first line, naming another output
    shrunk = f"{first} [{ref}; call expand_ref for the full output]"
    assert rerun_output(shrunk, ref=ref) == f"{first} [rerun the command to see the output whole]"
    assert unshrunk(shrunk, ref=ref) == f"{first} [{ref}]"


def test_a_gisted_stored_output_says_to_run_its_command_again_and_names_no_ref() -> None:
    from ctxplugin.stages._unbound import rerun_output, unoffered

    gist = "[gist] [ref:command:7187404757b5caba · command output (table) · 775 tokens stored · expand_ref for more] | keeps: 241 field_6_1"
    assert rerun_output(gist) == "[gist] [summary of 775 tokens; rerun the command to see it whole] | keeps: 241 field_6_1"
    assert unoffered(gist) == "[gist] [ref:command:7187404757b5caba · command output (table) · 775 tokens stored] | keeps: 241 field_6_1"
