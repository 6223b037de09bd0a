"""Stored facts share one set of field names; nothing done through one of them reaches another."""

from __future__ import annotations

import copy
import pickle

import pytest
from pydantic import BaseModel, ConfigDict

from ctxplugin.facts import Fact, MemoryFactStore, Source, _shared_fields
from ctxplugin.testing.facts_contract import ALICE, make_fact


class LooseSource(Source):
    model_config = ConfigDict(frozen=False, validate_assignment=True)


class LooseFact(Fact):
    model_config = ConfigDict(frozen=False, validate_assignment=True)


def _stored(*facts: Fact) -> list[Fact]:
    store = MemoryFactStore()
    store.add(facts)
    return list(facts)


def test_a_change_to_the_field_names_of_one_stored_fact_reaches_no_other() -> None:
    first, second = _stored(make_fact("Order W1 ships", id="f1"), make_fact("Order W2 ships", id="f2"))
    names = set(second.model_fields_set)
    with pytest.raises(TypeError, match="model_copy"):
        first.model_fields_set.add("note")
    with pytest.raises(TypeError):
        first.source.model_fields_set.discard("type")
    assert second.model_fields_set == names


def test_copies_of_a_stored_fact_have_field_names_of_their_own() -> None:
    first, second = _stored(make_fact("Order W1 ships", id="f1"), make_fact("Order W2 ships", id="f2"))
    names = set(second.model_fields_set)
    for made in (
        first.model_copy(),
        first.model_copy(update={"note": "checked"}, deep=True),
        copy.copy(first),
        copy.deepcopy(first),
    ):
        made.model_fields_set.add("tags")
        assert "tags" in made.model_fields_set
    assert second.model_fields_set == first.model_fields_set == names


def test_facts_pickled_together_load_with_field_names_none_of_them_can_change_for_the_others() -> None:
    stored = _stored(make_fact("Order W1 ships", id="f1"), make_fact("Order W2 ships", id="f2"))
    first, second = pickle.loads(pickle.dumps(stored))
    names = set(second.model_fields_set)
    assert [first, second] == stored
    with pytest.raises(TypeError):
        first.model_fields_set.add("note")
    assert second.model_fields_set == names
    assert first.model_copy(update={"note": "checked"}).model_fields_set == names | {"note"}


def test_facts_that_take_assignment_keep_their_own_field_names() -> None:
    loose = [LooseFact(text=f"Order W{i} ships", id=f"f{i}", owner=ALICE, source=LooseSource(ref=f"m{i}")) for i in range(2)]
    first, second = _stored(*loose)
    names, source_names = set(second.model_fields_set), set(second.source.model_fields_set)
    first.note = "checked"  # type: ignore[misc]  # frozen in Fact, not in LooseFact
    first.source.call_id = "call_1"  # type: ignore[misc]
    assert second.model_fields_set == names
    assert second.source.model_fields_set == source_names


def test_nothing_is_shared_when_pydantic_copies_do_not_take_a_set_of_their_own(monkeypatch: pytest.MonkeyPatch) -> None:
    def shallow(self: BaseModel) -> BaseModel:  # what a pydantic that did not copy the set would do
        made = self.__class__.__new__(self.__class__)
        object.__setattr__(made, "__dict__", dict(self.__dict__))
        object.__setattr__(made, "__pydantic_extra__", self.__pydantic_extra__)
        object.__setattr__(made, "__pydantic_fields_set__", self.__pydantic_fields_set__)
        object.__setattr__(made, "__pydantic_private__", self.__pydantic_private__)
        return made

    monkeypatch.setattr(BaseModel, "__copy__", shallow)
    monkeypatch.setattr(_shared_fields, "_SAFE", None, raising=False)
    first, second = _stored(make_fact("Order W1 ships", id="f1"), make_fact("Order W2 ships", id="f2"))
    assert first.model_fields_set is not second.model_fields_set
    first.model_copy(update={"note": "checked"})
    assert "note" not in second.model_fields_set
