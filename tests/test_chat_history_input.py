"""What ``engine.history(session_id).add_messages`` is given: anything but messages is refused
before a message of the turn is kept, so one bad value does not break every later read of the
conversation."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage

from ctxplugin import ContextEngine, InvalidInputError
from ctxplugin.testing import memory_engine


@pytest.fixture(params=["memory", "embedded"])
def engine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    engine = memory_engine() if request.param == "memory" else ContextEngine.embedded(tmp_path / "store")
    yield engine
    engine.close()


@pytest.mark.parametrize(
    ("odd", "named"),
    [
        ({"role": "user", "content": "hi"}, "a dict, not a langchain-core BaseMessage"),
        (("user", "hi"), "a tuple, not a langchain-core BaseMessage"),
        ("hi", "a str, not a langchain-core BaseMessage"),
        (None, "a NoneType, not a langchain-core BaseMessage"),
        (RemoveMessage(id="m1"), "a RemoveMessage"),
    ],
    ids=["dict", "tuple", "str", "None", "RemoveMessage"],
)
def test_a_value_that_is_no_message_is_refused_and_nothing_of_the_turn_is_kept(engine: Any, odd: object, named: str) -> None:
    history = engine.history("s1")
    history.add_messages([HumanMessage("first")])
    with pytest.raises(InvalidInputError, match=rf"message 1 of the 2 added is {named}"):
        history.add_messages([HumanMessage("second"), odd])
    history.add_messages([AIMessage("third")])
    assert [m.content for m in history.full_messages] == ["first", "third"]
    assert [m.content for m in history.messages] == ["first", "third"], "the conversation still reads"


def test_one_message_given_where_a_list_goes_is_refused(engine: Any) -> None:
    history = engine.history("s1")
    with pytest.raises(InvalidInputError, match=r"add_messages\(\) takes a list of messages, got HumanMessage; add_message"):
        history.add_messages(HumanMessage("hi"))
    assert history.full_messages == []
    history.add_message(HumanMessage("hi"))
    assert [m.content for m in history.messages] == ["hi"]


def test_messages_given_as_any_iterable_are_kept(engine: Any) -> None:
    history = engine.history("s1")
    history.add_messages(m for m in [HumanMessage("first"), AIMessage("second")])
    history.add_messages({"q": HumanMessage("third")}.values())
    assert [m.content for m in history.full_messages] == ["first", "second", "third"]
    with pytest.raises(InvalidInputError, match=r"takes a list of messages, got dict$"):
        history.add_messages({"q": HumanMessage("fourth")})
