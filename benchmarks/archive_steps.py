"""Where the calls that rewrite the archive note spend their time, on the long session of
``benchmarks/latency.py``.

The chained swe session (``--runs`` recordings, as ``latency.py`` builds it) is replayed through
``prepare`` and ``capture_tool_result`` with the default configuration. Every call is timed on the
processor clock of the calling thread, with garbage collection off during the call (the machine
is shared; a full collection lands on whichever call runs then), and split into the calls that
make an archive note (its ranking and its text, every ``archive_blocks`` condensed blocks) and the
others; the calls made just after a new task message (most of them archive steps too) are also
counted apart. For each group: calls, summed and median milliseconds, the median of each stage of
``report.timings_ms``, and, for the archive steps, the archive note's own time and its ranking's
(``Digests._archive_note``, ``Digests._ranked``). ``--profile PATH`` writes a cProfile of the
archive steps alone (read it with ``python -m pstats PATH``); the times printed are then the
profiled ones, several times slower.

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/archive_steps.py [--runs 6] [--profile /tmp/archive.prof]
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import json
import pstats
import statistics
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from latency import BASH_TOOL, chained_session

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.history import _digests


def timed(name: str, spent: dict[str, float]) -> Callable[[], None]:
    """``Digests.<name>`` timed into ``spent[name]`` (processor milliseconds); the undo."""
    real = getattr(_digests.Digests, name)

    def wrapper(self: _digests.Digests, *args: Any, **kwargs: Any) -> Any:
        started = time.thread_time()
        try:
            return real(self, *args, **kwargs)
        finally:
            spent[name] += (time.thread_time() - started) * 1000

    setattr(_digests.Digests, name, wrapper)
    return lambda: setattr(_digests.Digests, name, real)


def replay(messages: list[BaseMessage], profile: Path | None = None) -> dict[str, Any]:
    """The figures of the module docstring, by group; ``profile``: where to write the archive steps' profile."""
    engine = ContextEngine(ContextConfig())
    bound: list[Any] = [BASH_TOOL, *engine.tools_for_model()]
    scope = Scope(session_id="archive-steps")
    spent: dict[str, float] = defaultdict(float)
    undo = [timed("_archive_note", spent), timed("_ranked", spent)]
    groups: dict[str, dict[str, list[float]]] = {
        "archive_steps": defaultdict(list),
        "other_calls": defaultdict(list),
        "new_task_calls": defaultdict(list),
    }
    captured: list[BaseMessage] = []
    stats: pstats.Stats | None = None
    gc.collect()
    try:
        for index, message in enumerate(messages):
            if index > 0 and isinstance(message, AIMessage):
                spent.clear()
                step = cProfile.Profile() if profile is not None else None
                gc.disable()
                started = time.thread_time()
                if step is not None:
                    step.enable()
                prepared = engine.prepare(captured, tools=bound, scope=scope)
                if step is not None:
                    step.disable()
                took = (time.thread_time() - started) * 1000
                gc.enable()
                archive = "_archive_note" in spent
                kinds = ["archive_steps" if archive else "other_calls"]
                if isinstance(captured[-1], HumanMessage):  # (an archive step too, most often)
                    kinds.append("new_task_calls")
                for kind in kinds:
                    figures = groups[kind]
                    figures["call"].append(took)
                    for stage, ms in (prepared.report.timings_ms or {}).items():
                        figures[f"stage {stage}"].append(ms)
                    if archive:
                        figures["archive note"].append(spent["_archive_note"])
                        figures["its ranking"].append(spent["_ranked"])
                if archive and step is not None:
                    stats = pstats.Stats(step) if stats is None else stats.add(step)
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, scope)
            captured.append(message)
    finally:
        for restore in undo:
            restore()
    if profile is not None and stats is not None:
        stats.dump_stats(str(profile))
    return {
        group: {"calls": len(figures["call"])}
        | {
            name: {
                "sum_ms": round(sum(values), 1),
                "median_ms": round(statistics.median(values), 2),
            }
            for name, values in figures.items()
        }
        for group, figures in groups.items()
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="swe runs chained into the session")
    parser.add_argument("--profile", type=Path, help="write a cProfile of the archive steps here")
    args = parser.parse_args(argv)
    print(json.dumps(replay(chained_session(args.runs), args.profile), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
