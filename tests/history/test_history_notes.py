"""Context notes list what the conversation said, never words scraped from schemas or markup."""

from __future__ import annotations

import json
import re

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage

from ctxplugin import ContextConfig, Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

SCHEMA = json.dumps(
    {
        "tools": [
            {
                "name": "lookup_customer",
                "description": "Find a customer by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"customer_id": {"type": "string", "description": "e.g. CUS-40917"}},
                    "required": ["customer_id"],
                },
            }
        ]
    }
)
PAGE = "<html><body><div class=\"alert\" data_role=\"banner\">Order ORD-77120 shipped</div></body></html>"
STRUCTURE = {
    "type", "string", "object", "properties", "required", "parameters", "description", "tools", "name",
    "div", "/div", "/body", "/html", "class", "alert", "data_role", "banner",
}


def conversation(turns: int) -> list[BaseMessage]:
    out: list[BaseMessage] = [SystemMessage("You are a support assistant."), HumanMessage("Help me with customer CUS-40917.")]
    for i in range(turns):
        call = f"c{i}"
        name, content = ("load_tools", SCHEMA) if i == 0 else ("open_page", PAGE) if i == 1 else ("note", "nothing new here, all as before. " * 12)
        args = {"customer_id": "CUS-40917"} if i < 2 else {}
        out.append(AIMessage("", tool_calls=[{"id": call, "name": name, "args": args}]))
        out.append(ToolMessage(content, tool_call_id=call, name=name))
    out.append(AIMessage("Done."))
    out.append(HumanMessage("What did we find?"))
    return out


def test_notes_never_list_json_keys_schema_words_or_markup_names() -> None:
    config = ContextConfig(
        budget={"total": 2500, "header": 600, "history": 1600, "facts": 100, "summaries": 600},
        history={"max_tokens": 300, "verbatim_exchanges": 1, "trimmed_exchanges": 1, "block_size": 2},
        facts={"enabled": False},
    )
    prepared = memory_engine(config).prepare(conversation(24), scope=Scope(session_id="notes"))
    notes = [content_text(m.content) for m in prepared.messages if content_text(m.content).startswith("[context note")]
    assert notes, "old exchanges were condensed into notes"
    listed: set[str] = set()
    for note in notes:
        body = re.fullmatch(r"\[context note: [^:]*: (.*)\]", note, re.S)
        assert body is not None, note
        listed.update(v.strip() for v in body.group(1).split(" | "))
    assert not listed & STRUCTURE, f"structure words in notes: {listed & STRUCTURE}"
    assert {"lookup_customer", "ORD-77120"} <= listed, "what was said stays"
