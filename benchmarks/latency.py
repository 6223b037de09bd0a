"""Per-call latency of ``prepare`` on long sessions, beside ``trim_messages`` and LangChain's
``ContextEditingMiddleware`` (``ClearToolUsesEdit``), all in this process.

Workloads (recordings from ``../shared/data``):

1. **long session**: the swe coding-agent runs chained into one session (each run's task
   follows the previous run as a new human turn, the system prompt once), ``--runs`` of them
   (default 6, about 470 calls). Every tool output goes through ``capture_tool_result`` as it
   arrives; before every assistant message each strategy builds its view of the history so far.
   Per strategy: p50 and p99 per call, and growth = median of the last 75 calls ÷ the first 75.
2. **chat thread**: the first ``--chat`` (100) tau airline conversations as one thread, their
   14 tool schemas bound: a long conversation where the user speaks every few calls, each user
   turn ending the view the previous calls extended. Per strategy as for the long session.
3. **capture**: ``capture_tool_result`` of distinct 20 KB tool outputs (real swe outputs,
   repeated to 20 KB and made distinct by a first line): p50.
4. **memory**: RSS before and after ``--rss-calls`` (2,000) further prepare calls, sessions of
   the chained workload run one after the other on the same engine.
5. **many sessions**: engines serving short conversations (the first 10 messages of tau
   airline conversations, each its own session): per-call prepare time of fresh sessions on an
   engine that has served 100 sessions and on one that has served ``--sessions`` (10,000),
   probed in turn (see :func:`many_sessions`).

ctxplugin runs with the default configuration (``ContextConfig()``: in-memory stores, facts and
history on, the default 7,500-token budget); ``--stores embedded`` uses SQLite and embedded Chroma in a
temporary directory instead. trim_messages keeps the latest whole steps within the same total
budget minus the tool schemas (as in ``ctxplugin replay``), twice: with the exact counter memoised
per message object (``trim_messages``, the cheapest it can be run) and with LangChain's
``count_tokens_approximately`` (``trim_messages_approx``, as its documentation sets it up).

For the long session ctxplugin's calls are also split into those whose view extends the
previous one (its first messages are the previous view's, the very objects) and those that
re-render it, with the median of each in the first and the last bucket, and grouped by the
recording they were made in (``ctxplugin_by_recording``). ``--self-chain NAME`` replaces the
long session by one recording chained with itself (see :func:`self_chained`; grouped by copy);
``--order NAMES`` chains the named recordings in that order instead of the first ``--runs``;
``--alone`` times ctxplugin without the other strategies running between its calls.

Before each timed session the garbage the imports, the engine's build and the loading of the
recordings left is collected (``gc.collect()``), so that a full collection of it does not land on
whichever call runs then; collections of what the calls themselves allocate still count, in every
strategy's calls alike.

Every call is also timed on the processor's clock of the calling thread (``strategies_cpu``):
on a shared machine the clock time of a call includes whatever time other processes held the
processor, which the processor time does not. Growth compares the last calls with the first,
which are calls on other recordings: the last recording's calls may cost more for what they
hold. So the long session is run a second time with its last recording chained first (the
others after it, in their order; ``--skip same`` leaves it out), in a fresh process, so that
no text is found in a memo the first session filled, and ``same_recording`` gives that
recording's median per strategy when it ends the session ÷ when it begins it: the same messages,
each read for the first time in both, so the ratio is the session's length alone. Both figures
go to stderr beside growth.

Run:
    uv run --all-packages python benchmarks/latency.py [--runs 6] [--sessions 10000] [--json out.json] [--chart docs/img/latency.png]
    uv run --all-packages python benchmarks/latency.py --self-chain marshmallow [--alone] --skip capture --skip rss --skip sessions
    uv run --all-packages python benchmarks/latency.py --order sqlfluff-1517,marshmallow --skip chat --skip capture --skip rss --skip sessions
"""

from __future__ import annotations

import argparse
import gc
import json
import multiprocessing
import operator
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, SystemMessage, ToolMessage
from langchain_core.messages.utils import count_tokens_approximately, trim_messages

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.replay.loaders import SWE_BASH_TOOL, load_file
from ctxplugin.replay.metrics import Meter
from ctxplugin.replay.peers import ClearToolUsesSettings, ContextEditing, TrimMessages

_HERE = Path(__file__).resolve().parents[1]
DATA = Path(
    os.environ.get("CTXPLUGIN_DATA")
    or next((p for p in (_HERE.parent / "shared" / "data", _HERE.parent.parent / "shared" / "data") if p.is_dir()), _HERE.parent / "shared" / "data")
)
SWE = DATA / "trajectories" / "swe"
TAU = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
TAU_TOOLS = DATA / "tools" / "tau-airline-tools.json"
BUCKET = 75

BASH_TOOL = SWE_BASH_TOOL


def rss_mb() -> float:
    """Resident set size of this process now (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as fh:
            return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
    except OSError:
        import resource

        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def pct(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def chained_session(runs: int, offset: int = 0, order: Sequence[str] = (), owners: list[str] | None = None) -> list[BaseMessage]:
    """``runs`` swe recordings as one conversation: the first system prompt, then each run's
    messages after its own system prompt. ``order``: the recordings whose file names hold these
    names, in this order, instead. ``owners`` gets, per message, the name of its recording."""
    files = sorted(SWE.glob("*.traj.json"))
    chosen = [recording(name) for name in order] if order else [files[(offset + i) % len(files)] for i in range(runs)]
    out: list[BaseMessage] = []
    for number, path in enumerate(chosen):
        messages = distinct(load_file(path).conversations[0].messages, f"r{number}")
        if out:
            messages = [m for m in messages if not isinstance(m, SystemMessage)]
        out.extend(messages)
        if owners is not None:
            owners.extend([path.name.removesuffix(".traj.json")] * len(messages))
    return out


def recording(name: str) -> Path:
    """The swe recording whose file name holds ``name``."""
    path = next((f for f in sorted(SWE.glob("*.traj.json")) if name in f.name), None)
    if path is None:
        raise SystemExit(f"no swe recording under {SWE} has {name!r} in its name")
    return path


def chain_names(runs: int, order: Sequence[str] = ()) -> list[str]:
    """The names of the recordings :func:`chained_session` chains, in order."""
    every = sorted(SWE.glob("*.traj.json"))
    files = [recording(name) for name in order] if order else [every[i % len(every)] for i in range(runs)]
    return [f.name.removesuffix(".traj.json") for f in files]


def chat_thread(count: int) -> list[BaseMessage]:
    """The first ``count`` tau airline conversations as one chat thread (the system prompt once):
    a long conversation where the user speaks every few calls."""
    out: list[BaseMessage] = []
    for number, conversation in enumerate(load_file(TAU).conversations[:count]):
        out.extend(m for m in distinct(conversation.messages, f"c{number}") if not (out and isinstance(m, SystemMessage)))
    return out


def distinct(messages: Sequence[BaseMessage], tag: str) -> list[BaseMessage]:
    """``messages`` with their ids and tool call ids prefixed by ``tag``: recordings chained into
    one session reuse them (the loader numbers each conversation's messages ``msg-0``, ``msg-1``,
    ...; the tau recordings share call ids), and in one session a message that comes again under
    an id is an edit of it, a tool result under a call id a replaced output."""
    out: list[BaseMessage] = []
    for message in messages:
        update: dict[str, Any] = {"id": f"{tag}/{message.id}"} if message.id else {}
        if isinstance(message, AIMessage) and message.tool_calls:
            update["tool_calls"] = [{**call, "id": f"{tag}/{call['id']}"} if call.get("id") else call for call in message.tool_calls]
        if isinstance(message, ToolMessage):
            update["tool_call_id"] = f"{tag}/{message.tool_call_id}"
        out.append(message.model_copy(update=update) if update else message)
    return out


def summary(times: dict[str, list[float]]) -> dict[str, dict[str, float]]:
    """p50, p99, the first and the last bucket's medians and growth of each strategy."""
    out: dict[str, dict[str, float]] = {}
    for name, values in times.items():
        first = statistics.median(values[:BUCKET])
        last = statistics.median(values[-BUCKET:])
        out[name] = {
            "p50_ms": pct(values, 50),
            "p99_ms": pct(values, 99),
            "growth": last / first if first else float("nan"),
            "first_ms": first,
            "last_ms": last,
        }
    return out


def self_chained(name: str, copies: int, owners: list[str] | None = None) -> list[BaseMessage]:
    """The swe recording whose file name holds ``name``, chained with itself ``copies`` times:
    a session of one workload throughout. Each copy's texts (and string tool-call arguments)
    end with ``[copy i]``, so nothing an earlier copy read is found again by its text.
    ``owners`` gets, per message, ``copy i``."""
    path = recording(name)
    out: list[BaseMessage] = []
    for i in range(copies):
        for message in distinct(load_file(path).conversations[0].messages, f"k{i}"):
            if owners is not None and not (out and isinstance(message, SystemMessage)):
                owners.append(f"copy {i}")
            if isinstance(message, SystemMessage):
                if out:
                    continue
            elif i and isinstance(message.content, str):
                update: dict[str, Any] = {"content": f"{message.content} [copy {i}]"}
                if isinstance(message, AIMessage) and message.tool_calls:
                    update["tool_calls"] = [
                        {**call, "args": {k: f"{v} # copy {i}" if isinstance(v, str) else v for k, v in call["args"].items()}}
                        for call in message.tool_calls
                    ]
                message = message.model_copy(update=update)
            out.append(message)
    return out


def make_engine(stores: str, root: Path | None) -> ContextEngine:
    config = ContextConfig()
    if stores == "embedded":
        assert root is not None
        return ContextEngine.embedded(root, config)
    return ContextEngine(config)


def long_session(
    engine: ContextEngine,
    messages: list[BaseMessage],
    session: str,
    extends: list[bool] | None = None,
    *,
    alone: bool = False,
    tools: list[dict[str, Any]] | None = None,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Per-call milliseconds of every strategy (``alone``: of ctxplugin only) over one chained
    session, the agent's ``tools`` bound (the swe bash tool by default); ``extends`` gets, per
    call, whether ctxplugin's view began with the previous call's messages (the very objects);
    ``cpu`` gets the processor time of the calling thread per call and strategy (what the call
    cost without the time other processes held the processor)."""
    tools = tools if tools is not None else [BASH_TOOL]
    meter = Meter(engine.counter)
    trim = TrimMessages(tools, int(engine.config.budget.total), meter)
    approx = ApproxTrim(tools, int(engine.config.budget.total), meter)
    editing = ContextEditing(tools, ClearToolUsesSettings())
    bound: list[Any] = [*tools, *engine.tools_for_model()]
    scope = Scope(session_id=session)
    names = ["ctxplugin"] if alone else ["ctxplugin", "trim_messages", "trim_messages_approx", "context_editing"]
    times: dict[str, list[float]] = {name: [] for name in names}
    captured: list[BaseMessage] = []
    raw: list[BaseMessage] = []
    shown: list[BaseMessage] | None = None
    # what the imports, the engine's build and the loading of the recordings left behind is
    # collected now: a full collection of it (60-130 ms) would land on whichever call ran then
    gc.collect()
    for index, message in enumerate(messages):
        if index > 0 and isinstance(message, AIMessage):
            for name, run in (
                *(
                    ()
                    if alone
                    else (
                        ("trim_messages", lambda: trim.view(raw)),
                        ("trim_messages_approx", lambda: approx.view(raw)),
                        ("context_editing", lambda: editing.view(raw)),
                    )
                ),
                ("ctxplugin", lambda: engine.prepare(captured, tools=bound, scope=scope)),
            ):
                started, started_cpu = time.perf_counter(), time.thread_time()
                made = run()
                times[name].append((time.perf_counter() - started) * 1000)
                if cpu is not None:
                    cpu.setdefault(name, []).append((time.thread_time() - started_cpu) * 1000)
            if extends is not None:
                view = made.messages
                extends.append(shown is not None and len(view) >= len(shown) and all(map(operator.is_, shown, view)))
                shown = view
        raw.append(message)
        if isinstance(message, ToolMessage):
            message = engine.capture_tool_result(message, scope)
        captured.append(message)
    return times


class ApproxTrim(TrimMessages):
    """``trim_messages`` as LangChain's documentation sets it up for speed: with
    ``count_tokens_approximately`` (characters ÷ 4 per message, nothing memoised)."""

    def view(self, history: Sequence[BaseMessage]) -> Any:
        return trim_messages(
            list(history),
            max_tokens=self.max_tokens,
            token_counter=count_tokens_approximately,
            strategy="last",
            start_on=("human", "ai"),
            include_system=True,
            allow_partial=False,
        )


def capture_latency(engine: ContextEngine, outputs: list[str], n: int = 200) -> list[float]:
    """Milliseconds of ``capture_tool_result`` on distinct 20 KB outputs."""
    scope = Scope(session_id="capture-bench")
    times: list[float] = []
    for i in range(n):
        base = outputs[i % len(outputs)]
        text = f"run {i}: output of the command follows\n" + (base * (20_000 // max(1, len(base)) + 1))
        text = text[:20_000]
        message = ToolMessage(content=text, tool_call_id=f"call_cap_{i}", name="bash")
        started = time.perf_counter()
        engine.capture_tool_result(message, scope)
        times.append((time.perf_counter() - started) * 1000)
    return times


def run_prepares(engine: ContextEngine, calls: int, offset: int) -> int:
    """``calls`` prepare calls over chained swe sessions, one session after another."""
    done = 0
    session = 0
    while done < calls:
        messages = chained_session(2, offset + session)
        scope = Scope(session_id=f"rss-{offset}-{session}")
        bound: list[Any] = [BASH_TOOL, *engine.tools_for_model()]
        history: list[BaseMessage] = []
        for index, message in enumerate(messages):
            if index > 0 and isinstance(message, AIMessage):
                engine.prepare(history, tools=bound, scope=scope)
                done += 1
                if done >= calls:
                    break
            if isinstance(message, ToolMessage):
                message = engine.capture_tool_result(message, scope)
            history.append(message)
        session += 1
    return done


def short_conversations() -> list[list[BaseMessage]]:
    """Tau airline conversations cut before the last assistant message within 10 messages."""
    out: list[list[BaseMessage]] = []
    for conversation in load_file(TAU).conversations:
        cuts = [i for i in conversation.call_indexes() if i <= 10]
        if cuts:
            out.append(list(conversation.messages[: cuts[-1]]))
    return out


def many_sessions(make: Callable[[str], ContextEngine], total: int, probe: int = 100, rounds: int = 5) -> dict[str, float]:
    """Median prepare ms of fresh sessions on an engine that has served 100 sessions and on one
    that has served ``total``. Both engines are filled first; then they are probed in turn,
    ``rounds`` times ``probe // rounds`` fresh sessions each (the same conversations on both), so
    that the machine's drift over the minutes the filling takes falls on both alike. Probed one
    after the other, minutes apart, the ratio moved between 0.72 and 1.37 at one commit."""
    from ctxplugin.replay.runner import load_tools_file

    conversations = short_conversations()

    def serve(engine: ContextEngine, tools: list[Any], sessions: range, prefix: str) -> list[float]:
        times: list[float] = []
        for number in sessions:
            messages = conversations[number % len(conversations)]
            scope = Scope(session_id=f"{prefix}-{number}")
            history = [engine.capture_tool_result(m, scope) if isinstance(m, ToolMessage) else m for m in messages]
            started = time.perf_counter()
            engine.prepare(history, tools=tools, scope=scope)
            times.append((time.perf_counter() - started) * 1000)
        return times

    engines: dict[str, tuple[ContextEngine, list[Any]]] = {}
    filled = {"early": 100, "late": total}
    rss: dict[str, float] = {}
    for name, count in filled.items():
        engine = make(name)
        tools: list[Any] = [*load_tools_file(TAU_TOOLS), *engine.tools_for_model()]
        serve(engine, tools, range(count), "fill")
        engines[name] = (engine, tools)
        rss[name] = rss_mb()
    step = max(1, probe // rounds)
    probes: dict[str, list[float]] = {"early": [], "late": []}
    for round_ in range(rounds):
        for name, (engine, tools) in engines.items():
            probes[name].extend(serve(engine, tools, range(round_ * step, (round_ + 1) * step), "probe"))
    early, late = statistics.median(probes["early"]), statistics.median(probes["late"])
    return {
        "sessions_early": 100,
        "sessions_late": total,
        "probes": rounds * step,
        "early_ms": early,
        "late_ms": late,
        "ratio": late / early,
        "rss_early_mb": rss["early"],
        "rss_late_mb": rss["late"],
    }


def chart(times: dict[str, list[float]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 4))
    for name, values in times.items():
        ax.plot(range(1, len(values) + 1), values, label=name, linewidth=0.8)
    ax.set_yscale("log")
    ax.set_xlabel("call of the chained session")
    ax.set_ylabel("ms per call (log)")
    ax.set_title("Per-call latency on one long session")
    ax.legend()
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def split_by_kind(values: Sequence[float], extends: Sequence[bool]) -> dict[str, dict[str, float]]:
    """For the first and the last bucket of calls: how many calls extended the previous view and
    how many re-rendered it, and the median time of each kind."""
    out: dict[str, dict[str, float]] = {}
    for bucket, part in (("first", slice(None, BUCKET)), ("last", slice(-BUCKET, None))):
        pairs = list(zip(values[part], extends[part], strict=True))
        kept = [v for v, e in pairs if e]
        redone = [v for v, e in pairs if not e]
        out[bucket] = {
            "extend_calls": len(kept),
            "extend_median_ms": statistics.median(kept) if kept else float("nan"),
            "rerender_calls": len(redone),
            "rerender_median_ms": statistics.median(redone) if redone else float("nan"),
        }
    return out


def call_owners(messages: Sequence[BaseMessage], owners: Sequence[str]) -> list[str]:
    """Per call of :func:`long_session` on ``messages``, the recording of the message it is
    made before."""
    return [owners[i] for i, m in enumerate(messages) if i > 0 and isinstance(m, AIMessage)]


def by_recording(times: dict[str, list[float]], cpu: dict[str, list[float]], owners: Sequence[str], extends: Sequence[bool]) -> list[dict[str, Any]]:
    """ctxplugin's calls grouped by the recording (or the copy) they were made in, in order:
    the median of each group's calls (on the clock and the processor's), of those that extended
    the previous view, and how many re-rendered it."""
    out: list[dict[str, Any]] = []
    for name in dict.fromkeys(owners):
        picked = [i for i, owner in enumerate(owners) if owner == name]
        kept = [times["ctxplugin"][i] for i in picked if extends[i]]
        kept_cpu = [cpu["ctxplugin"][i] for i in picked if extends[i]]
        out.append({
            "recording": name,
            "calls": len(picked),
            "median_ms": statistics.median(times["ctxplugin"][i] for i in picked),
            "cpu_median_ms": statistics.median(cpu["ctxplugin"][i] for i in picked),
            "extend_median_ms": statistics.median(kept) if kept else float("nan"),
            "extend_cpu_median_ms": statistics.median(kept_cpu) if kept_cpu else float("nan"),
            "rerender_calls": len(picked) - len(kept),
        })
    return out


def rotated_session(stores: str, root: str, names: Sequence[str], alone: bool) -> dict[str, Any]:
    """The long session of the recordings ``names`` with the last one chained first, the others
    after it in their order: ``{"times", "cpu", "owners", "extends"}`` for :func:`same_recording`."""
    owners: list[str] = []
    messages = chained_session(0, order=[names[-1], *names[:-1]], owners=owners)
    extends: list[bool] = []
    cpu: dict[str, list[float]] = {}
    times = long_session(make_engine(stores, Path(root)), messages, "same", extends, alone=alone, cpu=cpu)
    return {"times": times, "cpu": cpu, "owners": call_owners(messages, owners), "extends": extends}


def same_recording(name: str, late: dict[str, Any], early: dict[str, Any]) -> dict[str, Any]:
    """One recording's calls when it ends the chain (``late``) and when it begins it
    (``early``), each ``{"times", "cpu", "owners", "extends"}`` of one long session: the median of
    each strategy's calls, their ratio, and ctxplugin's calls by kind. The same messages timed
    at two lengths of session: what the ratio shows is the session's length, not the content."""
    out: dict[str, Any] = {"recording": name, "strategies": {}}
    picked = {}
    for where, run in (("late", late), ("early", early)):
        picked[where] = [i for i, owner in enumerate(run["owners"]) if owner == name]
    out["calls"] = len(picked["late"])
    for strategy in late["times"]:
        first = statistics.median(early["times"][strategy][i] for i in picked["early"])
        last = statistics.median(late["times"][strategy][i] for i in picked["late"])
        first_cpu = statistics.median(early["cpu"][strategy][i] for i in picked["early"])
        last_cpu = statistics.median(late["cpu"][strategy][i] for i in picked["late"])
        out["strategies"][strategy] = {
            "early_ms": first,
            "late_ms": last,
            "ratio": last / first,
            "cpu_early_ms": first_cpu,
            "cpu_late_ms": last_cpu,
            "cpu_ratio": last_cpu / first_cpu,
        }
    for where, run in (("early", early), ("late", late)):
        values = [run["times"]["ctxplugin"][i] for i in picked[where]]
        kinds = [run["extends"][i] for i in picked[where]]
        kept = [v for v, e in zip(values, kinds, strict=True) if e]
        out[f"ctxplugin_{where}"] = {
            "extend_calls": len(kept),
            "extend_median_ms": statistics.median(kept) if kept else float("nan"),
            "rerender_calls": len(values) - len(kept),
        }
    return out


def growth_line(results: dict[str, Any], alone: bool) -> str:
    """Growth as the run measured it (last bucket ÷ first), then on the processor's clock, then
    the last recording's calls late ÷ early in the session (same messages), each for ctxplugin
    and trim_messages."""
    names = ["ctxplugin"] if alone else ["ctxplugin", "trim_messages"]

    def each(pick: Callable[[str], float]) -> str:
        return ", ".join(f"{name} {pick(name):.2f}×" for name in names)

    line = (
        f"growth (last {BUCKET} calls ÷ first {BUCKET}): {each(lambda n: results['strategies'][n]['growth'])}"
        f"; processor time: {each(lambda n: results['strategies_cpu'][n]['growth'])}"
    )
    same = results.get("same_recording")
    if same:
        line += (
            f"\n{same['recording']}'s calls chained last ÷ chained first (the same messages): "
            f"{each(lambda n: same['strategies'][n]['ratio'])}; processor time: {each(lambda n: same['strategies'][n]['cpu_ratio'])}"
        )
    return line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=6, help="swe runs chained into the long session")
    parser.add_argument(
        "--self-chain", metavar="NAME", help="chain the swe recording whose file name holds NAME with itself --runs times instead"
    )
    parser.add_argument(
        "--order",
        metavar="NAMES",
        help="chain the swe recordings whose file names hold these comma-separated names, in this order (default: the first --runs)",
    )
    parser.add_argument(
        "--alone", action="store_true", help="time ctxplugin only on the long session (no other strategy runs between its calls)"
    )
    parser.add_argument("--sessions", type=int, default=10_000, help="sessions served before the late probe")
    parser.add_argument("--rss-calls", type=int, default=2_000)
    parser.add_argument("--stores", choices=["memory", "embedded"], default="memory")
    parser.add_argument("--chat", type=int, default=100, help="tau conversations chained into the chat thread")
    parser.add_argument("--skip", action="append", default=[], choices=["long", "same", "chat", "capture", "rss", "sessions"])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--chart", type=Path)
    args = parser.parse_args(argv)
    if not SWE.is_dir():
        print(f"recordings not found under {DATA} (set CTXPLUGIN_DATA)", file=sys.stderr)
        return 2
    results: dict[str, Any] = {"python": platform.python_version(), "machine": platform.machine(), "stores": args.stores}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        if "long" not in args.skip:
            engine = make_engine(args.stores, root / "long")
            order = [name for name in (args.order or "").split(",") if name]
            owners: list[str] = []
            messages = (
                self_chained(args.self_chain, args.runs, owners)
                if args.self_chain
                else chained_session(args.runs, order=order, owners=owners)
            )
            extends: list[bool] = []
            cpu: dict[str, list[float]] = {}
            times = long_session(engine, messages, "long-session", extends, alone=args.alone, cpu=cpu)
            results["calls"] = len(times["ctxplugin"])
            if args.self_chain:
                results["self_chain"] = args.self_chain
            else:
                results["chain"] = chain_names(args.runs, order)
            repeated = len(set(results.get("chain", []))) < len(results.get("chain", []))
            if repeated and "same" not in args.skip:
                # a recording chained twice: its calls early and late in the session are not one set
                print("same_recording left out: the chain holds a recording twice", file=sys.stderr)
            if not args.self_chain and "same" not in args.skip and len(results["chain"]) > 1 and not repeated:
                # the chain's last recording chained first, the rest after it in their order:
                # its calls timed early and late in a session, on the same messages
                # in a fresh process: in this one the long session has already read these texts,
                # and what is memoised by text would make their early calls cheaper than a first read
                names = results["chain"]
                with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
                    early = pool.submit(rotated_session, args.stores, str(root / "same"), names, args.alone).result()
                results["same_recording"] = same_recording(
                    names[-1],
                    {"times": times, "cpu": cpu, "owners": call_owners(messages, owners), "extends": extends},
                    early,
                )
            results["ctxplugin_by_kind"] = split_by_kind(times["ctxplugin"], extends)
            results["strategies"] = summary(times)
            results["strategies_cpu"] = summary(cpu)
            results["ctxplugin_by_recording"] = by_recording(times, cpu, call_owners(messages, owners), extends)
            mine = results["strategies"]["ctxplugin"]
            if not args.alone:
                trim = results["strategies"]["trim_messages"]
                results["p50_vs_trim"] = mine["p50_ms"] / trim["p50_ms"]
                results["p99_vs_trim"] = mine["p99_ms"] / trim["p99_ms"]
                approx = results["strategies"]["trim_messages_approx"]
                results["p50_vs_trim_approx"] = mine["p50_ms"] / approx["p50_ms"]
                results["p99_vs_trim_approx"] = mine["p99_ms"] / approx["p99_ms"]
            if args.chart:
                chart(times, args.chart)
            print(growth_line(results, args.alone), file=sys.stderr)
        if "chat" not in args.skip:
            engine = make_engine(args.stores, root / "chat")
            thread = chat_thread(args.chat)
            chat_times = long_session(engine, thread, "chat-thread", alone=args.alone, tools=json.loads(TAU_TOOLS.read_text()))
            results["chat"] = {"messages": len(thread), "calls": len(chat_times["ctxplugin"]), "strategies": summary(chat_times)}
        if "capture" not in args.skip:
            engine = make_engine(args.stores, root / "capture")
            outputs = [
                m.content for m in chained_session(2) if isinstance(m, ToolMessage) and isinstance(m.content, str) and len(m.content) > 500
            ]
            results["capture_20kb_p50_ms"] = pct(capture_latency(engine, outputs), 50)
        if "rss" not in args.skip:
            engine = make_engine(args.stores, root / "rss")
            run_prepares(engine, 100, offset=0)  # warm: encodings, imports, first allocations
            gc.collect()
            before = rss_mb()
            run_prepares(engine, args.rss_calls, offset=3)
            gc.collect()
            results["rss"] = {"calls": args.rss_calls, "before_mb": before, "after_mb": rss_mb(), "growth_mb": rss_mb() - before}
        if "sessions" not in args.skip:
            results["many_sessions"] = many_sessions(lambda name: make_engine(args.stores, root / f"sessions-{name}"), args.sessions)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
