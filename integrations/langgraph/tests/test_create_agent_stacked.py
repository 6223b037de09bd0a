"""``ContextMiddleware`` stacked with more of LangChain's middleware, in either order: context
editing, tool selection, model fallback, call limits, the todo list and a dynamic prompt.

Every request the model is sent is formatted offline by langchain-anthropic's and
langchain-openai's own request builders and checked against the rules their APIs enforce (each
tool result right after its call, every call answered, the system prompt first and exact)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain.agents.middleware import (
    ClearToolUsesEdit,
    ContextEditingMiddleware,
    LLMToolEmulator,
    LLMToolSelectorMiddleware,
    ModelCallLimitMiddleware,
    ModelFallbackMiddleware,
    ModelRequest,
    TodoListMiddleware,
    ToolCallLimitMiddleware,
    dynamic_prompt,
)
from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import Scope
from ctxplugin.facts import FactQuery
from ctxplugin.testing import RecordedCall, ScriptedChatModel, memory_engine, tool_call

ORDERS = ["context-first", "context-last"]


def arrange(order: str, context: ContextMiddleware, other: Any) -> list[Any]:
    return [context, other] if order == "context-first" else [other, context]


def run_turns(agent: Any, turns: list[str], config: Any) -> None:
    for turn in turns:
        agent.invoke({"messages": [("user", turn)]}, config)


# ---------------------------------------------------------------- what the providers accept


def anthropic_payload(call: RecordedCall) -> dict[str, Any]:
    from langchain_anthropic import ChatAnthropic

    model = ChatAnthropic(model="claude-sonnet-4-5", api_key="test-key")
    bound = model.bind_tools(call.tools) if call.tools else model
    kwargs = dict(getattr(bound, "kwargs", {}))
    payload: dict[str, Any] = model._get_request_payload(call.messages, **kwargs)
    return payload


def openai_payload(call: RecordedCall) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    model = ChatOpenAI(model="gpt-4o", api_key="test-key")
    bound = model.bind_tools(call.tools) if call.tools else model
    kwargs = dict(getattr(bound, "kwargs", {}))
    payload: dict[str, Any] = model._get_request_payload(call.messages, **kwargs)
    return payload


def assert_accepted(call: RecordedCall, system: str | None = None) -> None:
    """Anthropic and OpenAI (Chat Completions) would take this request: every tool result right
    after the turn that called it, every call answered before the next turn, the system prompt
    (when given) at the start of the system text, unchanged."""
    anthropic = anthropic_payload(call)
    turns = anthropic["messages"]
    assert turns[0]["role"] == "user"
    for index, turn in enumerate(turns):
        blocks = turn["content"] if isinstance(turn["content"], list) else []
        uses = {b["id"] for b in blocks if isinstance(b, dict) and b.get("type") == "tool_use"}
        if uses:
            after = turns[index + 1]["content"] if index + 1 < len(turns) else []
            answered = {
                b.get("tool_use_id")
                for b in after
                if isinstance(b, dict) and b.get("type") == "tool_result"
            }
            assert uses <= answered, f"Anthropic: tool_use without a tool_result: {uses - answered}"
        results = {
            b["tool_use_id"]
            for b in blocks
            if isinstance(b, dict) and b.get("type") == "tool_result"
        }
        if results:
            before = turns[index - 1]["content"] if index else []
            called = {
                b["id"] for b in before if isinstance(b, dict) and b.get("type") == "tool_use"
            }
            assert results <= called, (
                f"Anthropic: tool_result without its tool_use: {results - called}"
            )
    pending: set[str] = set()
    for message in openai_payload(call)["messages"]:
        if message["role"] == "tool":
            assert message["tool_call_id"] in pending, (
                "OpenAI: a tool message answers no pending call"
            )
            pending.discard(message["tool_call_id"])
            continue
        assert not pending, f"OpenAI: calls left unanswered: {pending}"
        pending = {c["id"] for c in message.get("tool_calls") or []}
    if system is not None:
        head = call.messages[0]
        assert isinstance(head, SystemMessage) and head.text.startswith(system)


def tool_results(state: list[BaseMessage]) -> list[ToolMessage]:
    return [m for m in state if isinstance(m, ToolMessage)]


# ---------------------------------------------------------------- ContextEditingMiddleware


@pytest.mark.parametrize("order", ORDERS)
def test_with_context_editing_cleared_outputs_keep_their_facts(order: str, scenario: Any) -> None:
    # ClearToolUsesEdit leaves old tool outputs out of one request; the outputs themselves did
    # not change, so the facts read from them stay in the ledger for every later call
    engine, model = memory_engine(), scenario.scripted()
    clear = ContextEditingMiddleware(edits=[ClearToolUsesEdit(trigger=2000, keep=1)])
    agent = create_agent(
        model,
        scenario.tools,
        checkpointer=InMemorySaver(),
        middleware=arrange(order, ContextMiddleware(engine), clear),
    )
    thread = f"edit-{order}"
    config: Any = {"configurable": {"thread_id": thread}}
    scope = Scope(session_id=thread)
    held: set[str] = set()
    for turn in ["user u-100", "flights SFO JFK", "log checkout", "user u-200", "flights JFK SEA"]:
        run_turns(agent, [turn], config)
        now = {fact.id for fact in engine.facts.store.find(FactQuery(reader=scope))}
        assert held <= now, f"facts withdrawn after {turn!r}: {len(held - now)}"
        held = now
    assert any("u-100" in fact.text for fact in engine.facts.store.find(FactQuery(reader=scope)))
    if order == "context-last":
        seen = [m for m in model.calls[-1].messages if isinstance(m, ToolMessage)]
        assert sum(str(m.content) == "[cleared]" for m in seen) >= 3, (
            "LangChain's edit reaches the model"
        )
    for call in model.calls:
        assert_accepted(call)
    state = agent.get_state(config).values["messages"]
    for result in tool_results(state):
        ref = result.additional_kwargs.get("ctxplugin", {}).get("ref")
        if ref:
            assert engine.expand_ref(ref, scope=scope) == result.content


# ---------------------------------------------------------------- LLMToolSelectorMiddleware

WANTED = {"flights": "search_flights", "log": "read_log", "user": "get_user"}


def selector() -> ScriptedChatModel:
    """A selection model that picks the one tool the latest user turn asks for (never a
    meta-tool), as ``LLMToolSelectorMiddleware`` asks it to: a structured-output tool call."""

    def pick(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        turn = next(m.text for m in reversed(messages) if m.type == "human")
        schema = tools[0]["function"]["name"]
        return AIMessage(
            content="", tool_calls=[tool_call(schema, {"tools": [WANTED[turn.split()[0]]]})]
        )

    return ScriptedChatModel(script=[pick] * 40, default=None)


def reading_policy(scenario: Any) -> Any:
    """The scenario's model, reading two items of each ref it is shown once."""

    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        last = messages[-1]
        if (
            isinstance(last, ToolMessage)
            and last.name in scenario.big_tools
            and "ref:" in str(last.content)
        ):
            ref = "ref:" + str(last.content).split("ref:", 1)[1].split()[0]
            return AIMessage(
                content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref, "limit": 2})]
            )
        reply: AIMessage = scenario.policy(messages, tools)
        return reply

    return step


def test_with_tool_selection_before_it_the_model_can_read_the_refs_it_is_shown(
    scenario: Any,
) -> None:
    # the selector narrows the agent's tools to one per call, and ctxplugin's expand_ref is not
    # among them: listed after it, ctxplugin binds its own tools again where its view needs them
    engine = memory_engine()
    model = ScriptedChatModel(script=[reading_policy(scenario)] * 40, default=None)
    select = LLMToolSelectorMiddleware(model=selector(), max_tools=1)
    agent = create_agent(
        model,
        scenario.tools,
        checkpointer=InMemorySaver(),
        middleware=[select, ContextMiddleware(engine)],
    )
    config: Any = {"configurable": {"thread_id": "select"}}
    run_turns(agent, scenario.turns, config)
    showing_refs = [
        c
        for c in model.calls
        if any(isinstance(m, ToolMessage) and "ref:" in str(m.content) for m in c.messages)
    ]
    assert showing_refs, "big outputs should reach the model as refs"
    for call in showing_refs:
        assert "expand_ref" in call.tool_names, (
            f"a view showing refs without expand_ref bound: {call.tool_names}"
        )
    for call in model.calls:
        assert len(set(call.tool_names) - {"expand_ref", "load_tools"}) <= 1, (
            "the selection is kept"
        )
        assert_accepted(call)
    reads = [
        m
        for m in agent.get_state(config).values["messages"]
        if isinstance(m, ToolMessage) and m.name == "expand_ref"
    ]
    assert len(reads) >= 2 and all(
        "items 0–1 of 80" in str(m.content) or "lines 0–1 of 300" in str(m.content) for m in reads
    )


# ---------------------------------------------------------------- LLMToolEmulator

EMULATED = "\n".join(f"2026-11-22T10:00:{i % 60:02d}Z INFO emulated request id=em-{i:04d}" for i in range(300))


@pytest.mark.parametrize("order", ORDERS)
def test_with_a_tool_emulator_naming_its_tools_refs_read_the_stored_outputs(order: str, scenario: Any) -> None:
    # LLMToolEmulator() without tools= would emulate expand_ref too (made-up reads of a ref):
    # naming the agent's tools keeps ctxplugin's own real; what the emulator makes up is
    # stored like any output
    engine = memory_engine()
    model = ScriptedChatModel(script=[reading_policy(scenario)] * 40, default=None)
    emulator_model = ScriptedChatModel(default=EMULATED)
    emulate = LLMToolEmulator(tools=[t.name for t in scenario.tools], model=emulator_model)
    agent = create_agent(
        model, scenario.tools, checkpointer=InMemorySaver(), middleware=arrange(order, ContextMiddleware(engine), emulate)
    )
    config: Any = {"configurable": {"thread_id": f"emulate-{order}"}}
    run_turns(agent, scenario.turns, config)
    assert len(emulator_model.calls) == len(scenario.turns), "only the agent's own tools are emulated"
    reads = [m for m in agent.get_state(config).values["messages"] if isinstance(m, ToolMessage) and m.name == "expand_ref"]
    assert len(reads) == len(scenario.turns)
    assert all("lines 0–1 of 300" in str(m.content) and "em-0000" in str(m.content) for m in reads)
    for call in model.calls:
        assert_accepted(call)


# ---------------------------------------------------------------- ModelFallbackMiddleware

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="


@tool(response_format="content")
def screenshot(page: str) -> list[dict[str, Any]]:
    """Screenshot a page."""
    return [
        {"type": "text", "text": f"The {page} page, total 41.90 EUR"},
        {"type": "image", "base64": PNG, "mime_type": "image/png"},
    ]


def shot_policy(scenario: Any) -> Any:
    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        last = messages[-1]
        if last.type == "human" and last.text.startswith("shot"):
            return AIMessage(content="", tool_calls=[tool_call("screenshot", {"page": "checkout"})])
        reply: AIMessage = scenario.policy(messages, tools)
        return reply

    return step


def provider_model(
    base: type[Any], payloads: list[dict[str, Any]], reply: Any, **kwargs: Any
) -> Any:
    """``base`` (a provider's chat model) whose API is answered locally: each request body its
    own builder makes is kept in ``payloads``; ``reply`` None makes the API fail (overloaded)."""

    class Local(base):  # type: ignore[misc]
        def _generate(
            self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
        ) -> ChatResult:
            payloads.append(self._get_request_payload(messages, stop=stop, **kw))
            if reply is None:
                raise RuntimeError("529 overloaded")
            return ChatResult(generations=[ChatGeneration(message=reply(messages, []))])

    return Local(**kwargs)


def tool_images(payload: dict[str, Any]) -> int:
    """Images inside OpenAI Chat Completions tool messages (which its API refuses)."""
    return sum(PNG in json.dumps(m) for m in payload["messages"] if m.get("role") == "tool")


def test_with_model_fallback_before_it_each_model_gets_a_view_it_takes(scenario: Any) -> None:
    # Claude takes images in tool results, OpenAI's Chat Completions refuses them: listed after
    # the fallback middleware, each attempt is prepared for the model that makes it
    from langchain_anthropic import ChatAnthropic
    from langchain_openai import ChatOpenAI

    primary_sent: list[dict[str, Any]] = []
    fallback_sent: list[dict[str, Any]] = []
    primary = provider_model(
        ChatAnthropic, primary_sent, None, model="claude-sonnet-4-5", api_key="test-key"
    )
    fallback = provider_model(
        ChatOpenAI, fallback_sent, shot_policy(scenario), model="gpt-4o", api_key="test-key"
    )
    engine = memory_engine()
    agent = create_agent(
        primary,
        [*scenario.tools, screenshot],
        checkpointer=InMemorySaver(),
        middleware=[ModelFallbackMiddleware(fallback), ContextMiddleware(engine)],
    )
    config: Any = {"configurable": {"thread_id": "fallback"}}
    run_turns(agent, ["shot checkout", "flights SFO JFK", "shot checkout"], config)
    assert len(primary_sent) == len(fallback_sent) == 6
    assert [tool_images(p) for p in fallback_sent] == [0] * 6
    assert any(
        "41.90 EUR" in json.dumps(p) and "cannot take images" in json.dumps(p)
        for p in fallback_sent
    )
    assert PNG in json.dumps(primary_sent[-1]), "Claude is sent the screenshots"
    shots = [
        m
        for m in agent.get_state(config).values["messages"]
        if isinstance(m, ToolMessage) and m.name == "screenshot"
    ]
    assert len(shots) == 2 and all(PNG in json.dumps(m.content) for m in shots), (
        "the state keeps the images"
    )


# ---------------------------------------------------------------- limits, todo list, dynamic prompt

SYSTEM = "You are a travel agent. Quote flight numbers exactly."


@dynamic_prompt
def prompt_with_count(request: ModelRequest) -> str:
    return f"{SYSTEM} {len(request.messages)} messages so far."


def planning(scenario: Any) -> Any:
    def step(messages: list[BaseMessage], tools: list[dict[str, Any]]) -> AIMessage:
        last = messages[-1]
        if last.type == "human" and last.text.startswith("plan"):
            todos = [
                {"content": "search flights", "status": "in_progress"},
                {"content": "read the log", "status": "pending"},
            ]
            return AIMessage(content="", tool_calls=[tool_call("write_todos", {"todos": todos})])
        reply: AIMessage = scenario.policy(messages, tools)
        return reply

    return step


OTHERS: dict[str, Any] = {
    "tool call limit (end)": lambda: ToolCallLimitMiddleware(thread_limit=2, exit_behavior="end"),
    "tool call limit (continue)": lambda: ToolCallLimitMiddleware(
        tool_name="read_log", thread_limit=1
    ),
    "model call limit (end)": lambda: ModelCallLimitMiddleware(run_limit=1, exit_behavior="end"),
    "todo list": TodoListMiddleware,
    "dynamic prompt": lambda: prompt_with_count,
}


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("other", list(OTHERS))
def test_with_limits_todos_and_a_dynamic_prompt(order: str, other: str, scenario: Any) -> None:
    engine = memory_engine()
    model = ScriptedChatModel(script=[planning(scenario)] * 40, default=None)
    agent = create_agent(
        model,
        scenario.tools,
        system_prompt=SYSTEM,
        checkpointer=InMemorySaver(),
        middleware=arrange(order, ContextMiddleware(engine), OTHERS[other]()),
    )
    thread = f"{other}-{order}"
    config: Any = {"configurable": {"thread_id": thread}}
    run_turns(agent, ["plan the trip", *scenario.turns, "log payments"], config)
    for call in model.calls:
        assert_accepted(call, system=SYSTEM)
    state = agent.get_state(config).values["messages"]
    for result in tool_results(state):
        if result.name in scenario.big_tools and result.status == "success":  # not a blocked call
            ref = result.additional_kwargs["ctxplugin"]["ref"]
            assert engine.expand_ref(ref, scope=Scope(session_id=thread)) == result.content
    if other == "todo list":
        assert len(agent.get_state(config).values["todos"]) == 2
    if other.startswith("tool call limit"):
        assert any(
            m.status == "error" and "limit exceeded" in str(m.content) for m in tool_results(state)
        )
