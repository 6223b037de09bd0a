"""Builders of realistic agent conversations for the history tests."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._messages import META_KEY
from ctxplugin.history import _digests, _reuse


def listing(step: int, lines: int = 40) -> str:
    """A tool output like ``grep -n``: numbered lines with paths and names."""
    return "\n".join(
        f"/repo/src/module_{step}.py:{100 + i}: def handler_{step}_{i}(request): return render(request)"
        for i in range(lines)
    )


def build_session(
    exchanges: int, *, refs: bool = False, task: str = "Fix the failing test in /repo/src/app.py"
) -> list[BaseMessage]:
    """A coding agent's history: the task, then one model call with its tool result per step."""
    messages: list[BaseMessage] = [HumanMessage(content=task, id="task")]
    for step in range(exchanges):
        call_id = f"call_{step}"
        prose = (
            f"Step {step}: I will inspect /repo/src/module_{step}.py next because the traceback "
            "points there and the handler looks suspicious. " * 3
        )
        messages.append(
            AIMessage(
                content=prose,
                id=f"ai_{step}",
                tool_calls=[
                    {
                        "name": "bash",
                        "args": {"command": f"grep -n handler /repo/src/module_{step}.py"},
                        "id": call_id,
                    }
                ],
            )
        )
        content, extra = listing(step), {}
        if refs and step % 3 == 0:  # as the engine shows a stored output: summary plus ref
            ref = f"ref:bash:{step:016x}"
            content = f"{listing(step, lines=12)}\n… 28 more lines [{ref}; call expand_ref for the full output]"
            extra = {META_KEY: {"ref": ref}}
        messages.append(
            ToolMessage(
                content=content,
                tool_call_id=call_id,
                name="bash",
                id=f"tool_{step}",
                additional_kwargs=extra,
            )
        )
    return messages


SessionBuilder = Callable[..., list[BaseMessage]]


@pytest.fixture
def agent_session() -> SessionBuilder:
    """``agent_session(exchanges, refs=False, task=...)``: see :func:`build_session`."""
    return build_session


@pytest.fixture
def clear_memos() -> Callable[[], None]:
    """Empties the memos of block notes, archives and gathered blocks when called: what follows is
    made afresh."""

    def clear() -> None:
        _digests._RANKED.clear()
        _digests._BASES.clear()
        _digests._CACHE.clear()
        _digests._RUNS.clear()
        _reuse._ENTRIES.clear()

    return clear
