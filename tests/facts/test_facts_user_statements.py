"""How the rules read what a user says about their own trip: preferences, limits, changes of
mind, corrections and hypotheticals, in the forms users of a booking assistant use.

The sentences follow the forms found in the user turns of the airline recordings
(``tau/gpt-4o-airline-dev.json``): contracted "I'd prefer", limits on a time or an amount,
"X, not Y" corrections, "actually, make it ...".
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import ContextConfig
from ctxplugin.config import FactsConfig
from ctxplugin.facts import FactsLedger, MemoryFactStore, RuleExtractor
from ctxplugin.facts.model import FactQuery
from ctxplugin.scope import Scope
from ctxplugin.testing import memory_engine

S = Scope(session_id="trip-1", user_id="traveller")

Label = tuple[str, str | None, str]


def read(text: str) -> list[Label]:
    return [(d.kind, d.key, d.scope) for d in RuleExtractor().from_text(text)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        # preferences, contracted or not, with "rather" and "like"
        ("I'd prefer an aisle seat.", [("preference", "pref_seat", "global")]),
        ("I would prefer a window seat.", [("preference", "pref_seat", "global")]),
        ("I’d prefer direct flights, please.", [("preference", "pref_flights", "global")]),
        ("We'd rather sit in economy.", [("preference", "pref_economy", "global")]),
        ("We'd rather fly on Friday.", [("preference", "pref_fly", "global")]),
        ("I would rather have a refund to my original payment method.", [("preference", "pref_method", "global")]),
        ("I'd like the 3pm one.", [("preference", "pref_one", "global")]),
        ("I'd prefer to pay with a gift card.", [("preference", "pref_card", "global")]),
        ("I prefer to use my credit card for the payment instead.", [("preference", "pref_card", "global")]),
        ("I prefer window seats.", [("preference", "pref_seats", "global")]),
        # a bound in a preference does not give the preference its key
        ("I prefer flights departing after 8am and before 9pm.", [("preference", "pref_flights", "global")]),
        ("I'd prefer a flight that departs after 8 am.", [("preference", "pref_flight", "global")]),
        ("Please make that change for me.", []),  # asks for something to be done, chooses nothing
        # what is still a task
        ("I'd like to change my flight to May 24.", [("task", None, "global")]),
        ("I would like to upgrade to business class.", [("task", None, "global")]),
        # limits on a time or an amount
        ("I don't want to fly before 11 AM EST.", [("constraint", None, "global")]),
        ("I'm looking to fly after 11 AM EST.", [("constraint", None, "global")]),
        ("I'm willing to pay up to $600 for the business class upgrades.", [("constraint", None, "global")]),
        ("I really need the change to fit under $1,000.", [("constraint", None, "global")]),
        ("No more than $600, please.", [("constraint", None, "global")]),
        # hypotheticals and questions state nothing current
        ("What if I flew Friday?", []),
        ("Do you have any flights that depart after 11 AM?", []),
    ],
)
def test_user_statements_are_read_as_labelled(text: str, expected: list[Label]) -> None:
    assert read(text) == expected


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("No more than $600, please.", "No more than $600, please."),
        ("No more than two stops, please.", "No more than two stops, please."),
        ("No, I don't want travel insurance.", "I don't want travel insurance."),
    ],
)
def test_a_leading_no_that_negates_is_kept(text: str, shown: str) -> None:
    # "No more than $600" without its "No" says the opposite
    (draft,) = RuleExtractor().from_text(text)
    assert draft.text == shown


@pytest.mark.parametrize(
    ("text", "old"),
    [
        ("No, not economy, business.", "economy"),
        ("I want to fly from Atlanta to Las Vegas, not Los Angeles.", "Los Angeles"),
        ("The refund should go to my original payment method, not a gift card.", "a gift card"),
    ],
)
def test_a_not_correction_names_the_value_it_replaces(text: str, old: str) -> None:
    (draft,) = RuleExtractor().from_text(text)
    assert draft.replaces == old
    assert draft.importance >= 0.7


@pytest.mark.parametrize(
    "text", ["I'm not sure about my membership level, but I'd like the refund.", "Not only me, my son too."]
)
def test_a_not_that_corrects_nothing_names_no_old_value(text: str) -> None:
    assert all(d.replaces is None for d in RuleExtractor().from_text(text))


# ---------------------------------------------------------------- the ledger: what is current
def ledger() -> FactsLedger:
    return FactsLedger(MemoryFactStore(), FactsConfig())


def current(facts: FactsLedger) -> list[str]:
    """The user's statements in force (not hypothetical, draft or superseded)."""
    query = FactQuery(reader=S, valid=True, scopes=("global", "session"))
    return sorted(f.text for f in facts.store.find(query) if not f.from_tool)


@pytest.mark.parametrize(
    ("first", "then", "now"),
    [
        ("I'd prefer an aisle seat.", "Actually, I'd prefer a window seat.", "I'd prefer a window seat."),
        ("I'd prefer an aisle seat.", "Actually, make it a window seat.", "Make it a window seat."),
        ("I'd prefer an aisle seat.", "No wait, make it a window seat.", "Make it a window seat."),
        ("I'd prefer economy class.", "No, not economy, business.", "Not economy, business."),
        ("I'd like the 3pm one.", "Actually, make it the 5pm one.", "Make it the 5pm one."),
        ("I'd prefer to pay with a gift card.", "I'd rather pay with a credit card instead.", "I'd rather pay with a credit card instead."),
        (
            "I'd prefer a flight that departs after 8 am.",
            "Actually, I'd prefer a flight after 10 am.",
            "I'd prefer a flight after 10 am.",
        ),
    ],
)
def test_a_change_of_mind_replaces_the_earlier_value(first: str, then: str, now: str) -> None:
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (new,) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == [now], f"{first!r} should be outdated by {then!r}"
    assert new.supersedes == old.id


@pytest.mark.parametrize(
    ("bound", "value"),
    [
        ("I'd prefer a flight that departs after 8 am.", "The 9:15 flight works."),
        ("I'd prefer a flight that departs after 8 am.", "I'd like the HAT266 flight."),
        ("I'd prefer a flight that departs after 8 am.", "Make it the 9:15 flight."),
        ("I prefer flights departing after 8am and before 9pm.", "The flights at 9am and 6pm are fine."),
        ("I'm willing to pay up to $600 for the upgrade.", "The $450 upgrade is fine."),
        ("I don't want to fly before 11am.", "Let's take the 1pm flight."),
    ],
)
def test_a_value_that_meets_a_bound_does_not_replace_it(bound: str, value: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(bound, id="m1")], scope=S)
    facts.ingest([HumanMessage(value, id="m2")], scope=S)
    assert bound in current(facts), f"{value!r} meets {bound!r}: the bound still holds"


def test_a_value_that_breaks_a_bound_replaces_it() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("I'd prefer a flight that departs after 8 am.", id="m1")], scope=S)
    facts.ingest([HumanMessage("Actually, make it the 7am flight.", id="m2")], scope=S)
    assert current(facts) == ["Make it the 7am flight."]


def test_a_hypothetical_never_becomes_current() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("I'd like the flight on Thursday.", id="m1")], scope=S)
    facts.ingest([HumanMessage("What if I flew Friday?", id="m2")], scope=S)
    facts.ingest([HumanMessage("What if we went with the Friday flight instead.", id="m3")], scope=S)
    assert current(facts) == ["I'd like the flight on Thursday."]


def test_a_user_correction_leaves_a_tool_record_alone() -> None:
    # "not LAX" corrects what the agent understood; the reservation a tool read still says LAX
    facts = ledger()
    record = ToolMessage('{"reservation_id": "ZFA04Y", "origin": "ATL", "destination": "LAX"}', tool_call_id="c1", name="get_reservation_details")
    facts.ingest([record], scope=S)
    facts.ingest([HumanMessage("I want to fly from ATL to LAS, not LAX.", id="m2")], scope=S)
    records = facts.store.find(FactQuery(reader=S, valid=True))
    assert any(f.from_tool and "LAX" in f.text for f in records)


# ---------------------------------------------------------------- what the model sees
def view(*turns: str) -> dict[str, str]:
    """The user messages of the prepared view of a conversation of ``turns``, by id."""
    messages: list[BaseMessage] = []
    for i, turn in enumerate(turns):
        messages.append(HumanMessage(turn, id=f"h{i}"))
        messages.append(AIMessage(f"Reply {i}.", id=f"a{i}"))
    messages.append(HumanMessage("Please go ahead.", id="last"))
    prepared = memory_engine(ContextConfig()).prepare(messages, scope=S)
    return {str(m.id): str(m.content) for m in prepared.messages if isinstance(m, HumanMessage)}


def test_a_bound_the_chosen_flight_meets_is_not_marked_outdated() -> None:
    shown = view("I'd prefer a flight that departs after 8 am.", "The 9:15 flight works.", "Make it the 9:15 flight.")
    assert shown["h0"] == "I'd prefer a flight that departs after 8 am."


def test_a_changed_preference_is_marked_outdated_in_the_view() -> None:
    shown = view("I'd prefer an aisle seat.", "Actually, make it a window seat.")
    assert shown["h0"].startswith("[outdated:") and "window seat" in shown["h0"]
    assert shown["h1"] == "Actually, make it a window seat."


def test_a_hypothetical_is_marked_as_not_current_in_the_view() -> None:
    shown = view("I'd rather fly on Thursday.", "Suppose I'd rather fly on Friday.")
    assert not shown["h0"].startswith("[")
    assert shown["h1"].startswith("[hypothetical")


def test_a_choice_stays_in_its_conversation_and_a_standing_preference_follows_the_user() -> None:
    # "I'd like the 3pm one" picks among this trip's options; "I prefer aisle seats" is the user's
    facts = ledger()
    facts.ingest([HumanMessage("I prefer aisle seats.", id="m1")], scope=S)
    facts.ingest([HumanMessage("I'd like the 3pm one.", id="m2")], scope=S)
    facts.ingest([HumanMessage("We'd rather fly on Friday.", id="m3")], scope=S)
    facts.ingest([HumanMessage("Make it the 5pm one.", id="m4")], scope=S)
    assert current(facts) == ["I prefer aisle seats.", "Make it the 5pm one.", "We'd rather fly on Friday."]
    next_trip = Scope(session_id="trip-2", user_id="traveller")
    later = FactQuery(reader=next_trip, valid=True, scopes=("global", "session"))
    assert [f.text for f in facts.store.find(later)] == ["I prefer aisle seats."]


# ---------------------------------------------------------------- a new value of the same thing
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My email is ana.old@example.com.", "My new email is ana.new@example.org."),
        ("My email is ana.old@example.com.", "Please use my new email ana.new@example.org from now on, the old one is closed."),
        ("My email is ana.old@example.com.", "Update my email to ana.new@example.org."),
        ("My phone number is 555-0199.", "Change my phone number to 555-0100."),
        ("My phone number is 555-0199.", "My current phone number is 555-0100."),
        ("My address is 5 Main St, Springfield.", "My updated address is 12 Oak Ave, Springfield."),
        ("Our budget is $500.", "Our new budget is $900."),
        ("The deadline is Monday.", "The new deadline is Friday."),
        ("The deadline is Monday.", "The revised deadline is Friday."),
        # a change told in the passive
        ("The meeting is on Monday.", "The meeting got moved to Tuesday."),
        ("The meeting is on Monday.", "The meeting has been pushed to Tuesday."),
        ("My check-in is May 3.", "My check-in was postponed to May 5."),
        ("My flight is at 3pm.", "My flight got bumped to 6pm."),
        # one contact detail under its several names
        ("My email address is ana.old@example.com.", "Here's my new email: ana.new@example.org."),
        ("My e-mail is ana.old@example.com.", "I've got a new email address: ana.new@example.org."),
        ("My phone number is 555-0199.", "Update my mobile number to 555-0100."),
        ("My cell phone is 555-0199.", "I got a new phone number: 555-0100."),
        # "my number" given as a phone number is the phone
        ("My number is 555-0199.", "That's wrong, my phone number is 555-0100."),
        ("My phone number is +1 (415) 555-0199.", "My number is 415.555.0100."),
        ("My contact number is 555-0199.", "Update my phone to 555-0100."),
    ],
)
def test_a_new_value_of_the_same_thing_replaces_the_old_one(first: str, then: str) -> None:
    # "new", "current", "updated" say which value holds; they do not name another thing
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (new, *_) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert new.key == old.key
    assert new.supersedes == old.id
    assert first not in current(facts)


@pytest.mark.parametrize(
    "text",
    ["The old one is closed.", "The first one was fine.", "That blue one is mine."],
)
def test_a_pronoun_one_names_no_subject(text: str) -> None:
    assert all(key is None for _, key, _ in read(text))


@pytest.mark.parametrize(("text", "key"), [("The cell is empty.", "cell"), ("Cell: A1", "cell"), ("The mobile app is slow.", "mobile_app")])
def test_a_word_that_only_sometimes_names_a_phone_keeps_its_own_key(text: str, key: str) -> None:
    assert key in {k for _, k, _ in read(text)}


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("My number is 42.", "my_number"),
        ("My member number is 5550199.", "my_member_number"),
        ("My number is 2024-05-01.", "my_number"),  # a date, not a phone
        ("My number is 01.05.2024.", "my_number"),
    ],
)
def test_a_number_that_is_not_a_phone_keeps_its_own_key(text: str, key: str) -> None:
    assert key in {k for _, k, _ in read(text)}


def test_an_old_value_named_as_old_does_not_become_current() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("My email is ana.new@example.org.", id="m1")], scope=S)
    facts.ingest([HumanMessage("My old email was ana.old@example.com.", id="m2")], scope=S)
    assert "My email is ana.new@example.org." in current(facts)


@pytest.mark.parametrize(
    "text",
    [
        "Change my reservation to the 10:45 flight.",  # asks for an action on the reservation
        "Please use my credit card for this one.",
        "Update my seat to 14C on the second leg.",
    ],
)
def test_a_request_about_a_booking_is_not_a_new_value(text: str) -> None:
    assert all(key is None or not key.startswith("my_") for _, key, _ in read(text))


# ---------------------------------------------------------------- a value said again to correct it
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My booking reference is QQ47LX.", "Sorry, it's QQ47LM."),
        ("My reservation number is QQ47LX.", "Sorry, I mistyped, it's QQ47LM."),
        ("My departure date is May 3.", "I meant May 4."),
        ("My flight is at 3pm.", "Correction: it's at 4pm."),
        ("I'd like the HAT123 flight.", "Oops, that should be HAT124."),
        # the user names what they got wrong
        ("My departure date is May 20.", "Sorry, I got the date wrong, it's May 21."),
        ("My reservation ID is ABC123.", "I gave you the wrong reservation ID, it's XYZ789."),
        ("My reservation ID is ABC123.", "Sorry, I provided the wrong ID - it's XYZ789."),
    ],
)
def test_a_value_said_again_to_correct_it_replaces_the_old_one(first: str, then: str) -> None:
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (new,) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert (new.key, new.supersedes) == (old.key, old.id)
    assert first not in current(facts)


def test_a_correction_later_in_the_same_message_replaces_the_value_it_follows() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("My departure date is May 3. Actually, no, it's May 4.", id="m1")], scope=S)
    assert [t for t in current(facts) if "May" in t] == ["It's May 4."]


def test_a_corrected_code_replaces_the_code_of_its_shape_only() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("My booking reference is QQ47LX.", id="m1")], scope=S)
    facts.ingest([HumanMessage("My phone number is 555-0199.", id="m2")], scope=S)
    facts.ingest([HumanMessage("Sorry, it's QQ47LM.", id="m3")], scope=S)
    assert "My phone number is 555-0199." in current(facts)
    assert "My booking reference is QQ47LX." not in current(facts)


@pytest.mark.parametrize(
    ("first", "between", "then"),
    [
        ("My reservation ID is ABC123.", "My flight number is HAT123.", "I gave you the wrong reservation ID, it's XYZ789."),
        ("My reservation ID is ABC123.", "I'd like the HAT123 flight.", "Sorry, I provided the wrong reservation ID - it's XYZ789."),
        ("My departure date is May 20.", "The meeting is on May 25.", "Sorry, I got my departure date wrong, it's May 21."),
    ],
)
def test_a_correction_naming_what_was_wrong_replaces_that_value(first: str, between: str, then: str) -> None:
    """"I gave you the wrong reservation ID, it's XYZ789" corrected the latest code of its shape,
    the flight said since: the flight was marked replaced and the wrong reservation ID stayed
    current."""
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(between, id="m2")], scope=S)
    (new,) = facts.ingest([HumanMessage(then, id="m3")], scope=S)
    assert (new.key, new.supersedes) == (old.key, old.id)
    assert between in current(facts) and first not in current(facts)


@pytest.mark.parametrize("then", ["It's raining at 4pm.", "It's QQ47LM."])
def test_a_value_said_without_correcting_replaces_nothing(then: str) -> None:
    # no "sorry", "I meant", "actually": a new statement, not a correction of the last value
    facts = ledger()
    facts.ingest([HumanMessage("My booking reference is QQ47LX. My flight is at 3pm.", id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert {"My booking reference is QQ47LX.", "My flight is at 3pm."} <= set(current(facts))


def test_a_value_corrected_by_restating_it_is_marked_outdated_in_the_view() -> None:
    shown = view("My booking reference is QQ47LX.", "Sorry, it's QQ47LM.")
    assert shown["h0"].startswith("[outdated:") and "QQ47LM" in shown["h0"]
    assert shown["h1"] == "Sorry, it's QQ47LM."


# ---------------------------------------------------------------- a value that holds only on a condition
@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My budget is $500.", "If I get the bonus, my budget is $700."),
        ("My budget is $500.", "My budget is $700 if I get the bonus."),
        ("My budget is $500.", "My budget is $700 unless the hotel is included."),
        ("The meeting is on Monday.", "If the room is free, the meeting is on Tuesday."),
    ],
)
def test_a_value_on_a_condition_replaces_nothing_and_is_kept(first: str, then: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == sorted([first, then])


@pytest.mark.parametrize(
    ("first", "then", "now"),
    [
        ("My budget is $500.", "If that's ok, my budget is $700.", "If that's ok, my budget is $700."),
        ("My budget is $500.", "My budget is $700, if that helps.", "My budget is $700, if that helps."),
        ("I'd prefer an aisle seat.", "If possible, I'd prefer a window seat.", "I'd prefer a window seat."),
    ],
)
def test_politeness_is_no_condition(first: str, then: str, now: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == [now]


@pytest.mark.parametrize(
    ("first", "then", "key"),
    [
        ("We expect 5 people.", "Actually 7 people will come.", "people_count"),
        ("There will be 12 guests.", "We'll have 15 guests.", "guest_count"),
        ("The dinner has 8 guests.", "The dinner has 10 guests now.", "dinner_guest_count"),
        ("We expect 5 people at the offsite.", "Actually 7 people will come.", "offsite_people_count"),
        ("I need 2 rooms.", "Actually I need three rooms.", "room_count"),
        # a word of difference ("3 people over") that goes on to say when or where is none
        ("We expect 40 people.", "Actually we expect 45 people over the weekend.", "people_count"),
        ("We have 12 people.", "We have 14 people up in Denver.", "people_count"),
    ],
)
def test_a_later_count_of_the_same_unit_replaces_the_earlier_one(first: str, then: str, key: str) -> None:
    facts = ledger()
    (old,) = facts.ingest([HumanMessage(first, id="m1")], scope=S)
    (new,) = facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert (old.key, new.key) == (key, key)
    assert new.supersedes == old.id and len(current(facts)) == 1


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("We expect 5 people.", "We need 3 rooms."),
        ("The dinner has 8 guests.", "The lunch has 5 guests."),
        ("We expect 5 people at the offsite.", "We expect 20 people at the conference."),
    ],
)
def test_a_count_of_another_unit_or_subject_stands_beside(first: str, then: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == sorted([first, then])


def test_a_replaced_count_is_marked_in_the_view() -> None:
    engine = memory_engine(ContextConfig())
    messages: list[BaseMessage] = [
        HumanMessage("We expect 5 people.", id="h0"), AIMessage("OK.", id="a0"),
        HumanMessage("Actually 7 people will come.", id="h1"), AIMessage("OK.", id="a1"),
        HumanMessage("How many attend?", id="h2"),
    ]
    view = {m.id: str(m.content) for m in engine.prepare(messages, scope=S).messages}
    assert view["h0"] == "[outdated: people_count is now: 7 people will come.] We expect 5 people."


def test_a_new_count_alone_revises_the_latest_count_of_its_unit() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("I need 2 rooms.", id="m1")], scope=S)
    facts.ingest([HumanMessage("We expect 5 people.", id="m2")], scope=S)
    (new,) = facts.ingest([HumanMessage("Make it 3 rooms.", id="m3")], scope=S)
    assert new.key == "room_count"
    assert current(facts) == ["Make it 3 rooms.", "We expect 5 people."]


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("We expect 5 people.", "2 more people will come."),
        ("We expect 5 people.", "We need 2 extra people for setup."),
        ("I need 2 rooms.", "We need 1 additional room."),
        ("The team has 5 engineers.", "We hired 2 engineers."),  # hiring adds to the team
        ("We expect 5 people.", "We are 3 people short."),  # what is missing, not the count
        ("We expect 5 people.", "We are 2 people over the limit."),
        ("We expect 5 people.", "We have 2 people left to confirm."),
        ("We expect 10 guests.", "I'm bringing 2 guests."),
    ],
)
def test_a_count_added_to_the_stated_one_replaces_nothing(first: str, then: str) -> None:
    # "2 more people" adds to the 5: the count is 7, not 2, so the 5 still holds
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert first in current(facts)


@pytest.mark.parametrize(
    ("first", "then"),
    [
        ("My wife has 3 bags.", "I have 2 bags."),
        ("My family has 4 people.", "We expect 20 people."),
        ("The dinner has 8 guests.", "I have 2 guests."),
    ],
)
def test_a_count_of_one_owner_is_not_taken_over_by_anothers(first: str, then: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == sorted([first, then])


@pytest.mark.parametrize(
    ("first", "then"),
    [("The offsite is in Denver.", "The offsite is for 12 people."), ("The offsite is for 12 people.", "The offsite is in Denver.")],
)
def test_what_a_thing_is_for_and_where_it_is_stand_beside(first: str, then: str) -> None:
    facts = ledger()
    facts.ingest([HumanMessage(first, id="m1")], scope=S)
    facts.ingest([HumanMessage(then, id="m2")], scope=S)
    assert current(facts) == sorted([first, then])


def test_a_later_count_replaces_the_count_a_thing_is_for() -> None:
    facts = ledger()
    facts.ingest([HumanMessage("The offsite is in Denver.", id="m1")], scope=S)
    facts.ingest([HumanMessage("The offsite is for 12 people.", id="m2")], scope=S)
    facts.ingest([HumanMessage("Actually 15 people will come.", id="m3")], scope=S)
    assert current(facts) == ["15 people will come.", "The offsite is in Denver."]


@pytest.mark.parametrize(
    ("first", "supposed", "kept"),
    [
        ("My wife has 3 bags.", "What if I had 2 bags?", True),
        ("We expect 5 people at the offsite.", "What if 10 people came?", False),
    ],
)
def test_a_supposed_count_taken_up_replaces_only_what_a_count_would(first: str, supposed: str, kept: bool) -> None:
    facts = ledger()
    for i, text in enumerate([first, supposed, "Let's do that."]):
        facts.ingest([HumanMessage(text, id=f"m{i}")], scope=S)
    assert (first in current(facts)) is kept, current(facts)
