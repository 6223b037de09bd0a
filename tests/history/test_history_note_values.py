"""What a note may list of one message: values, never prose or markup read as one."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage

from ctxplugin.history._note_values import _values


def listed(message: AIMessage | ToolMessage) -> set[str]:
    first, rest = _values(message, {})
    return {value for _, value in (*first, *rest)}


def test_prose_between_two_backtick_spans_is_not_a_value() -> None:
    # `in` is too short to be read as a quoted value: its closing backtick would open one that
    # ends at the next span's opening backtick
    message = AIMessage("The `in` operator. When `'S' in pn` is executed, Python first looks for `__contains__` in pydicom/valuerep.py.")
    values = listed(message)
    assert "operator. When" not in values
    assert "is executed, Python first looks for" not in values
    assert "pydicom/valuerep.py" in values


def test_a_value_quoted_in_backticks_stays_when_prose_between_spans_says_it_too() -> None:
    message = AIMessage("Run `make test` then `make lint`; the tests call `load_config`.")
    assert {"make test", "make lint", "load_config"} <= listed(message)


def test_the_closing_tags_a_command_output_is_wrapped_in_are_not_values() -> None:
    output = ToolMessage("<returncode>0</returncode>\n<output>\nsrc/app/main.py:12: Rule_L031\n</output>", tool_call_id="c1", name="bash")
    values = listed(output)
    assert not {"/returncode", "/output"} & values
    assert {"src/app/main.py", "Rule_L031"} <= values


def test_the_ids_of_a_record_a_tool_returned_come_first_its_other_values_after() -> None:
    record = ToolMessage(
        '{"payment_id": "credit_card_9525117", "reservation_id": "BOH180", "city": "San Diego", "amount": 5662}',
        tool_call_id="c1",
        name="get_reservation_details",
    )
    first, rest = _values(record, {})
    assert {"credit_card_9525117", "BOH180"} <= {value for _, value in first}
    assert "5662" in {value for _, value in rest}
    text = ToolMessage("found credit_card_9525117 in the log", tool_call_id="c2", name="bash")
    assert "credit_card_9525117" not in {value for _, value in _values(text, {})[0]}, "a text output's words stay after"


def test_a_name_between_two_backtick_spans_stays_a_value() -> None:
    assert "parse_grammar" in listed(AIMessage("Both `a` parse_grammar `b` are called."))
