"""What the background summarizer is asked for, against what the views show of it.

Replays recordings call by call through an engine with a scripted summarizer (a function that
answers at once; every pending summary is waited for after each call, as if the model answered
between two calls) and counts, per recording: the summaries requested (``requested``; a request
the quota refuses is asked again on a later call and counted again), those written (``written``)
and the summarizer tokens they cost (``tokens``), the distinct messages shown as a gist in at least one view (``gists``) and of those the ones shown led
by a summary (``led``), and the gists the views showed counted per view (``shown``, of them led by
a summary ``shown_led``). A request for a message never shown as a gist is spent for nothing.

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/summarizer_spend.py                  # swe, mode="whole"
    uv run --all-packages python benchmarks/summarizer_spend.py --tau 20 --mode compact

``--session-tokens`` sets the per-session quota (default: the configuration's, 5,000), ``--total``
the total budget (default: the mode's).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cas import MemoryCASStore
from ctxplugin.facts import FactsLedger, MemoryFactStore
from ctxplugin.history import GIST_PREFIX
from ctxplugin.replay.loaders import load_file
from ctxplugin.testing import logical_clock
from ctxplugin.tokens import content_text

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "trajectories"
SWE = ["sqlfluff__sqlfluff-2419", "pylint-dev__astroid-1978", "marshmallow-code__marshmallow-1359"]
LEAD = "Summary of a message: "


def summarize(text: str) -> str:
    return LEAD + " ".join(text.split()[:6])


def run(conversation: Any, config: ContextConfig) -> dict[str, int]:
    ledger = FactsLedger(MemoryFactStore(), config.facts, clock=logical_clock())
    engine = ContextEngine(config=config, cas=MemoryCASStore(), facts=ledger, summarizer=summarize)
    summarizer = engine.summarizer
    assert summarizer is not None
    scope = Scope(session_id=conversation.id)
    tools = [*conversation.tools, *engine.tools_for_model()]
    gists: set[str] = set()
    led: set[str] = set()
    shown = shown_led = 0
    try:
        for index in conversation.call_indexes():
            prepared = engine.prepare(conversation.messages[:index], tools=tools, scope=scope)
            for message in prepared.messages:
                text = content_text(message.content)
                if text.startswith(GIST_PREFIX):
                    key = message.id or text
                    gists.add(key)
                    shown += 1
                    if text.startswith(GIST_PREFIX + LEAD):
                        led.add(key)
                        shown_led += 1
            summarizer.drain(60)
        stats = summarizer.stats
        return {
            "requested": stats.requested, "written": stats.completed, "tokens": stats.tokens_used, "gists": len(gists), "led": len(led),
            "shown": shown, "shown_led": shown_led,
        }
    finally:
        engine.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=["whole", "compact"], default="whole")
    parser.add_argument("--tau", type=int, default=0, help="replay the first N tau airline conversations instead of swe")
    parser.add_argument("--session-tokens", type=int, default=None)
    parser.add_argument("--total", type=int, default=None, help="the total budget (default: the mode's)")
    args = parser.parse_args()
    history: dict[str, Any] = {}
    if args.session_tokens is not None:
        history["summarizer"] = {"session_tokens": args.session_tokens}
    budget: dict[str, Any] = {} if args.total is None else {"total": args.total}
    config = ContextConfig(mode=args.mode, history=history, budget=budget)
    if args.tau:
        conversations = load_file(DATA / "tau" / "gpt-4o-airline-dev.json").conversations[: args.tau]
    else:
        conversations = [load_file(DATA / "swe" / f"{name}.traj.json").conversations[0] for name in SWE]
    total = dict.fromkeys(("requested", "written", "tokens", "gists", "led", "shown", "shown_led"), 0)
    for conversation in conversations:
        figures = run(conversation, config)
        for key, value in figures.items():
            total[key] += value
        if not args.tau:
            print(f"{conversation.id:40} " + "  ".join(f"{k} {v}" for k, v in figures.items()))
    print(f"{'all':40} " + "  ".join(f"{k} {v}" for k, v in total.items()))


if __name__ == "__main__":
    main()
