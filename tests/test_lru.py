"""The per-message memo: found by the message object, bounded, never stale."""

from __future__ import annotations

import gc
import weakref

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxplugin._lru import LRU, Memo, PerMessage, shared, text_key
from ctxplugin.facts._text import words
from ctxplugin.history.identifiers import identifiers, text_runs
from ctxplugin.tokens import count_message, get_counter


def test_a_value_is_found_again_for_the_same_message() -> None:
    memo: PerMessage[str] = PerMessage(4)
    message = HumanMessage("where is the report?")
    memo.put(message, "value")
    assert memo.get(message) == "value"


def test_an_equal_but_distinct_message_is_not_the_same_entry() -> None:
    memo: PerMessage[str] = PerMessage(4)
    memo.put(HumanMessage("same text", id="a"), "value")
    assert memo.get(HumanMessage("same text", id="a")) is None


@pytest.mark.parametrize(
    "change",
    [
        {"content": "new text"},
        {"additional_kwargs": {"ctxplugin": {"pinned": True}}},
        {
            "tool_calls": [
                {"name": "bash", "args": {"command": "ls"}, "id": "c2", "type": "tool_call"}
            ]
        },
    ],
)
def test_a_message_given_new_fields_is_computed_again(change: dict[str, object]) -> None:
    memo: PerMessage[str] = PerMessage(4)
    message = AIMessage(
        "old text",
        tool_calls=[{"name": "bash", "args": {"command": "pwd"}, "id": "c1", "type": "tool_call"}],
    )
    memo.put(message, "value")
    for field, value in change.items():
        setattr(message, field, value)
    assert memo.get(message) is None


def test_the_memo_is_bounded_and_evicts_the_oldest() -> None:
    memo: PerMessage[int] = PerMessage(3)
    messages = [HumanMessage(f"message {i}") for i in range(5)]
    for i, message in enumerate(messages):
        memo.put(message, i)
    assert len(memo) == 3
    assert [memo.get(m) for m in messages] == [None, None, 2, 3, 4]


def test_a_message_that_is_gone_is_not_held() -> None:
    memo: PerMessage[int] = PerMessage(4)
    message = ToolMessage("output", tool_call_id="c1")
    memo.put(message, 1)
    del message
    gc.collect()
    stranger = ToolMessage("output", tool_call_id="c1")
    assert memo.get(stranger) is None


def test_size_must_be_positive() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        PerMessage(0)


def test_token_counts_follow_a_changed_message() -> None:
    counter, _ = get_counter()
    message = HumanMessage("short")
    before = count_message(message, counter)
    message.content = "a much longer text than before, with many more words in it"
    assert count_message(message, counter) > before


def test_the_entry_of_a_collected_message_goes() -> None:
    memo: PerMessage[int] = PerMessage(8)
    gone = [HumanMessage(f"old {i}") for i in range(3)]
    for i, message in enumerate(gone):
        memo.put(message, i)
    del gone, message
    gc.collect()
    kept = HumanMessage("still here")
    memo.put(kept, 9)
    assert len(memo) == 1
    assert memo.get(kept) == 9


def test_a_memo_makes_a_value_once_keeps_its_size_and_makes_outside_its_lock() -> None:
    memo: Memo[str, str] = Memo(2)
    made: list[str] = []

    def make(key: str) -> str:
        made.append(key)
        return key.upper()

    assert memo.get_or_make("a", lambda: make("a")) == "A"
    assert memo.get_or_make("a", lambda: make("a")) == "A"
    assert made == ["a"]
    memo.get_or_make("b", lambda: make("b"))
    memo.get_or_make("c", lambda: make("c"))  # "a" is the least recently used: it goes
    memo.get_or_make("a", lambda: make("a"))
    assert made == ["a", "b", "c", "a"]
    # a make that asks the memo for another key does not wait on the memo's own lock
    assert memo.get_or_make("outer", lambda: memo.get_or_make("inner", lambda: "i") + "o") == "io"


def test_a_message_memoised_by_several_maps_is_held_by_one_weak_reference() -> None:
    # one entry per message whatever the number of maps: fewer long-lived objects for the collector
    tokens: PerMessage[int] = PerMessage(4)
    words: PerMessage[str] = PerMessage(4)
    message = HumanMessage("the report is in the shared folder")
    tokens.put(message, 7)
    words.put(message, "report folder")
    assert weakref.getweakrefcount(message) == 1
    assert (tokens.get(message), words.get(message)) == (7, "report folder")


def test_maps_sharing_a_message_keep_their_own_values_bounds_and_fields() -> None:
    first: PerMessage[str] = PerMessage(1)
    second: PerMessage[str] = PerMessage(4)
    message = AIMessage("old text")
    first.put(message, "first")
    second.put(message, "second")
    first.put(HumanMessage("another"), "pushes the first out")
    assert (first.get(message), second.get(message)) == (None, "second")
    old = message.content
    message.content = "new text"
    second.put(message, "second, new")
    assert (first.get(message), second.get(message)) == (None, "second, new")
    first.put(message, "first, new")
    # the value made for the old content stands again only where it is still held
    message.content = old
    assert (first.get(message), second.get(message)) == (None, None)


def test_a_collected_message_leaves_every_map_that_held_it() -> None:
    first: PerMessage[int] = PerMessage(8)
    second: PerMessage[int] = PerMessage(8)
    gone = HumanMessage("soon collected")
    first.put(gone, 1)
    second.put(gone, 2)
    del gone
    gc.collect()
    kept = HumanMessage("still here")
    first.put(kept, 3)
    second.put(kept, 4)
    assert (len(first), len(second)) == (1, 1)
    assert (first.get(kept), second.get(kept)) == (3, 4)


def test_the_values_of_a_collected_message_are_let_go_even_by_a_map_not_used_since() -> None:
    idle: PerMessage[AIMessage] = PerMessage(8)  # a compressed copy, say
    busy: PerMessage[int] = PerMessage(8)
    value = AIMessage("a value only the idle map holds")
    held = weakref.ref(value)
    gone = HumanMessage("soon collected")
    idle.put(gone, value)
    busy.put(gone, 1)
    del gone, value
    gc.collect()
    busy.put(HumanMessage("a later message"), 2)
    assert held() is None


def test_a_map_that_is_dropped_lets_go_of_its_values_while_its_messages_live_on() -> None:
    # a map made per counter goes with its counter: what it kept for a message still in use goes too
    message = HumanMessage("a message the application keeps")
    value = AIMessage("a value only the dropped map holds")
    held = weakref.ref(value)
    dropped: PerMessage[AIMessage] = PerMessage(8)
    dropped_ref = weakref.ref(dropped)
    kept: PerMessage[int] = PerMessage(8)
    dropped.put(message, value)
    kept.put(message, 1)
    del dropped, value
    gc.collect()
    kept.put(HumanMessage("a later message"), 2)
    assert dropped_ref() is None
    assert held() is None
    assert kept.get(message) == 1


def test_a_full_map_lets_the_oldest_sixteenth_go_at_once() -> None:
    memo: PerMessage[int] = PerMessage(32)
    messages = [HumanMessage(f"message {i}") for i in range(33)]
    for i, message in enumerate(messages):
        memo.put(message, i)
    assert len(memo) == 30
    assert [memo.get(m) for m in messages[:3]] == [None, None, None]
    assert [memo.get(m) for m in messages[3:]] == list(range(3, 33))


def test_equal_words_runs_and_values_read_from_different_texts_are_one_string() -> None:
    # made at run time: equal literals in one module are one object already
    word = "".join(["zephyr", "ine"])
    first, second = f"the {word} station", f"{word.upper()} stops"
    assert words(first)[1] is words(second)[0]
    run = "".join(["Quixo", "tic9"])
    assert next(iter(text_runs(f"a {run}") - {"a"})) is next(iter(text_runs(f"{run} b") - {"b"}))
    value = "".join(["quartz_", "lamp_7"])
    assert identifiers(f"read {value} now")[0] is identifiers(f"{value} again")[0]


def test_shared_keeps_order_and_equality() -> None:
    items = ["".join(["ab", "c"]), "x", "".join(["a", "bc"])]
    found = shared(items)
    assert found == tuple(items)
    assert found[0] is found[2]


def test_the_key_of_a_text_tells_texts_apart_by_length_and_ends_keeping_only_the_hash_of_a_long_ones_ends() -> None:
    long = "a" * 20 + "middle" + "z" * 20
    assert text_key(long) == text_key("".join(["a" * 20, "middle", "z" * 20]))
    assert text_key(long) != text_key(long[:-1] + "y")
    assert text_key(long) != text_key("b" + long[1:])
    assert text_key(long) != text_key(long + "z")
    assert text_key(long)[2] == hash(long[:16] + long[-16:]), "a long text's ends are kept as their hash"
    short = "short text"
    assert text_key(short)[2] == short


@given(st.text(max_size=48), st.text(max_size=48))
def test_two_texts_share_a_key_only_when_their_lengths_hashes_and_ends_are_the_same(one: str, other: str) -> None:
    same = (len(one), hash(one), one[:16], one[-16:]) == (len(other), hash(other), other[:16], other[-16:])
    assert (text_key(one) == text_key(other)) == same
    assert text_key(one) != text_key(one + other[-1:]) or not other


def test_maps_of_one_text_hold_one_key_object_and_the_table_of_keys_is_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    from ctxplugin import _lru

    text = "x" * 40 + " the body of a tool output " + "y" * 40
    again = "".join(["x" * 40, " the body of a tool output ", "y" * 40])  # equal, another object
    tokens: LRU[object, int] = LRU(8)
    values: LRU[object, str] = LRU(8)
    alerts: Memo[object, str] = Memo(8)
    tokens.put(text_key(text), 30)
    values.put(text_key(again), "values")
    alerts.get_or_make(text_key(text), lambda: "alerts")
    held = [next(iter(tokens)), next(iter(values)), next(iter(alerts._entries))]
    assert held[0] is held[1] is held[2], "one key held by every memo of the text"
    assert tokens.hit(text_key(again)) == 30 and values.hit(text_key(text + "!")) is None
    long_key = ("kind", 1, "a text longer than thirty-two characters is not shared")
    values.put(long_key, "kept")  # a key holding a long text is not kept beyond its map
    assert long_key not in _lru._KEYS and values.hit(long_key) == "kept"
    monkeypatch.setattr(_lru, "SHARED_VALUES", 8)
    for i in range(40):
        tokens.put(text_key(f"text number {i} " * 3), i)
    assert len(_lru._KEYS) <= 9
    assert len(tokens) == 8 and tokens.hit(text_key("text number 39 " * 3)) == 39
