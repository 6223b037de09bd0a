"""Session ids made from thread ids and namespaces: one session per (thread id, namespace), for
any strings, and the session ids of ordinary thread ids unchanged."""

from __future__ import annotations

import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxplugin import Scope
from ctxplugin.scope import namespaced, scope_from_config, session_part


def session(thread: str, namespace: str | None = None) -> str:
    return scope_from_config({"configurable": {"thread_id": thread}}, namespace=namespace).session_id


@pytest.mark.parametrize(("value", "escaped"), [
    ("a/b", "a%2Fb"), ("a%2Fb", "a%252Fb"), ("%", "%25"), ("/", "%2F"), ("a%/", "a%25%2F"),
    ("plain", "plain"), ("a|b:c d", "a|b:c d"),
])
def test_session_part_escapes_only_slash_and_percent(value: str, escaped: str) -> None:
    assert session_part(value) == escaped


def test_a_thread_id_shaped_like_a_namespaced_session_names_another_session() -> None:
    assert session("a", "b") == "a/b"
    assert session("a/b") == "a%2Fb"
    assert session("a/b", "c") == "a%2Fb/c" != session("a", "b/c") == "a/b%2Fc"
    assert session("a%2Fb") == "a%252Fb" != session("a/b")


def test_a_blank_thread_id_is_a_thread_of_its_own() -> None:
    """LangGraph keeps a thread whose id is only spaces (its checkpoints are under it): its
    session id is escaped, since a Scope refuses a blank session id, rather than failing the run."""
    assert session(" ") == "%20" != session("  ") == "%20%20" != session("\t") == "%09"
    assert session(" ", "worker") == "%20/worker" and session("t", " ") == "t/%20"
    assert session("%20") == "%2520" and session("\u3000") == "%E3%80%80"


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.text(alphabet="a/%2F5 \t", min_size=1, max_size=6), min_size=2, max_size=2, unique=True),
       st.none() | st.text(alphabet="a/%2F5 \t", min_size=1, max_size=4))
def test_session_part_is_injective(values: list[str], namespace: str | None) -> None:
    first, second = values
    assert session_part(first) != session_part(second)
    assert session(first, namespace) != session(second, namespace)
    assert session(first) != session(first, namespace or "n")


@pytest.mark.parametrize("thread", ["t-9", str(uuid.uuid4()), "user:42|chat 7", "été"])
def test_ordinary_thread_ids_keep_their_session_ids(thread: str) -> None:
    assert session(thread) == thread
    assert session(thread, "worker") == f"{thread}/worker"


def test_the_callers_own_session_ids_are_kept_as_given() -> None:
    fixed = Scope(session_id="team/planning", user_id="u1")
    assert scope_from_config({"configurable": {"ctxplugin_scope": fixed}}) == fixed
    assert scope_from_config({"configurable": {"ctxplugin_scope": fixed}}, namespace="b").session_id == "team%2Fplanning/b"
    assert scope_from_config(None, "shared/room").session_id == "shared/room"
    assert scope_from_config(None, "shared/room", namespace="b").session_id == "shared%2Froom/b"
    assert namespaced(fixed, None) is fixed
    assert namespaced(fixed, "x").user_id == "u1"
