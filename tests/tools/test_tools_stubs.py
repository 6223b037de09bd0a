"""tools.binding="stubs": every directory tool bound as a stub (its name, arguments left open)
from the first call, so the bound list never changes within a conversation; the directory in the
header gives each tool's purpose and load_tools answers with schemas. tools.binding="auto" (the
default): stubs while they fit in directory_max_tokens, else the loaded schemas."""

from __future__ import annotations

import json
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from ctxplugin import ContextConfig, Scope
from ctxplugin.config import ToolsConfig
from ctxplugin.testing import memory_engine, tool_directory
from ctxplugin.tokens import count_message, count_tool_schemas, get_counter
from ctxplugin.tools import (
    DIRECTORY_TITLE,
    LOAD_TOOLS_NAME,
    STUBS_TITLE,
    ToolRegistry,
    plan_tools,
    resolve_call,
    tool_name,
)

COUNTER = get_counter()[0]
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"
OPEN_PARAMETERS = {"type": "object", "properties": {}, "additionalProperties": True}


def fn_tool(name: str, params: int = 2) -> dict[str, Any]:
    props = {f"arg_{i}": {"type": "string", "description": f"The {i}th argument of {name}."} for i in range(params)}
    return {"type": "function", "function": {
        "name": name,
        "description": f"Run {name.replace('_', ' ')}. Returns JSON.",
        "parameters": {"type": "object", "properties": props, "required": sorted(props)},
    }}


TOOLS = [fn_tool(f"tool_{c}") for c in "abcdefghij"]  # 10 tools: the directory is active


def memory_engine_with(config: ContextConfig | None = None, **tools: Any) -> Any:
    return memory_engine(config or ContextConfig(tools=ToolsConfig(**tools)))


def airline() -> list[dict[str, Any]]:
    path = DATA / "tools" / "tau-airline-tools.json"
    if not path.is_file():
        pytest.skip(f"shared data not found at {path}")
    return list(json.loads(path.read_text()))


def spec(tools: list[dict[str, Any]], name: str) -> dict[str, Any]:
    return next(t for t in tools if t["function"]["name"] == name)


def plan(tools: list[Any], body: list[BaseMessage] | None = None, **config: Any) -> Any:
    """The plan with ``binding`` "stubs" unless ``config`` names another."""
    config.setdefault("binding", "stubs")
    return plan_tools(tools, body or [HumanMessage(content="hi")], config=ToolsConfig(**config),
                      counter=COUNTER, registry=ToolRegistry(COUNTER))


def stub_tokens(tools: list[Any]) -> int:
    """What the stubs of ``tools`` cost (``load_tools`` excluded): what auto compares with
    ``directory_max_tokens``."""
    return count_tool_schemas([t for t in plan(tools).bound if tool_name(t) != LOAD_TOOLS_NAME], COUNTER)


def service_tools(count: int) -> list[dict[str, Any]]:
    return [fn_tool(f"service_{i:03d}_action") for i in range(count)]


def as_openai(tools: list[Any]) -> list[dict[str, Any]]:
    return [convert_to_openai_tool(t) for t in tools]


def names(tools: list[Any]) -> list[str]:
    return [tool_name(t) or "?" for t in tools]


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id}])


def calls(*items: str | tuple[str, list[str]]) -> list[BaseMessage]:
    """A conversation where each item is a direct call, or (load_tools, [names])."""
    out: list[BaseMessage] = [HumanMessage(content="go")]
    for i, item in enumerate(items):
        if isinstance(item, tuple):
            out.append(call(LOAD_TOOLS_NAME, {"names": item[1]}, f"c{i}"))
        else:
            out.append(call(item, {}, f"c{i}"))
        out.append(ToolMessage(content="ok", tool_call_id=f"c{i}"))
    return out


# ------------------------------------------------------------------ plan


def test_plan_binds_pinned_tools_load_tools_and_a_stub_for_every_other_tool() -> None:
    result = plan(TOOLS, calls(("load_tools", ["tool_c"]), "tool_e"), pinned=["tool_h"])
    assert result.active
    assert names(result.bound) == ["tool_h", LOAD_TOOLS_NAME, *[f"tool_{c}" for c in "abcdefgij"]]
    assert result.bound[0] is TOOLS[7]  # the pinned tool as given, full schema
    assert result.bound[2] == {"type": "function", "function": {"name": "tool_a", "parameters": OPEN_PARAMETERS}}
    assert result.loaded == ["tool_c", "tool_e"]  # still derived from the conversation
    # the purposes are in the header's directory, under the stubs' title, pinned tool included
    lines = result.directory_text.splitlines()
    assert lines[0] == STUBS_TITLE and DIRECTORY_TITLE not in result.directory_text
    assert lines[1:] == [f"- tool_{c}: Run tool {c}" for c in "abcdefghij"]
    assert result.directory_tokens == COUNTER.count(result.directory_text)
    assert result.schema_tokens_sent == count_tool_schemas(as_openai(result.bound), COUNTER)
    assert result.schema_tokens_full == count_tool_schemas(TOOLS, COUNTER)


def test_without_intents_the_directory_lists_names_and_the_stubs_are_the_same() -> None:
    bare = plan(TOOLS, intent_chars=0)
    assert bare.directory_text == f"{STUBS_TITLE}\nTools: " + ", ".join(f"tool_{c}" for c in "abcdefghij")
    assert as_openai(bare.bound) == as_openai(plan(TOOLS).bound)


def test_provider_builtin_tools_stay_bound_after_the_stubs() -> None:
    builtin = {"type": "web_search_preview"}
    result = plan([*TOOLS, builtin])
    assert result.bound[-1] is builtin and len(result.bound) == len(TOOLS) + 2


@pytest.mark.parametrize("binding", ["stubs", "loaded"])
def test_named_provider_tools_are_bound_as_given(binding: str) -> None:
    from langchain_anthropic import ChatAnthropic

    # Anthropic's own tools carry a name but no schema; a stub would turn them into functions
    web = {"type": "web_search_20250305", "name": "web_search", "max_uses": 3}
    bash = {"type": "bash_20250124", "name": "bash"}
    result = plan([*TOOLS, web, bash], binding=binding)
    assert result.bound[-2:] == [web, bash] and result.bound[-1] is bash
    assert "web_search" not in result.directory_text and "- bash" not in result.directory_text
    bound = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key").bind_tools(result.bound)
    payload = bound.bound._get_request_payload([HumanMessage("Search the web.")], **bound.kwargs)  # type: ignore[attr-defined]
    sent = {t["name"]: t for t in payload["tools"]}
    assert sent["web_search"] == web and sent["bash"] == bash


ACTIONS = st.lists(
    st.one_of(
        st.sampled_from([f"tool_{c}" for c in "abcdefghij"] + ["unknown"]),
        st.lists(st.sampled_from([f"tool_{c}" for c in "abcdefghij"]), max_size=4).map(lambda n: ("load_tools", n)),
    ),
    max_size=20,
)


@settings(max_examples=40, deadline=None)
@given(actions=ACTIONS, max_loaded=st.integers(1, 6))
def test_the_bound_list_does_not_depend_on_the_conversation(actions: list[Any], max_loaded: int) -> None:
    first = plan(TOOLS, max_loaded=max_loaded, pinned=["tool_b"])
    later = plan(TOOLS, calls(*actions), max_loaded=max_loaded, pinned=["tool_b"])
    assert as_openai(later.bound) == as_openai(first.bound)
    assert later.schema_tokens_sent == first.schema_tokens_sent
    assert later.directory_text == first.directory_text


# ------------------------------------------------------------------ engine


def conversation(load: list[str], use: list[tuple[str, dict[str, Any]]]) -> list[list[BaseMessage]]:
    """The views an agent sends, one per model call: a load, then direct calls, then a new question."""
    steps: list[list[BaseMessage]] = [[SystemMessage(content="You help travellers."),
                                       HumanMessage(content="Please look up my trip.")]]
    steps.append([*steps[-1], call(LOAD_TOOLS_NAME, {"names": load}, "load"),
                  ToolMessage(content="(schemas)", tool_call_id="load", name=LOAD_TOOLS_NAME)])
    for i, (name, args) in enumerate(use):
        steps.append([*steps[-1], call(name, args, f"use{i}"),
                      ToolMessage(content=f"result {i}", tool_call_id=f"use{i}", name=name)])
    steps.append([*steps[-1], AIMessage(content="Done."), HumanMessage(content="And my bags?")])
    return steps


def tool_sets() -> list[Any]:
    synthetic = (TOOLS, "tool_a", ["tool_c", "tool_f"],
                 [("tool_c", {"arg_0": "x", "arg_1": "y"}), ("tool_f", {"arg_0": "x", "arg_1": "y"})])
    return [pytest.param(synthetic, id="synthetic"), pytest.param("airline", id="tau-airline")]


@pytest.mark.parametrize("case", tool_sets())
def test_engine_binds_the_same_list_on_every_call_of_a_growing_conversation(case: Any) -> None:
    if case == "airline":
        tools = airline()
        case = (tools, "think", ["get_user_details", "get_reservation_details"],
                [("get_user_details", {"user_id": "mia_li_3668"}),
                 ("get_reservation_details", {"reservation_id": "NO6JO3"})])
    tools, pinned, load, use = case
    engine = memory_engine_with(binding="stubs", pinned=[pinned])
    scope = Scope(session_id="stubs")
    prepared = [engine.prepare(view, tools=tools, scope=scope) for view in conversation(load, use)]

    first = prepared[0].tools
    expected_names = [pinned, LOAD_TOOLS_NAME, *[n for n in names(tools) if n != pinned]]
    for p in prepared:
        assert names(p.tools) == expected_names
        assert as_openai(p.tools) == as_openai(first)
        assert all(a is b or a == b for a, b in zip(p.tools, first, strict=True))
        header = tool_directory(p.messages)
        assert STUBS_TITLE in header and DIRECTORY_TITLE not in header
        assert all(f"\n- {n}: " in header for n in names(tools))  # the header says what each tool does
        # what the report says is sent is what is bound
        assert p.report.sections["tools"].after == count_tool_schemas(as_openai(p.tools), COUNTER)
        assert p.report.sections["tools"].before == count_tool_schemas(tools, COUNTER)
        assert p.report.tools_directory and p.report.tools_bound == expected_names

    assert first[0] is spec(tools, pinned)  # the pinned tool keeps its full schema
    assert "bound" not in as_openai(first)[1]["function"]["description"]  # load_tools promises no binding
    for stub in as_openai(first[2:]):
        assert stub["function"] == {"name": stub["function"]["name"], "parameters": OPEN_PARAMETERS}
    assert sum(len(json.dumps(t)) for t in as_openai(first)) < sum(len(json.dumps(t)) for t in tools)

    assert prepared[0].report.tools_loaded == []
    assert prepared[1].report.tools_loaded == load
    assert prepared[-1].report.tools_loaded == load
    # the tool list did not change, so the prefix survives the load and each later step: the
    # bound schemas, which a request sends first, then the previous view's messages
    for before, after in pairwise(prepared):
        schemas = after.report.sections["tools"].after
        assert schemas > 0 and schemas == before.report.sections["tools"].after
        assert after.report.unchanged_prefix_tokens == schemas + sum(count_message(m, COUNTER) for m in before.messages)


def test_with_loaded_binding_the_same_conversation_grows_the_list_and_resets_the_prefix() -> None:
    views = conversation(["tool_c", "tool_f"], [("tool_c", {"arg_0": "x", "arg_1": "y"})])
    stubs = memory_engine_with(binding="stubs")
    loaded = memory_engine_with(binding="loaded")
    scope = Scope(session_id="compare")
    by_stubs = [stubs.prepare(v, tools=TOOLS, scope=scope) for v in views]
    by_loaded = [loaded.prepare(v, tools=TOOLS, scope=scope) for v in views]
    assert names(by_loaded[0].tools) == [LOAD_TOOLS_NAME]
    assert names(by_loaded[1].tools) == [LOAD_TOOLS_NAME, "tool_c", "tool_f"]
    assert by_loaded[1].report.unchanged_prefix_tokens == 0
    assert "bound from your next step on" in as_openai(by_loaded[0].tools)[0]["function"]["description"]
    assert by_stubs[1].report.unchanged_prefix_tokens > 0
    # the bound stubs cost more than load_tools alone, far less than every schema
    assert by_loaded[0].report.sections["tools"].after < by_stubs[0].report.sections["tools"].after
    assert by_stubs[0].report.sections["tools"].after < by_stubs[0].report.sections["tools"].before


def test_bound_tools_matches_prepare_in_stubs_mode() -> None:
    engine = memory_engine_with(binding="stubs", pinned=["tool_d"])
    body = calls(("load_tools", ["tool_a"]), "tool_b")
    prepared = engine.prepare(body, tools=TOOLS, scope=Scope(session_id="b"))
    assert as_openai(engine.bound_tools(body, TOOLS)) == as_openai(prepared.tools)


def test_the_config_accepts_a_plain_dict() -> None:
    assert memory_engine_with(config=ContextConfig(tools={"binding": "stubs"})).registry.stubs
    assert not memory_engine_with(config=ContextConfig(tools={"binding": "loaded"})).registry.stubs
    default = memory_engine_with()
    # auto may bind stubs, so load_tools answers with parameters whatever a call binds
    assert default.config.tools.binding == "auto" and default.registry.stubs


# ------------------------------------------------------------------ auto


def test_auto_binds_stubs_for_a_moderate_tool_set_and_loaded_schemas_for_a_large_one() -> None:
    assert ToolsConfig().binding == "auto" and ToolsConfig().directory_max_tokens == 1500
    large_tools = service_tools(200)
    assert stub_tokens(TOOLS) <= 1500 < stub_tokens(large_tools)
    body = calls(("load_tools", ["tool_c"]), ("load_tools", ["service_007_action"]))

    moderate = plan(TOOLS, body, binding="auto")
    assert names(moderate.bound) == [LOAD_TOOLS_NAME, *names(TOOLS)]
    assert as_openai(moderate.bound) == as_openai(plan(TOOLS, body).bound)
    assert moderate.directory_text == plan(TOOLS).directory_text

    large = plan(large_tools, body, binding="auto")
    assert names(large.bound) == [LOAD_TOOLS_NAME, "service_007_action"]
    assert large.bound[1] is large_tools[7]  # the loaded tool with its full schema
    assert as_openai(large.bound) == as_openai(plan(large_tools, body, binding="loaded").bound)
    assert large.directory_text.startswith(DIRECTORY_TITLE) and STUBS_TITLE not in large.directory_text
    assert large.schema_tokens_sent < stub_tokens(large_tools) / 10


def test_auto_switches_where_the_stubs_stop_fitting() -> None:
    tokens = stub_tokens(TOOLS)
    fits = plan(TOOLS, binding="auto", directory_max_tokens=tokens)
    over = plan(TOOLS, binding="auto", directory_max_tokens=tokens - 1)
    assert names(fits.bound) == [LOAD_TOOLS_NAME, *names(TOOLS)] and fits.directory_text.startswith(STUBS_TITLE)
    assert names(over.bound) == [LOAD_TOOLS_NAME] and over.directory_text.startswith(DIRECTORY_TITLE)
    # pinned tools keep their schemas and are not stubs: they do not count
    pinned = plan(TOOLS, binding="auto", directory_max_tokens=tokens - 1, pinned=["tool_a"])
    assert names(pinned.bound) == ["tool_a", LOAD_TOOLS_NAME, *names(TOOLS[1:])]


def test_the_default_engine_binds_stubs_for_ten_tools_and_loaded_schemas_for_two_hundred() -> None:
    large_tools = service_tools(200)
    engine = memory_engine_with()
    view = [SystemMessage(content="You help."), *calls(("load_tools", ["service_007_action"]))]
    scope = Scope(session_id="auto")
    few = engine.prepare(view, tools=TOOLS, scope=scope)
    assert names(few.tools) == [LOAD_TOOLS_NAME, *names(TOOLS)]
    assert STUBS_TITLE in tool_directory(few.messages)
    many = engine.prepare(view, tools=large_tools, scope=scope)
    assert names(many.tools) == [LOAD_TOOLS_NAME, "service_007_action"]
    assert many.tools[1] is large_tools[7]
    assert DIRECTORY_TITLE in tool_directory(many.messages)
    assert many.report.sections["tools"].after == count_tool_schemas(as_openai(many.tools), COUNTER)
    # load_tools answers as each tool is bound: a stub gets its JSON schema, a tool bound with
    # its schema from the next call a compact signature
    stubbed = names(TOOLS)[0]
    answer = engine.registry.meta_tool().invoke({"names": [stubbed, "service_007_action"]}).splitlines()
    assert answer[0].startswith("Parameters of these tools (JSON schema)")
    assert json.loads(answer[1][2:])["name"] == stubbed
    assert answer[2].startswith("Loaded; these tools are bound with their full schemas")
    assert answer[3].startswith("- service_007_action(") and "{" not in answer[3]


# ------------------------------------------------------------------ load_tools and bad calls


def test_load_tools_answers_with_each_tools_json_schema() -> None:
    tools = airline()
    engine = memory_engine_with(binding="stubs")
    engine.prepare([HumanMessage(content="hi")], tools=tools, scope=Scope(session_id="l"))
    meta = engine.registry.meta_tool()
    answer = meta.invoke({"names": ["book_reservation", "get_user_details", "get_user", "book_reservation"]})
    lines = answer.splitlines()
    assert lines[0].startswith("Parameters of these tools (JSON schema)")
    assert lines[3] == "Not loaded:"
    assert lines[4].startswith("- get_user: no such tool; did you mean get_user_details")
    assert len(lines) == 5
    for line, name in zip(lines[1:3], ["book_reservation", "get_user_details"], strict=True):
        assert line.startswith("- ")
        schema = json.loads(line[2:])
        real = spec(tools, name)["function"]
        assert schema["name"] == name
        assert schema["parameters"] == real["parameters"]
        assert set(schema["parameters"]["properties"]) == set(real["parameters"]["properties"])
        assert line[2:] == json.dumps(real, separators=(",", ":"), ensure_ascii=False)  # compact


def test_load_tools_answers_with_signatures_when_binding_loaded_tools() -> None:
    engine = memory_engine_with(binding="loaded")
    engine.prepare([HumanMessage(content="hi")], tools=TOOLS, scope=Scope(session_id="l"))
    lines = engine.registry.meta_tool().invoke({"names": ["tool_a"]}).splitlines()
    assert lines == ["Loaded; these tools are bound with their full schemas from your next step on:",
                     "- tool_a(arg_0: string, arg_1: string)"]


def test_a_call_with_wrong_arguments_gets_the_schema_without_the_binding_promise() -> None:
    tools = airline()
    engine = memory_engine_with(binding="stubs")
    engine.prepare([HumanMessage(content="hi")], tools=tools, scope=Scope(session_id="r"))
    res = resolve_call("update_reservation_baggages", {"reservation_id": "NO6JO3", "bags": 2}, engine.registry)
    assert res.kind == "schema"
    assert "bound from your next step on" not in res.message
    schema_line = res.message.split("The schema of update_reservation_baggages:\n", 1)[1].splitlines()[0]
    assert json.loads(schema_line)["parameters"] == spec(tools, "update_reservation_baggages")["function"]["parameters"]
    assert res.message.rstrip().endswith("Call update_reservation_baggages again with arguments that match it.")
    assert resolve_call("get_user_details", {"user_id": "mia_li_3668"}, engine.registry).kind == "run"


# ------------------------------------------------------------------ directory inactive


def test_with_few_tools_stubs_change_nothing() -> None:
    few = TOOLS[:3]
    engine = memory_engine_with(binding="stubs")
    body = [SystemMessage(content="You help."), *calls(("load_tools", ["tool_a"]), "tool_b")]
    prepared = engine.prepare(body, tools=few, scope=Scope(session_id="few"))
    assert prepared.tools == few and all(a is b for a, b in zip(prepared.tools, few, strict=True))
    assert not prepared.report.tools_directory
    assert prepared.system_message is not None and str(prepared.system_message.content) == "You help."
    assert prepared.report.sections["tools"].after == count_tool_schemas(few, COUNTER)
    never = memory_engine_with(binding="stubs", directory="never")
    assert never.prepare(body, tools=TOOLS, scope=Scope(session_id="n")).tools == TOOLS


# ------------------------------------------------------------------ strict binding


@pytest.mark.parametrize("binding", ["stubs", "auto"])
def test_a_strict_call_binds_every_tool_with_its_own_schema_where_stubs_would_be_bound(binding: str) -> None:
    """Strict function calling closes every schema: a stub could only be called with ``{}``."""
    engine = memory_engine_with(binding=binding)
    scope = Scope(session_id="strict")
    body = calls(("load_tools", ["tool_a"]), "tool_b")
    prepared = engine.prepare(body, tools=TOOLS, scope=scope, strict_tools=True)
    assert as_openai(prepared.tools) == as_openai(TOOLS)
    assert STUBS_TITLE not in tool_directory(prepared.messages)
    assert prepared.report.sections["tools"].after == count_tool_schemas(TOOLS, COUNTER)
    assert as_openai(engine.bound_tools(body, TOOLS, strict_tools=True)) == as_openai(TOOLS)
    assert all(t["function"]["parameters"]["properties"] for t in as_openai(prepared.tools))


def test_a_strict_call_with_loaded_binding_keeps_the_directory() -> None:
    engine = memory_engine_with(binding="loaded")
    body = calls(("load_tools", ["tool_a"]))
    strict = engine.prepare(body, tools=TOOLS, scope=Scope(session_id="s"), strict_tools=True)
    loose = engine.prepare(body, tools=TOOLS, scope=Scope(session_id="l"))
    assert names(strict.tools) == names(loose.tools) == [LOAD_TOOLS_NAME, "tool_a"]


def test_five_hundred_tools_are_listed_by_name_and_loaded_on_request() -> None:
    tools = [
        {"type": "function", "function": {"name": f"tool_{i}", "description": f"Does thing {i} with the catalogue",
                                          "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}, "required": ["arg"]}}}
        for i in range(500)
    ]
    engine = memory_engine(ContextConfig(mode="whole"))
    scope = Scope(session_id="many-tools")
    messages: list[BaseMessage] = [SystemMessage("You run the catalogue."), HumanMessage("Use tool_321 on widget 9.")]
    prepared = engine.prepare(messages, tools=tools, scope=scope)
    header = tool_directory(prepared.messages)
    assert all(f"tool_{i}" in header.split("Tools: ", 1)[1].replace(",", " ").split() for i in range(500))
    assert prepared.report.within_budget and prepared.report.tokens_after <= engine.config.budget.total
    names = [t["function"]["name"] if isinstance(t, dict) else t.name for t in prepared.tools]
    assert names == ["load_tools"]
    load = AIMessage("", tool_calls=[{"id": "l1", "name": "load_tools", "args": {"names": ["tool_321"]}}])
    loaded = engine.prepare([*messages, load, ToolMessage("loaded", tool_call_id="l1", name="load_tools")], tools=tools, scope=scope)
    bound = {t["function"]["name"] if isinstance(t, dict) else t.name: t for t in loaded.tools}
    assert "tool_321" in bound


def test_load_tools_answer_names_only_the_tools_max_loaded_keeps_bound() -> None:
    # a request naming more tools than tools.max_loaded binds only the most recently named:
    # the answer must not promise the others are bound
    engine = memory_engine_with(binding="loaded", max_loaded=3, pinned=["tool_a"])
    scope = Scope(session_id="many-loads")
    asked = ["tool_b", "tool_c", "tool_a", "tool_d", "tool_e", "tool_f"]
    messages: list[BaseMessage] = [HumanMessage("go")]
    engine.prepare(messages, tools=TOOLS, scope=scope)
    load = next(t for t in engine.tools_for_model() if t.name == LOAD_TOOLS_NAME)
    answer = load.invoke({"names": asked}, config={"configurable": {"ctxplugin_scope": scope}})
    messages += [AIMessage("", tool_calls=[{"name": LOAD_TOOLS_NAME, "args": {"names": asked}, "id": "l1"}]),
                 ToolMessage(answer, tool_call_id="l1", name=LOAD_TOOLS_NAME)]
    report = engine.prepare(messages, tools=TOOLS, scope=scope).report
    assert report.tools_loaded == ["tool_d", "tool_e", "tool_f"]
    bound, _, unbound = answer.partition("Not bound")
    promised = [line[2:].split("(")[0] for line in bound.splitlines() if line.startswith("- ")]
    assert sorted(promised) == ["tool_a", "tool_d", "tool_e", "tool_f"]  # the pinned tool stays bound
    assert [line[2:].split("(")[0] for line in unbound.splitlines() if line.startswith("- ")] == ["tool_b", "tool_c"]
    assert "at most 3 loaded tools" in unbound
    # the pinned tool was bound before it was asked for: said so, not promised for the next step
    already, _, loaded = bound.partition("Loaded;")
    assert "Already bound" in already and "- tool_a(" in already and "tool_a" not in loaded
