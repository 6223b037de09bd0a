"""Replies of ``ScriptedChatModel`` in two processes sharing a LangGraph checkpointer.

A chat model's reply id names one message; LangGraph's ``add_messages`` replaces a message in
the state when a new one has its id. Two processes that each start their own scripted model and
continue one thread (a restart, a second worker) must not reuse each other's ids, or the second
process overwrites the first one's replies and the thread's tool results lose their calls.
"""

from __future__ import annotations

import subprocess
import sys

from langchain_core.messages import AIMessage, HumanMessage

from ctxplugin.testing import ScriptedChatModel

FIRST_REPLY_ID = (
    "from ctxplugin.testing import ScriptedChatModel\n"
    "from langchain_core.messages import AIMessage, HumanMessage\n"
    "print(ScriptedChatModel(script=[AIMessage('hi')]).invoke([HumanMessage('q')]).id)\n"
)


def first_reply_id_of_a_new_process() -> str:
    done = subprocess.run([sys.executable, "-c", FIRST_REPLY_ID], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_two_processes_give_their_replies_different_ids() -> None:
    ids = {first_reply_id_of_a_new_process() for _ in range(2)}
    assert len(ids) == 2, f"both processes named their first reply {ids}"
    mine = ScriptedChatModel(script=[AIMessage("a")]).invoke([HumanMessage("q")]).id
    assert mine not in ids


def test_ids_given_in_the_script_are_kept() -> None:
    reply = ScriptedChatModel(script=[AIMessage("a", id="mine")]).invoke([HumanMessage("q")])
    assert reply.id == "mine"
