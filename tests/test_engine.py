from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path

import pytest
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from ctxplugin import ConfigError, ContextConfig, ContextEngine, InvalidInputError, Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import count_messages

SCOPE = Scope(session_id="s1")


def big_json(n: int = 60) -> str:
    return json.dumps([{"flight_number": f"HAT{i:03d}", "price": 100 + i, "seats": i % 7} for i in range(n)])


def conversation(turns: int = 3) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage(content="You are a travel agent."), HumanMessage(content="Find flights SFO to JFK")]
    for i in range(turns):
        call_id = f"call_{i}"
        messages.append(AIMessage(content="", tool_calls=[{"name": "search", "args": {"q": f"SFO-JFK {i}"}, "id": call_id}]))
        messages.append(ToolMessage(content=big_json(60 + i), tool_call_id=call_id, name="search"))
        messages.append(AIMessage(content=f"Found flights, cheapest HAT{i:03d}."))
        messages.append(HumanMessage(content=f"And for day {i + 1}?"))
    return messages


def test_prepare_does_not_mutate_inputs() -> None:
    engine = memory_engine()
    messages = conversation()
    snapshot = [m.model_dump() for m in messages]
    engine.prepare(messages, scope=SCOPE)
    assert [m.model_dump() for m in messages] == snapshot


def test_report_counts_are_honest() -> None:
    engine = memory_engine(ContextConfig(budget={"total": 100_000, "header": 1000, "history": 50_000, "facts": 800, "summaries": 50_000}))
    messages = conversation()
    prepared = engine.prepare(messages, scope=SCOPE)
    report = prepared.report
    assert report.tokens_before == count_messages(messages, engine.counter)
    assert report.tokens_after == count_messages(prepared.messages, engine.counter)
    assert report.tokens_after < report.tokens_before
    assert sum(s.after for s in report.sections.values()) == report.tokens_after
    assert report.timings_ms["total"] >= report.timings_ms["validate"] >= 0
    assert report.refs_used, "large tool outputs should be replaced by refs"


def test_view_keeps_tool_call_pairing_and_refs_expand_exactly() -> None:
    engine = memory_engine()
    messages = conversation()
    prepared = engine.prepare(messages, scope=SCOPE)
    call_ids = {c["id"] for m in prepared.messages if isinstance(m, AIMessage) for c in m.tool_calls}
    result_ids = {m.tool_call_id for m in prepared.messages if isinstance(m, ToolMessage)}
    assert call_ids == result_ids
    ref = prepared.report.refs_used[0]
    originals = {m.content for m in messages if isinstance(m, ToolMessage)}
    assert engine.expand_ref(ref, scope=SCOPE) in originals


def test_capture_tool_result_keeps_call_id_and_round_trips() -> None:
    engine = memory_engine()
    original = ToolMessage(content=big_json(200), tool_call_id="c9", name="search")
    compact = engine.capture_tool_result(original, scope=SCOPE)
    assert compact.tool_call_id == "c9"
    assert len(str(compact.content)) < len(str(original.content))
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert ref.startswith("ref:")
    assert engine.expand_ref(ref, scope=SCOPE) == original.content
    small = ToolMessage(content="ok", tool_call_id="c10")
    assert engine.capture_tool_result(small, scope=SCOPE).content == "ok"


def test_expand_ref_takes_one_field_path_as_a_string() -> None:
    engine = memory_engine()
    compact = engine.capture_tool_result(ToolMessage(content=big_json(200), tool_call_id="c1"), scope=SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    assert engine.expand_ref(ref, scope=SCOPE, fields="[3].flight_number") == engine.expand_ref(
        ref, scope=SCOPE, fields=["[3].flight_number"]
    )
    assert "HAT003" in engine.expand_ref(ref, scope=SCOPE, fields="[3].flight_number")


def test_refs_are_not_readable_from_another_session() -> None:
    engine = memory_engine()
    compact = engine.capture_tool_result(ToolMessage(content=big_json(200), tool_call_id="c1"), scope=SCOPE)
    ref = compact.additional_kwargs["ctxplugin"]["ref"]
    with pytest.raises(KeyError):
        engine.expand_ref(ref, scope=Scope(session_id="other"))


def test_empty_list_is_a_clear_error() -> None:
    with pytest.raises(InvalidInputError, match="empty"):
        memory_engine().prepare([], scope=SCOPE)


def test_non_message_is_a_clear_error() -> None:
    # a dict is how the agents take their input ({"messages": [{"role": "user", ...}]}); prepare
    # takes messages, and the error says how to make them
    with pytest.raises(ValueError, match=r"not a langchain-core BaseMessage.*convert_to_messages"):
        memory_engine().prepare([{"role": "user", "content": "hi"}], scope=SCOPE)


def test_one_tool_given_as_tools_is_a_clear_error() -> None:
    lookup = {"type": "function", "function": {"name": "lookup", "parameters": {"type": "object", "properties": {}}}}
    for one in (lookup, "lookup", len):
        with pytest.raises(InvalidInputError, match=r"tools= takes a list of tools, got \w+; wrap one tool in a list"):
            memory_engine().prepare([HumanMessage(content="hi")], tools=one, scope=SCOPE)
    assert memory_engine().prepare([HumanMessage(content="hi")], tools=(lookup,), scope=SCOPE).tools


@pytest.mark.parametrize("content", [None, {"rows": 3}, 7, b"raw"])
def test_content_set_to_something_other_than_text_or_blocks_is_a_clear_error(content: object) -> None:
    """The constructors coerce content to text; one set afterwards is not read as anything."""
    result = ToolMessage(content="ok", tool_call_id="c1", name="lookup")
    object.__setattr__(result, "content", content)
    engine = memory_engine()
    with pytest.raises(InvalidInputError, match=rf"content of type {type(content).__name__}; a message's content is a string"):
        engine.capture_tool_result(result, scope=SCOPE)
    call = AIMessage(content="", tool_calls=[{"name": "lookup", "args": {}, "id": "c1"}])
    with pytest.raises(InvalidInputError, match=r"message 2 \(ToolMessage\) has content of type"):
        engine.prepare([HumanMessage(content="go"), call, result, HumanMessage(content="and?")], scope=SCOPE)


def test_a_remove_message_is_a_clear_error() -> None:
    """A RemoveMessage is a state instruction: sent on, every provider refuses the request."""
    messages: list[BaseMessage] = [HumanMessage(content="hi", id="h1"), RemoveMessage(id="h1")]
    with pytest.raises(InvalidInputError, match=r"message 1 is a RemoveMessage\(id='h1'\).*add_messages"):
        memory_engine().prepare(messages, scope=SCOPE)


@pytest.mark.parametrize("messages", [None, 5, "hello", b"hello"])
def test_something_that_is_not_a_list_is_a_clear_error(messages: object) -> None:
    with pytest.raises(InvalidInputError, match="takes a list of langchain-core messages"):
        memory_engine().prepare(messages, scope=SCOPE)


def test_a_scope_that_is_not_a_scope_is_a_clear_error() -> None:
    engine = memory_engine()
    with pytest.raises(InvalidInputError, match=r"prepare\(\) takes scope=Scope"):
        engine.prepare([HumanMessage(content="hi")], scope="session-1")
    with pytest.raises(InvalidInputError, match=r"capture_tool_result\(\) takes scope=Scope"):
        engine.capture_tool_result(ToolMessage(content="x" * 5000, tool_call_id="c1"), "session-1")


@pytest.mark.parametrize("window", [0, -1, "128000", 1.5, True])
def test_a_context_window_that_is_not_a_positive_int_is_a_clear_error(window: object) -> None:
    with pytest.raises(InvalidInputError, match="context_window must be a positive number of tokens"):
        memory_engine().prepare([HumanMessage(content="hi")], scope=SCOPE, context_window=window)


def test_a_non_message_put_in_place_of_one_sent_before_is_a_clear_error() -> None:
    """The session's previous conversation is checked message by message on the next call;
    an item there that is not a message is named, not tripped over."""
    engine = memory_engine()
    messages: list[object] = [HumanMessage(content="hi"), AIMessage(content="hello"), HumanMessage(content="and?")]
    engine.prepare(messages, scope=SCOPE)
    messages[1] = "hello"
    with pytest.raises(InvalidInputError, match="message 1 is a str"):
        engine.prepare(messages, scope=SCOPE)


def test_orphan_tool_result_is_a_clear_error() -> None:
    messages = [HumanMessage(content="hi"), ToolMessage(content="x", tool_call_id="nope")]
    with pytest.raises(InvalidInputError, match="nope"):
        memory_engine().prepare(messages, scope=SCOPE)


def test_tool_call_arguments_holding_an_integer_too_long_to_write_are_a_clear_error() -> None:
    # no JSON a model writes parses to such an integer; built in Python, it made json.dumps raise a bare ValueError
    messages = [
        HumanMessage(content="hi"),
        AIMessage(content="", tool_calls=[{"name": "factor", "args": {"n": [1, 7 ** 6000]}, "id": "c1"}]),
        ToolMessage(content="x", tool_call_id="c1", name="factor"),
    ]
    with pytest.raises(InvalidInputError, match=r"message 1 has a tool call \('factor'\) whose arguments hold an integer of over 4,300 digits"):
        memory_engine().prepare(messages, scope=SCOPE)
    messages[1] = AIMessage(content="", tool_calls=[{"name": "factor", "args": {"n": [1, 7 ** 5000]}, "id": "c1"}])  # 4,226 digits
    assert memory_engine().prepare(messages, scope=SCOPE).messages[-1].content == "x"


def test_tool_call_arguments_keyed_by_an_integer_too_long_to_write_are_a_clear_error() -> None:
    # json.dumps writes an integer key as text too: a bare ValueError before
    messages = [
        HumanMessage(content="hi"),
        AIMessage(content="", tool_calls=[{"name": "factor", "args": {"n": {7 ** 6000: "prime"}}, "id": "c1"}]),
        ToolMessage(content="x", tool_call_id="c1", name="factor"),
    ]
    with pytest.raises(InvalidInputError, match=r"message 1 has a tool call \('factor'\) whose arguments hold an integer of over 4,300 digits"):
        memory_engine().prepare(messages, scope=SCOPE)


def test_tool_call_arguments_nested_past_any_real_call_are_a_clear_error() -> None:
    deep: dict[str, object] = {}
    for _ in range(3000):  # deeper than the JSON encoder can go: RecursionError before
        deep = {"a": deep}
    messages = [
        HumanMessage(content="hi"),
        AIMessage(content="", tool_calls=[{"name": "search", "args": deep, "id": "c1"}]),
        ToolMessage(content="x", tool_call_id="c1", name="search"),
    ]
    with pytest.raises(InvalidInputError, match=r"message 1 has a tool call \('search'\) whose arguments nest deeper than 100"):
        memory_engine().prepare(messages, scope=SCOPE)
    shallow = {"filters": {"route": {"from": "SFO", "to": ["JFK", "EWR"]}}}
    messages[1] = AIMessage(content="", tool_calls=[{"name": "search", "args": shallow, "id": "c1"}])
    assert memory_engine().prepare(messages, scope=SCOPE).messages[-1].content == "x"


def test_orphan_tool_call_gets_a_placeholder_result() -> None:
    messages = [
        HumanMessage(content="hi"),
        AIMessage(content="", tool_calls=[{"name": "search", "args": {}, "id": "lost"}]),
        HumanMessage(content="are you there?"),
    ]
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    results = [m for m in prepared.messages if isinstance(m, ToolMessage)]
    assert [m.tool_call_id for m in results] == ["lost"]
    assert any("lost" in w for w in prepared.report.warnings)
    assert len(messages) == 3  # the caller's list is untouched


def test_pending_tool_call_at_the_end_is_left_alone() -> None:
    messages = [HumanMessage(content="hi"), AIMessage(content="", tool_calls=[{"name": "s", "args": {}, "id": "now"}])]
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    assert not any(isinstance(m, ToolMessage) for m in prepared.messages)


def test_multimodal_content_blocks_pass_through() -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}
    messages = [HumanMessage(content=[{"type": "text", "text": "what is in this picture?"}, image])]
    prepared = memory_engine().prepare(messages, scope=SCOPE)
    human = [m for m in prepared.messages if isinstance(m, HumanMessage)]
    assert human[0].content == messages[0].content


async def test_aprepare_matches_prepare() -> None:
    engine = memory_engine()
    messages = conversation()
    sync = engine.prepare(messages, scope=SCOPE)
    other = await memory_engine().aprepare(messages, scope=SCOPE)
    assert [m.content for m in sync.messages] == [m.content for m in other.messages]


async def test_acapture_tool_result() -> None:
    engine = memory_engine()
    compact = await engine.acapture_tool_result(ToolMessage(content=big_json(100), tool_call_id="a1"), scope=SCOPE)
    assert compact.tool_call_id == "a1" and "ref:" in str(compact.content)


def test_embedded_creates_its_directory(tmp_path: Path) -> None:
    target = tmp_path / "nested" / ".ctxplugin"
    engine = ContextEngine.embedded(path=target)
    assert target.is_dir()
    prepared = engine.prepare(conversation(), scope=SCOPE)
    ref = prepared.report.refs_used[0]
    again = ContextEngine.embedded(path=target)
    assert again.expand_ref(ref, scope=SCOPE).startswith("[")


def test_embedded_reads_a_tilde_as_the_home_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/...`` (in code, or a quoted CTXPLUGIN_PATH) is under the home directory, not a
    directory named ``~`` in the working one."""
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(work)
    ContextEngine.embedded(path="~/.ctxplugin").close()
    assert (home / ".ctxplugin").is_dir() and not (work / "~").exists()
    monkeypatch.setenv("CTXPLUGIN_PATH", "~/from-env")
    ContextEngine.embedded().close()
    assert (home / "from-env").is_dir() and list(work.iterdir()) == []


@pytest.mark.parametrize("kind", ["a file", "under a file", "empty", "a NUL", "undecodable bytes"])
def test_embedded_on_a_path_it_cannot_use_is_a_config_error_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    monkeypatch.chdir(tmp_path)  # an empty path must not put the stores here
    (tmp_path / "taken").write_text("not a directory")
    # undecodable bytes: a directory name read with surrogateescape, which SQLite and Chroma refuse
    path = {"a file": "taken", "under a file": "taken/store", "empty": "", "a NUL": "bad\x00name",
            "undecodable bytes": "bad\udcffname"}[kind]
    with pytest.raises(ConfigError, match="path is empty" if kind == "empty" else "embedded store directory"):
        ContextEngine.embedded(path=path)
    with pytest.raises(ConfigError):
        ContextEngine.from_config(ContextConfig(path=path))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"]


def test_unchanged_prefix_is_reported_between_calls() -> None:
    engine = memory_engine()
    messages = conversation(2)
    first = engine.prepare(messages, scope=SCOPE)
    assert first.report.unchanged_prefix_tokens == 0
    second = engine.prepare([*messages, AIMessage(content="Here you go.")], scope=SCOPE)
    assert second.report.unchanged_prefix_tokens > 0


def test_facts_are_not_extracted_from_meta_tools_or_errors() -> None:
    engine = memory_engine()
    decision = "We decided to use order #W2001 instead."
    messages: list[BaseMessage] = [
        HumanMessage(content="Which order should we refund?"),
        AIMessage(content="", tool_calls=[
            {"name": "load_tools", "args": {"names": ["refund"]}, "id": "m1"},
            {"name": "refund", "args": {"order_id": "#W2001"}, "id": "m2"},
        ]),
        ToolMessage(content=decision, tool_call_id="m1", name="load_tools"),
        ToolMessage(content=decision, tool_call_id="m2", name="refund", status="error"),
    ]
    engine.prepare(messages, scope=SCOPE)
    engine.capture_tool_result(ToolMessage(content=decision, tool_call_id="m3", name="expand_ref"), scope=SCOPE)
    assert not any("#W2001" in hit.fact.text for hit in engine.facts.search("order #W2001", scope=SCOPE, k=20))
    engine.capture_tool_result(ToolMessage(content=decision, tool_call_id="m4", name="refund"), scope=SCOPE)
    assert any("#W2001" in hit.fact.text for hit in engine.facts.search("order #W2001", scope=SCOPE, k=20))


def test_an_original_kept_in_the_state_is_stored_again_on_another_store(tmp_path: Path) -> None:
    # the state keeps the original with its ref; after the stores moved (embedded to a server,
    # a database restored) the ref shown in the view must still expand to it
    raw = ToolMessage(big_json(), tool_call_id="c1", name="list_rows", id="t1")
    compact = ContextEngine.embedded(tmp_path / "before").capture_tool_result(raw, scope=SCOPE)
    note = compact.additional_kwargs["ctxplugin"]
    kept = raw.model_copy(update={"additional_kwargs": {"ctxplugin": note}})
    messages = [
        HumanMessage("List the rows.", id="h1"),
        AIMessage("", tool_calls=[{"name": "list_rows", "args": {}, "id": "c1"}], id="a1"),
        kept,
        AIMessage("Listed.", id="a2"),
        HumanMessage("Which row has id 7?", id="h2"),
    ]
    moved = ContextEngine.embedded(tmp_path / "after")
    prepared = moved.prepare(messages, tools=moved.tools_for_model(), scope=SCOPE)
    assert note["compact"] in [m.content for m in prepared.messages]
    assert moved.expand_ref(note["ref"], scope=SCOPE) == big_json()


def test_tools_for_model_gives_the_same_tools_on_every_call_in_a_new_list() -> None:
    engine = memory_engine()
    first, again = engine.tools_for_model(), engine.tools_for_model()
    assert [t.name for t in first] == ["expand_ref", "load_tools"]
    assert all(a is b for a, b in zip(first, again, strict=True)), "a host asking on every step binds the same tools"
    first.clear()
    assert [t.name for t in engine.tools_for_model()] == ["expand_ref", "load_tools"]
    assert memory_engine().tools_for_model()[0] is not again[0], "each engine has its own"


@pytest.mark.parametrize(
    "value",
    [b"%PDF-1.7", {"window", "aisle"}, datetime(2024, 5, 1, 9, 30, tzinfo=UTC), Decimal("19.99")],
    ids=["bytes", "set", "datetime", "decimal"],
)
async def test_tool_call_args_json_cannot_encode_pass_through(value: object) -> None:
    """Such args are the host's to send (Anthropic's client writes a datetime or a set; LangGraph
    checkpoints them): an old call with them is archived with its turn, the latest is passed on
    untouched, and both are counted."""

    def booking(call_id: str) -> list[BaseMessage]:
        call = AIMessage(content="", tool_calls=[{"name": "book", "args": {"when": value}, "id": call_id}])
        return [HumanMessage(content="Book it"), call, ToolMessage(content="booked", tool_call_id=call_id, name="book")]

    messages = [*booking("old"), *conversation(6)[1:], *booking("new")]
    engine = memory_engine()
    for prepared in (engine.prepare(messages, scope=SCOPE), await engine.aprepare(messages, scope=SCOPE)):
        assert prepared.report.tokens_before == count_messages(messages, engine.counter)
        assert prepared.report.tokens_after == count_messages(prepared.messages, engine.counter)
        calls = {c["id"]: c for m in prepared.messages if isinstance(m, AIMessage) for c in m.tool_calls}
        assert calls["new"]["args"]["when"] is value
