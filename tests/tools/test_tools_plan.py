"""plan_tools with tools.binding="loaded": when the directory is used, what is bound, and how
loaded tools are derived from the conversation. Stubs and the auto choice are tested in
test_tools_stubs.py."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import ContextConfig, Scope
from ctxplugin.config import ToolsConfig
from ctxplugin.errors import InvalidInputError
from ctxplugin.testing import conversation_messages, memory_engine, tool_directory
from ctxplugin.tokens import count_tool_schemas, get_counter
from ctxplugin.tools import (
    DIRECTORY_TITLE,
    LOAD_TOOLS_NAME,
    ToolRegistry,
    ToolUses,
    plan_tools,
    tool_name,
    used_tools,
)

COUNTER = get_counter()[0]


def fn_tool(name: str, description: str | None = None, params: int = 2) -> dict[str, Any]:
    props = {f"arg_{i}": {"type": "string", "description": f"The {i}th argument of {name}."} for i in range(params)}
    return {"type": "function", "function": {
        "name": name,
        "description": description or f"Run {name.replace('_', ' ')}. Returns JSON.",
        "parameters": {"type": "object", "properties": props, "required": sorted(props)},
    }}


TOOLS = [fn_tool(f"tool_{c}") for c in "abcdefghij"]  # 10 tools


def calls(*names_: str | tuple[str, list[str]]) -> list[BaseMessage]:
    """A conversation where each item is a direct call, or (load_tools, [names])."""
    out: list[BaseMessage] = [HumanMessage(content="go")]
    for i, item in enumerate(names_):
        if isinstance(item, tuple):
            call = {"name": LOAD_TOOLS_NAME, "args": {"names": item[1]}, "id": f"c{i}"}
        else:
            call = {"name": item, "args": {}, "id": f"c{i}"}
        out.append(AIMessage(content="", tool_calls=[call]))
        out.append(ToolMessage(content="ok", tool_call_id=f"c{i}"))
    return out


def plan(tools: list[Any], body: list[BaseMessage] | None = None, **config: Any) -> Any:
    registry = ToolRegistry(COUNTER)
    return plan_tools(tools, body or [HumanMessage(content="hi")], config=ToolsConfig(binding="loaded", **config),
                      counter=COUNTER, registry=registry)


def bound_names(result: Any) -> list[str]:
    return [tool_name(t) or "?" for t in result.bound]


def test_below_both_thresholds_everything_is_bound_as_given() -> None:
    tools = TOOLS[:7]
    result = plan(tools)
    assert not result.active and result.directory_text == ""
    assert result.bound == tools and all(a is b for a, b in zip(result.bound, tools, strict=True))
    assert result.schema_tokens_sent == result.schema_tokens_full == count_tool_schemas(tools, COUNTER)


def test_activation_by_count_and_by_schema_tokens() -> None:
    assert plan(TOOLS[:8]).active
    big = [fn_tool("alpha", params=40), fn_tool("beta", params=40)]
    assert count_tool_schemas(big, COUNTER) >= 1500
    assert plan(big).active
    assert not plan(big, min_schema_tokens=100_000).active
    assert not plan(TOOLS, directory="never").active
    assert plan(TOOLS[:1], directory="always").active
    assert not plan([], directory="always").active


def test_active_plan_binds_only_the_meta_tool_until_something_is_used() -> None:
    result = plan(TOOLS)
    assert result.active and bound_names(result) == [LOAD_TOOLS_NAME] and result.loaded == []
    meta_tokens = count_tool_schemas([convert_to_openai_tool(result.bound[0])], COUNTER)
    assert result.schema_tokens_sent == meta_tokens
    assert result.schema_tokens_full == count_tool_schemas(TOOLS, COUNTER)
    assert result.schema_tokens_sent < result.schema_tokens_full / 5


def test_directory_lists_every_tool_sorted_and_does_not_depend_on_the_conversation() -> None:
    shuffled = list(TOOLS)
    random.Random(7).shuffle(shuffled)
    first = plan(TOOLS)
    later = plan(shuffled, calls(("load", ["tool_c"]), "tool_e"))
    assert first.directory_text == later.directory_text
    lines = first.directory_text.splitlines()
    assert lines[0] == DIRECTORY_TITLE
    assert lines[1:] == [f"- tool_{c}: Run tool {c}" for c in "abcdefghij"]
    assert first.directory_tokens == COUNTER.count(first.directory_text)


def test_load_requests_and_direct_calls_load_tools_in_first_use_order() -> None:
    body = calls(("load_tools", ["tool_d", "tool_b"]), "tool_h", ("load_tools", ["tool_d", "no_such_tool"]))
    result = plan(TOOLS, body)
    assert result.loaded == ["tool_d", "tool_b", "tool_h"]
    assert bound_names(result) == [LOAD_TOOLS_NAME, "tool_d", "tool_b", "tool_h"]
    expected = count_tool_schemas([convert_to_openai_tool(t) for t in result.bound], COUNTER)
    assert result.schema_tokens_sent == expected


def test_least_recently_used_tools_are_evicted() -> None:
    body = calls(("load_tools", ["tool_a", "tool_b"]), "tool_c", "tool_a", ("load_tools", ["tool_d"]))
    assert plan(TOOLS, body, max_loaded=3).loaded == ["tool_a", "tool_c", "tool_d"]
    assert plan(TOOLS, body, max_loaded=1).loaded == ["tool_d"]


def test_names_given_as_one_string_are_split() -> None:
    body: list[BaseMessage] = [HumanMessage(content="go"), AIMessage(content="", tool_calls=[
        {"name": LOAD_TOOLS_NAME, "args": {"names": "tool_f, tool_g tool_z"}, "id": "x"}])]
    assert plan(TOOLS, body).loaded == ["tool_f", "tool_g"]


def asked(*strings: str) -> list[BaseMessage]:
    """A conversation where each load_tools call names its tools as one string."""
    return [HumanMessage(content="go"), *(AIMessage(content="", tool_calls=[
        {"name": LOAD_TOOLS_NAME, "args": {"names": text}, "id": f"c{i}"}]) for i, text in enumerate(strings))]


def test_one_string_that_is_a_tools_whole_name_loads_that_tool_not_its_words() -> None:
    # "tool_a tool_b" was split on its space: tool_a and tool_b were bound, not the tool asked for
    spaced = [*TOOLS, fn_tool("tool_a tool_b")]
    assert plan(spaced, asked("tool_a tool_b")).loaded == ["tool_a tool_b"]
    assert plan(spaced, asked(" tool_a tool_b ")).loaded == ["tool_a tool_b"]
    assert plan(spaced, asked("tool_a, tool_b")).loaded == ["tool_a", "tool_b"], "not its name: the names it lists"
    assert plan(TOOLS, asked("tool_a tool_b")).loaded == ["tool_a", "tool_b"], "no tool of that name: split as before"
    # the order of use counts each listed name as before, the whole name once
    assert plan(TOOLS, asked("tool_a tool_b", "tool_c"), max_loaded=2).loaded == ["tool_b", "tool_c"]
    assert plan(spaced, asked("tool_c", "tool_a tool_b", "tool_d"), max_loaded=2).loaded == ["tool_a tool_b", "tool_d"]
    assert plan(spaced, asked("tool_a tool_b", "tool_c tool_d"), max_loaded=2).loaded == ["tool_c", "tool_d"]
    assert plan(spaced, asked("tool_a tool_b", "tool_a tool_b", "tool_c"), max_loaded=2).loaded == ["tool_a tool_b", "tool_c"]


def test_pinned_tools_come_first_and_do_not_take_loaded_slots() -> None:
    body = calls(("load_tools", ["tool_a", "tool_j"]))
    result = plan(TOOLS, body, pinned=["tool_j", "tool_e", "not_here"], max_loaded=1)
    assert result.pinned == ["tool_e", "tool_j"]
    assert result.loaded == ["tool_a"]
    assert bound_names(result) == ["tool_e", "tool_j", LOAD_TOOLS_NAME, "tool_a"]


def test_provider_builtin_tools_are_always_bound() -> None:
    builtin = {"type": "web_search_preview"}
    result = plan([*TOOLS, builtin])
    assert result.bound[-1] is builtin
    assert result.schema_tokens_sent > plan(TOOLS).schema_tokens_sent


@pytest.mark.parametrize("binding", ["loaded", "stubs", "auto"])
def test_tools_deferred_to_the_providers_tool_search_are_bound_as_given(binding: str) -> None:
    # Anthropic's and OpenAI's own lazy loading: stubbed or left out, the provider could not find them
    from langchain_core.tools import StructuredTool

    deferred = StructuredTool.from_function(lambda account_id: account_id, name="lookup_order",
                                            description="Look up an order.", extras={"defer_loading": True})
    anthropic_form = {"name": "refund", "description": "Refund an order.", "defer_loading": True,
                      "input_schema": {"type": "object", "properties": {"order_id": {"type": "string"}}}}
    search = {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}
    for tools in ([*TOOLS, deferred, search], [*TOOLS, anthropic_form, search]):
        registry = ToolRegistry(COUNTER)
        result = plan_tools(tools, [HumanMessage(content="hi")], config=ToolsConfig(binding=binding, directory="always"),
                            counter=COUNTER, registry=registry)
        assert not result.active and result.directory_text == ""
        assert all(a is b for a, b in zip(result.bound, tools, strict=True))
    registry = ToolRegistry(COUNTER)
    assert plan_tools(TOOLS, [HumanMessage(content="hi")], config=ToolsConfig(binding=binding, directory="always"),
                      counter=COUNTER, registry=registry).active


def test_a_pinned_name_no_tool_has_is_reported() -> None:
    engine = memory_engine(ContextConfig(tools=ToolsConfig(binding="loaded", pinned=["tool_b", "tool_jj"])))
    prepared = engine.prepare([HumanMessage("hi")], tools=TOOLS, scope=Scope(session_id="p"))
    assert tool_name(prepared.tools[0]) == "tool_b"
    (warning,) = [w for w in prepared.report.warnings if "pinned" in w]
    assert "'tool_jj'" in warning and "did you mean 'tool_j'?" in warning
    spelt = memory_engine(ContextConfig(tools=ToolsConfig(binding="loaded", pinned=["tool_j"])))
    warnings = spelt.prepare([HumanMessage("hi")], tools=TOOLS, scope=Scope(session_id="p")).report.warnings
    assert not [w for w in warnings if "pinned" in w]


def test_duplicate_names_are_rejected() -> None:
    with pytest.raises(InvalidInputError, match="tool_a"):
        plan([*TOOLS, fn_tool("tool_a", "Another one.")])


def test_large_registries_get_a_shorter_directory() -> None:
    many = [fn_tool(f"service_{i:03d}_action", f"Perform the action number {i} on the service, with many details "
                                                  "about what it does and when to use it. More.") for i in range(200)]
    roomy = plan(many, directory_max_tokens=100_000)
    medium = plan(many, directory_max_tokens=roomy.directory_tokens - 1)
    tight = plan(many, directory_max_tokens=50)
    assert ("- service_000_action: Perform the action number 0 on the service, with many details about what it…\n"
            in roomy.directory_text)
    assert "- service_000_action: Perform the action number 0 on the…\n" in medium.directory_text
    assert tight.directory_text.endswith("service_198_action, service_199_action")
    assert roomy.directory_tokens > medium.directory_tokens > tight.directory_tokens
    assert all(f"service_{i:03d}_action" in tight.directory_text for i in range(200))
    assert plan(many, intent_chars=0).directory_text == tight.directory_text


ACTIONS = st.lists(
    st.one_of(
        st.sampled_from([f"tool_{c}" for c in "abcdefghij"] + ["unknown", "expand_ref"]),
        st.lists(st.sampled_from([f"tool_{c}" for c in "abcdefghij"]), max_size=4).map(lambda n: ("load_tools", n)),
    ),
    max_size=25,
)


@settings(max_examples=60, deadline=None)
@given(actions=ACTIONS, max_loaded=st.integers(1, 6), pinned=st.sets(st.sampled_from(["tool_a", "tool_b"])))
def test_plan_invariants(actions: list[Any], max_loaded: int, pinned: set[str]) -> None:
    result = plan(TOOLS, calls(*actions), max_loaded=max_loaded, pinned=sorted(pinned))
    known = {f"tool_{c}" for c in "abcdefghij"}
    assert set(result.loaded) <= known - pinned
    assert len(result.loaded) <= max_loaded and len(set(result.loaded)) == len(result.loaded)
    assert bound_names(result) == [*result.pinned, LOAD_TOOLS_NAME, *result.loaded]
    used = [n for a in actions for n in (a[1] if isinstance(a, tuple) else [a]) if n in known - pinned]
    if used:
        assert used[-1] in result.loaded  # the tool used last is always bound
    assert result.loaded == used_tools(calls(*actions), known - pinned, max_loaded)


@settings(max_examples=60, deadline=None)
@given(actions=ACTIONS, cut=st.integers(0, 25), max_loaded=st.integers(1, 6))
def test_uses_folded_call_by_call_are_those_read_at_once(actions: list[Any], cut: int, max_loaded: int) -> None:
    messages = calls(*actions)
    known = {f"tool_{c}" for c in "abcdefghij"}
    uses = ToolUses()
    uses.update(messages[: cut * 2])  # an earlier call's conversation, then this one grown from it
    assert uses.recent(known, max_loaded) == used_tools(messages[: cut * 2], known, max_loaded)
    uses.update(messages)
    assert uses.recent(known, max_loaded) == used_tools(messages, known, max_loaded)
    rewritten = [HumanMessage(content="start over"), *messages[cut * 2 :]]  # not grown from it: read anew
    uses.update(rewritten)
    assert uses.recent(known, max_loaded) == used_tools(rewritten, known, max_loaded)


def test_the_conversation_read_from_a_view_leaves_out_the_directory() -> None:
    engine = memory_engine(ContextConfig(tools=ToolsConfig(directory="always")))
    messages = [SystemMessage(content="You help."), *calls(("load_tools", ["tool_c"]))]
    prepared = engine.prepare(messages, tools=TOOLS, scope=Scope(session_id="conversation"))
    assert tool_directory(prepared.messages)
    assert conversation_messages(prepared.messages) == messages, "the conversation's own messages, without ctxplugin's texts"


def test_engine_puts_the_directory_in_the_header_and_reports_tools() -> None:
    engine = memory_engine(ContextConfig(tools=ToolsConfig(binding="loaded", pinned=["tool_b"])))
    messages = [SystemMessage(content="You help."), *calls(("load_tools", ["tool_c"]))]
    prepared = engine.prepare(messages, tools=TOOLS, scope=Scope(session_id="p"))
    assert prepared.system_message is not None and prepared.system_message.content == "You help."
    directory = tool_directory(prepared.messages)
    assert directory.startswith(DIRECTORY_TITLE) and "- tool_j: Run tool j" in directory
    assert prepared.messages[1].content == directory, "the directory is a system message of its own, after the host's"
    assert [tool_name(t) for t in prepared.tools] == ["tool_b", LOAD_TOOLS_NAME, "tool_c"]
    report = prepared.report
    assert report.tools_directory and report.tools_loaded == ["tool_c"]
    assert report.sections["tools"].before == count_tool_schemas(TOOLS, COUNTER)
    assert report.sections["tools"].after < report.sections["tools"].before / 3
    bound = engine.bound_tools(messages, TOOLS)
    assert [tool_name(t) for t in bound] == ["tool_b", LOAD_TOOLS_NAME, "tool_c"]
