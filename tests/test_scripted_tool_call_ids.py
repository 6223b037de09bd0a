"""Tool-call ids of ``ctxplugin.testing.tool_call`` in two processes sharing one thread.

A tool message answers its call by the call's id. Two processes that each script their own tool
calls and continue one checkpointed thread must not give two calls one id, or a tool message of
the second process answers a call of the first.
"""

from __future__ import annotations

import subprocess
import sys

from ctxplugin.testing import tool_call

FIRST_CALL_ID = "from ctxplugin.testing import tool_call\nprint(tool_call('search', {})['id'])\n"


def first_call_id_of_a_new_process() -> str:
    done = subprocess.run([sys.executable, "-c", FIRST_CALL_ID], capture_output=True, text=True, check=True)
    return done.stdout.strip()


def test_two_processes_give_their_tool_calls_different_ids() -> None:
    ids = {first_call_id_of_a_new_process() for _ in range(2)}
    assert len(ids) == 2, f"both processes named their first tool call {ids}"
    assert tool_call("search", {})["id"] not in ids


def test_one_process_gives_each_tool_call_its_own_id() -> None:
    assert len({tool_call("search", {})["id"] for _ in range(50)}) == 50


def test_an_id_given_is_kept() -> None:
    assert tool_call("search", {"q": "x"}, call_id="mine")["id"] == "mine"
