"""Ids of ``ctxplugin.testing``'s scripted replies and tool calls in two processes sharing a thread.

A chat model's reply id names one message; LangGraph's ``add_messages`` replaces a message in
the state when a new one has its id. A tool message answers its call by the call's id. Two
processes that each script their own model and continue one thread (a restart, a second worker)
must not reuse each other's ids, or the second process overwrites the first one's replies, or
answers the first one's tool calls with its own tool results.
"""

from __future__ import annotations

import subprocess
import sys

from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin.testing import ScriptedChatModel, tool_call

FIRST_REPLY_ID = (
    "from ctxplugin.testing import ScriptedChatModel\n"
    "from langchain_core.messages import AIMessage, HumanMessage\n"
    "print(ScriptedChatModel(script=[AIMessage('hi')]).invoke([HumanMessage('q')]).id)\n"
)
FIRST_CALL_ID = "from ctxplugin.testing import tool_call\nprint(tool_call('search', {})['id'])\n"


def printed_by_a_new_process(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_two_processes_give_their_replies_different_ids() -> None:
    ids = {printed_by_a_new_process(FIRST_REPLY_ID) for _ in range(2)}
    assert len(ids) == 2, f"both processes named their first reply {ids}"
    mine = ScriptedChatModel(script=[AIMessage("a")]).invoke([HumanMessage("q")]).id
    assert mine not in ids


def test_ids_given_in_the_script_are_kept() -> None:
    reply = ScriptedChatModel(script=[AIMessage("a", id="mine")]).invoke([HumanMessage("q")])
    assert reply.id == "mine"


def test_two_processes_give_their_tool_calls_different_ids() -> None:
    ids = {printed_by_a_new_process(FIRST_CALL_ID) for _ in range(2)}
    assert len(ids) == 2, f"both processes named their first tool call {ids}"
    assert tool_call("search", {})["id"] not in ids


def test_one_process_gives_each_tool_call_its_own_id() -> None:
    assert len({tool_call("search", {})["id"] for _ in range(50)}) == 50


def test_a_tool_call_id_given_is_kept() -> None:
    assert tool_call("search", {"q": "x"}, call_id="mine")["id"] == "mine"
