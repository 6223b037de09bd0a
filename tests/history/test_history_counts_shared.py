"""History compression counts texts in the memo the other stages use: a text is encoded once
whichever stage counts it first (ctxplugin.history.compressors.MemoCounter)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.history.compressors import memo_counter
from ctxplugin.tokens import EXACT_COUNT_CHARS, ApproxCounter, count_cached, count_message


class CallCounting(ApproxCounter):
    """The approximate counter, counting how often it is asked."""

    def __init__(self) -> None:
        self.calls = 0

    def count(self, text: str) -> int:
        self.calls += 1
        return super().count(text)


def test_a_text_the_room_stage_counted_is_not_counted_again_by_history() -> None:
    counter = CallCounting()
    text = "an output line with a path src/app/main.py and enough words to be memoised " * 3
    first = count_cached(text, counter)
    assert counter.calls == 1
    assert memo_counter(counter).count(text) == first
    assert counter.calls == 1


def test_a_message_counted_by_one_is_found_by_the_other_either_way() -> None:
    counter = CallCounting()
    memo = memo_counter(counter)
    ai = AIMessage("looking at the file now, then running the tests", tool_calls=[{"name": "bash", "args": {"command": "ls -la src"}, "id": "c1"}])
    tool = ToolMessage("total 12\ndrwxr-xr-x 2 root root 4096 app\n-rw-r--r-- 1 root root 220 setup.py", tool_call_id="c1")
    expected = [count_message(m, counter) for m in (ai, tool)]
    calls = counter.calls
    assert [count_message(m, memo) for m in (ai, tool)] == expected
    assert counter.calls == calls
    fresh = ToolMessage("another output with its own words, long enough to be memoised here", tool_call_id="c2")
    got = count_message(fresh, memo)
    calls = counter.calls
    assert count_message(fresh, counter) == got and counter.calls == calls


def test_short_texts_are_remembered_and_a_huge_text_is_counted_in_bounded_time() -> None:
    counter = CallCounting()
    memo = memo_counter(counter)
    assert memo.count("ls -la") == memo.count("ls -la") and counter.calls == 1
    huge = "word " * (EXACT_COUNT_CHARS // 2)
    assert memo.count(huge) == count_cached(huge, CallCounting())


class SlottedCounting:
    """A counter that cannot be weakly referenced (no shared memo can keep its counts)."""

    __slots__ = ("calls", "name")

    def __init__(self) -> None:
        self.calls = 0
        self.name = "slotted"

    def count(self, text: str) -> int:
        self.calls += 1
        return len(text.split())


def test_a_counter_the_shared_memo_cannot_keep_is_remembered_by_history_itself() -> None:
    counter = SlottedCounting()
    memo = memo_counter(counter)
    text = "a long enough line of words for the history to count it more than once " * 2
    assert memo.count(text) == memo.count(text) == len(text.split())
    assert counter.calls == 1


def test_an_output_counted_at_capture_is_not_counted_again_by_prepare() -> None:
    counter = CallCounting()
    engine = ContextEngine(ContextConfig(), counter=counter)
    scope = Scope(session_id="counted-once")
    output = ToolMessage("\n".join(f"src/app/module_{i}.py:{i}: def handler_{i}(request): ..." for i in range(400)), tool_call_id="c1", name="grep")
    engine.capture_tool_result(output, scope)
    seen: list[str] = []
    original = counter.count

    def recording(text: str) -> int:
        seen.append(text)
        return original(text)

    counter.count = recording  # type: ignore[method-assign]
    history = [HumanMessage("find the handlers"), AIMessage("", tool_calls=[{"name": "grep", "args": {}, "id": "c1"}]), output]
    engine.prepare(history, scope=scope)  # the host keeps the original output
    assert str(output.content) not in seen, "the output's tokens were counted again"


def test_every_message_of_a_10000_message_thread_is_counted_once_over_several_passes() -> None:
    counter = CallCounting()
    thread = [
        AIMessage(f"step {i}: listing the module", tool_calls=[{"name": "bash", "args": {"command": f"ls src/mod_{i}"}, "id": f"c{i}"}])
        for i in range(10_000)
    ]
    first = [count_message(m, counter) for m in thread]
    calls = counter.calls
    assert [count_message(m, counter) for m in thread] == first  # a later stage's pass over the same thread
    assert counter.calls == calls, "a pass over the thread found counts of the previous pass gone"


def test_counters_of_engines_built_one_after_another_are_not_all_kept() -> None:
    import gc
    import weakref

    from ctxplugin.history import compressors

    first = CallCounting()
    memo_counter(first).count("a short text to remember")
    gone = weakref.ref(first)
    for _ in range(compressors.MEMO_COUNTERS + 1):
        memo_counter(CallCounting()).count("a short text to remember")
    del first
    gc.collect()
    assert gone() is None
    assert len(compressors._MEMOS) <= compressors.MEMO_COUNTERS
