"""Waits of a step for another call's store work use the step's store time, as its own store
calls do: a step waits ``stores.timeout`` for its stores in all, however many such waits it makes."""

from __future__ import annotations

from langchain_core.messages import HumanMessage

from ctxplugin._step import step_budget, step_wait
from ctxplugin.facts._batch import Sent
from ctxplugin.scope import Scope
from ctxplugin.stages.memos import ReadMemo

TIMEOUT = 0.2
SCOPE = Scope(session_id="s", user_id="u")


def test_waiting_for_another_call_s_write_uses_the_step_s_store_time() -> None:
    sent = Sent()
    with sent.sending(), step_budget(TIMEOUT):  # another thread's write, never done while this step reads
        assert sent.read(lambda: "read") == "read"
        # was the whole store time again, for each read: a step making many waited without end
        assert step_wait(TIMEOUT) == 0.0


def test_waiting_for_another_call_s_reading_uses_the_step_s_store_time() -> None:
    memo = ReadMemo()
    message = HumanMessage("The deploy is owned by team-a.", id="h1")
    assert memo.first_read(message, SCOPE)  # another prepare of the session reads it, never done here
    with step_budget(TIMEOUT):
        with memo.reading([message], SCOPE) as fresh:
            assert fresh == []
        assert step_wait(TIMEOUT) < TIMEOUT / 2  # was the whole store time, left for the store calls after it
