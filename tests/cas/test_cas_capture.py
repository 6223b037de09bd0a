"""capture(): pass-through rules, the compact form, and bad input that must never raise."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin.cas import Captured, CASStore, MemoryCASStore, SQLiteCASStore, capture, expand
from ctxplugin.config import CASConfig
from ctxplugin.errors import RefNotFoundError
from ctxplugin.scope import Scope, Visibility
from ctxplugin.tokens import get_counter

COUNTER = get_counter()[0]
SCOPE = Scope(session_id="s1")
CONFIG = CASConfig()
LOG = "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO worker step {i} ok" for i in range(200))


def run(
    content: object,
    store: CASStore | None = None,
    *,
    config: CASConfig = CONFIG,
    tool_name: str | None = "tool",
    is_error: bool = False,
) -> tuple[Captured, CASStore]:
    store = store or MemoryCASStore()
    captured = capture(content, store=store, scope=SCOPE, config=config, counter=COUNTER, tool_name=tool_name, is_error=is_error)
    return captured, store


def ref(captured: Captured) -> str:
    assert captured.ref_id is not None
    return captured.ref_id


def test_small_outputs_pass_through_unstored() -> None:
    captured, _ = run("ok, 3 rows updated")
    assert captured.passthrough and captured.ref_id is None and captured.text == "ok, 3 rows updated"


def test_large_output_becomes_summary_with_ref_and_round_trips() -> None:
    captured, store = run(LOG, tool_name="tail_logs")
    assert not captured.passthrough
    assert captured.text.startswith(f"[{captured.ref_id} ")
    assert ref(captured).startswith("ref:tail_logs:")
    assert captured.compact_tokens < captured.original_tokens / 3
    assert captured.compact_tokens == COUNTER.count(captured.text)
    assert expand(store, ref(captured), SCOPE) == LOG


def test_identical_outputs_share_one_ref_and_are_created_once() -> None:
    store = MemoryCASStore()
    first, _ = run(LOG, store)
    second, _ = run(LOG, store)
    assert first.ref_id == second.ref_id
    assert (first.created, second.created) == (True, False)


def test_threshold_and_kind_come_from_config_and_tool() -> None:
    captured, _ = run(LOG, config=CASConfig(passthrough_tokens=100_000))
    assert captured.passthrough
    captured, _ = run(LOG, tool_name=None)
    assert ref(captured).startswith("ref:log:")
    captured, _ = run(LOG, config=CASConfig(enabled=False))
    assert captured.passthrough


def test_error_outputs_pass_through_or_keep_every_error_line() -> None:
    failure = "Traceback (most recent call last):\n" + "\n".join(
        f'  File "/app/mod{i}.py", line {i}, in f{i}\n    call_{i}()' for i in range(40)
    ) + "\nValueError: bad value 42"
    captured, _ = run(failure, is_error=True)
    assert captured.passthrough and captured.text == failure
    many = "\n".join(f"step {i}: ERROR code E{i:04d} at /srv/job/{i}.py" if i % 20 == 0 else f"step {i} fine" for i in range(2000))
    captured, store = run(many, is_error=True, config=CASConfig(error_passthrough_tokens=4000))
    assert not captured.passthrough
    for i in range(0, 2000, 20):  # all 100 error lines, verbatim, within the error allowance
        assert f"step {i}: ERROR code E{i:04d} at /srv/job/{i}.py" in captured.text
    assert expand(store, ref(captured), SCOPE) == many
    flood = "\n".join(f"ERROR {i}: retry failed for /srv/job/{i}.py" for i in range(3000))
    captured, _ = run(flood, is_error=True)  # more error lines than any allowance: counted, not lost
    assert "ERROR 0: retry failed" in captured.text and "more error/warning lines" in captured.text


@pytest.mark.parametrize("visibility", ["user", "workspace"])
def test_a_scope_without_the_id_its_visibility_needs_can_still_read_its_outputs(
    visibility: Visibility, tmp_path: Path
) -> None:
    # cas.visibility widens who may read beyond the writing session; a thread with no user id
    # (no workspace id) has no one to widen to, and must keep reading what it stored
    store = SQLiteCASStore(tmp_path / "cas.sqlite3")
    config = CASConfig(visibility=visibility)
    captured = capture(LOG, store=store, scope=SCOPE, config=config, counter=COUNTER, tool_name="tail_logs")
    assert expand(store, ref(captured), SCOPE) == LOG
    with pytest.raises(RefNotFoundError):
        expand(store, ref(captured), Scope(session_id="s2"))


def test_compact_form_not_smaller_passes_through() -> None:
    # many tiny lines full of error words: the summary would be as big as the original
    text = "\n".join(f"E{i} error" for i in range(120))
    captured, _ = run(text, config=CASConfig(passthrough_tokens=10, summary_tokens=30))
    if captured.passthrough:
        assert captured.text == text and captured.ref_id is None
    else:
        assert captured.compact_tokens < captured.original_tokens


def test_content_blocks() -> None:
    blocks = [{"type": "text", "text": LOG[:4000]}, {"type": "text", "text": LOG[4000:]}]
    captured, store = run(blocks)
    assert not captured.passthrough
    assert expand(store, ref(captured), SCOPE) == LOG[:4000] + "\n" + LOG[4000:]
    image = [{"type": "text", "text": LOG}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]
    captured, store = run(image)  # stored whole (the image too); the view keeps the image block
    assert not captured.passthrough and json.loads(expand(store, ref(captured), SCOPE)) == image


BAD_INPUTS = {
    "non-utf8": (b"caf\xe9 \xff\xfe binary \x80 " * 400).decode("utf-8", "surrogateescape"),
    "10MB log": "\n".join(f"2024-05-01 12:00:{i % 60:02d} INFO worker-{i % 7} item id={i} path=/var/lib/app/{i}.bin" for i in range(120_000))
    + "\nERROR: disk full at /var/lib/app\n",
    "deep json": "[" * 200_000 + "]" * 200_000,
    "deep but parseable json": '{"a":' * 800 + "1" + "}" * 800,
    "json lookalike": '{"user_id": "u1", "items": [1, 2, 3' + ", 4" * 600,
    "empty": "",
    "whitespace": " \n\t\n " * 500,
    "one 3MB word": "x" * 3_000_000,
    "nul bytes": "\x00" * 5000,
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_bad_input_is_stored_or_passed_through_never_raised(name: str, tmp_path: Path) -> None:
    content = BAD_INPUTS[name]
    store = SQLiteCASStore(f"{tmp_path}/cas.sqlite3")
    captured, _ = run(content, store)
    if captured.passthrough:
        assert captured.text == content
    else:
        assert expand(store, ref(captured), SCOPE) == content
        assert captured.compact_tokens <= CONFIG.summary_tokens * 3
        captured.text.encode("utf-8")  # the summary is valid UTF-8: this would raise
    store.close()


def test_10mb_log_summary_keeps_the_error_line() -> None:
    captured, _ = run(BAD_INPUTS["10MB log"])
    assert "ERROR: disk full at /var/lib/app" in captured.text
    assert "120001 lines" in captured.text


@settings(max_examples=40, deadline=None)
@given(st.text(min_size=0, max_size=3000))
def test_any_text_round_trips_through_sqlite(text: str) -> None:
    store = MemoryCASStore()
    captured = capture(text * 3, store=store, scope=SCOPE, config=CASConfig(passthrough_tokens=5), counter=COUNTER, tool_name="t")
    if not captured.passthrough:
        assert captured.ref_id is not None
        assert expand(store, ref(captured), SCOPE) == text * 3


@settings(max_examples=40, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(max_size=30), lambda x: st.lists(x, max_size=6) | st.dictionaries(st.text(max_size=10), x, max_size=6), max_leaves=60))
def test_any_json_summarizes(value: object) -> None:
    text = json.dumps(value) * 1
    captured = capture(text, store=MemoryCASStore(), scope=SCOPE, config=CASConfig(passthrough_tokens=5), counter=COUNTER, tool_name="t")
    assert captured.passthrough or (captured.ref_id is not None and captured.ref_id in captured.text)


def test_a_view_keeps_the_artifact_of_an_output_it_shows_by_ref() -> None:
    # a content_and_artifact tool (MCP structured content, rows for the UI): the model is shown
    # the summary, and whatever reads the prepared messages still finds the artifact
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from ctxplugin import ContextConfig
    from ctxplugin.testing import memory_engine, tool_call

    artifact = {"rows": list(range(200))}
    output = ToolMessage(LOG, tool_call_id="c1", name="fetch_rows", artifact=artifact, status="success")
    messages = [HumanMessage("rows?"), AIMessage("", tool_calls=[tool_call("fetch_rows", {}, "c1")]), output]
    prepared = memory_engine(ContextConfig(mode="compact")).prepare(messages, scope=SCOPE)
    shown = next(m for m in prepared.messages if isinstance(m, ToolMessage) and m.tool_call_id == "c1")
    assert "ref:" in str(shown.content) and shown.content != LOG
    assert shown.artifact == artifact and shown.status == "success"
