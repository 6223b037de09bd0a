"""When a new replacement comes into force, each message's read is brought up to date from the
one before by the changes added: it gives what reading the message against all of them gives."""

from __future__ import annotations

import gc

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, Scope
from ctxplugin.facts import _reading
from ctxplugin.facts._changes import change_of
from ctxplugin.facts.outdated import Marking, in_force
from ctxplugin.testing import memory_engine
from ctxplugin.testing.facts_contract import make_fact

TEAMS = ["data", "web", "infra", "mobile"]
PROJECTS = ["Alpha", "Beta", "Gamma", "Delta", "Epsilon"]


def two_teams() -> list[BaseMessage]:
    """Where two teams are, each said by the user and acknowledged."""
    return [
        HumanMessage("The data team is on Project Alpha.", id="h0"),
        AIMessage("Noted.", id="a0"),
        HumanMessage("The web team is on Project Gamma.", id="h1"),
        AIMessage("Noted.", id="a1"),
    ]


def notes_of(read: _reading.Read) -> tuple[object, ...]:
    empty, stating, kind = read
    return empty, [(c.old.id, c.new.id, c.note, c.short) for c in stating], kind


def test_reads_brought_up_to_date_equal_reads_made_afresh(mocker: MockerFixture) -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base"))
    scope = Scope(session_id="rereading")
    history: list[BaseMessage] = [SystemMessage("You plan the teams' work.")]
    for i, team in enumerate(TEAMS):
        history += [HumanMessage(f"The {team} team is on Project {PROJECTS[i]}.", id=f"h-{team}"), AIMessage("Noted.", id=f"a-{team}")]
    brought_up = mocker.spy(_reading, "_brought_up")
    versions = set()
    for round_, team in enumerate(TEAMS * 2):
        project = PROJECTS[(TEAMS.index(team) + round_ + 1) % len(PROJECTS)]
        history += [
            HumanMessage(f"Actually, the {team} team moved to Project {project}.", id=f"move-{round_}"),
            AIMessage(f"Understood: {team} on {project}.", id=f"ok-{round_}"),
            HumanMessage(f"What is the {team} team on?", id=f"ask-{round_}"),
        ]
        engine.prepare(history, scope=scope)
        rules = in_force(engine.facts, scope)
        versions.add(rules.version)
        for message in history[1:]:
            assert notes_of(_reading.read(message, rules)) == notes_of(
                _reading._read(message, rules.candidates, rules.provisional)
            ), f"round {round_}: {message.content!r}"
    assert len(versions) >= 4, "the replacements did not change the facts in force"
    assert brought_up.call_count > 0, "no read was brought up to date: the check checks nothing"


def test_a_marking_carried_across_a_new_replacement_equals_one_made_afresh() -> None:
    engine = memory_engine(ContextConfig(encoding="cl100k_base"))
    scope = Scope(session_id="carried-marking")
    history = two_teams()
    carried = Marking()
    engine.prepare([SystemMessage("Plan."), *history], scope=scope)
    carried.update(history, in_force(engine.facts, scope), spans={}, asides={})
    for turn, line in enumerate(["Actually, the web team moved to Project Delta.", "Actually, the data team moved to Project Beta."]):
        grown = len(history)
        history += [HumanMessage(line, id=f"m{turn}"), AIMessage("Understood.", id=f"u{turn}")]
        engine.prepare([SystemMessage("Plan."), *history], scope=scope)
        rules = in_force(engine.facts, scope)
        carried.update(history, rules, spans={}, asides={}, start=grown)
        fresh = Marking()
        fresh.update(history, rules, spans={}, asides={})
        assert [m.content for m in carried.out] == [m.content for m in fresh.out]
        assert carried.count == fresh.count
    assert carried.count == 2
    assert str(carried.out[0].content).startswith("[outdated:")
    assert str(carried.out[2].content).startswith("[outdated:")


@pytest.mark.parametrize(("keep", "read_first"), [({0}, False), (set(), True)], ids=["kept-message", "read-by-another"])
def test_marks_before_the_first_message_a_new_replacement_restates_stand(keep: set[int], read_first: bool) -> None:
    # a message kept as sent (never read: it gets no mark), or one another reader already read
    # under the new rules, is not taken as restated: the marks before the message the
    # replacement is about stand, and only the marks from it on are made again
    engine = memory_engine(ContextConfig(encoding="cl100k_base"))
    scope = Scope(session_id="marks-stand")
    history: list[BaseMessage] = [
        HumanMessage("Please plan the work of the teams for the quarter.", id="task"),
        AIMessage("Noted.", id="a"),
        *two_teams(),
    ]
    engine.prepare([SystemMessage("Plan."), *history], scope=scope)
    carried = Marking()
    carried.update(history, in_force(engine.facts, scope), spans={}, asides={}, keep=keep)
    grown = len(history)
    history += [HumanMessage("Actually, the web team moved to Project Delta.", id="m"), AIMessage("Understood.", id="u")]
    engine.prepare([SystemMessage("Plan."), *history], scope=scope)
    rules = in_force(engine.facts, scope)
    assert rules.version != carried.version
    if read_first:
        _reading.read(history[2], rules)
    carried.update(history, rules, spans={}, asides={}, keep=keep, start=grown)
    assert carried.kept == 4, "marks before the restated message were made again"
    assert str(carried.out[4].content).startswith("[outdated:")
    fresh = Marking()
    fresh.update(history, rules, spans={}, asides={}, keep=keep)
    assert [m.content for m in carried.out] == [m.content for m in fresh.out]
    assert carried.count == fresh.count == 1


def test_a_later_mark_points_back_once_an_earlier_message_quotes_the_same_replacement() -> None:
    # two old statements replaced by one new fact: the first message stating either quotes the
    # replacement in full, the later ones point back. When a new change makes an earlier message
    # state it, a later message whose own read did not change must point back now
    new = make_fact("The web team moved to Project Delta.", key="web_team_project")
    first = make_fact("The web team is on Project Gamma.", key="web_team_project")
    second = make_fact("Web team status: Gamma rollout for the web team.", key="web_team_project")
    history: list[BaseMessage] = [
        HumanMessage("The web team is on Project Gamma.", id="m0"),
        AIMessage("Noted.", id="a0"),
        HumanMessage("Web team status: Gamma rollout for the web team.", id="m1"),
        AIMessage("Noted.", id="a1"),
    ]
    one = _reading.in_force_of([change_of(second, new)], [])
    both = _reading.in_force_of([change_of(first, new), change_of(second, new)], [])
    carried = Marking()
    carried.update(history, one, spans={}, asides={})
    assert carried.count == 1 and str(carried.out[2].content).startswith("[outdated: web_team_project is now:")
    carried.update(history, both, spans={}, asides={}, start=len(history))
    fresh = Marking()
    fresh.update(history, both, spans={}, asides={})
    assert [m.content for m in carried.out] == [m.content for m in fresh.out]
    assert str(carried.out[0].content).startswith("[outdated: web_team_project is now:")
    assert str(carried.out[2].content).startswith("[outdated: web_team_project changed, as noted above]")
    assert carried.kept == 0


def _marked_again(history: list[BaseMessage], rules: _reading.InForce, previous: int) -> Marking:
    """``history`` marked with its last message and, first, the one at ``previous`` kept as
    sent; then grown by a reply and a new user message, ``previous`` marked again."""
    carried = Marking()
    carried.update(history, rules, spans={}, asides={}, keep={previous})
    grown = len(history)
    history += [AIMessage("Noted.", id="reply"), HumanMessage("What is next on the plan?", id="next")]
    carried.update(history, rules, spans={}, asides={}, keep={len(history) - 1}, start=grown, again=(previous,))
    fresh = Marking()
    fresh.update(history, rules, spans={}, asides={}, keep={len(history) - 1})
    assert [m.content for m in carried.out] == [m.content for m in fresh.out]
    assert carried.count == fresh.count
    return carried


def test_the_previous_user_message_is_marked_in_place_when_the_user_speaks_again() -> None:
    # the user's previous message was shown as sent; now it is marked, pointing back to the
    # replacement an earlier message quotes, and the marks between them stand
    new = make_fact("The web team moved to Project Delta.", key="web_team_project")
    old = make_fact("The web team is on Project Gamma.", key="web_team_project")
    rules = _reading.in_force_of([change_of(old, new)], [])
    history: list[BaseMessage] = [
        HumanMessage("The web team is on Project Gamma.", id="m0"),
        AIMessage("Noted.", id="a0"),
        HumanMessage("The web team is on Project Gamma.", id="m1"),
    ]
    carried = _marked_again(history, rules, previous=2)
    assert carried.count == 2
    assert str(carried.out[2].content).startswith("[outdated: web_team_project changed, as noted above]")
    assert carried.kept == 2, "the previous user message's mark changed"


def test_marks_after_the_previous_user_message_are_made_again_when_it_quotes_the_replacement() -> None:
    # a reply after the user's previous message quoted the replacement in full while that
    # message was shown as sent; marked now, the message quotes it and the reply points back
    new = make_fact("The web team moved to Project Delta.", key="web_team_project")
    old = make_fact("The web team is on Project Gamma.", key="web_team_project")
    rules = _reading.in_force_of([change_of(old, new)], [])
    history: list[BaseMessage] = [
        HumanMessage("Plan the quarter.", id="m0"),
        HumanMessage("The web team is on Project Gamma.", id="m1"),
        AIMessage("The web team is on Project Gamma.", id="a1"),
    ]
    carried = _marked_again(history, rules, previous=1)
    assert str(carried.out[1].content).startswith("[outdated: web_team_project is now:")
    assert str(carried.out[2].content).startswith("[outdated: web_team_project changed, as noted above]")
    assert carried.kept == 1


TEAM_LINES = {
    team: [make_fact(f"The {team} team is on Project {project}.", key=f"{team}_team_project") for project in PROJECTS]
    for team in TEAMS
}


def team_history() -> list[BaseMessage]:
    """Each team's projects in turn, said by the user and restated by the assistant."""
    history: list[BaseMessage] = []
    for project in PROJECTS:
        for team in TEAMS:
            history += [
                HumanMessage(f"The {team} team is on Project {project}.", id=f"h-{team}-{project}"),
                AIMessage(f"Noted: the {team} team is on Project {project}.", id=f"a-{team}-{project}"),
            ]
    return history


STEPS = st.lists(
    st.lists(st.tuples(st.sampled_from(TEAMS[:2]), st.integers(0, 3), st.integers(1, 4)), max_size=4),
    min_size=2,
    max_size=6,
)
"""Sets of replacements in force, one after another (one old project to a later one, per team)."""


def assert_carried_equals_afresh(history: list[BaseMessage], steps: list[list[tuple[str, int, int]]]) -> None:
    """A marking carried from step to step of ``steps`` marks every message of ``history`` as
    one made afresh at each step does."""
    carried = Marking()
    for step in steps:
        changes = [
            change_of(TEAM_LINES[team][old], TEAM_LINES[team][min(old + ahead, len(PROJECTS) - 1)])
            for team, old, ahead in dict.fromkeys(step)
        ]
        rules = _reading.in_force_of(changes, [])
        carried.update(history, rules, spans={}, asides={}, start=len(history))
        fresh = Marking()
        fresh.update(history, rules, spans={}, asides={})
        assert [m.content for m in carried.out] == [m.content for m in fresh.out]
        assert carried.count == fresh.count
        assert carried.quoted == fresh.quoted


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_a_marking_carried_across_changes_in_force_equals_one_made_afresh(steps: list[list[tuple[str, int, int]]]) -> None:
    # changes come into force, leave it and come back, as the most recent ones of a long session do
    assert_carried_equals_afresh(team_history(), steps)


def with_chatter(history: list[BaseMessage]) -> list[BaseMessage]:
    """``history`` with messages between that state no replacement: empty, unrelated, or asking
    about the teams without a value (a long chat's most messages)."""
    out: list[BaseMessage] = []
    for index, message in enumerate(history):
        out.append(message)
        if index % 3 == 2:
            out += [
                AIMessage("", id=f"empty-{index}"),
                HumanMessage(f"Order {4500 + index} shipped to Lyon; which team is on which project again?", id=f"ask-{index}"),
                AIMessage("Checking the plan.", id=f"check-{index}"),
            ]
    return out


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(STEPS)
def test_a_marking_carried_in_a_long_chat_equals_one_made_afresh(steps: list[list[tuple[str, int, int]]]) -> None:
    # most messages of a long chat state no replacement: a carried marking passes over them
    # without reading them, and still marks every message as one made afresh does
    assert_carried_equals_afresh(with_chatter(team_history()), steps)


SAID = st.tuples(st.sampled_from(["human", "ai", "tool"]), st.sampled_from(TEAMS[:2]), st.integers(0, 2), st.booleans())


def _said(index: int, role: str, team: str, project: int, states: bool) -> BaseMessage:
    text = f"The {team} team is on Project {PROJECTS[project]}." if states else "Noted, next step."
    if role == "human":
        return HumanMessage(text, id=f"m{index}")
    if role == "ai":
        return AIMessage(text, id=f"m{index}")
    return ToolMessage(text, tool_call_id=f"call{index}", id=f"m{index}")


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(SAID, min_size=2, max_size=14),
    st.lists(st.tuples(st.sampled_from(TEAMS[:2]), st.integers(0, 1), st.integers(1, 2), st.integers(0, 13), st.integers(0, 6)), max_size=3),
    st.dictionaries(st.integers(0, 13), st.sampled_from(["hypothetical", "draft"]), max_size=3),
)
def test_a_marking_grown_turn_by_turn_equals_one_made_afresh(
    said: list[tuple[str, str, int, bool]], moves: list[tuple[str, int, int, int, int]], spans: dict[int, str]
) -> None:
    # a conversation of user, assistant and tool messages stating where the teams are, grown
    # one message at a time with the latest user message kept as sent, while replacements come
    # into force: once the user speaks again, their previous message is marked in place; every
    # step marks as one made afresh
    changes = []
    for team, old, ahead, at, since in dict.fromkeys(moves):
        new = TEAM_LINES[team][min(old + ahead, len(PROJECTS) - 1)]
        new = new.model_copy(update={"source": new.source.model_copy(update={"ref": f"m{at}"})})
        changes.append((since, change_of(TEAM_LINES[team][old], new)))
    history: list[BaseMessage] = []
    carried = Marking()
    latest = -1
    for index, said_here in enumerate(said):
        history.append(_said(index, *said_here))
        rules = _reading.in_force_of([change for since, change in changes if since <= index], [])
        was_latest = latest
        if isinstance(history[-1], HumanMessage):
            latest = index
        again = (was_latest,) if was_latest not in (-1, latest) else ()
        shown = {i: kind for i, kind in spans.items() if i < len(history)}
        keep = {latest} if latest >= 0 else set()
        carried.update(history, rules, spans=shown, asides={}, keep=keep, start=index, again=again)
        fresh = Marking()
        fresh.update(history, rules, spans=shown, asides={}, keep=keep)
        assert [m.content for m in carried.out] == [m.content for m in fresh.out], index
        assert carried.count == fresh.count


def test_a_message_given_new_content_or_a_new_ref_is_read_for_its_new_words_and_refs() -> None:
    # words and refs are kept per message: an edited message must not keep those of its old text
    message = HumanMessage("The data team is on Project Alpha.", id="h0")
    words, refs = _reading._terms(message)
    assert "alpha" in words and set(refs) == {"h0"}
    message.content = "The data team is on Project Beta."
    words, refs = _reading._terms(message)
    assert "beta" in words and "alpha" not in words
    message.additional_kwargs = {"ctxplugin": {"ref": "cas:answer"}}
    assert set(_reading._terms(message)[1]) == {"h0", "cas:answer"}


def test_a_carried_marking_brings_each_read_up_from_its_own_previous_rules(mocker: MockerFixture) -> None:
    # the data team's messages were last read two replacements ago (the web team's move since
    # did not concern them); when the data team's replacement changes, each is brought up from
    # the rules the marking was made under, by one step, not from the rules it was last read at
    # (a long chat's messages were last read at as many different rules): and still marks every
    # message as a marking made afresh does
    history = with_chatter(team_history())
    data, web = TEAM_LINES["data"], TEAM_LINES["web"]
    steps = [
        [change_of(data[0], data[1])],
        [change_of(data[0], data[1]), change_of(web[2], web[4])],
        [change_of(data[0], data[3]), change_of(web[2], web[4])],
    ]
    carried = Marking()
    stepped = mocker.spy(_reading, "_step")
    for changes in steps:
        rules = _reading.in_force_of(changes, [])
        was = carried.version
        stepped.reset_mock()
        carried.update(history, rules, spans={}, asides={}, start=len(history))
        assert {call.args[0] for call in stepped.call_args_list} <= {was}, "a read brought up from older rules"
    fresh = Marking()  # (made last: it reads every message under the rules in force)
    fresh.update(history, rules, spans={}, asides={})
    assert [m.content for m in carried.out] == [m.content for m in fresh.out]
    assert carried.count == fresh.count
    assert any(str(m.content).startswith("[outdated: data_team_project is now: The data team is on Project Delta") for m in carried.out)


def test_the_refs_kept_for_a_message_are_strings_alone() -> None:
    # kept for as long as the message is memoised: a tuple of strings is no object the garbage
    # collector goes through again, a set is
    message = ToolMessage("deploy finished", tool_call_id="call_7", id="msg_7")
    words, refs = _reading._terms(message)
    gc.collect()
    assert sorted(refs) == ["call_7", "msg_7"]
    assert "deploy" in words
    assert not gc.is_tracked(refs)
