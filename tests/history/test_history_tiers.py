from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, HistoryConfig, InvalidInputError, Scope
from ctxplugin._messages import exchange_spans
from ctxplugin.history import (
    GIST_PREFIX,
    HistoryBudget,
    HistoryView,
    Tier,
    compress_history,
    identifiers,
    is_boundary_call,
    pin,
    tier_bounds,
)
from ctxplugin.history.identifiers import missing
from ctxplugin.testing import memory_engine, note_values
from ctxplugin.tokens import content_text, count_message, count_messages, get_counter

COUNTER = get_counter()[0]
Builder = Callable[..., list[BaseMessage]]


def tier_of(message: BaseMessage) -> str | None:
    note = message.additional_kwargs.get("ctxplugin")
    return note.get("tier") if isinstance(note, dict) else None


def test_tier_bounds_move_together_in_blocks() -> None:
    config = HistoryConfig(verbatim_exchanges=2, trimmed_exchanges=5, block_size=4)
    assert tier_bounds(2, config) == (0, 0)
    assert tier_bounds(6, config) == (0, 4)
    assert tier_bounds(9, config) == (0, 4)
    assert tier_bounds(10, config) == (4, 8)
    moves = [n for n in range(3, 60) if is_boundary_call(n, config)]
    assert moves == list(range(6, 60, 4)), "boundaries move once every block_size exchanges"
    for n in range(3, 60):
        gist_end, verbatim_start = tier_bounds(n, config)
        assert 2 <= n - verbatim_start <= 5, "at least verbatim_exchanges, less than one more block"
        assert gist_end % 4 == 0 and verbatim_start % 4 == 0


def test_block_size_one_gives_exact_ages() -> None:
    config = HistoryConfig(verbatim_exchanges=2, trimmed_exchanges=5, block_size=1)
    assert tier_bounds(20, config) == (15, 18)


def test_tiers_by_age(agent_session: Builder) -> None:
    config = HistoryConfig()
    body = agent_session(12)  # 13 exchanges: the task, then 12 steps
    view = compress_history(body, config=config, counter=COUNTER)
    gist_end, verbatim_start = tier_bounds(len(exchange_spans(body)), config)
    assert (gist_end, verbatim_start) == (4, 8)
    spans = exchange_spans(body)
    for number, (start, end) in enumerate(spans):
        for index in range(start, end):
            original, shown = body[index], view.messages[index]
            if index == 0:
                assert shown is original, "the task is protected"
            elif number < gist_end:
                assert tier_of(shown) == Tier.GIST.value
                assert content_text(shown.content).startswith(GIST_PREFIX)
            elif number < verbatim_start:
                assert tier_of(shown) in (Tier.TRIMMED.value, None)
                if isinstance(original, ToolMessage):  # the listings are over trim_tokens
                    assert "tokens elided" in content_text(shown.content)
            else:
                assert shown is original
    assert view.compressed_count == sum(1 for a, b in zip(body, view.messages, strict=True) if a is not b)
    assert view.tiers["gist"] > 0 and view.tiers["trimmed"] > 0 and view.tiers["verbatim"] > 0


def test_gisted_ai_message_keeps_its_tool_calls(agent_session: Builder) -> None:
    body = agent_session(12)
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER)
    gisted = [m for m in view.messages if isinstance(m, AIMessage) and tier_of(m) == "gist"]
    assert gisted
    originals = {m.id: m for m in body}
    for message in gisted:
        assert message.tool_calls == originals[message.id].tool_calls  # type: ignore[attr-defined]


def test_long_tool_call_arguments_are_trimmed_with_their_values_kept() -> None:
    script = "\n".join(
        ["cd /testbed && cat > check_parse.py << 'EOF'", "import sys", "from sqlfluff.core import Linter"]
        + [f"    total += lint(query, dialect=dialect)  # {word} case" for word in ["plain", "nested", "quoted", "empty"] * 30]
        + ["    raise KeyError('HAT0042')", "EOF", "python check_parse.py"]
    )
    raw = {"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}]}
    long_call = AIMessage("Write the script.", tool_calls=[{"name": "bash", "args": {"command": script, "timeout": 30}, "id": "c1"}], id="a1", additional_kwargs=raw)
    body: list[BaseMessage] = [HumanMessage("Fix the parser", id="h0"), long_call, ToolMessage("ok", tool_call_id="c1", id="t1")]
    for i in range(2, 8):
        body += [AIMessage("", tool_calls=[{"name": "bash", "args": {"command": f"ls dir{i}"}, "id": f"c{i}"}], id=f"a{i}"),
                 ToolMessage("ok", tool_call_id=f"c{i}", id=f"t{i}")]
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=7, block_size=1, trim_tokens=100)
    shown = next(m for m in compress_history(body, config=config, counter=COUNTER).messages if m.id == "a1")
    assert isinstance(shown, AIMessage) and tier_of(shown) == "trimmed"
    (call,) = shown.tool_calls
    assert (call["id"], call["name"], call["args"]["timeout"]) == ("c1", "bash", 30)
    command = call["args"]["command"]
    assert COUNTER.count(command) < COUNTER.count(script) // 4
    assert command.startswith("cd /testbed && cat > check_parse.py") and command.endswith("python check_parse.py")
    assert missing(identifiers(script), command) == [] and "KeyError('HAT0042')" in command
    assert "tool_calls" not in shown.additional_kwargs, "no stale raw copy of the long arguments"
    # the newest exchange keeps its calls exactly
    newest = compress_history([*body[:-2], body[1].model_copy(update={"id": "a9"}), ToolMessage("ok", tool_call_id="c1", id="t9")], config=config, counter=COUNTER).messages
    assert newest[-2].tool_calls == long_call.tool_calls  # type: ignore[attr-defined]


def _block_body(blocks: list[str | dict[str, Any]], script: str) -> list[BaseMessage]:
    call = AIMessage(blocks, tool_calls=[{"name": "bash", "args": {"command": script, "timeout": 30}, "id": "c1"}], id="a1")
    body: list[BaseMessage] = [HumanMessage("Go", id="h0"), call, ToolMessage("ok", tool_call_id="c1", id="t1")]
    for i in range(2, 6):
        body += [AIMessage("next", id=f"a{i}"), HumanMessage(f"step {i}", id=f"h{i}")]
    return body


def test_calls_held_as_content_blocks_are_trimmed_in_the_blocks_too() -> None:
    # the shape Claude answers in: its text and its tool_use blocks, the calls also in tool_calls
    script = "\n".join(f"python lint.py --dialect ansi --case {word} >> /tmp/lint.log" for word in ["plain", "nested", "quoted", "empty"] * 50)
    reasoning = " ".join(f"I will check module_{i} before the change." for i in range(60))
    blocks: list[str | dict[str, Any]] = [
        {"type": "text", "text": reasoning, "index": 0},
        {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": script, "timeout": 30}, "index": 1},
    ]
    body = _block_body(blocks, script)
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=4, block_size=1, trim_tokens=60)
    shown = next(m for m in compress_history(body, config=config, counter=COUNTER).messages if m.id == "a1")
    assert isinstance(shown, AIMessage) and tier_of(shown) in ("trimmed", "gist")
    (call,) = shown.tool_calls
    assert (call["id"], call["name"], call["args"]["timeout"]) == ("c1", "bash", 30)
    assert COUNTER.count(call["args"]["command"]) < COUNTER.count(script) // 4
    assert missing(identifiers(script), call["args"]["command"]) == []
    assert isinstance(shown.content, list)
    texts = [b for b in shown.content if isinstance(b, dict) and b.get("type") == "text"]
    uses = [b for b in shown.content if isinstance(b, dict) and b.get("type") == "tool_use"]
    assert len(texts) == 1 and COUNTER.count(texts[0]["text"]) < COUNTER.count(reasoning)
    assert missing(identifiers(reasoning), texts[0]["text"]) == []
    assert [(u["id"], u["name"], u["input"]) for u in uses] == [("c1", "bash", call["args"])], "the block says what tool_calls says"
    assert count_message(shown, COUNTER) < count_message(body[1], COUNTER) // 3
    assert body[1].content == blocks, "the history is not mutated"


def test_standard_tool_call_blocks_are_trimmed_like_tool_use_blocks() -> None:
    script = "\n".join(f"echo step {i} >> /tmp/log_{i}.txt" for i in range(200))
    blocks: list[str | dict[str, Any]] = [{"type": "tool_call", "id": "c1", "name": "bash", "args": {"command": script, "timeout": 30}}]
    body = _block_body(blocks, script)
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=4, block_size=1, trim_tokens=60)
    shown = next(m for m in compress_history(body, config=config, counter=COUNTER).messages if m.id == "a1")
    assert isinstance(shown, AIMessage) and isinstance(shown.content, list)
    (block,) = shown.content
    assert isinstance(block, dict) and block["args"] == shown.tool_calls[0]["args"] != {"command": script, "timeout": 30}


@pytest.mark.parametrize(
    "other",
    [
        {"type": "thinking", "thinking": "Let me think.", "signature": "c2lnbmF0dXJl"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}},
        {"type": "tool_use", "id": "c9", "name": "bash", "input": {"command": "ls"}},  # not among tool_calls
        {"type": "text", "text": "Cited.", "citations": [{"type": "char_location", "cited_text": "x"}]},
    ],
)
def test_blocks_that_cannot_be_rewritten_leave_the_message_alone(other: dict[str, Any]) -> None:
    script = "\n".join(f"echo step {i} >> /tmp/log_{i}.txt" for i in range(200))
    blocks: list[str | dict[str, Any]] = [other, {"type": "tool_use", "id": "c1", "name": "bash", "input": {"command": script, "timeout": 30}}]
    body = _block_body(blocks, script)
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=4, block_size=1, trim_tokens=60)
    shown = next(m for m in compress_history(body, config=config, counter=COUNTER).messages if m.id == "a1")
    assert shown is body[1]


def test_over_budget_sends_the_history_as_it_is_until_it_no_longer_fits(agent_session: Builder) -> None:
    config = HistoryConfig(compress="over_budget")
    budget = HistoryBudget(total=6000)
    sizes = {n: count_messages(agent_session(n), COUNTER) for n in range(2, 20)}
    fits = max(n for n, size in sizes.items() if size <= 6000)
    body = agent_session(fits)
    view = compress_history(body, config=config, counter=COUNTER, budget=budget)
    assert all(shown is original for shown, original in zip(view.messages, body, strict=True))
    assert view.compressed_count == 0 and view.tiers["verbatim"] + view.tiers["protected"] == len(body)
    assert compress_history(body, config=HistoryConfig(), counter=COUNTER, budget=budget).compressed_count > 0
    for n in range(fits + 1, fits + 6):  # once over, the tiers by age apply on every call
        grown = compress_history(agent_session(n), config=config, counter=COUNTER, budget=budget)
        assert grown.compressed_count > 0


def test_values_survive_every_tier(agent_session: Builder) -> None:
    body = agent_session(14, refs=True)
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER)
    for original, shown in zip(body, view.messages, strict=True):
        text = content_text(shown.content)
        assert missing(identifiers(content_text(original.content)), text) == []
        ref = original.additional_kwargs.get("ctxplugin", {}).get("ref")
        if ref:
            assert ref in text, "a stored output keeps its ref in every tier"


def test_protected_messages_are_never_altered(agent_session: Builder) -> None:
    body = agent_session(12)
    body[5] = pin(body[5])
    body.insert(7, HumanMessage(content="Also check " + "the config loader carefully. " * 30, id="mid"))
    body.append(HumanMessage(content="Please also run the whole suite. " * 20, id="latest"))
    body.insert(9, SystemMessage(content="Tool budget: 30 calls. " * 20, id="sys"))
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER)
    shown = {m.id: m for m in view.messages}
    for message in (body[0], body[5], body[-1], body[9]):
        assert shown[message.id] is message
    assert shown["mid"] is not body[7], "an old human turn that is neither first nor latest is compressed"


def test_pin_marks_without_mutating() -> None:
    original = AIMessage(content="Budget is 1,200 EUR.", additional_kwargs={"ctxplugin": {"ref": "r"}})
    pinned = pin(original)
    assert pinned.additional_kwargs["ctxplugin"] == {"ref": "r", "pinned": True}
    assert original.additional_kwargs["ctxplugin"] == {"ref": "r"}


def test_inputs_are_never_mutated_and_output_is_deterministic(agent_session: Builder) -> None:
    body = agent_session(20, refs=True)
    snapshot = [m.model_dump() for m in body]
    first = compress_history(body, config=HistoryConfig(), counter=COUNTER, budget=2500)
    second = compress_history(body, config=HistoryConfig(), counter=COUNTER, budget=2500)
    assert [m.model_dump() for m in body] == snapshot
    assert [m.model_dump() for m in first.messages] == [m.model_dump() for m in second.messages]


def test_multimodal_content_passes_through(agent_session: Builder) -> None:
    body = agent_session(12)
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    body[2] = body[2].model_copy(update={"content": [{"type": "text", "text": "look " * 200}, image]})
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER)
    assert view.messages[2] is body[2]


def test_budget_condenses_oldest_blocks_to_digests(agent_session: Builder) -> None:
    config = HistoryConfig()
    body = agent_session(40)
    full = compress_history(body, config=config, counter=COUNTER)
    budget = count_messages(full.messages, COUNTER) * 2 // 3
    view = compress_history(body, config=config, counter=COUNTER, budget=budget)
    assert count_messages(view.messages, COUNTER) <= budget
    assert view.omitted_exchanges > 0
    assert (view.omitted_exchanges + 1) % config.block_size == 0, "whole blocks (block 0 holds the task)"
    assert view.messages[0] is body[0], "the task stays first"
    digests = [m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert digests and all(isinstance(d, HumanMessage) for d in digests)
    _, last = digests[-1].additional_kwargs["ctxplugin"]["condensed"]
    text = content_text(digests[-1].content)
    assert f"grep -n handler /repo/src/module_{last - 1}.py" in text, "the commands of the condensed exchanges"
    ids = [m.id for m in view.messages if m not in digests]
    assert ids == [m.id for m in body if m.id in set(ids)], "nothing is reordered"


def test_a_note_does_not_list_again_what_a_listed_command_shows(agent_session: Builder) -> None:
    config = HistoryConfig()
    body = agent_session(40)
    full = compress_history(body, config=config, counter=COUNTER)
    view = compress_history(body, config=config, counter=COUNTER, budget=count_messages(full.messages, COUNTER) * 2 // 3)
    notes = [content_text(m.content) for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert notes
    for text in notes:
        by_label = note_values(text)
        values = [v for listed in by_label.values() for v in listed]
        commands = [v for v in by_label.get("ran", []) if v.startswith("grep -n handler ")]
        assert commands, "the note lists the commands the model ran"
        paths = {c.rsplit(" ", 1)[1] for c in commands}
        assert not paths & set(values), "a path inside a listed command is not listed again"


def test_archive_keeps_the_newest_values_of_old_blocks(agent_session: Builder) -> None:
    config = HistoryConfig(archive_tokens=120)
    body = agent_session(60)
    view = compress_history(body, config=config, counter=COUNTER, budget=8000)
    notes = [m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert count_messages(view.messages, COUNTER) <= 8000
    archive = notes[0]
    first, last = archive.additional_kwargs["ctxplugin"]["condensed"]
    assert view.messages[1] is archive and first == 1, "the archive follows the task"
    text = content_text(archive.content)
    assert COUNTER.count(text) <= 120
    assert f"/repo/src/module_{last - 1}.py" in text, "newest values first"
    assert "/repo/src/module_0.py" not in text, "the oldest values age out of the archive"
    later = notes[1:]
    assert len(later) < config.archive_blocks, "blocks are archived archive_blocks at a time"


def test_archive_shrinks_when_even_a_condensed_history_is_too_large(agent_session: Builder) -> None:
    # at a boundary move: no exchange joined the window since, so nothing there is trimmed early
    config = HistoryConfig(archive_tokens=400)
    body = agent_session(61)
    assert is_boundary_call(len(exchange_spans(body)), config)
    roomy = compress_history(body, config=config, counter=COUNTER, budget=10**6 // 100)
    archive = next(m for m in roomy.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))
    full_archive = count_message(archive, COUNTER)
    assert full_archive > 200
    bare = compress_history(body, config=HistoryConfig(archive_tokens=0), counter=COUNTER, budget=1)
    budget = count_messages(bare.messages, COUNTER) + full_archive // 2 + 60
    tight = compress_history(body, config=config, counter=COUNTER, budget=budget)
    notes = [m for m in tight.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert count_messages(tight.messages, COUNTER) <= budget
    assert notes and count_message(notes[0], COUNTER) <= 200, "the archive was halved to fit"


def test_one_long_newest_exchange_does_not_wipe_out_the_notes(agent_session: Builder) -> None:
    # At a boundary move the window holds only the newest exchange; room for the exchanges still
    # to come is estimated from the newest one, so one long script there (a heredoc of 2,000
    # tokens) must not make the plan drop every note of older history.
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=6, archive_blocks=6, archive_tokens=600)
    body = agent_session(36)
    assert is_boundary_call(len(exchange_spans(body)), config)
    script = "\n".join(f"print('check {i}:', compute_{i}(data))" for i in range(180))
    body[-2] = body[-2].model_copy(update={"content": f"Let me write the fix.\ncat > fix.py << 'EOF'\n{script}\nEOF"})
    assert count_message(body[-2], COUNTER) > 1500
    roomy = compress_history(body, config=config, counter=COUNTER, budget=3600)
    archive = next(m for m in roomy.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))
    assert count_message(archive, COUNTER) > 300, "with room for the window as it is, the archive keeps its size"
    view = compress_history(body, config=config, counter=COUNTER, budget=3000)
    notes = [m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})]
    assert notes, "older history is still represented"
    assert view.messages[1] is notes[0], "by the archive"
    assert count_messages(view.messages, COUNTER) <= 3000, "which shrinks as far as the window needs, no further"
    typical = agent_session(36)
    usual = compress_history(typical, config=config, counter=COUNTER, budget=3000)
    assert [m.additional_kwargs["ctxplugin"]["condensed"] for m in notes] == [
        m.additional_kwargs["ctxplugin"]["condensed"] for m in usual.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {})
    ], "the same blocks are condensed as without the long script"


def test_budget_limits_each_section(agent_session: Builder) -> None:
    body = agent_session(40)

    def tool_tokens(messages: list[BaseMessage]) -> int:
        return sum(count_message(m, COUNTER) for m in messages if isinstance(m, ToolMessage))

    unlimited = compress_history(body, config=HistoryConfig(), counter=COUNTER)
    limit = tool_tokens(unlimited.messages) - 600
    view = compress_history(body, config=HistoryConfig(), counter=COUNTER, budget=HistoryBudget(tool_results=limit))
    assert view.omitted_exchanges > 0 and tool_tokens(view.messages) <= limit
    text_only = compress_history(body, config=HistoryConfig(), counter=COUNTER, budget=HistoryBudget(messages=10**6))
    assert text_only.omitted_exchanges == 0


def test_omission_changes_only_when_boundaries_move(agent_session: Builder) -> None:
    config = HistoryConfig()
    body = agent_session(60)
    omitted: list[int] = []
    for steps in range(20, 60):
        history = body[: 1 + 2 * steps]
        view = compress_history(history, config=config, counter=COUNTER, budget=3000)
        exchanges = len(exchange_spans(history))
        if omitted and not is_boundary_call(exchanges, config):
            assert view.omitted_exchanges == omitted[-1]
        omitted.append(view.omitted_exchanges)
    assert omitted[-1] > omitted[0]


def test_views_only_append_between_boundary_moves(agent_session: Builder) -> None:
    config = HistoryConfig()
    body = agent_session(60, refs=True)
    previous: list[BaseMessage] | None = None
    appended = 0
    for steps in range(1, 60):
        history = body[: 1 + 2 * steps]
        view = compress_history(history, config=config, counter=COUNTER, budget=3500).messages
        if previous is not None and not is_boundary_call(len(exchange_spans(history)), config):
            assert [m.model_dump() for m in view[: len(previous)]] == [m.model_dump() for m in previous]
            appended += 1
        previous = view
    assert appended >= 40


def test_engine_calls_share_most_of_their_prefix(agent_session: Builder) -> None:
    config = ContextConfig(
        budget={"total": 8000, "header": 1000, "history": 6000, "facts": 600, "summaries": 3000},
        history={"max_tokens": 3000},
        facts={"enabled": False},  # the facts block is this test's noise, not its subject
    )
    engine = memory_engine(config)
    body = agent_session(80)
    scope = Scope(session_id="prefix")
    shares: list[float] = []
    for steps in range(1, 80):
        prepared = engine.prepare(body[: 1 + 2 * steps], scope=scope)
        report = prepared.report
        if steps > 1:
            shares.append(report.unchanged_prefix_tokens / report.tokens_after)
        assert report.within_budget
    mostly = sum(1 for share in shares if share >= 0.6) / len(shares)
    assert mostly >= 0.7, f"only {mostly:.0%} of calls reuse at least 60% of their prompt"
    assert sum(shares) / len(shares) >= 0.6


def test_engine_reports_compression_and_omission(agent_session: Builder) -> None:
    config = ContextConfig(budget={"total": 6000, "header": 1000, "history": 4000, "facts": 600, "summaries": 2000})
    engine = memory_engine(config)
    prepared = engine.prepare(agent_session(40), tools=engine.tools_for_model(), scope=Scope(session_id="r"))
    report = prepared.report
    assert "expand_ref" in report.tools_bound  # the first note says what it reads
    assert report.compressed_messages > 0
    assert report.dropped_exchanges > 0
    assert "earlier exchanges are not shown" not in content_text(prepared.messages[0].content)
    first_note = next(m for m in prepared.messages if content_text(m.content).startswith("[context note"))
    assert "expand_ref" in content_text(first_note.content)
    assert report.within_budget and report.tokens_after <= 6000


def test_history_can_be_turned_off(agent_session: Builder) -> None:
    config = ContextConfig(
        budget={"total": 100_000, "header": 1000, "history": 90_000, "facts": 600, "summaries": 90_000},
        history={"enabled": False},
    )
    prepared = memory_engine(config).prepare(agent_session(12), scope=Scope(session_id="off"))
    assert prepared.report.compressed_messages == 0
    assert not any(tier_of(m) for m in prepared.messages)


def test_bad_configuration_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match="trimmed_exchanges"):
        HistoryConfig(verbatim_exchanges=4, trimmed_exchanges=2)
    with pytest.raises(ValueError, match="block_size"):
        HistoryConfig(block_size=0)
    with pytest.raises(InvalidInputError, match="total"):
        HistoryBudget(total=-1)


def test_the_archive_keeps_values_the_model_reused_before_ones_seen_once() -> None:
    # old exchanges: the model opens the same config file three times; newer ones: one-off greps
    messages: list[BaseMessage] = [HumanMessage(content="Make the nightly export pass", id="task")]
    for step in range(16):
        command = "cat /repo/conf/export_settings.yaml" if step < 3 else f"grep -rn handler_{step} /repo/src/pkg_{step}/views_{step}.py"
        messages.append(AIMessage(content="", id=f"ai_{step}", tool_calls=[{"name": "bash", "args": {"command": command}, "id": f"c{step}"}]))
        messages.append(ToolMessage(content=f"ok {step}", tool_call_id=f"c{step}", name="bash", id=f"t{step}"))
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=2, archive_blocks=4, archive_tokens=60)
    view = compress_history(messages, config=config, counter=COUNTER, budget=160)
    archive = next(m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))
    values = [v for listed in note_values(content_text(archive.content)).values() for v in listed]
    assert "cat /repo/conf/export_settings.yaml" in note_values(content_text(archive.content))["ran"], (
        "a value the model used in three old exchanges outranks newer one-off values"
    )
    assert "handler_14" in content_text(archive.content), "recent one-off values fill the rest, newest first"
    assert not any("handler_4" in v.split() or "_4/" in v or "handler_4 " in v for v in values), (
        "the oldest one-off values age out"
    )


def test_the_archive_leaves_out_phrases_the_assistant_or_a_tool_said_for_commands_and_ids() -> None:
    messages: list[BaseMessage] = [HumanMessage(content="Make the nightly export pass", id="task")]
    for step in range(16):
        said = f"The `export handler {step}` looks wrong; checking HAT{step}."
        call = {"name": "bash", "args": {"command": f"grep -rn handler_{step} /repo/src/pkg_{step}.py"}, "id": f"c{step}"}
        messages.append(AIMessage(content=said, id=f"ai_{step}", tool_calls=[call]))
        output = f"error: 'connection reset by peer {step}' in W{step}X"
        messages.append(ToolMessage(content=output, tool_call_id=f"c{step}", name="bash", id=f"t{step}"))
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=2, archive_blocks=4, archive_tokens=400)
    view = compress_history(messages, config=config, counter=COUNTER, budget=400)
    archive = next(m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))
    listed = note_values(content_text(archive.content))
    phrases = [v for label in ("assistant mentioned", "bash returned") for v in listed.get(label, []) if " " in v]
    assert phrases == [], "a phrase of old prose or output is not listed"
    assert "grep -rn handler_12 /repo/src/pkg_12.py" in listed["ran"] and "HAT3" in listed["assistant mentioned"], (
        "the commands and ids take the room"
    )


def test_notes_list_the_shell_lines_of_a_script_command_not_its_body() -> None:
    # the model writes a script with a here-document and runs it in the same command; later it
    # runs the script again on its own, so the run line is a value worth keeping
    script = (
        "cd /repo && cat > repro_export.py << 'EOF'\n"
        "import exporter\n"
        "print(exporter.run(limit=25))\n"
        "EOF\n"
        "python repro_export.py\n"
    )
    messages: list[BaseMessage] = [HumanMessage(content="Make the nightly export pass", id="task")]
    for step in range(8):
        command = script if step == 0 else f"grep -rn handler_{step} /repo/src/pkg_{step}.py"
        call = {"name": "bash", "args": {"command": command}, "id": f"c{step}"}
        if step == 1:  # a file's content given to a write tool is not commands, whatever its lines
            content = "limit = 25\nretries = 3\nmask = flags << shift\n"
            call = {"name": "write_file", "args": {"path": "/repo/conf.py", "content": content}, "id": f"c{step}"}
        messages.append(AIMessage(content="", id=f"ai_{step}", tool_calls=[call]))
        output = "\n".join(f"row {step}.{i}: value" for i in range(40))
        messages.append(ToolMessage(content=output, tool_call_id=f"c{step}", name="bash", id=f"t{step}"))
    config = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=2, archive_blocks=2, archive_tokens=400)
    view = compress_history(messages, config=config, counter=COUNTER, budget=1200)
    archive = next(m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))
    assert archive.additional_kwargs["ctxplugin"]["condensed"][0] == 1, "the script's exchange is condensed"
    by_label = note_values(content_text(archive.content))
    assert by_label, archive.content
    values = {v for listed in by_label.values() for v in listed}
    assert "python repro_export.py" in by_label["ran"], "the line after the here-document, whole"
    assert not any("print(exporter.run" in v for v in values), "the script body is not a shell line"
    assert not any(v.startswith("cd /repo && cat >") for v in values), "the line that writes the file is not listed"
    assert "/repo/conf.py" in by_label["path"], "the written file's path, under its argument's name"
    assert not values & {"limit = 25", "retries = 3", "mask = flags << shift"}, "a written file's lines are not listed"


SCRIPT_CONFIG = HistoryConfig(verbatim_exchanges=1, trimmed_exchanges=1, block_size=6, archive_blocks=6, archive_tokens=600)


def _scripted(agent_session: Builder, output: str = "ok", lines: int = 120) -> tuple[list[BaseMessage], list[BaseMessage]]:
    """A session at a boundary move, and the same with a script of ``lines`` lines written just
    after (its tool result ``output``)."""
    body = agent_session(36)
    assert is_boundary_call(len(exchange_spans(body)), SCRIPT_CONFIG)
    script = "\n".join(f"print('check {i}:', compute_{i}(data))" for i in range(lines))
    call = {"name": "bash", "args": {"command": f"cat > fix.py << 'EOF'\n{script}\nEOF\npython fix.py"}, "id": "big"}
    return body, [
        *body,
        AIMessage(content="Let me write the fix.", id="ai_big", tool_calls=[call]),
        ToolMessage(content=output, tool_call_id="big", name="bash", id="tool_big"),
    ]


def _archive(view: HistoryView) -> BaseMessage:
    return next(m for m in view.messages if "condensed" in m.additional_kwargs.get("ctxplugin", {}))


def test_a_long_output_between_moves_shrinks_the_archive_instead_of_losing_it(agent_session: Builder) -> None:
    # The plan is made at a boundary move and kept until the next one, with room for the
    # exchanges to come estimated from the newest. A long exchange written between moves whose
    # output is long too (it cannot be trimmed without hiding what the next step reads) must
    # not leave the view over its budget: the budget stage would then drop the oldest
    # exchanges, which are the notes, and all of older history with them.
    output = "\n".join(f"/repo/src/fix.py:{i}: check {i} failed: expected {3 * i}, got {7 * i}" for i in range(20))
    body, later = _scripted(agent_session, output=output, lines=95)
    assert not is_boundary_call(len(exchange_spans(later)), SCRIPT_CONFIG)
    before = compress_history(body, config=SCRIPT_CONFIG, counter=COUNTER, budget=3000)
    after = compress_history(later, config=SCRIPT_CONFIG, counter=COUNTER, budget=3000)
    assert count_message(_archive(before), COUNTER) > 500
    assert count_messages(after.messages, COUNTER) <= 3000, "the view still fits"
    assert 100 < count_message(_archive(after), COUNTER) < 500, "by a smaller archive, not by none"
    assert _archive(after).additional_kwargs == _archive(before).additional_kwargs, "covering the same exchanges"
    assert after.messages[-2] is later[-2] and after.messages[-1] is later[-1], "the latest exchange shown whole"


def test_a_long_script_is_trimmed_and_the_archive_keeps_its_size(agent_session: Builder) -> None:
    # A long script the assistant writes between moves, with a short result, is shown trimmed
    # at once when the window has no room for it: the archive stays the one of the move. Shrunk
    # for the call, it would grow back on the next (or at the next move, which gists the script
    # anyway), rewriting the start of the cached prefix twice and hiding the oldest values
    # meanwhile; trimming rewrites only the end of the view.
    body, scripted = _scripted(agent_session)

    def step(n: int) -> list[BaseMessage]:
        run = {"name": "bash", "args": {"command": f"python -m pytest tests/test_{n}.py"}, "id": f"run{n}"}
        return [
            AIMessage(content="Now run the tests.", id=f"ai_run{n}", tool_calls=[run]),
            ToolMessage(content="3 passed", tool_call_id=f"run{n}", name="bash", id=f"tool_run{n}"),
        ]

    later, again = [*scripted, *step(1)], [*scripted, *step(1), *step(2)]
    assert not is_boundary_call(len(exchange_spans(again)), SCRIPT_CONFIG)
    views = [compress_history(h, config=SCRIPT_CONFIG, counter=COUNTER, budget=3000, session="script") for h in (body, scripted, later, again)]
    at_move, written, after, next_call = views
    assert all(count_messages(v.messages, COUNTER) <= 3000 for v in views)
    assert _archive(written).content == _archive(at_move).content, "while the script is the latest exchange, the archive keeps its size"
    for view in (written, after):
        big = next(m for m in view.messages if m.id == "ai_big")
        assert big.additional_kwargs["ctxplugin"]["tier"] == "trimmed"
        assert count_message(big, COUNTER) < count_message(scripted[-2], COUNTER) // 2
    assert next(m for m in written.messages if m.id == "tool_big") is scripted[-1], "its short result is shown whole"
    assert (after.tiers["trimmed"], after.tiers["verbatim"]) == (2, 4), "its two messages count as trimmed, the others stay verbatim"
    for earlier, view in ((written, after), (after, next_call)):
        assert [m.content for m in view.messages[: len(earlier.messages)]] == [m.content for m in earlier.messages], (
            "each next call extends the view"
        )
    for history, view in ((scripted, written), (again, next_call)):
        fresh = compress_history(history, config=SCRIPT_CONFIG, counter=COUNTER, budget=3000, session=f"script-{len(history)}")
        assert [(m.type, m.content) for m in fresh.messages] == [(m.type, m.content) for m in view.messages], (
            "as planning from scratch would show it"
        )


def _booking_chat(lookups: int) -> list[BaseMessage]:
    """A task, ``lookups`` tool calls, the assistant's question, the user's short answer."""
    body: list[BaseMessage] = [HumanMessage("Book me the cheapest flight from JFK to SEA on May 20.", id="task")]
    for i in range(lookups):
        body.append(AIMessage("", id=f"a{i}", tool_calls=[{"name": "search", "args": {"day": i}, "id": f"c{i}"}]))
        body.append(ToolMessage(f"HAT{100 + i}: JFK-SEA, $" + f"{400 + i} " * 60, tool_call_id=f"c{i}", id=f"t{i}"))
    question = "I found HAT103 at $403 in economy, departing 08:10 and arriving 11:25. " * 4
    body.append(AIMessage(question + "Shall I book it with the card on file ending 7447?", id="question"))
    body.append(HumanMessage("Yes, go ahead.", id="answer"))
    return body


def test_the_assistant_message_the_latest_user_turn_answers_is_kept_whole() -> None:
    config = HistoryConfig(compress="always", block_size=4, verbatim_exchanges=1, trimmed_exchanges=1)
    body = _booking_chat(6)  # nine exchanges: the window after a move holds the answer alone
    assert tier_bounds(len(exchange_spans(body)), config) == (8, 8)
    view = compress_history(body, config=config, counter=COUNTER, budget=HistoryBudget(total=600), session="booking")
    shown = {m.id: m for m in view.messages if m.id}
    assert shown["question"] is body[-2] and shown["answer"] is body[-1]
    # once the user speaks again, the earlier question is history like any other message
    later = [*body, AIMessage("Booked: reservation 4WQ150.", id="done"), HumanMessage("Thanks! Anything else I need?", id="next")]
    again = compress_history(later, config=config, counter=COUNTER, budget=HistoryBudget(total=600), session="booking")
    fresh = compress_history(later, config=config, counter=COUNTER, budget=HistoryBudget(total=600), session="booking-fresh")
    assert [(m.id, m.content) for m in again.messages] == [(m.id, m.content) for m in fresh.messages]
    kept = {m.id: m for m in again.messages if m.id}
    assert kept["done"] is later[-2] and kept.get("question") is not body[-2]


@pytest.mark.parametrize("size", [1, 2, 4, 5])
def test_block_members_are_each_block_without_its_protected_exchanges(size: int) -> None:
    from ctxplugin.history.tiers import _block_members

    for blocks in (0, 1, 7):
        for protected in (set(), {0}, {3, 4, 9}, {max(blocks * size - 1, 0), blocks * size, 100}):
            expected = [[i for i in range(k * size, (k + 1) * size) if i not in protected] for k in range(blocks)]
            assert [list(m) for m in _block_members(blocks, size, protected)] == expected


def test_archived_blocks_passed_over_at_once_give_the_view_assembled_block_by_block(mocker: Any) -> None:
    from ctxplugin.history import tiers as tiers_module
    from ctxplugin.history._condensed import assemble

    # a long history whose archive holds whole blocks and blocks short of a pinned exchange
    messages: list[BaseMessage] = [HumanMessage("Fix the failing test in /repo/app.py", id="task")]
    for step in range(80):
        extra = {"ctxplugin": {"pinned": True}} if step in (9, 10, 31, 47) else {}
        messages.append(AIMessage(f"step {step}", tool_calls=[{"name": "bash", "args": {"command": f"cat f{step}.py"}, "id": f"c{step}"}]))
        messages.append(ToolMessage(f"value_{step} " * 40, tool_call_id=f"c{step}", additional_kwargs=extra))
    config = HistoryConfig(block_size=2, verbatim_exchanges=2, trimmed_exchanges=4, archive_blocks=3)
    spy = mocker.spy(tiers_module, "assemble")
    view = compress_history(messages, config=config, counter=COUNTER, budget=HistoryBudget(total=2500), session="archived-runs")
    assert view.omitted_exchanges > 20
    shown, spans, notes, plan, block_size, first_window, short = spy.call_args.args
    assert short, "some condensed blocks are short of members"
    assert assemble(shown, spans, notes, plan, block_size, first_window, short) == assemble(shown, spans, notes, plan, block_size, first_window)
