"""Budgets: the prepared view is within budget, or the report says why not."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._messages import META_KEY
from ctxplugin.budget import Parts, enforce, total_tokens
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text, count_messages, get_counter

WORDS = st.sampled_from(["flight", "HAT123", "refund", "/src/app.py", "https://x.io/a", "42", "error:", "user_7", "the", "and"])
TEXT = st.lists(WORDS, min_size=1, max_size=400).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    messages: list[BaseMessage] = []
    if draw(st.booleans()):
        messages.append(SystemMessage(content=draw(TEXT)))
    messages.append(HumanMessage(content=draw(TEXT)))
    for turn in range(draw(st.integers(0, 8))):
        calls = draw(st.integers(0, 2))
        ids = [f"c{turn}_{i}" for i in range(calls)]
        messages.append(AIMessage(content=draw(TEXT) if draw(st.booleans()) else "",
                                  tool_calls=[{"name": "search", "args": {"q": str(i)}, "id": i} for i in ids]))
        for i in ids:
            body = draw(st.one_of(TEXT, st.lists(st.integers(), max_size=200).map(json.dumps)))
            messages.append(ToolMessage(content=body, tool_call_id=i, name="search"))
        if draw(st.booleans()):
            messages.append(HumanMessage(content=draw(TEXT)))
    return messages


budgets = st.fixed_dictionaries({
    "total": st.integers(60, 4000),
    "header": st.integers(20, 1000),
    "history": st.integers(20, 2000),
    "facts": st.integers(20, 800),
    "summaries": st.integers(20, 1000),
})


@pytest.mark.filterwarnings("ignore:budget.*more than budget.total:ctxplugin.errors.ConfigWarning")  # sections over the total too
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(messages=conversations(), budget=budgets)
def test_view_is_within_budget_or_says_why(messages: list[BaseMessage], budget: dict[str, int]) -> None:
    engine = memory_engine(ContextConfig(budget=budget))
    prepared = engine.prepare(messages, scope=Scope(session_id="p"))
    report = prepared.report
    actual = count_messages(prepared.messages, engine.counter) + report.sections["tools"].after
    assert actual == report.tokens_after
    if report.within_budget:
        assert actual <= budget["total"]
    else:
        assert any("over the total budget" in w for w in report.warnings)
    # always a valid conversation
    calls = [str(c["id"]) for m in prepared.messages if isinstance(m, AIMessage) for c in m.tool_calls]
    results = [m.tool_call_id for m in prepared.messages if isinstance(m, ToolMessage)]
    assert sorted(calls) == sorted(results)
    # the conversation still starts with the user's turn (Anthropic, Google, Bedrock require it)
    body = [m for m in prepared.messages if not isinstance(m, SystemMessage)]
    assert isinstance(body[0], HumanMessage)


def test_minimum_viable_context_keeps_current_question_and_last_answer() -> None:
    long = " ".join(f"detail{i}" for i in range(3000))
    messages: list[BaseMessage] = [SystemMessage(content="You are helpful. " + long), HumanMessage(content="first task " + long)]
    messages += [AIMessage(content="answer one " + long), HumanMessage(content="what is the status of order #W1234?")]
    engine = memory_engine(ContextConfig(budget={"total": 300, "header": 100, "history": 100, "facts": 50, "summaries": 50}))
    prepared = engine.prepare(messages, scope=Scope(session_id="m"))
    assert prepared.report.tokens_after <= 300
    assert any("minimum viable" in w for w in prepared.report.warnings)
    texts = [str(m.content) for m in prepared.messages]
    assert any("order #W1234" in t for t in texts)
    assert any(t.startswith("answer one") for t in texts)


def test_minimum_viable_context_keeps_the_task_when_user_turns_are_observations() -> None:
    # a coding agent's shape: the task, then each command's output comes back as a user turn
    long = " ".join(f"line{i}" for i in range(400))
    messages: list[BaseMessage] = [SystemMessage(content="You are a coding agent."),
                                   HumanMessage(content="Fix the failing parser test in src/parse.py.")]
    for step in range(6):
        messages += [AIMessage(content=f"run step {step} " + long), HumanMessage(content=f"output {step} " + long)]
    messages.append(AIMessage(content="final command"))
    engine = memory_engine(ContextConfig(budget={"total": 400, "header": 100, "history": 100, "facts": 50, "summaries": 50}))
    prepared = engine.prepare(messages[:-1], scope=Scope(session_id="obs"))
    assert any("minimum viable" in w for w in prepared.report.warnings)
    body = [m for m in prepared.messages if not isinstance(m, SystemMessage)]
    assert isinstance(body[0], HumanMessage) and str(body[0].content).startswith("Fix the failing parser test")
    assert str(body[-1].content).startswith("output 5"), "the latest observation stays last"
    assert any(str(m.content).startswith("run step 5") for m in body), "the last assistant turn stays"
    assert prepared.report.tokens_after <= 400


def _long_session() -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(content="sys"), HumanMessage(content="the task")]
    for i in range(30):
        messages += [AIMessage(content=f"step {i} edits src/mod_{i}.py " + "word " * 60), HumanMessage(content=f"continue {i}")]
    return messages


def test_history_dropped_by_the_budget_stage_is_noted_where_it_was() -> None:
    budget = {"total": 1500, "header": 600, "history": 800, "facts": 100, "summaries": 100}
    engine = memory_engine(ContextConfig(budget=budget, history={"enabled": False}))
    # an agent with a tool: its request has a tool list, so the note can be a lookup
    edit = {"name": "edit_file", "description": "Edit a file.", "parameters": {"type": "object", "properties": {}}}
    tools = [{"type": "function", "function": edit}]
    prepared = engine.prepare(_long_session(), tools=tools, scope=Scope(session_id="b"))
    dropped = prepared.report.dropped_exchanges
    assert dropped > 0
    texts = [str(m.content) for m in prepared.messages]
    assert texts[0] == "sys", "the header, start of every cached prefix, is unchanged"
    assert texts[1] == "the task", "the task is protected"
    # the note is a lookup (a call and its result), never a user turn
    call, note = prepared.messages[2], prepared.messages[3]
    assert isinstance(call, AIMessage) and call.tool_calls and isinstance(note, ToolMessage)
    assert texts[3].startswith("[earlier exchanges are not shown") and texts.count(texts[3]) == 1
    assert str(dropped) not in texts[3], "the note names no count: it stays cacheable"
    assert texts[4].startswith(f"step {dropped // 2}"), "it stands where the dropped exchanges were"
    assert prepared.report.tokens_after <= 1500


def test_history_condensed_into_notes_leaves_the_header_alone() -> None:
    budget = {"total": 1500, "header": 600, "history": 800, "facts": 100, "summaries": 100}
    engine = memory_engine(ContextConfig(budget=budget))
    # an agent with a tool of its own and expand_ref bound: a view that binds no expand_ref names it nowhere
    edit = {"name": "edit_file", "description": "Edit a file.", "parameters": {"type": "object", "properties": {}}}
    tools = [{"type": "function", "function": edit}, *engine.tools_for_model()]
    prepared = engine.prepare(_long_session(), tools=tools, scope=Scope(session_id="c"))
    assert prepared.report.dropped_exchanges > 0
    assert str(prepared.messages[0].content) == "sys", "the header, start of every cached prefix, is unchanged"
    notes = [str(m.content) for m in prepared.messages if str(m.content).startswith("[context note")]
    assert "expand_ref" in prepared.report.tools_bound
    assert notes and "expand_ref" in notes[0], "the first note says stored outputs stay readable"
    assert all("expand_ref" not in note for note in notes[1:])
    assert prepared.report.tokens_after <= 1500


def test_bound_meta_tool_schemas_count_against_the_total() -> None:
    from langchain_core.utils.function_calling import convert_to_openai_tool

    from ctxplugin.tokens import count_tool_schemas

    engine = memory_engine(ContextConfig(budget={"total": 900, "header": 300, "history": 400, "facts": 100, "summaries": 300}))
    meta = engine.tools_for_model()
    messages: list[BaseMessage] = [SystemMessage(content="sys"), HumanMessage(content="the task " + "word " * 200),
                                   *_calls(range(1), "ls", "a.py b.py")]  # an agent with tools: expand_ref is bound
    for i in range(12):
        messages += [AIMessage(content=f"step {i} " + "word " * 80), HumanMessage(content=f"continue {i}")]
    prepared = engine.prepare(messages, tools=meta, scope=Scope(session_id="meta"))
    sent = count_tool_schemas([convert_to_openai_tool(t) for t in prepared.tools], engine.counter)
    assert "expand_ref" in [t.name for t in prepared.tools]
    assert prepared.report.sections["tools"].after == sent
    assert count_messages(prepared.messages, engine.counter) + sent <= 900


def _note(text: str) -> HumanMessage:
    return HumanMessage(content=f"[context note: {text}]", additional_kwargs={META_KEY: {"condensed": [0, 1]}})


def _calls(numbers: range, command: str, output: str) -> list[BaseMessage]:
    """One bash call and its output per number."""
    out: list[BaseMessage] = []
    for i in numbers:
        call = {"name": "bash", "args": {"cmd": f"{command} {i}"}, "id": f"a{i}", "type": "tool_call"}
        out += [AIMessage(content="", tool_calls=[call]), ToolMessage(content=output, tool_call_id=f"a{i}")]
    return out


def _enforced(history: list[BaseMessage], over: int) -> tuple[Parts, list[str], int]:
    """``history`` fitted to a total ``over`` tokens below its own: the parts, their history's
    texts and the total."""
    counter = get_counter("cl100k_base")[0]
    parts = Parts(header=(SystemMessage(content="sys"),), history=history)
    total = total_tokens(parts, counter) - over
    budgets = {"total": total, "header": 100, "history": 10_000, "facts": 0, "summaries": 10_000}
    fitted = enforce(parts, budgets, counter, block_size=4).parts
    assert total_tokens(fitted, counter) <= total
    return fitted, [str(m.content) for m in fitted.history], total


def test_a_context_note_after_the_latest_user_message_does_not_take_its_protection() -> None:
    # the history stage's notes are human messages in the history; the user's latest message
    # (a new task) is older than the block notes that follow it
    history: list[BaseMessage] = [HumanMessage(content="first task: fix the parser"), _note("exchanges 1-4: ran make")]
    history += _calls(range(3), "ls", "out " * 80)
    history += [HumanMessage(content="second task: now rename the module to core_v2"), _note("exchanges 5-8: ran pytest")]
    history += _calls(range(3, 8), "cat", "line " * 80)
    fitted, texts, _ = _enforced(history, 700)
    assert fitted.dropped_exchanges > 0
    assert "second task: now rename the module to core_v2" in texts, "the latest user message stays"
    assert "first task: fix the parser" in texts, "and so does the task"


def test_over_the_total_the_exchanges_after_the_notes_go_before_the_notes() -> None:
    # the notes stand for every older exchange in a few tokens: when the window after them is
    # over, its oldest exchanges go first, and rounding a drop up to a block takes no note
    history: list[BaseMessage] = [HumanMessage(content="the task"), _note("exchanges 1-40: ran make; path src/a.py")]
    history += [_note("exchanges 41-44: ran pytest -k parser"), *_calls(range(3), "cat", "line " * 120)]
    fitted, texts, _ = _enforced(history, 60)
    assert fitted.dropped_exchanges == 2, "two exchanges (a block, short of the notes and the last exchange)"
    assert texts[:3] == [str(m.content) for m in history[:3]], "the task and both notes stay"
    assert texts[3].startswith("[earlier exchanges are not shown") and texts[4:] == [str(m.content) for m in history[-2:]]


def test_the_archive_note_is_kept_when_every_other_exchange_goes() -> None:
    # the first note stands for every older exchange: when the budget stage must drop more than
    # the exchanges after the notes, later notes go, the archive stays
    archive = _note("exchanges 1-40 are condensed to the values they used: ran make; path src/a.py; HAT136")
    history: list[BaseMessage] = [HumanMessage(content="the task"), archive, _note("exchanges 41-44: ran pytest " + "-k x " * 30)]
    history += _calls(range(3), "cat", "line " * 120)
    fitted, texts, _ = _enforced(history, 300)
    assert fitted.dropped_exchanges == 3, "both exchanges before the last, then the block note"
    assert str(archive.content) in texts and not any("exchanges 41-44" in t for t in texts)


def test_the_assistant_message_the_latest_user_turn_answers_is_not_dropped() -> None:
    options = AIMessage(content="Two flights fit: HAT069 at 06:00 for $121 and HAT083 at 07:10 for $135. " * 3)
    history: list[BaseMessage] = [HumanMessage(content="Book JFK to SEA on May 20.")]
    history += _calls(range(4), "search", "flight " * 120)
    history += [options, HumanMessage(content="Neither of those options works for me; anything later?")]
    fitted, texts, _ = _enforced(history, 400)
    assert fitted.dropped_exchanges > 0
    assert texts[-2:] == [str(options.content), "Neither of those options works for me; anything later?"]
    # after a tool result the user's turn answers no assistant message: every exchange may go
    history = [*history[:-2], HumanMessage(content="Anything later?")]
    fitted, texts, _ = _enforced(history, 480)
    assert fitted.dropped_exchanges == 4 and texts[-1] == "Anything later?"


def test_the_last_resort_cuts_text_and_keeps_thinking_images_and_tool_use_whole() -> None:
    # a tool-use turn of a model with extended thinking: the provider checks the thinking
    # block's signature and refuses the turn without it; the user's image is theirs
    thinking = {"type": "thinking", "thinking": "let me weigh it " * 300, "signature": "SIG-1"}
    use = {"type": "tool_use", "id": "c1", "name": "lookup", "input": {"q": "W1234"}}
    image = {"type": "image", "base64": "AAAA" * 200, "mime_type": "image/png"}
    messages: list[BaseMessage] = [
        SystemMessage(content="You are careful. " * 200),
        HumanMessage(content=[{"type": "text", "text": "what is in this picture? " * 200, "cache_control": {"type": "ephemeral"}}, image]),
        AIMessage(content=[thinking, {"type": "text", "text": "checking " * 1200}, use],
                  tool_calls=[{"name": "lookup", "args": {"q": "W1234"}, "id": "c1"}]),
        ToolMessage(content="found it", tool_call_id="c1", name="lookup"),
    ]
    engine = memory_engine(ContextConfig(budget={"total": 3000, "header": 600, "history": 1000, "facts": 200, "summaries": 300}))
    prepared = engine.prepare(messages, scope=Scope(session_id="blocks"))
    assert any("minimum viable" in w for w in prepared.report.warnings)
    human = next(m for m in prepared.messages if isinstance(m, HumanMessage))
    ai = next(m for m in prepared.messages if isinstance(m, AIMessage))
    assert isinstance(human.content, list) and human.content[-1] == image, "the image stays, in its place"
    first = human.content[0]
    assert isinstance(first, dict) and first["cache_control"] == {"type": "ephemeral"} and "cut to fit" in first["text"]
    assert isinstance(ai.content, list) and ai.content[0] == thinking and ai.content[-1] == use
    middle = ai.content[1]
    assert isinstance(middle, dict) and len(middle["text"]) < len("checking " * 1200), "the text between them is what was cut"
    assert ai.tool_calls[0]["id"] == "c1"
    # as Anthropic is sent it: the assistant turn opens with its signed thinking
    anthropic = pytest.importorskip("langchain_anthropic")
    payload = anthropic.ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")._get_request_payload(prepared.messages)
    turn = next(m for m in payload["messages"] if m["role"] == "assistant")
    assert turn["content"][0] == thinking and any(b.get("type") == "tool_use" and b["id"] == "c1" for b in turn["content"])


def test_the_last_resort_gives_the_text_beside_an_image_the_others_share() -> None:
    """The task came with a screenshot: the image is kept whole, and the words the user wrote
    beside it are cut to the same size as the others' texts, not to nothing while an assistant
    turn keeps hundreds of tokens."""
    image = {"type": "image", "base64": "AAAA" * 200, "mime_type": "image/png"}
    task = "Please rebook booking BK-4471 for passenger Ana Ruiz. " + "My seat preferences follow. " * 60
    messages: list[BaseMessage] = [SystemMessage(content="You are a travel agent."), HumanMessage(content=[{"type": "text", "text": task}, image])]
    for turn in range(3):
        messages += [AIMessage(content=f"Checking {turn}. " + "detail " * 300,
                               tool_calls=[{"name": "lookup", "args": {"id": f"BK-{turn}"}, "id": f"c{turn}"}]),
                     ToolMessage(content="\n".join(f"row {j}: booking BK-{turn}{j} confirmed, seat {j}C" for j in range(60)),
                                 tool_call_id=f"c{turn}", name="lookup")]
    lookup = {"type": "function", "function": {"name": "lookup", "description": "Look up a booking.",
                                               "parameters": {"type": "object", "properties": {"id": {"type": "string"}}}}}
    engine = memory_engine(ContextConfig(budget={"total": 1500}))
    prepared = engine.prepare(messages, tools=[lookup, *engine.tools_for_model()], scope=Scope(session_id="task-image"))
    assert any("minimum viable" in w for w in prepared.report.warnings), "the last resort did not run: the test shows nothing"
    assert prepared.report.within_budget
    shown = next(m for m in prepared.messages if isinstance(m, HumanMessage))
    assert isinstance(shown.content, list) and shown.content[-1] == image, "the image stays, in its place"
    text = content_text(shown.content)
    answer = next(m for m in prepared.messages if isinstance(m, AIMessage) and m.tool_calls and m.tool_calls[0]["id"] == "c2")
    assert "BK-4471" in text, f"the task's words were cut to {text!r} while the last answer kept {len(str(answer.content))} characters"


def test_the_last_resort_keeps_the_others_heads_when_screenshots_alone_are_over_the_total() -> None:
    """The user sent three screenshots, which alone take more than the total: the view cannot
    fit, and the text beside them goes first; the last answer still keeps its head."""
    image = {"type": "image", "base64": "AAAA" * 200, "mime_type": "image/png"}
    task = HumanMessage(content=[{"type": "text", "text": "Why does checkout fail? " + "Steps I took. " * 100}, image, image, image])
    answer = AIMessage(content="The card form rejects BK-4471 because the expiry field is empty. " + "detail " * 300)
    messages: list[BaseMessage] = [SystemMessage(content="You are a support agent."), task, answer, HumanMessage(content="And now?")]
    engine = memory_engine(ContextConfig(budget={"total": 1500}))
    prepared = engine.prepare(messages, scope=Scope(session_id="screens"))
    assert any("over the total budget" in w for w in prepared.report.warnings), "the screenshots fit: the test shows nothing"
    shown = next(m for m in prepared.messages if isinstance(m, AIMessage))
    assert "BK-4471" in content_text(shown.content), f"the last answer was cut to {content_text(shown.content)!r}"


def test_a_turn_of_text_blocks_alone_is_cut_to_one_text() -> None:
    from ctxplugin._cut import cut_content

    counter = get_counter()[0]
    blocks = [{"type": "text", "text": "alpha " * 400}, "beta " * 400]
    cut = cut_content(blocks, 50, counter)
    assert isinstance(cut, str) and counter.count(cut) <= 50
    assert cut_content([{"type": "image", "base64": "AAAA", "mime_type": "image/png"}], 10, counter) == [
        {"type": "image", "base64": "AAAA", "mime_type": "image/png"}
    ], "nothing to cut: the content is left as it is"


def test_the_last_resort_cuts_the_others_before_the_current_question() -> None:
    long = " ".join(f"detail{i}" for i in range(1500))
    question = "Please rebook order #W1234 " + " ".join(f"on flight HAT{i:03d}" for i in range(25)) + "?"
    messages: list[BaseMessage] = [SystemMessage(content="You are helpful. " + long), HumanMessage(content="first task " + long),
                                   AIMessage(content="answer one " + long), HumanMessage(content=question)]
    engine = memory_engine(ContextConfig(budget={"total": 400, "header": 100, "history": 100, "facts": 50, "summaries": 50}))
    counter = engine.counter
    assert 100 < counter.count(question) <= 200, "larger than a fair share, within half of the total"
    prepared = engine.prepare(messages, scope=Scope(session_id="question"))
    assert any("minimum viable" in w for w in prepared.report.warnings)
    assert prepared.report.within_budget and prepared.report.tokens_after <= 400
    assert [m.content for m in prepared.messages if isinstance(m, HumanMessage)][-1] == question
    assert any(str(m.content).startswith("answer one") for m in prepared.messages), "the others keep their heads"


def test_parallel_tool_results_over_the_total_shorten_the_fewest_oldest() -> None:
    """One assistant turn with 200 parallel calls, every result stored: the budget shortens the
    oldest results to their first line and ref, as few as make the view fit."""
    engine = memory_engine(ContextConfig(mode="whole", budget={"total": 20000}))
    scope = Scope(session_id="parallel")
    calls = [{"id": f"call_{i}", "name": "lookup", "args": {"q": f"item {i}"}} for i in range(200)]
    results = [
        engine.capture_tool_result(ToolMessage(
            "\n".join(f"item {i} row {j}: sku SKU-{i}-{j} price {(i * 61 + j * 7) % 997}" for j in range(60)),
            tool_call_id=f"call_{i}", name="lookup"), scope)
        for i in range(200)
    ]
    messages: list[BaseMessage] = [HumanMessage("look up the 200 items"), AIMessage("", tool_calls=calls), *results]
    prepared = engine.prepare(messages, scope=scope)
    report = prepared.report
    assert report.within_budget and report.tokens_after <= engine.config.budget.total
    shown = [m for m in prepared.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in shown] == [f"call_{i}" for i in range(200)]
    short = [m.tool_call_id for m in shown if "call expand_ref for the full output" in content_text(m.content)]
    assert short == [f"call_{i}" for i in range(len(short))]  # the oldest, in order
    assert 0 < len(short) < 200
    # the ref in every shortened result reads back the stored output
    for view, original in zip(shown[:3], results[:3], strict=True):
        ref = original.additional_kwargs[META_KEY]["ref"]
        assert ref in content_text(view.content)
        assert engine.expand_ref(ref, scope=scope).startswith(f"item {int(original.tool_call_id[5:])} row 0:")


def test_the_budget_shortens_no_more_results_than_it_needs() -> None:
    counter = get_counter()[0]
    history: list[BaseMessage] = [HumanMessage("go"), AIMessage("", tool_calls=[{"id": f"c{i}", "name": "t", "args": {}} for i in range(30)])]
    history += [
        ToolMessage(f"head {i}\n" + "body " * 200, tool_call_id=f"c{i}", name="t",
                    additional_kwargs={META_KEY: {"ref": f"ref:text:{i:016x}"}})
        for i in range(30)
    ]
    whole = total_tokens(Parts(header=(), history=history), counter)
    for total in (whole - 1, whole - 500, whole - 2000, 200):
        outcome = enforce(Parts(header=(), history=history), {"total": total, "header": total, "history": whole,
                                                                "facts": total, "summaries": whole}, counter, block_size=4)
        short = [i for i, m in enumerate(outcome.parts.history) if "call expand_ref" in content_text(m.content)]
        assert short == list(range(2, 2 + len(short)))
        if outcome.within and short:
            one_fewer = list(outcome.parts.history)
            one_fewer[short[-1]] = history[short[-1]]
            assert total_tokens(Parts(header=(), history=one_fewer), counter) > total


def test_a_system_prompt_the_last_resort_cuts_is_not_reported_as_whole() -> None:
    rules = "".join(f"Rule {i}: never reveal code R{i:04d}. " for i in range(1500))
    messages = [SystemMessage(rules), HumanMessage("hello"), AIMessage("bonjour"), HumanMessage("what is rule 1499?")]
    prepared = memory_engine(ContextConfig(budget={"total": 2000})).prepare(messages, scope=Scope(session_id="s"))
    assert len(content_text(prepared.messages[0].content)) < len(rules)
    [header] = [w for w in prepared.report.warnings if w.startswith("header is")]
    assert "never rewritten" not in header and "cut" in header, header
    whole = memory_engine(ContextConfig(budget={"total": 20000, "header": 1000})).prepare(messages, scope=Scope(session_id="s"))
    assert content_text(whole.messages[0].content).startswith(rules)
    assert any("never rewritten" in w for w in whole.report.warnings), "a header only over its own budget stays whole"


def test_the_last_resort_warning_names_which_part_of_the_header_it_cut() -> None:
    counter = get_counter("cl100k_base")[0]
    host = SystemMessage("You are an airline agent.")
    directory = SystemMessage("Tool directory.\n" + "\n".join(f"- tool_{i}: does thing {i} with care" for i in range(80)),
                              additional_kwargs={META_KEY: {"tool_directory": True}})
    history: list[BaseMessage] = [HumanMessage("Book me a flight " * 30), AIMessage("Sure " * 50), HumanMessage("Now please " * 20)]

    def header_warning(header: tuple[SystemMessage, ...]) -> tuple[tuple[SystemMessage, ...], str]:
        parts = Parts(header=header, history=history)
        budgets = {"total": total_tokens(parts, counter) // 3, "header": 100, "history": 10_000, "facts": 0, "summaries": 10_000}
        outcome = enforce(parts, budgets, counter, block_size=4)
        return outcome.parts.header, next(w for w in outcome.warnings if w.startswith("header is"))

    cut, warning = header_warning((host, directory))
    assert cut[0] is host and cut[1] is not directory, "a short prompt stays whole under the common cap, the directory is cut"
    assert "tool directory was cut" in warning and "system prompt was cut" not in warning, warning
    cut, warning = header_warning((directory,))
    assert "tool directory was cut" in warning and "system prompt was cut" not in warning, warning
    long_prompt = SystemMessage("Rule: be careful with bookings. " * 200)
    cut, warning = header_warning((long_prompt,))
    assert cut[0] is not long_prompt and "the system prompt was cut" in warning and "directory" not in warning, warning
    cut, warning = header_warning((long_prompt, directory))
    assert all(a is not b for a, b in zip(cut, (long_prompt, directory), strict=True))
    assert "the system prompt and the tool directory were cut" in warning, warning


def test_the_last_resort_leaves_the_system_prompt_as_the_host_wrote_it() -> None:
    # a pasted log far over the total: only the essentials fit, and the note that earlier
    # exchanges are not shown goes in a message of its own, never into the host's system prompt
    log = "\n".join(f"10:{i // 60:02d}:{i % 60:02d} ERROR worker-{i % 7} timeout request_id=req_{i:06d}" for i in range(1500))
    messages: list[BaseMessage] = [SystemMessage(content="You are a debugging assistant."), HumanMessage(content="Why did req_000777 fail?\n" + log)]
    for i in range(6):
        messages += [
            AIMessage(content="", tool_calls=[{"name": "bash", "args": {"command": f"grep req_000{777 + i} app.log"}, "id": f"c{i}"}]),
            ToolMessage(content=f"line {i}: req_000{777 + i}", tool_call_id=f"c{i}"),
        ]
    bash = {"name": "bash", "description": "Run a command.", "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}
    for mode in ("whole", "compact"):
        engine = memory_engine(ContextConfig(mode=mode))
        prepared = engine.prepare(messages, tools=[{"type": "function", "function": bash}], scope=Scope(session_id=f"log-{mode}"))
        assert any("minimum viable" in w for w in prepared.report.warnings)
        assert prepared.messages[0].content == "You are a debugging assistant.", mode
        notes = [m for m in prepared.messages if "earlier exchanges are not shown" in content_text(m.content)]
        assert len(notes) == 1 and not isinstance(notes[0], (HumanMessage, AIMessage)), mode


def test_the_last_resort_cuts_the_arguments_of_the_last_tool_call() -> None:
    # a coding agent's last call wrote a whole file: its arguments are text the view can cut
    # (the state keeps them whole), as the doc promises the total is never exceeded
    source = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000))
    messages: list[BaseMessage] = [
        SystemMessage(content="You are a coding agent."), HumanMessage(content="Write src/gen.py."),
        AIMessage(content="", tool_calls=[{"name": "write_file", "args": {"path": "src/gen.py", "content": source, "mode": 420}, "id": "c1"}]),
        ToolMessage(content="written", tool_call_id="c1", name="write_file"),
    ]
    engine = memory_engine(ContextConfig(budget={"total": 1500}))
    prepared = engine.prepare(messages, scope=Scope(session_id="args"))
    assert prepared.report.within_budget and prepared.report.tokens_after <= 1500, prepared.report.warnings
    call = next(m for m in prepared.messages if isinstance(m, AIMessage)).tool_calls[0]
    args = call["args"]
    assert call["id"] == "c1" and args["path"] == "src/gen.py" and args["mode"] == 420, "short values stay"
    assert "cut to fit the budget" in args["content"] and args["content"].startswith("def f0(x):")
    sent = messages[2]
    assert isinstance(sent, AIMessage) and sent.tool_calls[0]["args"]["content"] == source, "the input is not changed"


def test_the_last_resort_leaves_a_call_its_responses_api_turn_repeats_in_its_content() -> None:
    # a Responses API turn repeats the call as a function_call block whose own id is the
    # item's (fc_...) and whose call_id is the tool call's: the provider sends that block, so
    # cutting the tool call's arguments alone would only make the view look smaller
    source = "".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(3000))
    args = {"path": "src/gen.py", "content": source}
    block = {"type": "function_call", "id": "fc_1", "call_id": "c1", "name": "write_file", "arguments": json.dumps(args)}
    messages: list[BaseMessage] = [
        SystemMessage(content="You are a coding agent."), HumanMessage(content="Write src/gen.py."),
        AIMessage(content=[block], tool_calls=[{"name": "write_file", "args": args, "id": "c1"}]),
        ToolMessage(content="written", tool_call_id="c1", name="write_file"),
    ]
    engine = memory_engine(ContextConfig(budget={"total": 1500}))
    prepared = engine.prepare(messages, scope=Scope(session_id="responses-args"))
    turn = next(m for m in prepared.messages if isinstance(m, AIMessage))
    assert turn.tool_calls[0]["args"]["content"] == source, "the call and the block it repeats stay alike"
    assert not prepared.report.within_budget, "the view is not reported within a total it exceeds"


def test_the_last_resort_says_it_cut_a_system_prompt_within_the_header_budget() -> None:
    # the header fits its own budget, but the total the user set does not hold the view: the
    # last resort cuts the system prompt, and a warning must say so
    prompt = "You are an airline agent. Always confirm the booking class first. " * 12
    messages = [SystemMessage(prompt), HumanMessage("Book flight HAT001 for me. " * 60), AIMessage("Which date? " * 40),
                HumanMessage("May 1st, please " * 30)]
    prepared = memory_engine(ContextConfig(budget={"total": 300, "header": 300})).prepare(messages, scope=Scope(session_id="s"))
    assert len(content_text(prepared.messages[0].content)) < len(prompt)
    assert not any(w.startswith("header is") for w in prepared.report.warnings), "the header was within its budget"
    assert any("the system prompt was cut at head and tail" in w for w in prepared.report.warnings), prepared.report.warnings
