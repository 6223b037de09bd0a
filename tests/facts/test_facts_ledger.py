"""Supersession rules of the ledger, including the three test vectors of the state-based spec."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin import InvalidInputError
from ctxplugin.config import FactsConfig
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.facts.model import FactQuery
from ctxplugin.scope import Scope
from ctxplugin.testing import memory_engine
from ctxplugin.tokens import content_text

S = Scope(session_id="s1", user_id="u1", tenant_id="t1")


@pytest.fixture
def ledger() -> FactsLedger:
    return FactsLedger(MemoryFactStore(), FactsConfig())


def texts(ledger: FactsLedger, query: str, scope: Scope = S, k: int = 12) -> list[str]:
    return [h.fact.text for h in ledger.search(query, scope=scope, k=k)]


# ---------------------------------------------------------------- test vectors of the spec
def test_vector_1_basic_supersession(ledger: FactsLedger) -> None:
    v1 = ledger.write("Status: approved", key="status", scope=S)
    v2 = ledger.write("Status: cancelled", key="status_v2", scope=S, supersedes=v1.id)
    found = texts(ledger, "What is the current status?")
    assert "Status: cancelled" in found
    assert not any("approved" in t for t in found)
    old = ledger.get(v1.id, scope=S)
    assert old is not None and not old.is_valid and old.superseded_by == v2.id
    assert v2.supersedes == v1.id


def test_vector_2_emphatic_repetition_does_not_outweigh_supersession(ledger: FactsLedger) -> None:
    first = ledger.write("The order is approved", key="order", scope=S, importance=0.9)
    repeats = [ledger.write("The order is approved", key="order", scope=S) for _ in range(2)]
    assert {r.id for r in repeats} == {first.id}, "a repeated statement is stored once"
    ledger.write("The order is cancelled", key="order", scope=S, importance=0.2)
    found = texts(ledger, "Should we proceed with the order? Is it approved?")
    assert found == ["The order is cancelled"]
    assert [f.is_valid for f in ledger.history("order", scope=S)] == [False, True]


def test_vector_3_authority_override(ledger: FactsLedger) -> None:
    intern = Scope(session_id="s1", user_id="u1", tenant_id="t1")
    policy = ledger.write(
        "Max discount is 15%", key="discount_policy", scope=S, kind="constraint",
        authority="executive", source="policy", constraint_type="budget",
    )
    suggestion = ledger.write("Let's offer a 25% discount", key="discount_policy", scope=intern, authority="intern")
    assert not suggestion.is_valid and suggestion.refused and suggestion.superseded_by == policy.id
    found = texts(ledger, "Can we offer a 25% discount?", scope=intern)
    assert found == ["Max discount is 15%"]
    current = ledger.current("discount_policy", scope=S)
    assert current is not None and current.id == policy.id and current.memory_type == "organizational"
    # a manager is still below the executive; the policy owner itself can change it
    assert not ledger.write("Max discount is 20%", key="discount_policy", scope=S, authority="manager").is_valid
    raised = ledger.write("Max discount is 18%", key="discount_policy", scope=S, kind="constraint", authority="policy")
    assert raised.is_valid and raised.supersedes == policy.id


# ---------------------------------------------------------------- more rules
def test_supersession_chain_explicit_target_resolves_to_the_head(ledger: FactsLedger) -> None:
    a = ledger.write("Meeting on Tuesday 2pm", key="meeting", scope=S)
    b = ledger.write("Meeting on Thursday 3pm", key="meeting", scope=S)
    c = ledger.write("Meeting on Friday 10am", scope=S, supersedes=a.id)  # names the old one
    assert c.supersedes == b.id
    stored_b = ledger.get(b.id, scope=S)
    assert stored_b is not None and stored_b.superseded_by == c.id
    assert texts(ledger, "when is the meeting?") == ["Meeting on Friday 10am"]


def test_keys_compare_without_case_or_spacing(ledger: FactsLedger) -> None:
    ledger.write("Data Team on Project Alpha", key="Data Team Allocation", scope=S)
    ledger.write("Data Team reallocated to Project Beta", key="data_team_allocation", scope=S)
    assert len(ledger.history("DATA-team allocation", scope=S)) == 2
    assert texts(ledger, "which project is the data team on?") == ["Data Team reallocated to Project Beta"]


def test_correction_naming_the_old_value_supersedes_it(ledger: FactsLedger) -> None:
    (old,) = ledger.ingest([HumanMessage("We will use Postgres for the cache.", id="m1")], scope=S)
    (new,) = ledger.ingest([HumanMessage("Let's use MySQL instead of Postgres.", id="m2")], scope=S)
    stored = ledger.get(old.id, scope=S)
    assert stored is not None and stored.superseded_by == new.id
    assert texts(ledger, "which database for the cache?") == ["Let's use MySQL instead of Postgres."]


@pytest.mark.parametrize("fact_scope", ["hypothetical", "draft", "task"])
def test_scoped_facts_never_override_global_ones(ledger: FactsLedger, fact_scope: str) -> None:
    budget = ledger.write("Budget is 50k", key="budget", scope=S, kind="constraint")
    other = ledger.write("Budget is 80k", key="budget", scope=S, fact_scope=fact_scope, scope_id="x")  # type: ignore[arg-type]
    explicit = ledger.write("Budget is 90k", scope=S, fact_scope=fact_scope, supersedes=budget.id)  # type: ignore[arg-type]
    assert other.is_valid and explicit.is_valid and explicit.supersedes is None
    assert explicit.note is not None and budget.id in explicit.note
    current = ledger.current("budget", scope=S)
    assert current is not None and current.id == budget.id
    found = texts(ledger, "what is the budget?")
    assert "Budget is 50k" in found
    if fact_scope in ("hypothetical", "draft"):
        assert found == ["Budget is 50k"], "hypothetical and draft facts never reach the facts block"
        assert sorted(texts_in_scopes(ledger, fact_scope)) == ["Budget is 80k", "Budget is 90k"]


def texts_in_scopes(ledger: FactsLedger, fact_scope: str) -> list[str]:
    return [h.fact.text for h in ledger.search("budget", scope=S, fact_scopes=(fact_scope,))]  # type: ignore[arg-type]


def test_repair_propagation_marks_dependents_transitively(ledger: FactsLedger) -> None:
    base = ledger.write("Exchange rate is 1.10 USD per EUR", key="fx_rate", scope=S)
    derived = ledger.write("Budget in USD is 55k", key="budget_usd", scope=S, depends_on=[base.id])
    derived2 = ledger.write("Quarterly USD spend cap is 13.75k", key="cap_usd", scope=S, depends_on=[derived.id])
    unrelated = ledger.write("Team size is 6", key="team_size", scope=S)
    ledger.write("Exchange rate is 1.05 USD per EUR", key="fx_rate", scope=S)
    flags = {f.id: f for f in (ledger.get(i, scope=S) for i in (derived.id, derived2.id, unrelated.id)) if f}
    assert flags[derived.id].needs_review and flags[derived2.id].needs_review
    assert not flags[unrelated.id].needs_review
    assert base.id in (flags[derived.id].note or "")
    hit = next(h for h in ledger.search("budget in USD", scope=S) if h.fact.id == derived.id)
    assert hit.fact.needs_review and hit.score < hit.relevance, "facts to review rank lower"


def test_isolation_between_users_sessions_and_tenants(ledger: FactsLedger) -> None:
    alice = Scope(session_id="a", user_id="alice", tenant_id="t1")
    bob = Scope(session_id="b", user_id="bob", tenant_id="t1")
    other_tenant = Scope(session_id="a", user_id="alice", tenant_id="t2")
    ledger.write("Alice's budget is 50k", key="budget", scope=alice)
    ledger.write("Bob's budget is 10k", key="budget", scope=bob)
    assert texts(ledger, "budget", scope=alice) == ["Alice's budget is 50k"]
    assert texts(ledger, "budget", scope=bob) == ["Bob's budget is 10k"]
    assert texts(ledger, "budget", scope=other_tenant) == []
    assert len(ledger.history("budget", scope=alice)) == 1, "bob's write did not supersede alice's"


def test_user_visible_preferences_follow_the_user_across_sessions(ledger: FactsLedger) -> None:
    s1 = Scope(session_id="one", user_id="alice")
    s2 = Scope(session_id="two", user_id="alice")
    ledger.write("Prefers window seats", key="pref_seats", scope=s1, visibility="user", kind="preference")
    ledger.write("Prefers aisle seats", key="pref_seats", scope=s2, visibility="user", kind="preference")
    assert texts(ledger, "seat preference", scope=s1) == ["Prefers aisle seats"]


def test_current_prefers_authority_then_recency(ledger: FactsLedger) -> None:
    ledger.write("Launch on May 1", key="launch", scope=S, authority="manager")
    assert ledger.current("launch", scope=S) is not None
    assert ledger.current("unknown_key", scope=S) is None
    with pytest.raises(InvalidInputError):
        ledger.current("  ", scope=S)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"text": ""}, "empty"),
        ({"text": "x" * 501}, "500"),
        ({"text": "ok", "kind": "opinion"}, "kind"),
        ({"text": "ok", "importance": 2.0}, "importance"),
        ({"text": "ok", "supersedes": "fact_nope"}, "fact_nope"),
        ({"text": "ok", "visibility": "workspace"}, "workspace_id"),
    ],
)
def test_bad_writes_are_clear_value_errors(ledger: FactsLedger, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        ledger.write(scope=S, **kwargs)  # type: ignore[arg-type]
    assert ledger.search("ok", scope=S) == []


def test_visibility_user_needs_a_user() -> None:
    ledger = FactsLedger(MemoryFactStore())
    with pytest.raises(ValueError, match="user_id"):
        ledger.write("x is y", scope=Scope(session_id="s"), visibility="user")


# ---------------------------------------------------------------- retrieval ranking
class Clock:
    def __init__(self) -> None:
        self.now = datetime(2025, 1, 1, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_strategies_order_equally_relevant_facts_by_recency_or_importance() -> None:
    clock = Clock()
    ledger = FactsLedger(MemoryFactStore(), FactsConfig(half_life_hours=1), clock=clock)
    old_important = ledger.write("Deploy window for service alpha", scope=S, importance=1.0)
    clock.now += timedelta(hours=10)
    new_minor = ledger.write("Deploy window for service beta", scope=S, importance=0.1)
    query = "deploy window for service"
    recent = [h.fact.id for h in ledger.search(query, scope=S, strategy="recent")]
    important = [h.fact.id for h in ledger.search(query, scope=S, strategy="important")]
    assert recent == [new_minor.id, old_important.id]
    assert important == [old_important.id, new_minor.id]


def test_relevance_dominates_recency_and_importance() -> None:
    clock = Clock()
    ledger = FactsLedger(MemoryFactStore(), FactsConfig(), clock=clock)
    relevant = ledger.write("The data team works on Project Beta", scope=S, importance=0.1)
    clock.now += timedelta(days=30)
    ledger.write("Lunch is served at noon", scope=S, importance=1.0)
    hits = ledger.search("which project is the data team on?", scope=S)
    assert hits[0].fact.id == relevant.id


def test_tag_overlap_and_exact_identifiers_rank_first(ledger: FactsLedger) -> None:
    target = ledger.write("Order #W1234 ships on Friday", scope=S)
    ledger.write("Order #W1235 ships on Monday", scope=S)
    ledger.write("Orders usually ship within two days", scope=S, tags=["shipping"])
    assert ledger.search("when does W1234 ship?", scope=S)[0].fact.id == target.id
    tagged = ledger.search("when do orders ship?", scope=S, tags=["shipping"])
    assert tagged[0].fact.text == "Orders usually ship within two days"


def test_min_relevance_k_and_blank_queries() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig(min_relevance=0.3))
    ledger.write("The data team works on Project Beta", scope=S)
    ledger.write("Lunch is served at noon", scope=S)
    assert texts(ledger, "which project is the data team on?") == ["The data team works on Project Beta"]
    assert ledger.search("data team", scope=S, k=0) == []
    assert ledger.search("   ", scope=S) == []


# ---------------------------------------------------------------- implicit supersession (rule 2)
def test_rule_2_implicit_supersession_of_the_spec(ledger: FactsLedger) -> None:
    (old,) = ledger.ingest([HumanMessage("The meeting is Tuesday at 2pm.", id="m1")], scope=S)
    (new,) = ledger.ingest([HumanMessage("Let's do the meeting Thursday at 3pm.", id="m2")], scope=S)
    stored = ledger.get(old.id, scope=S)
    assert stored is not None and not stored.is_valid and stored.superseded_by == new.id
    assert new.supersedes == old.id and new.key == old.key == "meeting", "the new statement takes over the key"
    assert texts(ledger, "when is the meeting?") == ["Let's do the meeting Thursday at 3pm."]
    # having the key, the next change supersedes by key
    latest = ledger.write("Meeting moved to Friday", key="meeting", scope=S)
    assert [f.id for f in ledger.history("meeting", scope=S) if f.is_valid] == [latest.id]


@pytest.mark.parametrize(
    ("second", "why"),
    [
        ("The standup meeting is Thursday at 3pm.", "a statement keyed otherwise is about another subject"),
        ("Thursday at 3pm works for lunch.", "the subject is not named"),
        ("Lunch is Thursday at 3pm.", "the subject is not named"),
        ("Room 4 at 2pm on Tuesday suits the meeting.", "no conflicting value"),
        ("We hold the meeting on Tuesday and Friday at 2pm.", "an added value is no conflict"),
        ("The meeting needs a projector.", "no typed value at all"),
    ],
)
def test_implicit_supersession_needs_the_subject_and_a_conflicting_value(
    ledger: FactsLedger, second: str, why: str
) -> None:
    first = ledger.write("The meeting is Tuesday at 2pm.", key="meeting", scope=S)
    ledger.ingest([HumanMessage(second, id="m2")], scope=S)
    stored = ledger.get(first.id, scope=S)
    assert stored is not None and stored.is_valid, why


def test_implicit_supersession_respects_slots_scopes_authority_and_the_switch() -> None:
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    meeting = ledger.write("The meeting is Tuesday at 2pm.", key="meeting", scope=S)
    other_session = Scope(session_id="s2", user_id="u1", tenant_id="t1")
    assert ledger.write("The meeting is Thursday at 3pm.", scope=other_session).supersedes is None
    hypothetical = ledger.write("What if the meeting were Friday?", scope=S, fact_scope="hypothetical")
    assert hypothetical.supersedes is None
    from_tool = ledger.write("meeting rescheduled to Monday 9am", scope=S, source="tool")
    assert from_tool.supersedes is None, "tool outputs never supersede implicitly"
    current = ledger.current("meeting", scope=S)
    assert current is not None and current.id == meeting.id

    policy = ledger.write("Refunds close on Friday.", key="refunds", scope=S, kind="constraint", authority="executive")
    refused = ledger.write("Refunds are open until Sunday.", scope=S, authority="intern")
    assert refused.refused and refused.superseded_by == policy.id, "a lower authority cannot override a constraint"

    off = FactsLedger(MemoryFactStore(), FactsConfig(implicit_supersession=False))
    kept = off.write("The meeting is Tuesday at 2pm.", key="meeting", scope=S)
    off.write("Let's do the meeting Thursday at 3pm.", scope=S)
    stored = off.get(kept.id, scope=S)
    assert stored is not None and stored.is_valid


@pytest.mark.parametrize(
    ("first", "denial"),
    [
        ("The meeting is on Tuesday.", "The meeting is not on Friday."),
        ("The deadline is Friday.", "The deadline isn't Monday."),
        ("The meeting is at 2pm.", "The meeting is not at 3pm."),
    ],
)
def test_denying_another_value_does_not_replace_the_current_one(first: str, denial: str) -> None:
    engine = memory_engine()
    conversation = [
        HumanMessage(first, id="h1"),
        AIMessage("Noted.", id="a1"),
        HumanMessage(denial, id="h2"),
        AIMessage("Ok.", id="a2"),
        HumanMessage("What do we have so far?", id="h3"),
    ]
    prepared = engine.prepare(conversation, scope=S)
    shown = [content_text(m.content) for m in prepared.messages]
    assert first in shown, "the statement still in force is not marked outdated"
    valid = [f.text for f in engine.facts.store.find(FactQuery(reader=S, valid=True))]
    assert sorted(valid) == sorted([first, denial])


def test_denying_the_current_value_still_replaces_it(ledger: FactsLedger) -> None:
    (old,) = ledger.ingest([HumanMessage("The meeting is on Tuesday.", id="m1")], scope=S)
    (new,) = ledger.ingest([HumanMessage("The meeting is not on Tuesday.", id="m2")], scope=S)
    assert new.supersedes == old.id and new.key == "meeting"
    (shipped,) = ledger.ingest([HumanMessage("The order is shipped.", id="m3")], scope=S)
    (later,) = ledger.ingest([HumanMessage("The order is not shipped yet.", id="m4")], scope=S)
    assert later.supersedes == shipped.id


def test_facts_stored_in_memory_share_the_set_of_their_field_names_and_copies_stay_apart(ledger: FactsLedger) -> None:
    one = ledger.write("The build uses Python 3.11", key="python_version", scope=S)
    two = ledger.write("The deploy target is Fly", key="deploy_target", scope=S)
    first, second = (ledger.get(f.id, scope=S) for f in (one, two))
    assert first is not None and second is not None
    assert first.model_fields_set is second.model_fields_set
    assert first.source.model_fields_set is second.source.model_fields_set
    names = set(first.model_fields_set)
    copied = first.model_copy(update={"note": "checked"})
    assert copied.model_fields_set == names | {"note"}
    assert first.model_fields_set == second.model_fields_set == names
