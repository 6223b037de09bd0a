"""How a user takes back, corrects and passes on values over several turns — "never mind, keep
the original", "make that the 24th", "I meant Boston not Austin", "don't use my Visa card, use
the Mastercard", two people's seats in one sentence, someone else's words — as the model sees
them on the next call of a real embedded engine: the outdated marks of the history, what the
ledger holds as current, and the facts block.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery
from ctxplugin.testing import facts_block

TRIP = Scope(session_id="trip-1", user_id="traveller")


def chat(*turns: str) -> list[BaseMessage]:
    """A support chat: the user's ``turns``, each answered, then the user's "go ahead"."""
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
    for i, turn in enumerate(turns):
        messages.append(HumanMessage(turn, id=f"h{i}"))
        messages.append(AIMessage(f"Noted ({i}).", id=f"a{i}"))
    messages.append(HumanMessage("OK, please go ahead.", id="last"))
    return messages


def prepared_turns(engine: ContextEngine, messages: list[BaseMessage]) -> tuple[dict[str, str], str]:
    """The user messages of the last prepared view by id, and its facts block; each prefix of
    the conversation is prepared in turn, as an agent would."""
    ends = [i + 1 for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for end in ends:
        prepared = engine.prepare(messages[:end], scope=TRIP)
    view = {str(m.id): str(m.content) for m in prepared.messages if isinstance(m, HumanMessage)}
    return view, facts_block(prepared.messages)


def current(engine: ContextEngine, *, scopes: tuple[str, ...] = ("global", "session")) -> list[str]:
    """The statements the ledger holds in force for the trip."""
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=TRIP, valid=True, scopes=scopes)))


def current_keys(engine: ContextEngine, *, scopes: tuple[str, ...] = ("global", "session")) -> dict[str | None, str]:
    found = engine.facts.store.find(FactQuery(reader=TRIP, valid=True, scopes=scopes))
    return {f.key: f.text for f in found}


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.mark.parametrize(
    ("first", "correction", "old", "new"),
    [
        ("My destination is Austin.", "I meant Boston not Austin.", "Austin", "Boston"),
        ("My destination is Austin.", "We meant to say Boston not Austin.", "Austin", "Boston"),
        ("I'd prefer to pay with my Visa card.", "Don't use my Visa card, use the Mastercard.", "Visa", "Mastercard"),
        ("I'd like the 6am flight.", "Never book the 6am flight, book the 9am one.", "6am", "9am"),
    ],
)
def test_a_correction_naming_what_it_rejects_replaces_it(engine: ContextEngine, first: str, correction: str, old: str, new: str) -> None:
    view, block = prepared_turns(engine, chat(first, correction))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == correction
    assert first not in current(engine)
    assert correction in current(engine)
    assert first not in block


def test_a_value_refused_without_another_replaces_nothing(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("I'd prefer to pay with my Visa card.", "Don't use the app, it keeps crashing."))
    assert view["h0"] == "I'd prefer to pay with my Visa card."
    assert "I'd prefer to pay with my Visa card." in current(engine)


def test_two_statements_in_one_sentence_are_replaced_one_at_a_time(engine: ContextEngine) -> None:
    view, block = prepared_turns(engine, chat("Anna's seat is 12A and Tom's seat is 12B.", "Actually Tom's seat is 14C."))
    assert view["h0"].startswith("[outdated: tom_seat is now: Tom's seat is 14C.]"), view["h0"]
    keys = current_keys(engine)
    assert keys["tom_seat"] == "Tom's seat is 14C."
    assert "12A" in keys["anna_seat"], "Anna's seat still stands"
    assert not any("12B" in text for text in current(engine))
    assert "12B" not in block


def test_when_a_reservation_departs_is_replaced_and_its_arrival_kept(engine: ContextEngine) -> None:
    turns = (
        "Reservation QW12ER departs on May 22.",
        "Reservation QW12ER arrives on May 23.",
        "Reservation QW12ER departs on May 24.",
    )
    view, block = prepared_turns(engine, chat(*turns))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == turns[1], "the arrival is another fact"
    assert current(engine) == sorted(turns[1:])
    assert "May 22" not in block


def test_a_departure_without_a_time_sets_nothing(engine: ContextEngine) -> None:
    prepared_turns(engine, chat("The data team left the project.", "The data team left the building."))
    assert not [k for k in current_keys(engine) if k and "departure" in k]


@pytest.mark.parametrize(
    "relayed",
    [
        "My manager said the hotel stay is 3 nights.",
        "Our travel agent told me the hotel stay is 3 nights.",
        "Anna thinks the hotel stay is 3 nights.",
    ],
)
def test_what_someone_else_said_is_a_draft_about_its_subject(engine: ContextEngine, relayed: str) -> None:
    view, block = prepared_turns(engine, chat(relayed))
    assert view["h0"] == f"[draft: not decided] {relayed}"
    drafts = current_keys(engine, scopes=("draft",))
    assert drafts == {"hotel_stay": relayed}, "keyed by what it is about, not by who said it"
    assert not current(engine), "not the user's own statement"
    assert "3 nights" not in block


def test_the_users_own_word_after_a_relayed_one_is_current(engine: ContextEngine) -> None:
    prepared_turns(engine, chat("My manager said the hotel stay is 3 nights.", "The hotel stay is 4 nights."))
    assert current_keys(engine) == {"hotel_stay": "The hotel stay is 4 nights."}


@pytest.mark.parametrize(
    ("first", "change", "back"),
    [
        ("I'd like an aisle seat.", "Actually, make it a window seat.", "Never mind, keep the original."),
        ("The meeting is on Tuesday.", "Actually, the meeting is on Thursday.", "Sorry, go back to Tuesday for the meeting."),
        ("My seat is 12A.", "Actually, my seat is 14C.", "Keep the original seat 12A."),
        ("My budget is $500.", "Actually, my budget is $700.", "Hmm, switch it back to the previous one."),
    ],
)
def test_going_back_makes_the_earlier_value_current_again(engine: ContextEngine, first: str, change: str, back: str) -> None:
    view, block = prepared_turns(engine, chat(first, change, back))
    assert view["h0"] == first, "current again: not outdated"
    assert view["h1"].startswith("[outdated:"), view["h1"]
    assert view["h2"] == back
    texts = current(engine)
    assert first in texts
    assert not [t for t in texts if t in change], "the value taken back is not current"
    assert change not in block


def test_going_back_after_two_changes_finds_the_value_named(engine: ContextEngine) -> None:
    turns = (
        "The meeting is on Tuesday.",
        "Actually, the meeting is on Thursday.",
        "Change of plans: the meeting is on Friday.",
        "Sorry, go back to Tuesday for the meeting.",
    )
    view, _ = prepared_turns(engine, chat(*turns))
    assert view["h0"] == turns[0]
    assert view["h1"].startswith("[outdated: meeting is now: The meeting is on Tuesday.]"), view["h1"]
    assert view["h2"].startswith("[outdated:"), view["h2"]
    assert current_keys(engine)["meeting"] == "The meeting is on Tuesday."


def test_going_back_with_nothing_changed_states_nothing(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("I'd like an aisle seat.", "Never mind, keep the original."))
    assert view["h0"] == "I'd like an aisle seat."
    assert current(engine) == ["I'd like an aisle seat."]


def test_going_back_read_again_by_a_new_process_changes_nothing(tmp_path: Path) -> None:
    messages = chat("I'd like an aisle seat.", "Actually, make it a window seat.", "Never mind, keep the original.")
    prepared_turns(ContextEngine.embedded(tmp_path / "ctx", ContextConfig()), messages)
    again = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    view, _ = prepared_turns(again, messages)
    assert view["h0"] == "I'd like an aisle seat."
    assert sorted(f.text for f in again.facts.store.find(FactQuery(reader=TRIP, valid=True))) == ["I'd like an aisle seat."]


@pytest.mark.parametrize("later", ["Was the meeting on Tuesday before?", "Hmm, the meeting on Tuesday, you said?"])
def test_a_user_message_after_the_change_is_not_marked_by_it(engine: ContextEngine, later: str) -> None:
    view, _ = prepared_turns(engine, chat("The meeting is on Tuesday.", "Actually, the meeting is on Thursday.", later))
    assert view["h0"].startswith("[outdated: meeting is now: The meeting is on Thursday.]")
    assert view["h2"] == later, "said after the change: it asks about it, it is not stale"


@pytest.mark.parametrize(
    ("first", "correction", "value"),
    [
        ("The departure date is May 23.", "Actually make that the 24th.", "24th"),
        ("The departure date is May 23.", "Make that May 24.", "May 24"),
        ("My budget is $500.", "Make it $700.", "$700"),
    ],
)
def test_a_new_value_alone_replaces_the_latest_value_of_its_type(engine: ContextEngine, first: str, correction: str, value: str) -> None:
    view, block = prepared_turns(engine, chat("I need to change reservation QW12ER.", first, correction))
    assert view["h1"].startswith("[outdated:"), view["h1"]
    assert first not in current(engine)
    key = next(k for k, t in current_keys(engine).items() if value in t)
    assert key is not None and key in view["h1"], "the new value answers for the old one's key"
    assert first not in block


def test_a_new_value_alone_leaves_values_of_other_types(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("The departure date is May 23.", "Make it $700."))
    assert view["h0"] == "The departure date is May 23."
    assert "The departure date is May 23." in current(engine)


@pytest.mark.parametrize(
    ("first", "correction", "later"),
    [
        ("My destination is Austin.", "I meant Boston not Austin.", "My destination is Denver."),
        ("I'd prefer to pay with my Visa card.", "Don't use my Visa card, use the Mastercard.", "I'd rather pay with my Amex card."),
        ("I'd prefer an economy seat.", "Business, not economy.", "I'd prefer a premium seat."),
    ],
)
def test_a_correction_is_replaced_in_turn_by_the_next_value(engine: ContextEngine, first: str, correction: str, later: str) -> None:
    view, block = prepared_turns(engine, chat(first, correction, later))
    assert view["h1"].startswith("[outdated:"), view["h1"]
    assert later in current(engine)
    assert correction not in current(engine), "the corrected value answers for the key the next one replaces"
    assert correction not in block


def test_when_a_meeting_starts_is_a_new_time_for_the_meeting(engine: ContextEngine) -> None:
    turns = ("The meeting is on Tuesday at 2pm.", "The meeting starts at 3pm.", "The meeting is on Friday at 4pm.")
    view, _ = prepared_turns(engine, chat(*turns))
    assert view["h0"].startswith("[outdated: meeting is now:"), view["h0"]
    assert view["h1"].startswith("[outdated: meeting"), view["h1"]
    assert current_keys(engine) == {"meeting": "The meeting is on Friday at 4pm."}


@pytest.mark.parametrize(
    ("first", "correction", "value"),
    [
        ("The deadline is Friday.", "Actually, Monday.", "Monday"),
        ("My budget is $500.", "Sorry, $700.", "$700"),
        ("The standup is at 9am.", "No, 10am.", "10am"),
        ("The departure date is May 23.", "Correction: the 24th.", "24th"),
    ],
)
def test_a_value_alone_after_a_correcting_word_replaces_the_latest_value_of_its_type(
    engine: ContextEngine, first: str, correction: str, value: str
) -> None:
    view, block = prepared_turns(engine, chat(first, correction))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == correction
    assert first not in current(engine)
    assert any(value in text for text in current(engine))
    assert first not in block


@pytest.mark.parametrize("then", ["Monday works for me too.", "Monday.", "Thanks, Monday."])
def test_a_value_alone_without_a_correcting_word_replaces_nothing(engine: ContextEngine, then: str) -> None:
    view, _ = prepared_turns(engine, chat("The deadline is Friday.", then))
    assert view["h0"] == "The deadline is Friday."
    assert "The deadline is Friday." in current(engine)


@pytest.mark.parametrize(
    ("first", "change"),
    [
        ("The meeting is on Tuesday at 2pm.", "Actually, move the meeting to Thursday."),
        ("The meeting is on Tuesday at 2pm.", "Please reschedule the meeting for Friday at 10am."),
        ("The launch is on May 3.", "Push the launch to May 10."),
        ("My budget is $500.", "Change my budget to $700."),
    ],
)
def test_asking_to_move_a_thing_to_a_new_value_replaces_its_old_value(engine: ContextEngine, first: str, change: str) -> None:
    view, block = prepared_turns(engine, chat(first, change))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == change
    assert first not in current(engine)
    assert first not in block


def test_asking_to_move_another_thing_leaves_the_old_value(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("The meeting is on Tuesday at 2pm.", "Move the standup to Thursday."))
    assert view["h0"] == "The meeting is on Tuesday at 2pm."
    assert "The meeting is on Tuesday at 2pm." in current(engine)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("Final: the launch date is May 5.", "Final: the hotel is the Hilton."),
        ("Confirmed: the venue is Hall B.", "Confirmed: the caterer is Acme."),
        ("Day 1: the hotel is the Hilton.", "Day 2: the hotel is the Marriott."),
        ("Anna: my seat is 12A.", "Tom: my seat is 14C."),
    ],
)
def test_statements_under_a_label_are_about_their_own_subjects(engine: ContextEngine, first: str, then: str) -> None:
    view, _ = prepared_turns(engine, chat(first, then))
    assert view["h0"] == first, "another statement under the same label, or the same subject under another"
    assert sorted(current(engine)) == sorted([first, then])


def test_a_labelled_statement_is_replaced_by_the_next_under_its_label(engine: ContextEngine) -> None:
    view, block = prepared_turns(engine, chat("Final: the launch date is May 5.", "Final: the launch date is May 9."))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert current(engine) == ["Final: the launch date is May 9."]
    assert "May 5" not in block


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("Option A: the hotel is the Hilton.", "Option B: the hotel is the Marriott."),
        ("Plan A is the train.", "Plan B is the bus."),
    ],
)
def test_things_named_by_a_letter_are_different_subjects(engine: ContextEngine, first: str, then: str) -> None:
    view, _ = prepared_turns(engine, chat(first, then))
    assert view["h0"] == first
    assert sorted(current(engine)) == sorted([first, then])


def test_a_thing_named_by_a_letter_is_replaced_by_its_own_next_value(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("Plan A is the train.", "Plan B is the bus.", "Plan A is the ferry."))
    assert view["h0"].startswith("[outdated: plan_a is now:"), view["h0"]
    assert sorted(current(engine)) == ["Plan A is the ferry.", "Plan B is the bus."]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My budget is $500.", "The budget is $700."),
        ("The budget is $500.", "My budget is now $700."),
        ("Our deadline is Friday.", "The deadline is Monday."),
    ],
)
def test_the_users_own_thing_and_the_thing_are_one_subject(engine: ContextEngine, first: str, then: str) -> None:
    view, block = prepared_turns(engine, chat(first, then))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert first not in current(engine)
    assert then.replace("now ", "") in " ".join(current(engine)).replace("now ", "")
    assert first not in block


def test_the_users_own_thing_with_a_value_of_another_type_is_kept(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("My budget is $500.", "The budget is flexible."))
    assert view["h0"] == "My budget is $500."
    assert "My budget is $500." in current(engine)


@pytest.mark.parametrize(
    ("supposed", "adopted"),
    [
        ("What if the venue was Hall C?", "OK, let's do that."),
        ("Suppose the venue is Hall C.", "Yes, let's go with that."),
        ("What if the venue were Hall C?", "Sounds good, do it."),
    ],
)
def test_a_hypothetical_taken_up_is_the_new_value(engine: ContextEngine, supposed: str, adopted: str) -> None:
    view, block = prepared_turns(engine, chat("The venue is Hall B.", supposed, adopted))
    assert view["h0"].startswith("[outdated: venue is now:"), view["h0"]
    assert "Hall C" in view["h0"]
    assert "The venue is Hall B." not in current(engine)
    assert "Hall C" in current_keys(engine)["venue"]
    assert "Hall B" not in block


@pytest.mark.parametrize("then", ["OK, let's do that.", "Let's go with that."])
def test_taking_up_with_no_hypothetical_before_changes_nothing(engine: ContextEngine, then: str) -> None:
    view, _ = prepared_turns(engine, chat("The venue is Hall B.", then))
    assert view["h0"] == "The venue is Hall B."
    assert current_keys(engine)["venue"] == "The venue is Hall B."


def test_a_hypothetical_let_go_stays_one(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("The venue is Hall B.", "What if the venue was Hall C?", "No, let's not do that."))
    assert view["h0"] == "The venue is Hall B."
    assert current_keys(engine)["venue"] == "The venue is Hall B."


def test_taking_up_read_again_by_a_new_process_changes_nothing(tmp_path: Path) -> None:
    messages = chat("The venue is Hall B.", "What if the venue was Hall C?", "OK, let's do that.")
    prepared_turns(ContextEngine.embedded(tmp_path / "ctx", ContextConfig()), messages)
    again = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    view, _ = prepared_turns(again, messages)
    assert view["h0"] == "[outdated: venue is now: The venue was Hall C.] The venue is Hall B."
    assert current_keys(again) == {"venue": "The venue was Hall C."}


def test_taking_up_after_another_statement_takes_up_nothing(engine: ContextEngine) -> None:
    turns = ("The venue is Hall B.", "What if the venue was Hall C?", "The caterer is Acme.", "OK, let's do that.")
    view, _ = prepared_turns(engine, chat(*turns))
    assert view["h0"] == "The venue is Hall B."
    assert current_keys(engine)["venue"] == "The venue is Hall B."


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("I want a window seat.", "Actually, make it an aisle seat."),
        ("We want a king room.", "Make it a twin room."),
        ("I like the window seat.", "Switch it to an aisle seat."),
    ],
)
def test_a_choice_replaces_the_one_thing_wanted_before(engine: ContextEngine, first: str, then: str) -> None:
    view, block = prepared_turns(engine, chat(first, then))
    assert view["h0"].startswith("[outdated: pref_"), view["h0"]
    assert first not in current(engine)
    assert first not in block


def test_one_thing_wanted_stays_in_its_conversation(engine: ContextEngine) -> None:
    prepared_turns(engine, chat("I want a window seat.", "I prefer aisle seats."))
    next_trip = Scope(session_id="trip-2", user_id="traveller")
    later = engine.facts.store.find(FactQuery(reader=next_trip, valid=True, scopes=("global", "session")))
    assert [f.text for f in later] == ["I prefer aisle seats."]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("I'd like a window seat.", "Actually, an aisle seat please."),
        ("I'd prefer a king room.", "Sorry, a twin room instead."),
        ("I want the vegetarian meal.", "No, the vegan meal."),
    ],
)
def test_the_thing_named_alone_after_a_correcting_word_replaces_the_choice(engine: ContextEngine, first: str, then: str) -> None:
    view, block = prepared_turns(engine, chat(first, then))
    assert view["h0"].startswith("[outdated: pref_"), view["h0"]
    assert first not in current(engine)
    assert first not in block


@pytest.mark.parametrize("then", ["An aisle seat, if there is one left?", "Actually, the seat is broken.", "The aisle seat."])
def test_the_thing_named_otherwise_replaces_no_choice(engine: ContextEngine, then: str) -> None:
    view, _ = prepared_turns(engine, chat("I'd like a window seat.", then))
    assert view["h0"] == "I'd like a window seat."


@pytest.mark.parametrize(
    "supposed",
    [
        "What if we held the offsite in Austin instead?",
        "What if we moved the offsite to Austin?",
        "What if the offsite was in Austin?",
    ],
)
def test_a_hypothetical_about_a_thing_named_shorter_is_taken_up_under_its_key(engine: ContextEngine, supposed: str) -> None:
    view, block = prepared_turns(engine, chat("The team offsite is in Denver.", supposed, "Let's do that."))
    assert view["h0"].startswith("[outdated: team_offsite is now:"), view["h0"]
    keys = current_keys(engine)
    assert "Austin" in keys["team_offsite"] and None not in keys, keys
    assert "Denver" not in block


def test_a_hypothetical_about_a_thing_named_shorter_is_kept_under_its_key(engine: ContextEngine) -> None:
    prepared_turns(engine, chat("The team offsite is in Denver.", "What if we held the offsite in Austin instead?"))
    supposed = current_keys(engine, scopes=("hypothetical",))
    assert list(supposed) == ["team_offsite"] and "Austin" in supposed["team_offsite"]
    assert current_keys(engine) == {"team_offsite": "The team offsite is in Denver."}


@pytest.mark.parametrize("then", ["Let's do that.", "OK, let's do that.", "Sounds good, do it."])
def test_taking_up_nothing_is_no_fact_of_its_own(engine: ContextEngine, then: str) -> None:
    prepared_turns(engine, chat("The venue is Hall B.", then))
    assert current(engine) == ["The venue is Hall B."]


@pytest.mark.parametrize("then", ["Let's do the first one.", "Let's go with the second option.", "OK, take the last one."])
def test_picking_an_option_by_its_place_is_no_fact_of_its_own(engine: ContextEngine, then: str) -> None:
    # which option "the first one" is lives in the conversation, not in the words: alone they state nothing
    prepared_turns(
        engine, chat("The venue is Hall B.", "What if the venue was Hall C?", "What if the venue was Hall D?", then)
    )
    assert current(engine) == ["The venue is Hall B."]


def test_a_hypothetical_taken_up_is_no_longer_marked_hypothetical(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("The venue is Hall B.", "What if the venue was Hall C?", "OK, let's do that."))
    assert view["h1"] == "What if the venue was Hall C?"
    assert current(engine, scopes=("hypothetical",)) == []


def test_a_hypothetical_not_taken_up_stays_marked(engine: ContextEngine) -> None:
    view, _ = prepared_turns(engine, chat("The venue is Hall B.", "What if the venue was Hall C?"))
    assert view["h1"] == "[hypothetical: not a current fact] What if the venue was Hall C?"


@pytest.mark.parametrize("declined", ["No, let's not.", "Never mind.", "Forget it.", "No thanks, keep Denver."])
def test_a_hypothetical_declined_is_not_taken_up_later(engine: ContextEngine, declined: str) -> None:
    turns = ("The team offsite is in Denver.", "What if we held the offsite in Austin instead?", declined, "Let's do that.")
    view, block = prepared_turns(engine, chat(*turns))
    assert view["h0"] == "The team offsite is in Denver."
    assert view["h1"].startswith("[hypothetical: not a current fact]"), view["h1"]
    assert current_keys(engine)["team_offsite"] == "The team offsite is in Denver."
    assert "Austin" in current_keys(engine, scopes=("hypothetical",))["team_offsite"]
    assert "Austin" not in block


def test_taking_up_after_other_exchanges_takes_up_nothing(engine: ContextEngine) -> None:
    turns = (
        "The team offsite is in Denver.", "What if we held the offsite in Austin instead?",
        "How many people fit in the main room?", "Can you list the hotels near the airport?", "Let's do that.",
    )
    view, _ = prepared_turns(engine, chat(*turns))
    assert view["h0"] == "The team offsite is in Denver."
    assert current_keys(engine)["team_offsite"] == "The team offsite is in Denver."
