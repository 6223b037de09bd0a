"""Properties of ``compress_history`` over generated conversations."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._messages import META_KEY
from ctxplugin.config import HistoryConfig
from ctxplugin.history import alert_lines, compress_history, identifiers, protected_indexes
from ctxplugin.history.identifiers import missing
from ctxplugin.tokens import content_text, count_message, count_messages, get_counter

COUNTER = get_counter()[0]

WORDS = ["the", "handler", "returns", "a", "list", "of", "rows", "and", "then", "we", "check", "it", "again"]
VALUES = [
    "/repo/src/app.py",
    "src/models/user.py:118",
    "https://example.org/api/v2/items?id=7",
    "HAT0042",
    "3f2a9c1e77",
    "2024-05-01",
    "12,400.75",
    "order_id_5521",
    "InspectBuilder",
    '"exact phrase"',
]
LINES = ["KeyError: 'HAT0042'", "ERROR: connection refused on port 5432", "WARNING: insecure key permissions"]

texts = st.lists(
    st.one_of(st.sampled_from(WORDS), st.sampled_from(VALUES), st.sampled_from(["\n", "\n" + LINES[0], "\n" + LINES[1], "\n" + LINES[2]])),
    min_size=0,
    max_size=250,
).map(" ".join)


@st.composite
def conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """A valid conversation: human turns, model calls with their tool results, some pinned,
    some tool results already stored (summary plus ref)."""
    counter = iter(range(10**6))
    messages: list[BaseMessage] = [HumanMessage(content=draw(texts), id=f"m{next(counter)}")]
    for _ in range(draw(st.integers(min_value=0, max_value=30))):
        kind = draw(st.sampled_from(["human", "ai", "tools", "tools"]))
        extra = {META_KEY: {"pinned": True}} if draw(st.integers(0, 14)) == 0 else {}
        if kind == "human":
            messages.append(HumanMessage(content=draw(texts), id=f"m{next(counter)}", additional_kwargs=extra))
        elif kind == "ai":
            messages.append(AIMessage(content=draw(texts), id=f"m{next(counter)}", additional_kwargs=extra))
        else:
            calls = [
                {"name": "bash", "args": {"command": draw(texts)[: draw(st.sampled_from([200, 4000]))]}, "id": f"c{next(counter)}"}
                for _ in range(draw(st.integers(1, 3)))
            ]
            messages.append(AIMessage(content=draw(texts), tool_calls=calls, id=f"m{next(counter)}", additional_kwargs=extra))
            for call in calls:
                content, note = draw(texts), {}
                if draw(st.booleans()):
                    ref = f"ref:bash:{next(counter):016x}"
                    content, note = f"{content[:300]} [{ref}; call expand_ref for the full output]", {"ref": ref}
                messages.append(
                    ToolMessage(
                        content=content,
                        tool_call_id=call["id"],
                        name="bash",
                        id=f"m{next(counter)}",
                        status=draw(st.sampled_from(["success", "error"])),
                        additional_kwargs={META_KEY: note} if note else {},
                    )
                )
    return messages


configs = st.builds(
    HistoryConfig,
    verbatim_exchanges=st.integers(0, 3),
    trimmed_exchanges=st.integers(3, 6),
    trim_tokens=st.integers(20, 200),
    gist_tokens=st.integers(8, 40),
    block_size=st.integers(1, 5),
    digest_tokens=st.integers(0, 200),
    compress=st.sampled_from(["always", "over_budget"]),
)

budgets = st.one_of(st.none(), st.integers(0, 6000))


def check_pairing_and_order(body: list[BaseMessage], view: list[BaseMessage]) -> None:
    open_calls: set[str] = set()
    for message in view:
        if isinstance(message, ToolMessage):
            assert message.tool_call_id in open_calls, "a result follows the call that asked for it"
            open_calls.discard(message.tool_call_id)
            continue
        assert not open_calls, "every call is answered before the next message"
        if isinstance(message, AIMessage):
            open_calls = {c["id"] for c in message.tool_calls if c["id"]}
    assert not open_calls
    originals = [m.id for m in body]
    kept = [m.id for m in view if m.id in set(originals)]
    assert kept == [i for i in originals if i in set(kept)], "nothing is reordered"


def check_protected(body: list[BaseMessage], view: list[BaseMessage]) -> None:
    shown = {m.id: m for m in view}
    for index in protected_indexes(body):
        assert shown[body[index].id] is body[index]


def check_values(body: list[BaseMessage], view: list[BaseMessage]) -> None:
    shown_by_id = {m.id: m for m in view}
    for original in body:
        shown = shown_by_id.get(original.id)
        if shown is None or shown is original:
            continue
        before, after = content_text(original.content), content_text(shown.content)
        assert missing(identifiers(before), after) == []
        for line in alert_lines(before):
            assert line in after
        ref = original.additional_kwargs.get(META_KEY, {}).get("ref")
        if ref:
            assert ref in after
        if isinstance(original, AIMessage):
            calls = shown.tool_calls  # type: ignore[attr-defined]
            assert [(c["id"], c["name"]) for c in calls] == [(c["id"], c["name"]) for c in original.tool_calls]
            for call, before_call in zip(calls, original.tool_calls, strict=True):
                for key, value in before_call["args"].items():
                    assert missing(identifiers(value), call["args"][key]) == []
                    assert all(line in call["args"][key] for line in alert_lines(value))


def check_never_larger(body: list[BaseMessage], view: list[BaseMessage]) -> None:
    assert count_messages(view, COUNTER) <= count_messages(body, COUNTER)
    originals = {m.id: m for m in body}
    for message in view:
        if message.id in originals:
            assert count_message(message, COUNTER) <= count_message(originals[message.id], COUNTER)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(conversations(), configs, budgets)
def test_compressed_history_properties(body: list[BaseMessage], config: HistoryConfig, budget: int | None) -> None:
    """Valid tool-call pairing and order, protected messages untouched, values of compressed
    messages still visible, never larger than the input, inputs not mutated, deterministic."""
    snapshot = [m.model_dump() for m in body]
    result = compress_history(body, config=config, counter=COUNTER, budget=budget)
    view = result.messages
    target(float(result.compressed_count + result.omitted_exchanges))
    check_pairing_and_order(body, view)
    check_protected(body, view)
    check_values(body, view)
    check_never_larger(body, view)
    assert [m.model_dump() for m in body] == snapshot
    again = compress_history(body, config=config, counter=COUNTER, budget=budget).messages
    assert [m.model_dump() for m in again] == [m.model_dump() for m in view]


def test_the_generator_exercises_every_tier() -> None:
    """The properties above are not vacuous: generated conversations do get compressed."""
    seen = {"trimmed": 0, "gist": 0, "omitted": 0}

    @settings(max_examples=15, deadline=None, database=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
    @given(conversations(), budgets)
    def run(body: list[BaseMessage], budget: int | None) -> None:
        result = compress_history(body, config=HistoryConfig(trim_tokens=40, gist_tokens=10), counter=COUNTER, budget=budget)
        for name in seen:
            seen[name] += result.tiers.get(name, 0)

    run()
    assert all(seen.values()), seen


def _alert_lines_line_by_line(text: str) -> list[str]:
    """alert_lines as its docstring states it: every stripped line the pattern matches."""
    from ctxplugin.history.identifiers import ALERT_LINE

    seen: dict[str, None] = {}
    for line in text.splitlines():
        stripped = line.strip()
        if stripped and ALERT_LINE.search(stripped):
            seen.setdefault(stripped[:400], None)
    return list(seen)


_ALERT_PIECES = ["E  assert x", "  E\tfailed", "ok", "Error: no", "ValueError: bad", "THE  end", "segmentation", "fault",
                 "security", "plain words", "", " ", "E"]
_BREAKS = ["\n", "\r\n", "\r", "\x0b", "\x0c", "\x1c", "\x85", "\u2028", " ", "\t"]


@given(st.lists(st.tuples(st.sampled_from(_ALERT_PIECES), st.sampled_from(_BREAKS)), max_size=12))
def test_alert_lines_finds_every_alert_line_whatever_breaks_the_lines(parts: list[tuple[str, str]]) -> None:
    text = "".join(piece + brk for piece, brk in parts)
    assert alert_lines(text) == _alert_lines_line_by_line(text)


def test_a_pytest_error_line_after_any_line_break_is_an_alert_line() -> None:
    for brk in _BREAKS[:8]:
        text = f"collected 3 items{brk}E  assert 1 == 2{brk}done"
        assert alert_lines(text) == ["E  assert 1 == 2"], repr(brk)
