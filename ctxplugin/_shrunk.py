"""The budget's third step: stored tool results reduced to their first line and ref, oldest
first, as few as make the view fit.

Each result's shorter form and what it saves are made once; the number to shorten is read off
the running sum of the savings and then checked against the real total. Trying one more result
at a time, each try laying out and counting the whole view again, was quadratic: 200 parallel
tool results over the budget took 15 s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import accumulate

from langchain_core.messages import BaseMessage, ToolMessage

from ctxplugin._messages import annotation
from ctxplugin.tokens import TokenCounter, content_text, count_message

SHRUNK_HINT = "; call expand_ref for the full output]"
"""How a result's shorter form ends, after its ref: ``first line [ref:…; call expand_ref …]``."""


def shrinkable(history: Sequence[BaseMessage], counter: TokenCounter) -> list[tuple[int, ToolMessage]]:
    """The stored tool results of ``history`` (those with a ref) that their first line and ref
    make shorter, oldest first: each one's index with that shorter message."""
    out: list[tuple[int, ToolMessage]] = []
    for i, message in enumerate(history):
        if not isinstance(message, ToolMessage):
            continue
        ref = annotation(message).get("ref")
        if not ref:
            continue
        text = content_text(message.content)
        first = text.strip().splitlines()[0][:160] if text.strip() else ""
        short = f"{first} [{ref}{SHRUNK_HINT}"
        if counter.count(short) < counter.count(text):
            out.append((i, message.model_copy(update={"content": short})))
    return out


def fewest_shrunk(
    history: Sequence[BaseMessage], counter: TokenCounter, over_by: Callable[[list[BaseMessage]], int]
) -> list[BaseMessage]:
    """``history`` with the fewest of its oldest :func:`shrinkable` results shortened for
    ``over_by`` (tokens the view with that history is over its budget) to be at most 0; all of
    them when no number is enough."""
    shrunk = shrinkable(history, counter)
    if not shrunk:
        return list(history)

    def made(n: int) -> list[BaseMessage]:
        out = list(history)
        for index, message in shrunk[:n]:
            out[index] = message
        return out

    over = over_by(list(history))
    saved = accumulate(count_message(history[i], counter) - count_message(short, counter) for i, short in shrunk)
    n = next((k + 1 for k, total in enumerate(saved) if total >= over), len(shrunk))
    while n < len(shrunk) and over_by(made(n)) > 0:
        n += 1
    while n > 1 and over_by(made(n - 1)) <= 0:
        n -= 1
    return made(n)


__all__ = ["SHRUNK_HINT", "fewest_shrunk", "shrinkable"]
