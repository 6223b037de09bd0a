"""Facts on a Chroma server: scopes whose ids joined alike under the old keys stay apart."""

from __future__ import annotations

import uuid

import pytest

from ctxplugin.config import FactsConfig
from ctxplugin.facts import ChromaFactStore, FactsLedger
from ctxplugin.scope import Scope

ALICE = Scope(user_id="a", session_id="b|c")
MALLORY = Scope(user_id="a|b", session_id="c")


@pytest.mark.chroma_server
def test_facts_on_a_chroma_server_keep_colliding_scopes_apart(chroma_url: str) -> None:
    with ChromaFactStore.http(chroma_url, config=FactsConfig(collection=f"t{uuid.uuid4().hex[:12]}")) as store:
        ledger = FactsLedger(store)
        ledger.write("account balance is 1024.00", scope=MALLORY, key="balance")
        ledger.write("account balance is 7.50", scope=ALICE, key="balance")
        assert [s.fact.text for s in ledger.search("account balance", scope=ALICE)] == ["account balance is 7.50"]
        assert [s.fact.text for s in ledger.search("account balance", scope=MALLORY)] == ["account balance is 1024.00"]
        mallory = ledger.current("balance", scope=MALLORY)
        assert mallory is not None and mallory.superseded_by is None
