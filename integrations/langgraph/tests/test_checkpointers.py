"""``create_agent`` + ``ContextMiddleware`` resumes a thread after a restart: a new engine on the
same embedded path and a new agent continue the checkpointed conversation, and refs made
before the restart still expand. In memory (re-created objects) and on Postgres (a child
process runs the first turn and exits)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ctxplugin_langgraph import ContextMiddleware
from langchain.agents import create_agent
from langchain_core.messages import ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from ctxplugin import ContextCallbackHandler, ContextEngine, Scope

DSN = os.environ.get("CTXPLUGIN_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test")
CONFTEST = Path(__file__).with_name("conftest.py")


def agent_on(engine: ContextEngine, model: Any, saver: Any, scenario: Any) -> Any:
    return create_agent(model, scenario.tools, system_prompt="Be brief.",
                        middleware=[ContextMiddleware(engine)], checkpointer=saver)


def finish_after_restart(path: Path, saver: Any, thread: str, scenario: Any, first_calls: int) -> None:
    """Turns 2 and 3 on a new engine and a new agent; then check the whole thread."""
    engine = ContextEngine.embedded(path=path)
    model, handler = scenario.scripted(), ContextCallbackHandler()
    agent = agent_on(engine, model, saver, scenario)
    config: Any = {"configurable": {"thread_id": thread}, "callbacks": [handler]}
    before = agent.get_state(config).values["messages"]
    assert len(before) == 4, "the first turn is in the checkpoint"
    for turn in scenario.turns[1:]:
        agent.invoke({"messages": [("user", turn)]}, config)
    state = agent.get_state(config).values["messages"]
    # the output stored before the restart reaches the new model as its ref
    first_result = next(m for m in before if isinstance(m, ToolMessage))
    first_ref = first_result.additional_kwargs["ctxplugin"]["ref"]
    assert any(isinstance(m, ToolMessage) and first_ref in str(m.content) for m in model.calls[-1].messages)
    assert engine.expand_ref(first_ref, scope=Scope(session_id=thread)) == first_result.content
    assert first_calls == 2
    scenario.check(model, state, engine, Scope(session_id=thread), None, recorded_turns=2)
    assert len(handler.reports) == 4 and all(r.within_budget for r in handler.reports)


def test_in_memory_checkpointer_and_recreated_objects(tmp_path: Path, scenario: Any) -> None:
    saver, thread = InMemorySaver(), "mem-restart"
    first = ContextEngine.embedded(path=tmp_path / "ctx")
    model = scenario.scripted()
    agent_on(first, model, saver, scenario).invoke(
        {"messages": [("user", scenario.turns[0])]}, {"configurable": {"thread_id": thread}}
    )
    del first
    finish_after_restart(tmp_path / "ctx", saver, thread, scenario, len(model.calls))


CHILD = textwrap.dedent(
    """
    import importlib.util, json, sys
    from langchain.agents import create_agent
    from langgraph.checkpoint.postgres import PostgresSaver
    from ctxplugin import ContextEngine
    from ctxplugin_langgraph import ContextMiddleware

    conftest, path, dsn, thread = sys.argv[1:5]
    spec = importlib.util.spec_from_file_location("host_scenario", conftest)
    scenario = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(scenario)
    engine = ContextEngine.embedded(path=path)
    model = scenario.scripted()
    with PostgresSaver.from_conn_string(dsn) as saver:
        saver.setup()
        agent = create_agent(model, scenario.TOOLS, system_prompt="Be brief.",
                             middleware=[ContextMiddleware(engine)], checkpointer=saver)
        agent.invoke({"messages": [("user", scenario.TURNS[0])]}, {"configurable": {"thread_id": thread}})
    print(json.dumps({"calls": len(model.calls)}))
    """
)


@pytest.fixture
def postgres_saver() -> Iterator[Any]:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres is not reachable at {DSN}: {exc}")
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(DSN) as saver:
        saver.setup()
        yield saver


@pytest.mark.postgres
@pytest.mark.slow
def test_postgres_checkpointer_across_processes(tmp_path: Path, scenario: Any, postgres_saver: Any) -> None:
    thread = f"pg-restart-{uuid.uuid4().hex[:8]}"
    script = tmp_path / "first_turn.py"
    script.write_text(CHILD)
    try:
        done = subprocess.run(
            [sys.executable, str(script), str(CONFTEST), str(tmp_path / "ctx"), DSN, thread],
            capture_output=True, text=True, timeout=120, check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        first_calls = json.loads(done.stdout.strip().splitlines()[-1])["calls"]
        finish_after_restart(tmp_path / "ctx", postgres_saver, thread, scenario, first_calls)
    finally:
        postgres_saver.delete_thread(thread)


@pytest.mark.postgres
def test_checkpointers_block_of_the_page_runs_on_a_fresh_database(tmp_path: Path, scenario: Any,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    psycopg = pytest.importorskip("psycopg")
    try:
        psycopg.connect(DSN, connect_timeout=3).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"Postgres is not reachable at {DSN}: {exc}")
    page = (Path(__file__).resolve().parents[3] / "docs" / "hosts" / "create-agent.md").read_text(encoding="utf-8")
    section = page[page.index("\n## Checkpointers and restarts\n"):]
    block = section[section.index("```python\n") + 10 : section.index("```", section.index("```python\n") + 10)]
    schema = f"ctxplugin_docs_{uuid.uuid4().hex[:8]}"  # a database the saver has never seen
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA "{schema}"')
    dsn = f"{DSN}{'&' if '?' in DSN else '?'}options=-csearch_path%3D{schema}"
    code = block.replace('"postgresql://..."', repr(dsn)) + textwrap.indent(textwrap.dedent("""\
        agent.invoke({"messages": [("user", turn)]}, {"configurable": {"thread_id": "docs"}})
        state = agent.get_state({"configurable": {"thread_id": "docs"}}).values["messages"]
        """), "    ")
    monkeypatch.chdir(tmp_path)  # the block opens ContextEngine.embedded(path=".ctxplugin")
    namespace: dict[str, Any] = {"create_agent": create_agent, "ContextEngine": ContextEngine,
                                 "ContextMiddleware": ContextMiddleware, "model": scenario.scripted(),
                                 "tools": scenario.tools, "turn": scenario.turns[0]}
    try:
        exec(compile(code, "<create-agent.md>", "exec", dont_inherit=True), namespace)
    finally:
        with psycopg.connect(DSN, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
    assert len(namespace["state"]) >= 2 and namespace["state"][-1].type == "ai"
