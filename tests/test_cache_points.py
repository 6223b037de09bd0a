"""Where a prepared view asks a Claude model's prompt cache to keep what it read
(``ctxplugin._cache_points``), on views ``prepare`` makes and on hand-made messages."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin._cache_points import EPHEMERAL, marked, place_marks, stable_ends, takes_cache_marks
from ctxplugin._layout import synthetic_kind
from ctxplugin.testing import memory_engine, tool_call, tool_directory


def claude() -> Any:
    from langchain_anthropic import ChatAnthropic

    return ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")


def long_session(exchanges: int = 40) -> list[BaseMessage]:
    messages: list[BaseMessage] = [SystemMessage("You fix bugs."), HumanMessage("Fix the failing test in src/app.py. " * 20)]
    for i in range(exchanges):
        messages.append(AIMessage("", tool_calls=[tool_call("bash", {"command": f"grep -n item_{i} src/app.py"}, f"c{i}")]))
        messages.append(ToolMessage(f"src/app.py:{100 + i}: item_{i} = compute({i})\n" * 30, tool_call_id=f"c{i}"))
    return messages


def test_the_last_note_and_the_header_are_the_stable_ends() -> None:
    engine = memory_engine(ContextConfig(budget={"total": 3000}))
    view = engine.prepare(long_session(), scope=Scope(session_id="s")).messages
    notes = [i for i, m in enumerate(view) if synthetic_kind(m) == "notes" and isinstance(m, ToolMessage)]
    assert notes, "the session should be condensed into notes"
    task = next(i for i, m in enumerate(view) if isinstance(m, HumanMessage))
    assert task < notes[-1]
    assert stable_ends(view) == [notes[-1], 0, task], "the task comes last: a middleware after ctxplugin may need its mark"


def test_without_notes_the_task_is_the_stable_end() -> None:
    view = [SystemMessage("You fix bugs."), HumanMessage("Fix it."), AIMessage("Looking."), HumanMessage("Go on.")]
    assert stable_ends(view) == [1, 0]
    assert stable_ends(view[:2]) == [0], "the view's last message is marked by the request's end"


def test_a_mark_keeps_the_text_and_skips_what_cannot_carry_one() -> None:
    control = dict(EPHEMERAL)
    tool = ToolMessage("out", tool_call_id="c1")
    assert marked(tool, control).content == [{"type": "text", "text": "out", "cache_control": control}]  # type: ignore[union-attr]
    image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}
    human = HumanMessage(content=[{"type": "text", "text": "look"}, image])
    assert marked(human, control).content == [{"type": "text", "text": "look", "cache_control": control}, image]  # type: ignore[union-attr]
    assert marked(HumanMessage(""), control) is None
    assert marked(HumanMessage(content=[{"type": "text", "text": ""}]), control) is None
    thinking = AIMessage(content=[{"type": "thinking", "thinking": "hm", "signature": "s"}, {"type": "text", "text": "done"}])
    assert marked(thinking, control) is None, "an assistant turn is never marked"
    once = marked(tool, control)
    assert once is not None and marked(once, control) is None


def test_only_claude_models_are_marked() -> None:
    from langchain_openai import ChatOpenAI

    assert takes_cache_marks(claude()) and takes_cache_marks(claude().bind(temperature=0))
    assert not takes_cache_marks(ChatOpenAI(model="gpt-4o", api_key="test-key"))
    view = [SystemMessage("s"), HumanMessage("task"), AIMessage("a"), HumanMessage("b")]
    assert place_marks(ChatOpenAI(model="gpt-4o", api_key="test-key"), view, [], {}) is None


def test_marks_stay_within_four_with_the_host_s_own() -> None:
    view: list[BaseMessage] = [SystemMessage("s"), HumanMessage("task"), AIMessage("a"), HumanMessage("b")]
    placed = place_marks(claude(), view, [], {})
    assert placed is not None
    out, settings = placed
    # header and task, the request's end, and one left for a caching middleware after this one
    assert settings == {"cache_control": dict(EPHEMERAL)}
    assert [i for i, m in enumerate(out) if isinstance(m.content, list)] == [0, 1]
    host_tools = [{"name": "a", "input_schema": {}, "cache_control": {"type": "ephemeral"}}]
    host_system = SystemMessage(content=[{"type": "text", "text": "s", "cache_control": {"type": "ephemeral"}}])
    placed = place_marks(claude(), [host_system, *view[1:]], host_tools, {"cache_control": {"type": "ephemeral"}})
    assert placed is not None
    out, _ = placed
    assert [i for i, m in enumerate(out) if isinstance(m.content, list)] == [0, 1], "the task, besides the host's three"
    own = HumanMessage(content=[{"type": "text", "text": "task", "cache_control": {"type": "ephemeral"}}])
    assert place_marks(claude(), [view[0], own, *view[2:]], [], {}) is None


def test_marks_take_the_lifetime_of_a_mark_the_host_put_on_the_tools() -> None:
    # tools come first in a request: a 1-hour mark there, then ctxplugin's, which may not outlive it
    view: list[BaseMessage] = [SystemMessage("s"), HumanMessage("task"), AIMessage("a"), HumanMessage("b")]
    hour = {"type": "ephemeral", "ttl": "1h"}
    tools = [{"name": "a", "input_schema": {}}, {"name": "b", "input_schema": {}, "cache_control": hour}]
    placed = place_marks(claude(), view, tools, {})
    assert placed is not None
    out, settings = placed
    controls = [b["cache_control"] for m in out if isinstance(m.content, list) for b in m.content if isinstance(b, dict) and "cache_control" in b]
    assert controls and all(c == hour for c in controls) and settings == {"cache_control": hour}
    asked = place_marks(claude(), view, tools, {"cache_control": {"type": "ephemeral"}})  # the host asked for one: taken
    assert asked is not None and asked[1] == {"cache_control": {"type": "ephemeral"}}


BASH = {"type": "function", "function": {"name": "bash", "description": "Run a bash command.",
                                         "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}}


def directory_view() -> tuple[list[BaseMessage], list[Any]]:
    engine = memory_engine(ContextConfig.model_validate({"budget": {"total": 3000}, "tools": {"directory": "always"}}))
    prepared = engine.prepare(long_session(), tools=[BASH, *engine.tools_for_model()], scope=Scope(session_id="d"))
    assert tool_directory(prepared.messages) and prepared.messages[0].content == "You fix bugs."
    return prepared.messages, prepared.tools


def test_the_header_s_end_is_the_directory_after_the_host_prompt() -> None:
    view, _ = directory_view()
    notes = [i for i, m in enumerate(view) if synthetic_kind(m) == "notes" and isinstance(m, ToolMessage)]
    task = next(i for i, m in enumerate(view) if isinstance(m, HumanMessage))
    assert stable_ends(view) == [notes[-1], 1, task]
    assert stable_ends(view, header_first=True) == [notes[-1], 0, task]
    facts = SystemMessage("Known facts: ...", additional_kwargs={"ctxplugin": {"synthetic": "facts"}})
    assert stable_ends([*view[:2], facts, HumanMessage("task"), AIMessage("a"), HumanMessage("b")]) == [3, 1], (
        "the facts after the header on a first call are not the header"
    )


def payload_system(view: list[BaseMessage], tools: list[Any], settings: dict[str, Any]) -> Any:
    bound: Any = claude().bind_tools(tools, **settings)
    return bound.bound._get_request_payload(view, **bound.kwargs)["system"]


def test_the_header_mark_is_on_the_directory_and_the_host_prompt_is_sent_as_given() -> None:
    view, tools = directory_view()
    directory = tool_directory(view)
    placed = place_marks(claude(), view, tools, {}, spare=False)
    assert placed is not None
    out, settings = placed
    assert out[0] is view[0], "the host's system prompt is not touched"
    assert payload_system(out, tools, settings) == [
        {"type": "text", "text": "You fix bugs."},
        {"type": "text", "text": directory, "cache_control": dict(EPHEMERAL)},
    ]


def test_with_a_mark_left_for_a_caching_middleware_the_header_mark_is_where_it_would_mark() -> None:
    """A caching middleware after ctxplugin marks the system prompt it is given (the host's):
    the header's mark is put there, so that the request still carries at most four."""
    view, tools = directory_view()
    placed = place_marks(claude(), view, tools, {})
    assert placed is not None
    out, settings = placed
    system = payload_system(out, tools, settings)
    assert [("cache_control" in b) for b in system] == [True, False]
    assert [b["text"] for b in system] == ["You fix bugs.", tool_directory(view)]
