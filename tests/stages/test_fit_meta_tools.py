"""An agent without tools of its own (a chat assistant) is bound ``expand_ref`` only when its
view shows a ref: a model that cannot bind tools, or a provider that refuses them for the model
asked, keeps working once ctxplugin is added, on a short chat and a long one."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import SQLiteCASStore
from ctxplugin.testing import facts_block, memory_engine
from ctxplugin.tokens import content_text

SCOPE = Scope(session_id="chat")
TURNS = ["My name is Alice and my booking is BK-7781.", "I live in Lisbon and my budget is 900 EUR.",
         *(f"Tell me about topic {i} in detail please, for order W{1000 + i}." for i in range(20))]
ANSWER = "Sure. " + "Here is a long answer with details. " * 60


def _chat(engine: ContextEngine) -> list[list[BaseMessage]]:
    """The views of a chat of :data:`TURNS`, prepared as a host with the meta-tools would."""
    history: list[BaseMessage] = [HumanMessage("hi", id="h-hi"), AIMessage("Hello!", id="a-hi")]
    views = []
    for i, turn in enumerate(TURNS):
        history.append(HumanMessage(turn, id=f"h{i}"))
        prepared = engine.prepare(history, tools=engine.tools_for_model(), scope=SCOPE)
        assert prepared.tools == [], f"call {i} binds {prepared.report.tools_bound} for a view showing no ref"
        assert prepared.report.tools_bound == []
        views.append(prepared.messages)
        history.append(AIMessage(ANSWER, id=f"a{i}"))
    return views


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_chat_without_tools_is_bound_none(mode: str) -> None:
    views = _chat(memory_engine(ContextConfig(mode=mode)))
    assert any(facts_block(view) for view in views)
    # nothing bound, so no lookup pair either: facts and notes go after the header
    assert not any(isinstance(m, AIMessage) and m.tool_calls for view in views for m in view)


def test_a_chat_whose_view_shows_a_ref_is_bound_expand_ref(tmp_path: Path) -> None:
    budget = {"total": 2000, "header": 400, "history": 1000, "facts": 200, "summaries": 300}
    engine = ContextEngine(config=ContextConfig(budget=budget), cas=SQLiteCASStore(tmp_path / "cas.db"))
    pasted = "Here is the whole log:\n" + "\n".join(f"12:00 worker INFO request id=req-{i:06d} ok" for i in range(3000))
    prepared = engine.prepare([HumanMessage(pasted, id="u1")], tools=engine.tools_for_model(), scope=SCOPE)
    assert re.search(r"ref:user:[0-9a-f]{16}", str(prepared.messages[-1].content))
    assert prepared.report.tools_bound == ["expand_ref"] and len(prepared.tools) == 1


def test_a_create_agent_chat_runs_on_a_model_that_cannot_bind_tools(tmp_path: Path) -> None:
    from ctxplugin_langgraph import ContextMiddleware
    from langchain.agents import create_agent
    from langgraph.checkpoint.memory import InMemorySaver

    model = GenericFakeChatModel(messages=itertools.cycle([AIMessage(ANSWER)]))  # bind_tools raises NotImplementedError
    for mode in ("whole", "compact"):
        engine = ContextEngine.embedded(path=tmp_path / mode, config=ContextConfig(mode=mode))
        agent = create_agent(model, [], system_prompt="You are a chat assistant.", middleware=[ContextMiddleware(engine)],
                             checkpointer=InMemorySaver())
        for turn in TURNS:
            agent.invoke({"messages": [{"role": "user", "content": turn}]}, {"configurable": {"thread_id": mode}})
        engine.close()


@pytest.mark.parametrize("mode", ["whole", "compact"])
def test_a_view_binding_nothing_speaks_of_no_expand_ref(mode: str) -> None:
    # the notes for condensed or dropped exchanges said that expand_ref reads stored outputs:
    # a tool the model was not given, which it may then call or name in its answer
    views = _chat(memory_engine(ContextConfig(mode=mode)))
    notes = [m for view in views for m in view if "earlier exchanges" in content_text(m.content) or "context note" in content_text(m.content)]
    assert notes, "the chat is long enough for notes"
    assert not [content_text(m.content) for m in notes if "expand_ref" in content_text(m.content)]
