"""What one message is read for: its own text and tool-call arguments, whatever was read before."""

from __future__ import annotations

from langchain_core.messages import AIMessage

from ctxplugin._message_values import read


def test_a_call_is_read_for_its_own_arguments_after_a_message_whose_text_is_its_text_and_arguments() -> None:
    plain = AIMessage(content="Then see run_tests\nfix_bug_42")
    calling = AIMessage(
        content="Then see run_tests", tool_calls=[{"name": "edit", "args": {"path": "fix_bug_42\n"}, "id": "call_1"}]
    )
    assert read(plain).used == ()
    found = read(calling)
    assert found.used == ("fix_bug_42",)
    assert found.text == "Then see run_tests\nfix_bug_42\n"
