"""How a user takes back what they said — "Never mind." after a change or after the agent's own
question, "Scratch that." after a message that changed two things, a retraction said twice,
"Forget what I said about the budget." — and asks for another choice ("can we do business
instead?"), as the ledger of a real embedded engine holds it after each call.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.facts.model import FactQuery
from ctxplugin.testing import facts_block

TRIP = Scope(session_id="trip-1", user_id="traveller")


def exchanges(*pairs: tuple[str, str]) -> list[BaseMessage]:
    """A support chat of (user, agent) turns, then the user's "go ahead"."""
    messages: list[BaseMessage] = [SystemMessage("You are an airline support agent.")]
    for i, (said, answer) in enumerate(pairs):
        messages += [HumanMessage(said, id=f"h{i}"), AIMessage(answer, id=f"a{i}")]
    messages.append(HumanMessage("OK, please go ahead.", id="last"))
    return messages


def chat(*turns: str) -> list[BaseMessage]:
    """The user's ``turns``, each answered without a question."""
    return exchanges(*((turn, f"Noted ({i}).") for i, turn in enumerate(turns)))


def prepared(engine: ContextEngine, messages: list[BaseMessage]) -> tuple[dict[str, str], str]:
    """The user messages of the last view by id, and its facts block; each prefix of the
    conversation is prepared in turn, as an agent would."""
    for end in [i + 1 for i, m in enumerate(messages) if isinstance(m, HumanMessage)]:
        view = engine.prepare(messages[:end], scope=TRIP)
    return {str(m.id): str(m.content) for m in view.messages if isinstance(m, HumanMessage)}, facts_block(view.messages)


def current(engine: ContextEngine) -> list[str]:
    """The statements the ledger holds in force for the trip."""
    return sorted(f.text for f in engine.facts.store.find(FactQuery(reader=TRIP, valid=True, scopes=("global", "session"))))


@pytest.fixture
def engine(tmp_path: Path) -> ContextEngine:
    return ContextEngine.embedded(tmp_path / "ctx", ContextConfig())


@pytest.mark.parametrize(
    "question",
    ["Got it. Would you also like a window seat?", "Done. Do you want me to add travel insurance?", "Updated. Anything else I can help with?"],
)
def test_never_mind_after_the_agents_question_answers_it(engine: ContextEngine, question: str) -> None:
    """"Never mind." said to the agent's own question took back the user's change before it."""
    prepared(engine, exchanges(("My budget is $500.", "Noted."), ("Actually, make my budget $700.", question), ("Never mind.", "OK.")))
    assert "My budget is $500." not in current(engine), current(engine)
    assert [t for t in current(engine) if "$700" in t], current(engine)


@pytest.mark.parametrize(
    "question",
    ["Are you sure you want to raise your budget to $700?", "Shall I update your budget to $700?", "Seat 14C is a middle seat. Still want it?"],
)
def test_never_mind_to_the_agents_question_about_the_change_takes_it_back(engine: ContextEngine, question: str) -> None:
    """The agent asking to confirm the change ("Shall I update your budget to $700?"): "Never
    mind." drops the change, as said without the question; the change stayed current."""
    change = "Actually, my seat is 14C." if "14C" in question else "Actually, make my budget $700."
    prepared(engine, exchanges(("My budget is $500. My seat is 12A.", "Noted."), (change, question), ("Never mind.", "OK.")))
    assert not [t for t in current(engine) if "$700" in t or "14C" in t], current(engine)


def test_never_mind_after_the_agents_question_read_by_the_ledger_alone(engine: ContextEngine) -> None:
    """The agent messages a caller passes to ``ingest`` tell the same."""
    messages = exchanges(("My budget is $500.", "Noted."), ("Actually, make my budget $700.", "Would you also like a window seat?"), ("Never mind.", "OK."))
    engine.facts.ingest(messages, scope=TRIP)
    assert "My budget is $500." not in current(engine), current(engine)


@pytest.mark.parametrize("retraction", ["Never mind.", "Scratch that.", "Actually, forget it.", "Forget what I said.", "Ignore my last message."])
def test_never_mind_after_a_change_and_no_question_still_takes_it_back(engine: ContextEngine, retraction: str) -> None:
    messages = exchanges(("My budget is $500.", "Noted."), ("Actually, make my budget $700.", "Got it, your budget is now $700."), (retraction, "OK."))
    prepared(engine, messages)
    assert "My budget is $500." in current(engine), current(engine)
    assert not [t for t in current(engine) if "$700" in t], current(engine)


@pytest.mark.parametrize(
    "change",
    [
        "Actually, my budget is $700. My seat is 14C.",
        "Actually, my budget is $700 and my seat is 14C.",
        "Change of plans: my budget is $700, and my seat is 14C.",
    ],
)
@pytest.mark.parametrize("retraction", ["Scratch that.", "Never mind."])
def test_a_retraction_takes_back_every_change_of_the_message_before(engine: ContextEngine, change: str, retraction: str) -> None:
    """"Scratch that." after a message that changed the budget and the seat took back only one."""
    view, _ = prepared(engine, chat("My budget is $500. My seat is 12A.", change, retraction))
    assert current(engine) == ["My budget is $500.", "My seat is 12A."], current(engine)
    assert view["h0"] == "My budget is $500. My seat is 12A.", view["h0"]


@pytest.mark.parametrize(
    "change", ["Actually, my budget is $700 and my seat is 14C.", "Change of plans: my budget is $700, and my seat is 14C."]
)
def test_two_changes_joined_after_a_correcting_word_change_both(engine: ContextEngine, change: str) -> None:
    """The words before the first change kept the sentence whole: one fact keyed by the budget,
    and the seat stayed 12A."""
    view, _ = prepared(engine, chat("My budget is $500. My seat is 12A.", change))
    assert [t.rstrip(".") for t in current(engine)] == ["My budget is $700", "My seat is 14C"], current(engine)
    assert view["h0"].startswith("[outdated:"), view["h0"]


def test_a_retraction_after_a_subject_withdrawn_brings_back_nothing_withdrawn(engine: ContextEngine) -> None:
    """"Scratch that." after a budget said anew brought back the one the user had withdrawn
    before: what it takes back is the value the change replaced, and that change replaced none
    (a first statement taken back stays current, as documented)."""
    prepared(engine, chat("My seat is 12A.", "My budget is $500.", "Forget what I said about the budget.", "My budget is $900.", "Scratch that."))
    assert not [t for t in current(engine) if "$500" in t], current(engine)


@pytest.mark.parametrize("again", ["Never mind.", "Scratch that.", "Hmm, never mind that."])
def test_a_retraction_said_twice_takes_back_once(engine: ContextEngine, again: str) -> None:
    """The second "Never mind." took back the first: the change it had taken back was current again."""
    view, _ = prepared(engine, chat("My budget is $500.", "Actually, my budget is $700.", "Never mind.", again))
    assert "My budget is $500." in current(engine), current(engine)
    assert not [t for t in current(engine) if "$700" in t], current(engine)
    assert view["h0"] == "My budget is $500."


def test_a_retraction_after_a_change_made_since_takes_that_back(engine: ContextEngine) -> None:
    prepared(engine, chat("My budget is $500.", "Actually, my budget is $700.", "Never mind.", "Actually, my budget is $800.", "Never mind."))
    assert "My budget is $500." in current(engine), current(engine)
    assert not [t for t in current(engine) if "$800" in t or "$700" in t], current(engine)


@pytest.mark.parametrize(
    "forget",
    [
        "Forget what I said about the budget.",
        "Actually, ignore what I told you about my budget.",
        "Never mind the budget.",
        "Please forget about the budget.",
    ],
)
def test_forgetting_a_subject_withdraws_what_the_user_said_about_it(engine: ContextEngine, forget: str) -> None:
    """"Forget what I said about the budget." was kept as a statement, and the budget stayed current."""
    view, block = prepared(engine, chat("My budget is $500.", "My seat is 12A.", "Actually, my budget is $700.", forget))
    assert current(engine) == ["My seat is 12A."], current(engine)
    assert "$700" not in block and "budget" not in block.lower(), block
    assert view["h3"] == forget


def test_a_subject_withdrawn_read_again_keeps_what_was_said_since(tmp_path: Path) -> None:
    messages = chat("My budget is $500.", "Forget what I said about the budget.", "My budget is $900.")
    prepared(ContextEngine.embedded(tmp_path / "ctx", ContextConfig()), messages)
    again = ContextEngine.embedded(tmp_path / "ctx", ContextConfig())
    prepared(again, messages)
    assert current(again) == ["My budget is $900."], current(again)


def test_forgetting_a_subject_leaves_the_other_subjects(engine: ContextEngine) -> None:
    prepared(engine, chat("I'd like an aisle seat.", "My budget is $500.", "Forget what I said about the seat."))
    assert current(engine) == ["My budget is $500."], current(engine)


@pytest.mark.parametrize("done", ["nevermind I booked the hotel", "Never mind they booked the hotel", "never mind we booked a hotel"])
def test_never_mind_before_what_the_user_did_withdraws_nothing(engine: ContextEngine, done: str) -> None:
    """"nevermind I booked the hotel" (no comma) was read as withdrawing "I booked the hotel" as
    a subject: the hotel's budget said before was taken back."""
    said = "I need to book a hotel in Paris, budget 200 euros a night."
    prepared(engine, exchanges((said, "Shall I search hotels for you?"), (done, "Great.")))
    assert said in current(engine), current(engine)


def test_forgetting_the_budget_leaves_the_hotel_budget(engine: ContextEngine) -> None:
    """"Forget what I said about the budget" took back the hotel budget too: a subject that is
    some statement's whole key withdraws that key, not every key holding its word."""
    prepared(engine, chat("My budget is $2000.", "The hotel budget is $300.", "Forget what I said about the budget."))
    assert current(engine) == ["The hotel budget is $300."], current(engine)


def test_forgetting_the_hotel_withdraws_what_was_said_of_it(engine: ContextEngine) -> None:
    prepared(engine, chat("My budget is $2000.", "The hotel budget is $300.", "Forget what I said about the hotel."))
    assert current(engine) == ["My budget is $2000."], current(engine)


def test_an_extractor_withdraws_the_subject_it_keys(tmp_path: Path) -> None:
    """A draft of ``revises="withdrawn"`` from the host's own extractor: ``key`` names the subject."""

    def read(message: BaseMessage) -> dict[str, str]:
        said = str(message.content)
        return {"text": said, "revises": "withdrawn", "key": "budget"} if said.startswith("Drop") else {"text": said, "key": "my_budget"}

    ledger = FactsLedger(MemoryFactStore(), extractor=read)
    ledger.ingest([HumanMessage("My budget is $500.", id="h0"), HumanMessage("Drop the budget talk.", id="h1")], scope=TRIP)
    assert ledger.current("my_budget", scope=TRIP) is None
    assert ledger.store.find(FactQuery(reader=TRIP, valid=True)) == []


@pytest.mark.parametrize(
    ("first", "instead", "old"),
    [
        ("I'd like economy class.", "can we do business instead?", "economy"),
        ("I'd like economy class.", "Could we switch to business class instead?", "economy"),
        ("I'd like an aisle seat.", "Hmm, can I get a window seat instead?", "aisle"),
        ("I'd like economy class.", "Make it business instead.", "economy"),
        ("I'd like economy class.", "How about business instead?", "economy"),
    ],
)
def test_another_choice_asked_for_instead_replaces_the_choice(engine: ContextEngine, first: str, instead: str, old: str) -> None:
    """"can we do business instead?" was read as a question: economy stayed the choice."""
    view, _ = prepared(engine, chat("I need to book a flight to Boston.", first, instead))
    assert not [t for t in current(engine) if old in t], current(engine)
    assert [t for t in current(engine) if t.lower() in instead.lower()], current(engine)
    assert view["h1"].startswith("[outdated:"), view["h1"]


def test_a_choice_asked_for_instead_beside_two_choices_replaces_the_one_of_its_kind(engine: ContextEngine) -> None:
    # "business" is a class: it replaces economy class and leaves the seat in force
    prepared(engine, chat("I'd like economy class.", "I want a window seat.", "Can we do business instead?"))
    assert sorted(current(engine)) == ["Can we do business instead?", "I want a window seat."], current(engine)


@pytest.mark.parametrize("instead", ["Can we do Chicago instead?", "Make it Chicago instead.", "How about Delta instead?"])
def test_a_name_asked_for_instead_replaces_no_choice(engine: ContextEngine, instead: str) -> None:
    """"Can we do Chicago instead?" (another destination) took the key of the one choice in force
    and replaced economy class: a name says no class or seat."""
    prepared(engine, chat("I need to book a flight to Boston.", "I'd like economy class.", instead))
    assert "I'd like economy class." in current(engine), current(engine)


@pytest.mark.parametrize(
    ("seat", "instead"),
    [
        ("I'd like seat 14C.", "make it business instead"),
        ("I'd like a window seat.", "Make it business instead."),
        ("I'd like a window seat.", "Can we do business instead?"),
        ("I'd like an aisle seat.", "How about economy instead?"),
    ],
)
def test_a_class_asked_for_instead_keeps_the_seat(engine: ContextEngine, seat: str, instead: str) -> None:
    """"make it business instead" with a seat the one choice in force took the seat's key: the
    cabin class replaced seat 14C."""
    view, _ = prepared(engine, chat("I need to book a flight to Boston.", seat, instead))
    assert seat in current(engine), current(engine)
    assert not view["h1"].startswith("[outdated:"), view["h1"]


def test_a_class_asked_for_beside_a_seat_is_a_class_choice(engine: ContextEngine) -> None:
    # read as a choice of cabin class, the next class asked for replaces it, and the seat stays
    prepared(engine, chat("I'd like a window seat.", "Make it business instead.", "Can we do economy instead?"))
    assert current(engine) == ["Can we do economy instead?", "I'd like a window seat."], current(engine)


def test_a_class_asked_for_instead_replaces_the_class_beside_a_seat(engine: ContextEngine) -> None:
    # "business" is a cabin class: of the two choices in force it can mean the class alone
    prepared(engine, chat("I'd like economy class.", "I want a window seat.", "Can we do business instead?"))
    assert current(engine) == ["Can we do business instead?", "I want a window seat."], current(engine)


@pytest.mark.parametrize(
    ("first", "instead", "old"),
    [
        ("I'd like economy.", "make it business instead", "economy"),
        ("I'd like a window seat.", "can we do aisle instead?", "window"),
        ("I'd prefer the vegetarian meal.", "Can we do vegan instead?", "vegetarian"),
        ("I'd like the Hilton.", "make it marriott instead", "Hilton"),
    ],
)
def test_a_choice_of_the_same_kind_asked_for_instead_replaces_it(engine: ContextEngine, first: str, instead: str, old: str) -> None:
    prepared(engine, chat(first, instead))
    assert current(engine) == [instead[:1].upper() + instead[1:]], current(engine)


@pytest.mark.parametrize("instead", ["make it chicago instead", "can we do chicago instead?", "how about denver instead?", "let's do denver instead", "chicago instead"])
@pytest.mark.parametrize("first", ["I'd like economy class.", "I'd like a window seat.", "I'd like seat 14C."])
def test_a_name_typed_in_lower_case_asked_for_instead_replaces_no_choice(engine: ContextEngine, first: str, instead: str) -> None:
    """"make it chicago instead" (a destination typed in lower case) took the key of the one
    choice in force: the city replaced economy class, or the seat."""
    view, _ = prepared(engine, chat("I need to book a flight to Boston.", first, instead))
    assert first in current(engine), current(engine)
    assert not view["h1"].startswith("[outdated:"), view["h1"]


@pytest.mark.parametrize("instead", ["make it chicago instead", "Make it Chicago instead."])
def test_a_name_asked_for_instead_replaces_no_choice_of_either_kind(engine: ContextEngine, instead: str) -> None:
    prepared(engine, chat("I'd like economy class.", "I want a window seat.", instead))
    assert {"I'd like economy class.", "I want a window seat."} <= set(current(engine)), current(engine)


@pytest.mark.parametrize(
    ("first", "instead"),
    [
        ("I'd like economy class.", "Can we do Business instead?"),
        ("I'd like economy class.", "MAKE IT BUSINESS INSTEAD"),
        ("I'd like a window seat.", "Make It Aisle Instead."),
    ],
)
def test_a_class_or_seat_capitalized_asked_for_instead_replaces_its_kind(engine: ContextEngine, first: str, instead: str) -> None:
    """"Can we do Business instead?" (the class capitalized, as airlines write it) was read as a
    name: economy class stayed in force beside business."""
    prepared(engine, chat(first, instead))
    assert current(engine) == [instead], current(engine)


@pytest.mark.parametrize(("first", "instead"), [("I'd like the Hilton.", "make it business instead"), ("I'd like the cheapest fare.", "Can we do aisle instead?")])
def test_a_class_or_seat_asked_for_instead_keeps_a_choice_of_no_known_kind(engine: ContextEngine, first: str, instead: str) -> None:
    """"make it business instead" with "I'd like the Hilton" the one choice in force took the
    hotel's key: the cabin class replaced the hotel."""
    view, _ = prepared(engine, chat(first, instead))
    assert first in current(engine), current(engine)
    assert not view["h0"].startswith("[outdated:"), view["h0"]


@pytest.mark.parametrize("question", ["can we change the date?", "Can we do the return on Friday?", "Could you check the business fares?"])
def test_a_question_without_instead_states_nothing(engine: ContextEngine, question: str) -> None:
    prepared(engine, chat("I'd like economy class.", question))
    assert current(engine) == ["I'd like economy class."], current(engine)
