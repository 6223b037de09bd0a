"""resolve_call and the load_tools meta-tool."""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from langchain_core.tools import InjectedToolCallId, StructuredTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel

from ctxplugin.tokens import get_counter
from ctxplugin.tools import (
    LOAD_TOOLS_NAME,
    ToolRegistry,
    close_matches,
    make_load_tools_tool,
    resolve_call,
    signature,
)

COUNTER = get_counter()[0]


class Flight(BaseModel):
    flight_number: str
    date: str


@tool
def book_reservation(user_id: str, cabin: Literal["economy", "business"], flights: list[Flight],
                     total_baggages: int = 0) -> str:
    """Book a reservation."""
    return "booked"


@tool
def cancel_reservation(reservation_id: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Cancel the whole reservation."""
    return tool_call_id


BAGGAGE = {"type": "function", "function": {
    "name": "update_reservation_baggages",
    "description": "Update the baggage information of a reservation.",
    "parameters": {"type": "object", "properties": {
        "reservation_id": {"type": "string"},
        "total_baggages": {"type": "integer"},
        "payment": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
        "kind": {"type": "string", "enum": ["cabin", "checked"]},
    }, "required": ["reservation_id", "total_baggages"]},
}}


def registry(*tools: Any) -> ToolRegistry:
    reg = ToolRegistry(COUNTER)
    reg.register_all(tools or [book_reservation, cancel_reservation, BAGGAGE])
    return reg


def test_valid_arguments_run() -> None:
    reg = registry()
    args = {"user_id": "mia_li_3668", "cabin": "economy", "flights": [{"flight_number": "HAT001", "date": "2024-05-01"}]}
    assert resolve_call("book_reservation", args, reg).kind == "run"
    assert resolve_call("update_reservation_baggages", {"reservation_id": "X", "total_baggages": 2}, reg).kind == "run"


def test_injected_arguments_are_not_expected_from_the_model() -> None:
    assert resolve_call("cancel_reservation", {"reservation_id": "NO6JO3"}, registry()).kind == "run"


def test_invalid_pydantic_arguments_get_the_schema_and_a_retry_instruction() -> None:
    reg = registry()
    res = resolve_call("book_reservation", {"user_id": "mia", "cabin": "first", "flights": [{"date": "x"}]}, reg)
    assert res.kind == "schema"
    assert any(e.startswith("cabin:") for e in res.errors)
    assert any(e.startswith("flights.0.flight_number:") for e in res.errors)
    schema_line = res.message.split("(bound from your next step on):\n", 1)[1].splitlines()[0]
    assert json.loads(schema_line)["name"] == "book_reservation"
    assert json.loads(schema_line)["parameters"]["required"] == ["user_id", "cabin", "flights"]
    assert res.message.rstrip().endswith("Call book_reservation again with arguments that match it.")


def test_invalid_json_schema_arguments_are_listed() -> None:
    reg = registry()
    res = resolve_call("update_reservation_baggages",
                       {"reservation_id": "X", "total_baggages": "two", "payment": {}, "kind": "hand"}, reg)
    assert res.kind == "schema"
    assert "total_baggages: 'two' is not of type 'integer'" in res.errors
    assert "payment: 'id' is a required property" in res.errors
    assert any(e.startswith("kind:") and "'hand'" in e for e in res.errors)
    missing = resolve_call("update_reservation_baggages", {}, reg)
    assert "(arguments): 'reservation_id' is a required property" in missing.errors


def test_arguments_that_are_not_an_object_are_rejected() -> None:
    res = resolve_call("update_reservation_baggages", ["X", 2], registry())
    assert res.kind == "schema" and "must be a JSON object" in res.errors[0]


def test_unknown_names_list_close_matches() -> None:
    reg = registry()
    res = resolve_call("cancel_reservaton", {}, reg)
    assert res.kind == "unknown" and res.matches[0] == "cancel_reservation"
    assert "no tool named 'cancel_reservaton'" in res.message and "Did you mean: cancel_reservation" in res.message
    assert close_matches("baggage", reg.names()) == ["update_reservation_baggages"]
    nothing = resolve_call("zzz", {}, reg)
    assert nothing.matches == [] and "Use a name from the tool directory." in nothing.message


def test_names_that_differ_only_by_case_are_all_suggested() -> None:
    # MCP servers name tools freely: "GetWeather" and "getweather" can both be tools
    names = ["GetWeather", "getweather", "get_weather_alerts"]
    assert close_matches("getWeather", names) == ["GetWeather", "getweather", "get_weather_alerts"]
    assert close_matches("getWeather", list(reversed(names))) == ["GetWeather", "getweather", "get_weather_alerts"]
    assert close_matches("GETWEATHER", names, n=2) == ["GetWeather", "getweather"]


def test_the_hosts_tool_is_checked_rather_than_the_registrys_version() -> None:
    reg = registry()
    newer = StructuredTool.from_function(lambda reservation_id, note: note, name="cancel_reservation",
                                         description="Cancel with a note.",
                                         args_schema={"type": "object", "required": ["reservation_id", "note"],
                                                      "properties": {"reservation_id": {"type": "string"},
                                                                     "note": {"type": "string"}}})
    assert resolve_call("cancel_reservation", {"reservation_id": "X"}, reg).kind == "run"
    assert resolve_call("cancel_reservation", {"reservation_id": "X"}, reg, tool=newer).kind == "schema"
    assert [e.version for e in reg.versions("cancel_reservation")] == [1, 2]


def test_schemas_that_cannot_validate_let_the_call_run() -> None:
    broken = {"type": "function", "function": {"name": "odd", "description": "Odd.",
                                               "parameters": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}}
    remote = {"type": "function", "function": {"name": "remote", "description": "Remote ref.",
                                               "parameters": {"$ref": "https://example.invalid/schema.json"}}}
    reg = registry(broken, remote)
    assert resolve_call("odd", {"x": 1}, reg).kind == "run"
    assert resolve_call("remote", {"x": 1}, reg).kind == "run"


def test_signature_is_compact() -> None:
    reg = registry()
    book = reg.get("book_reservation")
    assert book is not None
    assert signature(book) == ('book_reservation(user_id: string, cabin: "economy"|"business", '
                               "flights: object[], total_baggages?: integer)")
    bags = reg.get("update_reservation_baggages")
    assert bags is not None and 'kind?: "cabin"|"checked"' in signature(bags)


def test_load_tools_does_not_repeat_a_huge_name_back() -> None:
    meta = make_load_tools_tool(registry())
    out = meta.invoke({"names": ["z" * 100_000, "bok_reservation"]})
    assert "(100,000 characters): no such tool" in out and len(out) < 600
    assert "did you mean book_reservation" in out


def test_load_tools_confirms_names_and_suggests_matches() -> None:
    reg = registry()
    meta = make_load_tools_tool(reg)
    assert meta.name == LOAD_TOOLS_NAME
    spec = convert_to_openai_tool(meta)["function"]
    assert spec["parameters"]["required"] == ["names"]
    assert spec["parameters"]["properties"]["names"]["type"] == "array"
    out = meta.invoke({"names": ["cancel_reservation", "book_reservation", "cancel_reservation", "bok_reservation"]})
    lines = out.splitlines()
    assert lines[0].startswith("Loaded;")
    assert lines[1] == "- cancel_reservation(reservation_id: string)"
    assert lines[2].startswith("- book_reservation(user_id: string")
    assert lines[3] == "Not loaded:"
    assert lines[4].startswith("- bok_reservation: no such tool; did you mean book_reservation")
    assert len(lines) == 5
    assert "exact names" in meta.invoke({"names": []})
    assert reg.meta_tool() is reg.meta_tool()


def test_load_tools_takes_names_written_as_one_string() -> None:
    # a model asked for a list often writes names="a, b": the next call binds them either way
    # (the plan reads the string), so the tool answers for them rather than failing validation
    meta = make_load_tools_tool(registry())
    out = meta.invoke({"names": "cancel_reservation, book_reservation"})
    assert out.splitlines()[:2] == ["Loaded; these tools are bound with their full schemas from your next step on:",
                                    "- cancel_reservation(reservation_id: string)"]
    assert "- book_reservation(user_id: string" in out
    assert meta.invoke({"names": "cancel_reservation"}) == meta.invoke({"names": ["cancel_reservation"]})
    assert "exact names" in meta.invoke({"names": " "})


def test_load_tools_given_one_tools_whole_name_as_a_string_loads_that_tool() -> None:
    # names="find flights" was split on its space and answered for "find" and "flights"
    spaced = {"type": "function", "function": {"name": "find flights", "description": "Find flights.",
              "parameters": {"type": "object", "properties": {"origin": {"type": "string"}}, "required": ["origin"]}}}
    meta = make_load_tools_tool(registry(book_reservation, cancel_reservation, spaced))
    loaded = "Loaded; these tools are bound with their full schemas from your next step on:"
    assert meta.invoke({"names": "find flights"}).splitlines() == [loaded, "- find flights(origin: string)"]
    assert meta.invoke({"names": " find flights "}) == meta.invoke({"names": ["find flights"]})
    # a string that is no tool's name still lists names
    out = meta.invoke({"names": "cancel_reservation book_reservation"})
    assert "- cancel_reservation(reservation_id: string)" in out and "- book_reservation(user_id: string" in out
    assert "- find: no such tool" in meta.invoke({"names": "find, flights"})


def test_guessed_argument_names_do_not_run_even_when_all_parameters_are_optional() -> None:
    @tool
    def search_orders(query: str = "", limit: int = 10) -> str:
        """Search orders."""
        return query

    free_form = {"type": "function", "function": {"name": "log_event", "description": "Log anything.",
                                                  "parameters": {"type": "object", "properties": {"kind": {"type": "string"}},
                                                                 "additionalProperties": True}}}
    reg = registry(search_orders, BAGGAGE, free_form)
    res = resolve_call("search_orders", {"q": "shoes"}, reg)
    assert res.kind == "schema" and res.errors == ["q: unexpected argument (expected: limit, query)"]
    assert resolve_call("search_orders", {"query": "shoes"}, reg).kind == "run"
    extra = resolve_call("update_reservation_baggages", {"reservation_id": "X", "total_baggages": 1, "bags": 1}, reg)
    assert extra.kind == "schema" and extra.errors[0].startswith("bags: unexpected argument")
    assert resolve_call("log_event", {"kind": "x", "anything": 1}, reg).kind == "run"


def test_load_tools_answer_stays_short_for_a_long_list_of_unknown_names() -> None:
    # a model that lists thousands of guessed names gets a bounded answer, not one line per name
    meta = make_load_tools_tool(registry())
    out = meta.invoke({"names": ["cancel_reservation", *(f"guess_{i}" for i in range(3000))]})
    lines = out.splitlines()
    assert "- cancel_reservation(reservation_id: string)" in lines
    assert len(lines) < 40 and len(out) < 3000
    assert lines[-1] == "… and 2980 more names that are not tools; use names from the tool directory."


def test_load_tools_without_names_answers_what_the_argument_should_be() -> None:
    # a model may send names=null, leave names out, or give another type: the call is answered
    # as a tool result, not failed with a validation error from inside the tool
    meta = make_load_tools_tool(registry())
    for args in ({"names": None}, {}, {"names": 7}, {"names": {"tool": "cancel_reservation"}}, {"tool_names": ["x"]}):
        message = meta.invoke({"name": LOAD_TOOLS_NAME, "args": args, "id": "call_1", "type": "tool_call"})
        assert message.tool_call_id == "call_1", args
        assert 'load_tools(names=["tool_name"])' in message.content and "exact names" in message.content, args
    assert convert_to_openai_tool(meta)["function"]["parameters"]["required"] == ["names"], "the schema still asks for names"
    loaded = meta.invoke({"names": ["cancel_reservation", 7, None]})
    assert loaded.splitlines()[1] == "- cancel_reservation(reservation_id: string)"
