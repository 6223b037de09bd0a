"""Zero-LLM extraction, provenance, and user extractors plugged in like a summarizer."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableLambda

from ctxplugin import ContextConfig, InvalidInputError
from ctxplugin._lru import text_key
from ctxplugin.config import FactsConfig
from ctxplugin.facts import (
    FactDraft,
    FactsLedger,
    MemoryFactStore,
    RuleExtractor,
    as_extractor,
    combine,
)
from ctxplugin.facts._text import sentences
from ctxplugin.facts.model import FactQuery
from ctxplugin.facts.rules import _READ
from ctxplugin.scope import Scope
from ctxplugin.testing import memory_engine

S = Scope(session_id="s1", user_id="u1")
DATA = Path(__file__).resolve().parents[2] / ".." / "shared" / "data"


def drafts(text: str) -> list[tuple[str, str | None, str]]:
    return [(d.kind, d.key, d.scope) for d in RuleExtractor().from_text(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("The data team is on Project Alpha.", [("fact", "data_team", "global")]),
        ("Actually, the data team moved to Project Beta.", [("fact", "data_team", "global")]),
        ("My address is 123 Main St", [("fact", "my_address", "global")]),
        ("I moved to 456 Oak Ave", [("fact", "my_address", "global")]),
        ("I prefer window seats.", [("preference", "pref_seats", "global")]),
        ("Max discount is 15%.", [("constraint", "max_discount", "global")]),
        ("We decided to use Postgres for the cache.", [("decision", "decision_cache", "global")]),
        ("Stock price is $100", [("metric", "stock_price", "global")]),
        ("Changed the deadline from Friday to Monday.", [("fact", "deadline", "global")]),
        ("Suppose the budget is $80k.", [("constraint", "budget", "hypothetical")]),
        ("Draft: the launch date is June 3.", [("fact", "launch_date", "draft")]),
        ("I need to change my flight to May 27.", [("task", None, "global")]),
        ("See https://example.com/docs/a for details.", [("link", None, "global")]),
        ("Sure, it's sofia_kim_7287.", [("entity", None, "global")]),
        ("Can you check order #W1234?", []),
        ("hello there", []),
    ],
)
def test_rules_find_kinds_keys_and_scopes(text: str, expected: list[tuple[str, str | None, str]]) -> None:
    assert drafts(text) == expected


def test_statements_about_the_same_subject_share_a_key() -> None:
    first = RuleExtractor().from_text("The meeting is on Tuesday at 2pm.")
    later = RuleExtractor().from_text("OK so the meeting moved to Thursday at 3pm.")
    assert first[0].key == later[0].key == "meeting"
    assert later[0].text == "The meeting moved to Thursday at 3pm."
    assert later[0].importance > first[0].importance, "corrections weigh more"


def test_numbered_subjects_are_different_subjects() -> None:
    facts = FactsLedger(MemoryFactStore(), FactsConfig())
    facts.ingest([
        HumanMessage("Requirement 1: IT infrastructure budget capped at $200,000", id="h1"),
        HumanMessage("Requirement 2: Customer data must remain in US data centers", id="h2"),
        HumanMessage("Phase 2 is 3 weeks.", id="h3"),
        HumanMessage("Phase 2 is now 5 weeks.", id="h4"),
    ], scope=S)
    current = {f.key: f.text for f in facts.store.find(FactQuery(reader=S, valid=True))}
    assert current["requirement_1"].endswith("capped at $200,000")
    assert current["requirement_2"].endswith("US data centers")
    assert current["phase_2"] == "Phase 2 is now 5 weeks."  # the same numbered subject still supersedes


@pytest.mark.parametrize(
    "text",
    [
        "Question 5: please describe the refund policy",
        "Question 5: describe the refund policy.",
        "Question 5: how do refunds work",
        "Q5: what is the budget for the offsite",
        "Request 2: tell me about the shipping times",
        "Task 3: summarize the quarterly report",
        "Step 2: open the settings page",
        "Order 5: can you check the status",
        "Budget: kindly review the spreadsheet",
        "Task 3: fix failed tests",
        "Step 2: check passed builds again",
        "Order 5: does it ship today",
        "Order 5: have you shipped it",
    ],
)
def test_a_label_before_a_request_or_a_question_states_nothing(text: str) -> None:
    # "Question 5:" names what is asked; what follows asks, it does not state what holds, so a
    # later "Question 5: ..." is another question, not a new value of the same subject
    assert drafts(text) == []
    assert RuleExtractor().from_tool(text, "forms") == []


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("Order 5: shipped", "order_5"),
        ("Budget: $500", "budget"),
        ("Deadline: Friday", "deadline"),
        ("Question 5: yes", "question_5"),
        ("Question 5: the refund window is 30 days", "question_5"),
        ("Step 2: done", "step_2"),
        ("Task 3: assigned to Bob", "task_3"),
        ("Ticket 12: open since Monday", "ticket_12"),
        ("Decision: use Postgres for the cache", "decision"),
        ("Requirement 2: Customer data must remain in US data centers", "requirement_2"),
        # an action named by its noun, then how it stands: a status, not an instruction
        ("Step 3: build failed", "step_3"),
        ("Step 1: test passed", "step_1"),
        ("Task 5: review pending", "task_5"),
        ("Task 2: fix applied to staging", "task_2"),
        ("Step 4: install done.", "step_4"),
        # a polite instruction that gives the labelled value
        ("Deadline: please submit by Friday", "deadline"),
        ("Budget: please keep it under $500", "budget"),
        # "do it", "have it done" tell what to do; "does it", "have you" ask
        ("Decision: do it in-house", "decision"),
        ("Plan: have it delivered Friday", "plan"),
    ],
)
def test_a_label_before_a_value_still_keys_it(text: str, key: str) -> None:
    assert [d.key for d in RuleExtractor().from_text(text)] == [key]


def test_a_status_from_a_tool_after_an_action_label_is_keyed() -> None:
    assert [d.key for d in RuleExtractor().from_tool("Task: email sent", "mailer")] == ["task"]


def test_a_labelled_request_replaces_no_earlier_one() -> None:
    facts = FactsLedger(MemoryFactStore(), FactsConfig())
    facts.ingest([
        HumanMessage("Question 5: please describe the refund policy", id="h1"),
        HumanMessage("Question 5: please list the shipping options", id="h2"),
        HumanMessage("Order 5: processing", id="h3"),
        HumanMessage("Order 5: shipped", id="h4"),
    ], scope=S)
    assert facts.current("question_5", scope=S) is None
    assert [f.text for f in facts.history("order_5", scope=S)] == ["Order 5: processing", "Order 5: shipped"]
    assert facts.current("order_5", scope=S).text == "Order 5: shipped"  # type: ignore[union-attr]


def test_instead_of_names_the_replaced_value() -> None:
    (draft,) = RuleExtractor().from_text("Let's use MySQL instead of Postgres.")
    assert (draft.kind, draft.replaces) == ("decision", "Postgres")


def test_a_sentence_is_read_in_each_voice_on_its_own() -> None:
    # sentences are read once each: what a tool's line gave does not stand in for the user's
    # words, nor the other way round, in either order
    advice = "Use Valkey instead of Memcached for the session cache."
    assert RuleExtractor().from_tool(advice, "bash") == []
    (said,) = RuleExtractor().from_text(advice)
    assert (said.kind, said.replaces) == ("decision", "Memcached for the session cache")
    assert RuleExtractor().from_tool(advice, "bash") == []
    assert RuleExtractor().from_text(advice) == [said]


def test_an_extractor_of_its_own_reads_a_sentence_its_own_way() -> None:
    # a subclass that reads sentences otherwise is not given what the rules read before
    class Shouting(RuleExtractor):
        def _sentence(self, raw: str, voice: str) -> list[FactDraft]:
            return [FactDraft(text=raw.upper(), kind="fact")]

    sentence = "The offsite is in Lisbon in May."
    (plain,) = RuleExtractor().from_text(sentence)
    assert plain.text != sentence.upper()
    assert [d.text for d in Shouting().from_text(sentence)] == [sentence.upper()]
    assert RuleExtractor().from_text(sentence) == [plain]


def test_json_tool_results_become_keyed_records() -> None:
    payload = {"reservation_id": "OI5L9G", "origin": "MCO", "flights": [{"flight_number": "HAT017"}], "cabin": "business"}
    (record,) = RuleExtractor().from_tool(json.dumps(payload), "get_reservation_details")
    assert record.key == "reservation:OI5L9G"
    assert "HAT017" in record.text and "cabin=business" in record.text
    assert "oi5l9g" in record.tags and "hat017" in record.tags
    many = [{"flight_number": f"HAT{i:03d}", "price": i} for i in range(9)]
    found = RuleExtractor().from_tool(json.dumps(many), "search_direct_flight")
    assert [d.key for d in found[:5]] == [None] * 5, "search results are not keyed"
    assert found[-1].text == "direct_flight: 9 results"


def test_per_message_cap_and_non_user_messages() -> None:
    text = " ".join(f"Item {i} is at https://example.com/{i}." for i in range(20))
    assert len(RuleExtractor(max_per_message=5)(HumanMessage(text))) == 5
    assert RuleExtractor()(AIMessage("The budget is 50k.")) == []


def test_ingest_records_provenance_and_authority() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    human = HumanMessage("The budget is 50k.", id="msg-1")
    captured = ToolMessage(
        "order W1 status: shipped", tool_call_id="call-9", id="tool-msg",
        additional_kwargs={"ctxplugin": {"ref": "ref:order:0123456789abcdef"}},
    )
    plain_tool = ToolMessage("order W2 status: pending", tool_call_id="call-10")
    facts = ledger.ingest([human, AIMessage("noted"), captured, plain_tool], scope=S, authority="manager")
    refs = {f.text: (f.source.type, f.source.ref, f.authority, f.memory_type) for f in facts}
    assert refs["The budget is 50k."] == ("conversation", "msg-1", "manager", "user")
    assert refs["order W1 status: shipped"] == ("tool", "ref:order:0123456789abcdef", "tool", "organizational")
    assert refs["order W2 status: pending"][1] == "call-10"
    assert ledger.ingest([human], scope=S) == [], "a repeated statement is not stored twice"


def test_preferences_are_kept_for_the_user_across_sessions() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    ledger.ingest([HumanMessage("I prefer window seats.")], scope=Scope(session_id="a", user_id="u"))
    ledger.ingest([HumanMessage("Actually I prefer aisle seats.")], scope=Scope(session_id="b", user_id="u"))
    hits = ledger.search("seat preference", scope=Scope(session_id="c", user_id="u"))
    assert [h.fact.text for h in hits] == ["I prefer aisle seats."]


@pytest.mark.parametrize(
    "text", ["I want to pay at most $200.", "I need to spend no more than $200 on this change."]
)
def test_a_limit_the_user_sets_on_an_amount_is_a_budget_constraint(text: str) -> None:
    # not a task: the user states a limit the agent must keep to
    (draft,) = RuleExtractor().from_text(text)
    assert (draft.kind, draft.constraint_type) == ("constraint", "budget")


def test_a_preference_is_keyed_by_what_it_is_about_not_by_its_last_word() -> None:
    # "... on this booking, I already have coverage" is about insurance, not about a card
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    scope = Scope(session_id="a", user_id="u")
    (refusal,) = ledger.ingest(
        [
            HumanMessage(
                "I don't want travel insurance on this booking, I already have coverage through my card."
            )
        ],
        scope=scope,
    )
    assert refusal.key == "pref_insurance"
    ledger.ingest([HumanMessage("Actually I want travel insurance after all.")], scope=scope)
    current = [f.text for f in ledger.store.find(FactQuery(reader=scope, valid=True))]
    assert current == ["I want travel insurance after all."], "the refusal is replaced, not shown beside"


def test_typographic_apostrophes_are_read_like_ascii_ones() -> None:
    # phones and word processors type "don’t", "let’s": the same statements as "don't", "let's"
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    written = ledger.ingest(
        [
            HumanMessage("I don’t want travel insurance."),
            HumanMessage("Let’s go with the morning flight."),
        ],
        scope=Scope(session_id="a", user_id="u"),
    )
    assert [(f.kind, f.key, f.text) for f in written] == [
        ("preference", "pref_insurance", "I don’t want travel insurance."),
        ("decision", None, "Let’s go with the morning flight."),
    ]
    hits = ledger.search("travel insurance", scope=Scope(session_id="b", user_id="u"))
    assert [h.fact.text for h in hits] == ["I don’t want travel insurance."]
    ledger.ingest(
        [HumanMessage("I want travel insurance after all.")],
        scope=Scope(session_id="c", user_id="u"),
    )
    hits = ledger.search("travel insurance", scope=Scope(session_id="d", user_id="u"))
    assert [h.fact.text for h in hits] == ["I want travel insurance after all."]


# ---------------------------------------------------------------- user extractors
def sync_extractor(message: BaseMessage) -> list[dict[str, Any]]:
    return [{"text": f"Summary: {message.content}", "key": "summary", "kind": "fact"}]


async def async_extractor(message: BaseMessage) -> str:
    return "- Budget is 40k\n- Deadline is Friday"


@pytest.mark.parametrize(
    ("extractor", "expected"),
    [
        (sync_extractor, ["Summary: hi"]),
        (async_extractor, ["Budget is 40k", "Deadline is Friday"]),
        (RunnableLambda(lambda m: AIMessage(content='[{"text": "From a chain", "kind": "decision"}]')), ["From a chain"]),
        (RunnableLambda(lambda m: [FactDraft(text="A draft"), "a string"]), ["A draft", "a string"]),
        (lambda m: None, []),
    ],
)
def test_user_extractors_plug_in_sync_async_or_runnable(extractor: Any, expected: list[str]) -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig(), extractor=extractor)
    facts = ledger.ingest([HumanMessage("hi", id="m1")], scope=S)
    assert [f.text for f in facts] == expected
    assert all(f.source.ref == "m1" for f in facts)


async def test_async_extractor_works_from_inside_a_running_loop() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig(), extractor=async_extractor)
    assert len(ledger.ingest([HumanMessage("hi")], scope=S)) == 2


def test_combine_runs_rules_and_a_model() -> None:
    extract = combine(RuleExtractor(), sync_extractor)
    found = extract(HumanMessage("The budget is 50k."))
    assert [d.key for d in found] == ["budget", "summary"]


@pytest.mark.parametrize("bad", [42, [{"text": 1}], [{"text": "x", "colour": "red"}], [{"text": "x", "kind": "opinion"}]])
def test_bad_extractor_output_is_a_clear_error(bad: Any) -> None:
    extract = as_extractor(lambda m: bad)
    with pytest.raises(InvalidInputError):
        extract(HumanMessage("hi"))


def test_extractor_must_be_callable() -> None:
    with pytest.raises(ValueError, match="callable"):
        as_extractor(42)  # type: ignore[arg-type]


# ---------------------------------------------------------------- real recordings
def test_tau_bench_conversation_gives_grounded_facts() -> None:
    path = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
    if not path.exists():
        pytest.skip(f"shared data not found at {path}")
    record = json.loads(path.read_text())[3]
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    messages: list[BaseMessage] = []
    for i, m in enumerate(record["traj"]):
        if m["role"] == "user":
            messages.append(HumanMessage(m["content"], id=f"m{i}"))
        elif m["role"] == "tool":
            messages.append(ToolMessage(m["content"], tool_call_id=m["tool_call_id"], name=m.get("name")))
    facts = ledger.ingest(messages, scope=S)
    assert any(f.key == "reservation:obut9v" for f in facts)
    # the reservation the task acts on is found by its id, and by its route
    assert ledger.search("reservation OBUT9V", scope=S)[0].fact.key == "reservation:obut9v"
    assert all(len(f.text) <= 500 for f in facts)


@pytest.mark.parametrize(
    "text",
    [
        "```python\nfrom pydicom import Dataset\nds = Dataset()\nds.PatientName = 'SomeName'\n```",
        "key = tree2.body[3].value",
        "ds = Dataset(); pn = ds.PatientName; print(len(pn))",
        "Key: DictUnpack(), Value: Name.X(name='X')",
        "    def bool_value(self, context=None):",
        "if result == expected: return True",
        # listings and fragments from a coding agent's runs
        "171-        self, x: np.ndarray, y: np.ndarray, check_duplicates: bool = False",
        "215-        # Ensure dimensions are properly set",
        "   566\t    A uniform grid is defined by the point spacings for each axis",
        "</pr_description>",
        "<pr_description",
        "    c.first_name,",
        "for alias_info in to_check:",
        '"""Implementation of Rule L060."""',
    ],
)
def test_source_code_states_no_facts(text: str) -> None:
    assert RuleExtractor().from_text(text) == []
    assert RuleExtractor().from_tool(text, "bash") == []


def test_prose_around_a_code_block_still_states_facts() -> None:
    text = "The data team is on Project Alpha.\n```python\nteam = 'beta'\n```\nThe deadline is Friday."
    found = {(kind, key) for kind, key, _ in drafts(text)}
    assert ("fact", "data_team") in found
    assert any(key == "deadline" for _, key in found)
    assert not any(key == "team" for _, key in found)


@pytest.mark.parametrize(
    "line",
    [
        "ERROR: connection refused on port 5432",
        "L031: Avoid using aliases in join condition",
        "Test 2: Tuples with mixed fields",
        "bash: line 1: sqlfluff: command not found",
        "Test 5 PASSED: Tuple with DateTime and other fields works",
        "E ModuleNotFoundError: No module named 'pytz'",
        "AttributeError: 'List' object has no attribute 'opts'",
        "pydicom/jsonrep.py: The decoded PersonName object or an empty string.",
    ],
)
def test_log_lines_of_a_tool_are_not_keyed(line: str) -> None:
    assert all(draft.key is None for draft in RuleExtractor().from_tool(line, "bash"))
    # the same words from the user still state a keyed value
    if line.startswith("L031"):
        assert RuleExtractor().from_text(line)[0].key == "l031"


@pytest.mark.parametrize(
    "line",
    [
        "Installing collected packages: lazy-object-proxy, wrapt",
        "Downloading pygments-2.20.0-py3-none-any.whl.metadata (2.5 kB)",
        "Successfully installed wrapt-2.1.2",
        "Requirement already satisfied: numpy in /usr/lib/python3/site-packages (1.26.4)",
    ],
)
def test_an_installers_progress_lines_state_no_facts(line: str) -> None:
    assert RuleExtractor().from_tool(line, "bash") == []


def test_a_tools_advice_supersedes_nothing() -> None:
    lint = "L: 19 | P: 5 | L060 | Use 'COALESCE' instead of 'NVL'."
    assert all(draft.replaces is None for draft in RuleExtractor().from_tool(lint, "bash"))
    (said,) = RuleExtractor().from_text("Use COALESCE instead of NVL.")
    assert said.replaces == "NVL"


@pytest.mark.parametrize(
    ("text", "key"),
    [("The order status is shipped.", "order_status"), ("Deadline: Friday 14 March", "deadline"), ("Status: shipped", "status")],
)
def test_labelled_state_from_a_tool_is_still_keyed(text: str, key: str) -> None:
    (draft,) = RuleExtractor().from_tool(text, "order_lookup")
    assert draft.key == key


def test_traceback_frames_state_no_facts() -> None:
    # a real failing import from a coding agent's run: the frames say where it failed, not what holds
    output = (
        "Traceback (most recent call last):\n"
        '  File "/testbed/test_rectilinear_issue.py", line 1, in <module>\n'
        "    import pyvista as pv\n"
        '  File "/testbed/pyvista/__init__.py", line 10, in <module>\n'
        "    from pyvista.plotting import *\n"
        '  File "/testbed/pyvista/plotting/charts.py", line 15, in <module>\n'
        "ModuleNotFoundError: No module named 'matplotlib'\n"
        "Grid dimensions: 3 x 4 x 5\n"
    )
    texts = [draft.text for draft in RuleExtractor().from_tool(output, "bash")]
    assert texts == ["Grid dimensions: 3 x 4 x 5"]
    pasted = [d.text for d in RuleExtractor().from_text(output)]
    assert "Grid dimensions: 3 x 4 x 5" in pasted
    assert not [t for t in pasted if "line " in t or "Traceback" in t], "nor when a user pastes them"


@pytest.mark.parametrize(
    ("text", "voice", "expected"),
    [
        # a name in code, a value, a command's own prefix: kept as written
        ("field_obj.load_only = True", "tool", "field_obj.load_only = True"),
        ("grep: src/marshmallow/fields.py: binary file matches", "tool", "grep: src/marshmallow/fields.py: binary file matches"),
        ("Actually, ord-4412 is the order to refund.", "user", "ord-4412 is the order to refund"),
        # a name written in mixed case (a product, a function): capitalising it names another
        ("iPhone 15 is out of stock", "tool", "iPhone 15 is out of stock"),
        ("eBay order 7781 was refunded", "user", "eBay order 7781 was refunded"),
        ("Actually, getUser is the function to fix in auth.py.", "user", "getUser is the function to fix in auth.py"),
        # a tool's line is quoted as the tool wrote it: its first word may be a command or a field
        ("line 2 id=ID00002 value 6", "tool", "line 2 id=ID00002 value 6"),
        ("the order status is shipped.", "tool", "the order status is shipped"),
        ("npm ERR! missing script: build", "tool", "missing script: build"),
        # prose still reads as a sentence
        ("Actually, the data team moved to Project Beta.", "user", "The data team moved to Project Beta"),
    ],
)
def test_a_fact_keeps_the_case_of_a_value_it_starts_with(text: str, voice: str, expected: str) -> None:
    texts = [d.text.rstrip(".") for d in RuleExtractor().from_text(text, voice=voice)]
    assert texts == [expected]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # a request names a limit word without stating a limit
        ("Look up the discount policy page.", []),
        ("Please check the budget sheet.", []),
        # an amount in it is a limit the user sets
        ("Show me flights under $500 max.", [("constraint", None, "global")]),
        ("The budget is at most 50k.", [("constraint", "budget", "global")]),
    ],
)
def test_a_request_is_not_a_constraint_unless_it_sets_an_amount(text: str, expected: list[tuple[str, str | None, str]]) -> None:
    assert drafts(text) == expected


def test_a_tools_diagnostic_about_a_long_path_is_not_a_keyed_value() -> None:
    # "grep: <path>: ..." reports on one file; a later one about another file replaces nothing
    line = "grep: src/marshmallow/__pycache__/fields.cpython-311.pyc: binary file matches"
    assert [(d.kind, d.key) for d in RuleExtractor().from_text(line, voice="tool")] == [("entity", None)]
    assert [(d.kind, d.key) for d in RuleExtractor().from_text("status: confirmed", voice="tool")] == [("fact", "status")]


SOURCE = (
    "class PersonName:\n"
    "    def __init__(self, val, encodings=None, original_string=None):\n"
    "        # The decoded PersonName object or an empty string.\n"
    "        self.original_string = original_string\n"
    "        ret = self\n"
    "        self._components = None\n"
    "\n"
    "    def __str__(self):\n"
    "        return self.original_string\n"
    "\n"
    "    def __eq__(self, other):\n"
    "        return str(self) == other\n"
)
REPORT = (
    "============================= test session starts ==============================\n"
    "platform linux -- Python 3.11.5, pytest-9.0.3, pluggy-1.6.0 -- /opt/miniconda3/bin/python\n"
    "cachedir: .pytest_cache\n"
    "rootdir: /testbed\n"
    "collected 3 items\n"
    "\n"
    "pydicom/tests/test_valuerep.py::TestPersonName::test_last_first PASSED   [ 33%]\n"
    "pydicom/tests/test_valuerep.py::TestPersonName::test_copy PASSED         [ 66%]\n"
    "pydicom/tests/test_valuerep.py::TestPersonName::test_three_component PASSED [100%]\n"
)
DIFF = (
    "diff --git a/pydicom/valuerep.py b/pydicom/valuerep.py\n"
    "index e992f7872..3ac2ac0d4 100644\n"
    "--- a/pydicom/valuerep.py\n"
    "+++ b/pydicom/valuerep.py\n"
    "@@ -744,6 +744,9 @@ class PersonName:\n"
    "     def __str__(self):\n"
    "+    def __contains__(self, x):\n"
    "+        return x in self.__str__()\n"
)


@pytest.mark.parametrize("output", [SOURCE, REPORT, DIFF], ids=["source", "test report", "diff"])
def test_code_a_test_report_or_a_diff_from_a_tool_states_no_facts(output: str) -> None:
    # read line by line, each gives statements ("rootdir: /testbed", "Ret = self") that are not state
    assert any(RuleExtractor().from_text(line, voice="user") for line in output.splitlines())
    assert RuleExtractor().from_tool(output, "bash") == []
    # a summary's shape is taken as given: prose a summary found to be code states nothing either
    prose = "The order status is shipped. Deadline: Friday 14 March."
    assert RuleExtractor().from_tool(prose, "bash", shape="code") == []
    assert RuleExtractor().from_tool(prose, "bash", shape="text") != []


def test_a_captured_command_output_is_read_by_its_summarys_shape() -> None:
    engine = memory_engine(ContextConfig())
    scope = Scope(session_id="shapes")
    # a long source listing behind a command wrapper: summarized as code, no facts read
    listing = "<returncode>0</returncode>\n<output>\n" + SOURCE * 60 + "</output>"
    _, report = engine.capture_with_report(ToolMessage(listing, tool_call_id="c1", name="bash"), scope)
    assert report.ref_id is not None and report.facts_extracted == 0
    # a long page of prose from the same tool is read
    page = "The order status is shipped. Deadline: Friday 14 March.\n" + "Nothing else of note was found here today.\n" * 300
    _, report = engine.capture_with_report(ToolMessage(page, tool_call_id="c2", name="fetch"), scope)
    assert report.ref_id is not None and report.facts_extracted >= 1


@pytest.mark.parametrize(
    "line",
    [
        "/opt/miniconda3/bin/python: No module named pytest",
        "Error during parsing: Dropped elements in sequence matching!",
        "Payment failed for order OBUT9V: card declined",
        "Build failed: 3 errors in src/app.ts",
        "Fatal: repository 'https://example.com/x.git' not found",
    ],
)
def test_a_tools_report_of_a_failure_states_no_facts(line: str) -> None:
    # what happened when the tool ran, kept in its summary and the history; as a fact it would
    # still say "No module named pytest" after the agent installed it
    assert RuleExtractor().from_tool(line, "bash") == []
    # pasted by the user, the same words are what the user states
    assert [draft.text for draft in RuleExtractor().from_text(line)] == [line]
    # the output's other lines are read as before
    assert RuleExtractor().from_tool(f"{line}\nThe order status is shipped.", "bash")


def test_an_over_long_sentence_is_read_from_its_start_only() -> None:
    # a pasted blob with no sentence break (10 MB of minified data) is one "sentence": the rules
    # read its start, as the fact they make of it is clipped there anyway; what lies megabytes on
    # (here a comparison that reads as code) neither costs a scan per rule nor changes the reading
    text = "My budget is 500 EUR " + "z" * 10_000_000 + " if x == y"
    drafts = RuleExtractor()(HumanMessage(content=text))
    assert [(d.key, d.kind) for d in drafts] == [("my_budget", "constraint")]
    assert drafts[0].text.startswith("My budget is 500 EUR")


SEARCH_RESULTS = """1. Python 3.13 release notes - docs.python.org
URL: https://docs.python.org/3/whatsnew/3.13.html
Snippet: Python 3.13 was released on October 7, 2024.
2. Free-threaded CPython - peps.python.org
URL: https://peps.python.org/pep-0703/
Snippet: PEP 703 makes the GIL optional."""


def test_a_label_repeated_in_one_tool_output_keys_nothing() -> None:
    # one label per record ("Snippet:" of each search result) names parallel records, not a
    # value that changed: neither snippet may replace the other
    drafts = RuleExtractor().from_tool(SEARCH_RESULTS)
    snippets = [d for d in drafts if d.text.startswith("Snippet:")]
    assert len(snippets) == 2
    assert all(d.key is None for d in snippets)


def test_every_record_of_one_tool_output_stays_current() -> None:
    scope = Scope(session_id="search-1")
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    call = AIMessage("", tool_calls=[{"name": "search", "args": {"q": "python 3.13"}, "id": "c1"}], id="a1")
    ledger.ingest([call, ToolMessage(SEARCH_RESULTS, tool_call_id="c1", id="t1")], scope=scope)
    texts = {f.text for f in ledger.store.find(FactQuery(reader=scope, valid=True, scopes=("global", "session")))}
    assert {"Snippet: Python 3.13 was released on October 7, 2024.", "Snippet: PEP 703 makes the GIL optional."} <= texts
    assert ledger.superseded(scope=scope) == []


def test_a_label_said_once_in_a_tool_output_still_keys_its_value() -> None:
    drafts = RuleExtractor().from_tool("Order #A-4411 status: shipped\nCarrier: UPS\nTracking number: 1Z999AA10123456784")
    assert {d.key for d in drafts} >= {"carrier", "tracking_number"}


def test_a_label_said_again_on_the_next_line_is_one_value_moving_on() -> None:
    drafts = RuleExtractor().from_tool("Build status: started\nBuild status: finished with status 'done'")
    assert [d.key for d in drafts] == ["build_status", "build_status"], "the later line replaces the earlier"


@pytest.mark.parametrize(
    ("text", "stated", "value"),
    [
        # a value at the end of a sentence, the next one begun in lower case (as people type)
        ("My email is alice@example.com. show orders", "My email is alice@example.com.", "alice@example.com"),
        ("The version is 1.2.3. then deploy it", "The version is 1.2.3.", "1.2.3"),
        ("My log is at /var/log/app.log. check it", "My log is at /var/log/app.log.", "/var/log/app.log"),
        ("The order id is ORD-12. ship it today", "The order id is ORD-12.", "ord-12"),
        ("The docs are at https://x.io/a/b. read them", "The docs are at https://x.io/a/b.", "https://x.io/a/b"),
        # an abbreviation before a value ends no sentence
        ("Use e.g. ORD-123 for the refund.", "Use e.g. ORD-123 for the refund.", "ord-123"),
        ("Ask Dr. Smith about ORD-99.", "Ask Dr. Smith about ORD-99.", "ord-99"),
        ("Compare v2 vs. v3-beta first.", "Compare v2 vs. v3-beta first.", "v3-beta"),
        ("Refund order no. 4411-B today.", "Refund order no. 4411-B today.", "4411-b"),
    ],
)
def test_a_stated_value_is_kept_whole_in_its_sentence(text: str, stated: str, value: str) -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    facts = ledger.ingest([HumanMessage(text)], scope=S)
    assert [f.text for f in facts if value in f.tags] == [stated]
    assert all(f.text in {stated, stated.rstrip(".")} for f in facts), "nothing of the next sentence glued on"


@pytest.mark.parametrize(
    "text",
    ["Pack shirts, socks etc. and a coat.", "Steps: 1. open the app, 2. pick ORD-7.", "Bring the red one, i.e. the one from ORD-7.", "Wait... then retry."],
)
def test_a_point_inside_a_sentence_before_lower_case_ends_nothing(text: str) -> None:
    assert list(sentences(text)) == [text]


@pytest.mark.parametrize("output", ["55.0", "55.0\n", "-12.5", "$1,234.50", "12%"])
def test_a_tool_output_that_is_a_value_alone_states_no_fact(output: str) -> None:
    # "55.0" from a calculator names no subject: as a fact it would float in a facts block
    # without what it is; the output stays in the history beside the call that asked for it
    assert RuleExtractor()(ToolMessage(output, tool_call_id="c1", name="calculate")) == []


def test_a_value_with_its_subject_from_a_tool_is_still_read() -> None:
    assert [d.key for d in RuleExtractor().from_tool("Total: 55.0", "calculate")] == ["total"]
    assert [d.text for d in RuleExtractor().from_tool("W1234", "create_order")] == ["W1234"], "an identifier alone is still one"


def test_what_the_rules_read_of_a_sentence_is_kept_under_a_key_the_collector_leaves_alone() -> None:
    # a key holding the extractor's class stays an object the garbage collector goes through
    sentence = "The offsite moved to Porto in June."
    RuleExtractor().from_text(sentence)
    gc.collect()
    (key,) = [k for k in list(_READ._entries) if hash(sentence) in k or text_key(sentence) in k]
    assert not gc.is_tracked(key)
