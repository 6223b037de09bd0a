"""How well can older history's values be chosen without knowing the next action?

For every call of the SWE trajectories, the *pool* is every identifier (as the replay's recall
counts them) that older history holds — the messages after the task and before the newest
exchange — and that neither the task nor the newest exchange shows. A value is *used* when the
next action uses it. Each value gets four features known at the time of the call: how many
older messages held it, how many of those were the model's own, how many messages ago it last
appeared, and its length in tokens. A ranking learns, from the other seven trajectories, how
often values of each feature bucket are used per token, and ranks the eighth's values by it
(leave one trajectory out). The output is the tokens a call needed to show a given share of the
used values: the best any list of values chosen by these features can do.

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/history_reuse.py
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

from langchain_core.messages import AIMessage

from ctxplugin.replay.loaders import discover, load_file
from ctxplugin.replay.metrics import action_identifiers, message_identifiers, message_text, occurs
from ctxplugin.tokens import get_counter

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories" / "swe"
SHARES = (0.5, 0.67, 0.75, 0.8, 0.877, 0.9)


def candidates() -> tuple[int, list[tuple[str, tuple[int, ...], int, bool]]]:
    """``(calls, [(trajectory, bucket, tokens, used)])`` over every call's pool."""
    counter, _ = get_counter("cl100k_base")
    paths, _ = discover([DATA])
    calls = 0
    rows: list[tuple[str, tuple[int, ...], int, bool]] = []
    for path in paths:
        for conversation in load_file(path).conversations:
            messages = conversation.messages
            held = [message_identifiers(message) for message in messages]
            for index in conversation.call_indexes():
                action = messages[index]
                if not isinstance(action, AIMessage):
                    continue
                history = messages[:index]
                newest = max((i for i, m in enumerate(history) if isinstance(m, AIMessage)), default=len(history))
                shown = "\n".join(message_text(m) for m in [*history[:2], *history[newest:]])
                earlier = "\n".join(message_text(m) for m in history[1:])
                used = {i for i in action_identifiers(action) if occurs(i, earlier)}
                seen: dict[str, list[int]] = {}
                for j in range(2, newest):
                    for value in held[j]:
                        stats = seen.setdefault(value, [0, 0, 0])
                        stats[0] += 1
                        stats[1] += isinstance(messages[j], AIMessage)
                        stats[2] = j
                calls += 1
                for value, (count, typed, last) in seen.items():
                    if occurs(value, shown):
                        continue
                    tokens = counter.count(value) + 1
                    bucket = (min(count, 6), min(typed, 3), min(int(math.log2(newest - last + 1)), 6), min(tokens, 12) // 3)
                    rows.append((conversation.id, bucket, tokens, value in used))
    return calls, rows


def main() -> int:
    calls, rows = candidates()
    scored: list[tuple[float, int, bool]] = []
    for held_out in sorted({r[0] for r in rows}):
        rate: dict[tuple[int, ...], list[int]] = defaultdict(lambda: [0, 0])
        for trajectory, bucket, tokens, used in rows:
            if trajectory != held_out:
                rate[bucket][0] += used
                rate[bucket][1] += tokens
        for trajectory, bucket, tokens, used in rows:
            if trajectory == held_out:
                hits, cost = rate.get(bucket, (0, 0))
                scored.append(((hits + 0.1) / (cost + 10), tokens, used))
    scored.sort(key=lambda row: -row[0])
    total = sum(used for _, _, used in scored)
    pool = sum(tokens for _, tokens, _ in scored)
    print(f"{calls} calls; older history holds {pool / calls:,.0f} tokens of values a call; {total} of them used next")
    caught = spent = 0
    shares = list(SHARES)
    for _, tokens, used in scored:
        caught += used
        spent += tokens
        while shares and caught >= shares[0] * total:
            print(f"{shares.pop(0):6.1%} of the used values shown with {spent / calls:5,.0f} tokens a call")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
