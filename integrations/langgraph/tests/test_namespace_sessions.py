"""A namespaced agent's session never equals another thread's session, whatever the thread id and
the namespace hold: a client that picks the thread id ``"a/b"`` must not read what the agent
with namespace ``"b"`` stored on thread ``"a"``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextHooks, ContextMiddleware, current_scope
from ctxplugin_langgraph._scope import ScopeRule
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.tools import BaseTool, StructuredTool
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextEngine, Scope
from ctxplugin.testing import ScriptedChatModel, memory_engine, tool_call

SECRET = "K-77-SECRET"


def vault_tool(engine: ContextEngine) -> BaseTool:
    """A long output (stored as a ref) that also writes a fact in the agent's own scope."""

    def read_vault(vault: str) -> str:
        engine.facts.write(f"The vault code of {vault} is {SECRET}", key="vault_code", scope=current_scope())
        return json.dumps([{"row": i, "vault": vault, "code": f"{SECRET}-{i:04d}"} for i in range(400)])

    schema = {"type": "object", "properties": {"vault": {"type": "string"}}, "required": ["vault"]}
    return StructuredTool.from_function(func=read_vault, name="read_vault", description="Read a vault.", args_schema=schema)


def agent(engine: ContextEngine, model: ScriptedChatModel, namespace: str | None) -> Any:
    return create_agent(model, [vault_tool(engine)], system_prompt="You help.",
                        middleware=[ContextMiddleware(engine, namespace=namespace)], checkpointer=InMemorySaver())


def run(built: Any, thread: str) -> list[BaseMessage]:
    config: Any = {"configurable": {"thread_id": thread}}
    built.invoke({"messages": [{"role": "user", "content": "what is the vault code of the main vault?"}]}, config)
    return list(built.get_state(config).values["messages"])


def stored_ref(messages: list[BaseMessage]) -> str:
    ref: str = [m for m in messages if isinstance(m, ToolMessage)][-1].additional_kwargs["ctxplugin"]["ref"]
    return ref


@pytest.mark.parametrize(("first", "second"), [
    (("a/b", None), ("a", "b")),  # a thread id shaped like a namespaced session
    (("a", "b"), ("a/b", None)),
    (("a%2Fb", None), ("a/b", None)),  # an escaped-looking thread id
    (("a", "b/c"), ("a/b", "c")),  # namespaces holding "/"
    (("a%2Fb", "c"), ("a/b", "c")),
], ids=["thread-vs-namespace", "namespace-vs-thread", "escaped-vs-slash", "slash-in-namespace", "escaped-namespaced"])
def test_a_crafted_thread_id_reads_nothing_of_another_session(
    tmp_path: Path, first: tuple[str, str | None], second: tuple[str, str | None]
) -> None:
    engine = ContextEngine.embedded(tmp_path / "ctx")
    owner = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("read_vault", {"vault": "main"})]),
                                      AIMessage(content="Read.")])
    ref = stored_ref(run(agent(engine, owner, first[1]), first[0]))

    intruder = ScriptedChatModel(script=[AIMessage(content="", tool_calls=[tool_call("expand_ref", {"ref_id": ref})]),
                                         AIMessage(content="Done.")])
    state = run(agent(engine, intruder, second[1]), second[0])
    answer = [m for m in state if isinstance(m, ToolMessage) and m.name == "expand_ref"][-1]
    assert SECRET not in str(answer.content), "the other session's ref is refused"
    assert ref in str(answer.content) and "no such ref visible here" in str(answer.content), answer.content
    shown = "\n".join(str(m.content) for call in intruder.calls for m in call.messages)
    assert SECRET not in shown, "the other session's facts are not shown"


def session(thread: str, namespace: str | None) -> str:
    return ScopeRule(None, namespace)({"configurable": {"thread_id": thread}}).session_id


# few letters, "/" and "%" and the letters of their escapes (a blank thread id or namespace is
# refused, not named)
PART = (st.text(alphabet="ab/%2F5", min_size=1, max_size=8) | st.text(min_size=1)).filter(str.strip)
KEY = st.tuples(PART, st.none() | PART)


def lookalikes(thread: str, namespace: str | None) -> list[tuple[str, str | None]]:
    """Keys whose naive session id would equal that of ``(thread, namespace)``: the same text
    split at another "/", or with "/" written as its escape."""
    joined = thread if namespace is None else f"{thread}/{namespace}"
    found: list[tuple[str, str | None]] = [(joined, None), (joined.replace("/", "%2F"), None)]
    found += [(joined[:i], joined[i + 1:]) for i, char in enumerate(joined) if char == "/"]
    if namespace is not None:
        found.append((thread.replace("/", "%2F"), namespace))
    return [(t, n) for t, n in found if t.strip() and (n is None or n.strip())]


@st.composite
def key_pairs(draw: st.DrawFn) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
    first = draw(KEY)
    return first, draw(st.sampled_from(lookalikes(*first)) | KEY)


@settings(max_examples=1500, deadline=None)
@given(pair=key_pairs())
def test_thread_and_namespace_name_one_session_each(pair: tuple[tuple[str, str | None], tuple[str, str | None]]) -> None:
    first, second = pair
    if first != second:
        assert session(*first) != session(*second), (first, second)


@pytest.mark.parametrize("thread", ["thread-1", str(uuid.uuid4()), "user:42|chat 7", "tâche-été", "a.b_c~d"])
def test_ordinary_thread_ids_keep_their_session_ids(thread: str) -> None:
    # the sessions earlier versions stored data under stay the same, so that data is still read
    assert session(thread, None) == thread
    assert session(thread, "worker") == f"{thread}/worker"
    assert ScopeRule(None, "worker")({"configurable": {"thread_id": thread}}) == Scope(session_id=f"{thread}/worker")


def test_a_fixed_scope_is_the_hosts_own() -> None:
    fixed = Scope(session_id="team/planning", user_id="u1")
    assert ScopeRule(fixed)() == fixed, "kept as given without a namespace"
    assert ScopeRule(fixed, "b")().session_id == "team%2Fplanning/b"
    assert ScopeRule(lambda _config: fixed, "b%")().session_id == "team%2Fplanning/b%25"
    hooks = ContextHooks(memory_engine(), [], namespace="x/y")
    assert hooks.scope_rule({"configurable": {"thread_id": "t/1"}}).session_id == "t%2F1/x%2Fy"
