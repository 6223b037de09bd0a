"""Additions accumulate: "add X", "also invite Y" and list items never replace each other."""

from __future__ import annotations

import pytest

from ctxplugin import ContextConfig, Scope
from ctxplugin.facts.model import FactQuery
from ctxplugin.facts.rules import RuleExtractor
from ctxplugin.testing import chat, memory_engine
from ctxplugin.testing.planning import AGENDA, planning_turns

S = Scope(session_id="offsite", user_id="u1")
@pytest.mark.parametrize("mode", ["defaults", "compact"])
def test_planning_chat_last_view_keeps_city_invitees_title_and_every_agenda_item(mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if mode == "defaults":
        monkeypatch.delenv("CTXPLUGIN_MODE", raising=False)  # the tests' compact mode is not the default
    engine = memory_engine(ContextConfig())  # one thread
    turns = planning_turns()
    assert len(turns) == 30
    _, prepared = chat(engine, turns, scope=S, system="You are a planning assistant.", reply=lambda i, _: f"Noted ({i}).")
    view = "\n".join(str(m.content) for m in prepared.messages)
    assert "Lisbon" in view
    assert "platform team" in view and "invite design" in view.lower()
    assert "Platform Offsite 2026" in view
    assert "[outdated" not in view, "no user message is marked as replaced"
    assert prepared.report.outdated_marked == 0
    facts = engine.facts.store.find(FactQuery(reader=S, valid=True))
    texts = [f.text for f in facts]
    assert sum(t.startswith("Add agenda item") for t in texts) == len(AGENDA)
    assert "Invite the platform team only." in texts and "Also invite design." in texts
    assert {f.key for f in facts if "Lisbon" in f.text} == {"offsite"}


def test_additions_are_unkeyed_and_a_conflicting_value_still_replaces() -> None:
    rules = RuleExtractor()
    added = rules.from_text("Add agenda item 3: roadmap. Also invite design. - budget: 5k")
    assert added and all(d.key is None for d in added), added
    assert [d.kind for d in rules.from_text("Invite the finance lead.")] == ["decision"]
    # "too"/"as well" at the end add; "too" inside a sentence is not an addition
    assert rules.from_text("The venue is Porto as well.")[0].key is None
    assert rules.from_text("The room is too small.")[0].key == "room"
    # a statement about the same subject with another value is still keyed, so it replaces
    assert rules.from_text("The offsite is in Lisbon.")[0].key == "offsite"
    assert rules.from_text("Actually, the offsite is in Porto.")[0].key == "offsite"
    # numbered subjects are distinct subjects; the same number again is a real replacement
    assert rules.from_text("Agenda item 3: roadmap.")[0].key == "agenda_item_3"
    assert rules.from_text("Agenda item 4: hiring.")[0].key == "agenda_item_4"
