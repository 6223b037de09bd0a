"""What a user says that is not a new current value — a plan under consideration, a value said
again, "never mind" — and changes announced with a label ("Change of plans: ..."), as the model
sees them on the next call of a real embedded engine: the outdated marks of the history and
the facts block.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts.model import FactQuery
from ctxplugin.testing import facts_block

TRIP = Scope(session_id="trip-1", user_id="traveller")
NEXT_TRIP = Scope(session_id="trip-2", user_id="traveller")


def chat(*turns: str) -> list[BaseMessage]:
    """A support chat: the user's ``turns``, each answered, then the user's "go ahead"."""
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
    for i, turn in enumerate(turns):
        messages.append(HumanMessage(turn, id=f"h{i}"))
        messages.append(AIMessage(f"Noted ({i}).", id=f"a{i}"))
    messages.append(HumanMessage("OK, please go ahead.", id="last"))
    return messages


def shown(engine: ContextEngine, messages: list[BaseMessage], scope: Scope = TRIP) -> dict[str, str]:
    """The user messages of the prepared view, by id, each prefix of the conversation prepared
    in turn as an agent would."""
    ends = [i + 1 for i, m in enumerate(messages) if isinstance(m, HumanMessage)]
    for end in ends:
        prepared = engine.prepare(messages[:end], scope=scope)
    return {str(m.id): str(m.content) for m in prepared.messages if isinstance(m, HumanMessage)}


def current(engine: ContextEngine, scope: Scope = TRIP) -> list[str]:
    """The statements the ledger holds in force for ``scope``."""
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=scope, valid=True, scopes=("global", "session"))))


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.mark.parametrize(
    "change",
    [
        "Change of plans: the meeting is on Thursday at 3pm.",
        "Quick update: the meeting is on Thursday at 3pm.",
        "New plan - the meeting is on Thursday at 3pm.",
        "Scratch that, the meeting is on Thursday at 3pm.",
    ],
)
def test_a_change_announced_with_a_label_replaces_the_old_value(engine: ContextEngine, change: str) -> None:
    view = shown(engine, chat("The meeting is on Tuesday at 2pm.", change))
    assert view["h0"].startswith("[outdated: meeting is now:"), view["h0"]
    assert view["h1"] == change
    assert "The meeting is on Tuesday at 2pm." not in current(engine)


@pytest.mark.parametrize(
    ("first", "change", "old"),
    [
        ("I prefer a window seat.", "Hmm, on second thought, I prefer an aisle seat.", "I prefer a window seat."),
        ("My budget is $500.", "Let me correct that: my budget is $700.", "My budget is $500."),
        ("My budget is $500.", "Oops, my budget is $700.", "My budget is $500."),
        ("My budget is $500.", "Thinking about it more, my budget is $700.", "My budget is $500."),
        ("The meeting is on Tuesday.", "Come to think of it, the meeting is on Friday.", "The meeting is on Tuesday."),
    ],
)
def test_a_second_thought_replaces_the_old_value(engine: ContextEngine, first: str, change: str, old: str) -> None:
    """A user's second thought was read as no statement ("On second thought, I prefer ..."),
    under a key of its own (``correct_my_budget``), or as a value under consideration: the old
    value stayed current and unmarked."""
    view = shown(engine, chat(first, change))
    assert view["h0"].startswith("[outdated:"), view["h0"]
    assert view["h1"] == change
    assert old not in current(engine)


@pytest.mark.parametrize(
    "idea",
    [
        "I'm thinking about making my budget $800.",
        "Maybe my budget is $800, I'm not sure yet.",
        "We're considering raising my budget to $800.",
        "My budget might be $800.",
    ],
)
def test_a_value_under_consideration_leaves_the_current_one_alone(engine: ContextEngine, idea: str) -> None:
    view = shown(engine, chat("My budget is $500.", idea))
    assert view["h0"] == "My budget is $500.", "still the budget: nothing was decided"
    assert "My budget is $500." in current(engine)
    assert not any("800" in text for text in current(engine)), "a value under consideration is not current"


@pytest.mark.parametrize(
    "idea",
    [
        "Draft:\nThe venue is Hall C.\nMy budget is $900.",
        "Here is a draft of the plan: The venue is Hall C. My budget is $900.",
        "Suppose we move the event. Then the venue is Hall C and my budget would be $900.",
        "What if we move the event?\nThe venue would be Hall C. My budget would be $900.",
    ],
)
def test_what_a_draft_or_a_supposition_goes_on_to_say_is_not_current(engine: ContextEngine, idea: str) -> None:
    """A draft or a supposition opening a message covers what the message goes on to say: its
    next sentences were read as plain statements, replaced the venue and the budget, and the
    view marked the user's real plan outdated."""
    view = shown(engine, chat("The venue is Hall B. My budget is $500.", idea))
    assert view["h0"] == "The venue is Hall B. My budget is $500.", view["h0"]
    assert {"The venue is Hall B.", "My budget is $500."} <= set(current(engine))
    assert not any("Hall C" in text or "900" in text for text in current(engine)), current(engine)


def test_a_final_label_ends_the_draft_the_message_opened(engine: ContextEngine) -> None:
    """"Draft:" covered the rest of the message, a "Final:" line after it too: the user's final
    venue was read as a draft and not current."""
    shown(engine, chat("The venue is Hall B.", "Draft: the venue is Hall C.\nFinal: the venue is Hall D."))
    assert "Final: the venue is Hall D." in current(engine), current(engine)
    assert not any("Hall C" in text for text in current(engine)), current(engine)


@pytest.mark.parametrize(
    ("said", "stated"),
    [
        ("I suppose that's fine. Then my budget is $700.", "Then my budget is $700."),
        ("Suppose so. I would like the budget to be $700.", "I would like the budget to be $700."),
        ("I'd imagine it's fine. Then my budget is $700.", "Then my budget is $700."),
    ],
)
def test_i_suppose_opens_no_supposition(engine: ContextEngine, said: str, stated: str) -> None:
    """"I suppose", "suppose so" give an opinion, not a supposition: the sentence after it was
    read as hypothetical and the user's new budget was not current."""
    shown(engine, chat("My budget is $500.", said))
    assert stated in current(engine), current(engine)


@pytest.mark.parametrize(
    "said",
    [
        "The draft is due at 5:00 today. My budget is $700.",
        "Please send the proposal by 9:30 tomorrow. My budget is $700.",
        "What if the flight leaves at 10:30? Anyway, my budget is $700.",
    ],
)
def test_a_clock_time_is_no_label_opening_a_draft(engine: ContextEngine, said: str) -> None:
    """The colon of "5:00" in a sentence naming a draft or a supposition was read as a label
    ("Draft:"): the rest of the message was a draft and the user's new budget not current."""
    view = shown(engine, chat("My budget is $500.", said))
    assert "My budget is $700." in current(engine) or "Anyway, my budget is $700." in current(engine), current(engine)
    assert view["h0"].startswith("[outdated:"), view["h0"]


@pytest.mark.parametrize("retraction", ["Never mind.", "Scratch that.", "Actually, forget it.", "Hmm, never mind that."])
def test_a_bare_retraction_undoes_the_change_the_user_just_made(engine: ContextEngine, retraction: str) -> None:
    """"Never mind." right after a change left the change current: the new seat stayed in
    force and the user's seat was marked outdated."""
    view = shown(engine, chat("My seat is 12A.", "Actually, my seat is 14C.", retraction))
    assert view["h0"] == "My seat is 12A.", view["h0"]
    assert view["h1"].startswith("[outdated:"), view["h1"]
    assert "My seat is 12A." in current(engine) and "My seat is 14C." not in current(engine)


def test_a_bare_retraction_leaves_a_change_said_before_the_last_message(engine: ContextEngine) -> None:
    view = shown(engine, chat("My seat is 12A.", "Actually, my seat is 14C.", "My budget is $500.", "Never mind."))
    assert "My seat is 14C." in current(engine) and "My seat is 12A." not in current(engine)
    assert view["h1"] == "Actually, my seat is 14C."


def test_a_bare_retraction_after_a_question_leaves_the_change(engine: ContextEngine) -> None:
    """"Never mind." after a message that changed the seat and asked something drops the
    question: it took back the seat change, and the user's new seat was marked outdated."""
    change, reply = "Actually, my seat is 14C. Can you check if there is an upgrade?", "I could not find an upgrade."
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
    for i, (said, answer) in enumerate([("My seat is 12A.", "Noted."), (change, reply), ("Never mind.", "OK.")]):
        messages += [HumanMessage(said, id=f"h{i}"), AIMessage(answer, id=f"a{i}")]
    messages.append(HumanMessage("OK, please go ahead.", id="last"))
    view = shown(engine, messages)
    assert view["h1"] == change, view["h1"]
    assert "My seat is 14C." in current(engine) and "My seat is 12A." not in current(engine), current(engine)


@pytest.mark.parametrize(
    "again",
    ["My budget is $500, as I said.", "Like I said, my budget is $500.", "My budget is $500 again, just to be clear."],
)
def test_a_value_said_again_is_not_marked_outdated(engine: ContextEngine, again: str) -> None:
    view = shown(engine, chat("My budget is $500.", again))
    assert view["h0"] == "My budget is $500."
    assert view["h1"] == again
    assert [t for t in current(engine) if "500" in t] == ["My budget is $500."], "one fact, not replaced by itself"


def test_never_mind_is_not_a_preference_that_follows_the_user(engine: ContextEngine) -> None:
    shown(engine, chat("I'd like to add a bag.", "Never mind, I'll do it at the airport."))
    assert not [t for t in current(engine) if "mind" in t.lower()]
    later = engine.prepare([SystemMessage("You are an airline support agent."), HumanMessage("Hi, I need a new booking.")], scope=NEXT_TRIP)
    assert "mind" not in facts_block(later.messages).lower()


@pytest.mark.parametrize(
    "choice",
    ["I want the HAT123 flight.", "I don't want the May 25 flight.", "I'd like the 3pm one.", "I hate the 6am flight."],
)
def test_a_choice_of_one_flight_stays_in_its_conversation(engine: ContextEngine, choice: str) -> None:
    standing = ("I hate layovers.", "I prefer flights departing after 8am.")
    shown(engine, chat("I need to change reservation ZFA04Y.", *standing, choice))
    later = engine.prepare([SystemMessage("You are an airline support agent."), HumanMessage("Hi, I need a new booking.")], scope=NEXT_TRIP)
    block = facts_block(later.messages)
    assert all(s in block for s in standing), "a standing preference follows the user"
    assert choice not in block, "a choice made on another trip is not a preference for this one"
