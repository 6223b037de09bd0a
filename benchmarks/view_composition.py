"""Where the tokens of the default views go, and which parts alone show what the next step used.

The swe recordings are replayed at the defaults (or ``--config``). Every message of every view
is put in one part: the system prompt, the task (the first user message, kept exact), the
archive note (the first context note), the block notes, the facts block, the wrappers that
carry the notes, the assistant's messages and the tool outputs (whole, or summarised behind a
ref), each apart for the calls whose history was tiered and those sent whole. For each part the
table gives its tokens (and share of the full history's), per call, and how many of the values
the agent's next action used (as the replay's grounding recall counts them) no other part of
the view showed: what giving it up would cost in recall. The assistant's tiered messages are
split into their prose and their tool calls, and the tiered tool outputs and assistant messages
by age (exchanges since the latest), since a transform that is not done on first sight rewrites
the cached prefix.

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/view_composition.py
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage

from ctxplugin import ContextConfig
from ctxplugin.replay.loaders import discover, load_file
from ctxplugin.replay.metrics import (
    Meter,
    action_identifiers,
    calls_after,
    occurs,
    tools_tokens,
)
from ctxplugin.replay.runner import ReplaySettings, build_strategies, memory_engine_factory
from ctxplugin.scope import Scope

SWE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories" / "swe"
NOTES = ("context_notes", "known_facts")


def _wrapper(message: BaseMessage) -> bool:
    calls = getattr(message, "tool_calls", None) or []
    return isinstance(message, AIMessage) and bool(calls) and calls[0]["name"] in NOTES


def parts(view: list[BaseMessage]) -> list[str]:
    """The part each message of ``view`` belongs to."""
    out, notes = [], 0
    for index, message in enumerate(view):
        name = getattr(message, "name", None)
        if message.type == "system":
            out.append("system prompt")
        elif index == 1 and message.type == "human":
            out.append("task")
        elif _wrapper(message):
            out.append("note wrappers")
        elif message.type == "tool" and name == "context_notes":
            out.append("archive note" if notes == 0 else "block notes")
            notes += 1
        elif message.type == "tool" and name == "known_facts":
            out.append("facts block")
        elif message.type == "ai":
            out.append("assistant")
        elif message.type == "tool":
            head = str(message.content)[:300]
            out.append(
                "tool outputs, summarised"
                if "ref" in head and ("summary" in head or "expand_ref" in head)
                else "tool outputs"
            )
        else:
            out.append(message.type)
    return out


def ages(view: list[BaseMessage]) -> list[int | None]:
    """Each assistant message's and tool output's age in exchanges (1: the latest)."""
    out: list[int | None] = [None] * len(view)
    age = 0
    for index in range(len(view) - 1, 1, -1):
        message = view[index]
        if message.type == "ai" and not _wrapper(message):
            age += 1
            out[index] = age
        elif message.type == "tool" and getattr(message, "name", None) not in NOTES:
            out[index] = age + 1
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=SWE)
    parser.add_argument(
        "--config", type=Path, help="ContextConfig fields as JSON (the defaults when not given)"
    )
    args = parser.parse_args()
    config = ContextConfig.model_validate(
        json.loads(args.config.read_text()) if args.config else {}
    )
    settings = ReplaySettings(config=config, strategies=("ctxplugin",))
    tokens: Counter[tuple[str, str]] = Counter()
    alone: Counter[tuple[str, str]] = Counter()
    calls: Counter[str] = Counter()
    full = eligible = 0
    paths, _ = discover([args.data])
    for path in paths:
        for conversation in load_file(path).conversations:
            engine = memory_engine_factory(config)
            meter = Meter(engine.counter)
            [ours] = [
                s
                for s in build_strategies(
                    settings, engine, meter, Scope(session_id=conversation.id), conversation.tools
                )
                if s.name == "ctxplugin"
            ]
            messages = conversation.messages
            for index, action, said in calls_after(messages, conversation.call_indexes(), meter):
                full += meter.count(messages[:index])
                used = [i for i in sorted(action_identifiers(action)) if occurs(i, said)]
                eligible += len(used)
                prepared = ours.view(messages[:index])
                view = list(prepared.messages)
                kinds = parts(view)
                phase = "tiered" if "archive note" in kinds or "block notes" in kinds else "whole"
                calls[phase] += 1
                tools = prepared.tools
                tokens[(phase, "expand_ref schema")] += tools_tokens(tools, engine.counter)
                shown: list[tuple[str, str]] = []
                for message, kind, age in zip(view, kinds, ages(view), strict=True):
                    tokens[(phase, kind)] += meter.tokens(message)
                    shown.append((kind, meter.text([message])))
                    if phase == "tiered" and kind == "assistant" and isinstance(message, AIMessage):
                        prose = str(message.content or "")
                        tokens[(phase, "  of which prose")] += (
                            engine.counter.count(prose) if prose else 0
                        )
                    if phase == "tiered" and age is not None:
                        tokens[
                            (
                                phase,
                                f"  {'assistant' if kind == 'assistant' else 'tool output'}, age {age}",
                            )
                        ] += meter.tokens(message)
                for value in used:
                    where = {kind for kind, text in shown if occurs(value, text)}
                    if len(where) == 1:
                        alone[(phase, where.pop())] += 1
                    elif not where:
                        alone[(phase, "(not shown)")] += 1
    print(
        f"calls: {calls['tiered']} tiered, {calls['whole']} sent whole; values the next actions used: {eligible}"
    )
    print(
        f"{'phase':7} {'part':28} {'tokens':>10} {'× full':>7} {'per call':>9} {'only there':>10}"
    )
    for (phase, kind), count in sorted(tokens.items(), key=lambda item: (item[0][0], -item[1])):
        print(
            f"{phase:7} {kind:28} {count:10,} {count / full:7.4f} {count / calls[phase]:9.0f} {alone.get((phase, kind), ''):>10}"
        )
    for (phase, kind), count in alone.items():
        if kind == "(not shown)":
            print(f"{phase:7} {kind:28} {'':>10} {'':>7} {'':>9} {count:>10}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
