"""Tool-side tokens per model call with the tool directory, under ``binding="loaded"`` and the
default ``binding="auto"``, against binding every schema on every call.

Three tool sets: tau-bench airline (14 tools), tau-bench retail (16), and a generated registry
of 200 tools shaped like a multi-server MCP setup. Sessions are replayed call by call:

- airline: the 100 GPT-4o conversations of ``trajectories/tau/gpt-4o-airline-dev.json``;
- retail and 200 tools: the same 100 conversations with each session's tools mapped one to one
  (seeded per session) onto tools of the other set, so the number of calls, of distinct tools
  and the reuse pattern stay those of real sessions.

Each set runs with two settings, as an engine with that configuration would (the registry's
``stubs`` flag included, so ``load_tools`` answers as it would there):

- ``loaded``: only ``load_tools``, pinned and loaded tools are bound, with their schemas;
- ``auto`` (the default): every tool bound as a stub while the stubs fit in
  ``directory_max_tokens`` (the tau sets), else as ``loaded`` (200 tools). The ``binding``
  column says what was bound.

Two ways for a tool to get loaded are measured:

- ``load first``: before the first use of a tool, the model spends an extra call on
  ``load_tools`` naming it: with loaded schemas for a tool that is not bound (never loaded, or
  evicted), with stubs for a tool whose parameters it has not read in this session (the
  directory tells it to read them first). The extra calls are counted, with their own tokens
  and the ``load_tools`` answer (signatures with loaded schemas, JSON schemas with stubs);
- ``direct``: the model calls the tool straight away (every one of the 621 real calls in the
  airline trajectories validates against the real schema, so it runs).

Per call the script records the schema tokens bound (the ``load_tools`` meta-tool, stubs and
loaded schemas included), the header tokens (system prompt plus directory), the whole request
(history uncompressed), and the time ``plan_tools`` takes with a warm registry. The cache-aware
figures price, per session, the longest prefix unchanged since the previous call at 0.1x, with
the tools placed before the messages: any change of the bound list leaves the whole prompt
uncached.

Run:
    uv run --all-packages python benchmarks/tools_bench.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    SystemMessage,
    ToolMessage,
    convert_to_messages,
)

from ctxplugin.config import ToolsConfig
from ctxplugin.tokens import TokenCounter, count_message, get_counter
from ctxplugin.tools import LOAD_TOOLS_NAME, ToolRegistry, plan_tools, tool_name

DATA = Path(__file__).resolve().parents[1] / ".." / "shared" / "data"
Mode = Literal["load first", "direct"]

_SERVICES = ["github", "jira", "slack", "notion", "gmail", "calendar", "drive", "stripe", "zendesk", "hubspot",
             "linear", "confluence", "sentry", "datadog", "postgres", "s3", "figma", "asana", "twilio", "shopify"]
_ACTIONS = [("list", "List {o}s in {s}, newest first. Supports paging."),
            ("get", "Get one {o} from {s} by its id, with all fields."),
            ("create", "Create a new {o} in {s}. Returns the created {o} with its id."),
            ("update", "Update fields of an existing {o} in {s}. Only the given fields change."),
            ("delete", "Delete a {o} from {s}. This cannot be undone."),
            ("search", "Search {o}s in {s} with a free-text query and optional filters."),
            ("archive", "Archive a {o} in {s} so it no longer shows in default views."),
            ("export", "Export {o}s from {s} as CSV or JSON for a date range."),
            ("assign", "Assign a {o} in {s} to a user or team."),
            ("comment", "Add a comment to a {o} in {s}.")]
_OBJECTS = ["issue", "ticket", "message", "page", "email", "event", "file", "invoice", "contact", "deal",
            "project", "alert", "record", "bucket", "task", "order", "customer", "report", "channel", "document"]


def generated_tools(count: int = 200, seed: int = 0) -> list[dict[str, Any]]:
    """``count`` distinct OpenAI function tools named ``<service>_<action>_<object>``."""
    rng = random.Random(seed)
    seen: set[str] = set()
    tools: list[dict[str, Any]] = []
    while len(tools) < count:
        service, (action, text), obj = rng.choice(_SERVICES), rng.choice(_ACTIONS), rng.choice(_OBJECTS)
        name = f"{service}_{action}_{obj}"
        if name in seen:
            continue
        seen.add(name)
        props: dict[str, Any] = {f"{obj}_id": {"type": "string", "description": f"The id of the {obj}, e.g. '{obj[:3]}_8f2k1'."}}
        extra = [
            ("limit", {"type": "integer", "description": "Maximum number of results to return (1-100)."}),
            ("cursor", {"type": "string", "description": "Paging cursor from a previous call."}),
            ("status", {"type": "string", "enum": ["open", "pending", "closed", "archived"],
                        "description": f"Only {obj}s with this status."}),
            ("fields", {"type": "array", "items": {"type": "string"}, "description": "Fields to include in the answer."}),
            ("query", {"type": "string", "description": "Free-text query, matched against titles and bodies."}),
            ("owner", {"type": "object", "description": "Who owns it.", "properties": {
                "user_id": {"type": "string", "description": "The owner's user id."},
                "team": {"type": "string", "description": "The owner's team name."}}, "required": ["user_id"]}),
            ("due_date", {"type": "string", "description": "Due date in the format 'YYYY-MM-DD'."}),
        ]
        for key, spec in rng.sample(extra, rng.randint(1, 5)):
            props[key] = spec
        required = [f"{obj}_id"] + [k for k in props if k != f"{obj}_id" and rng.random() < 0.3]
        tools.append({"type": "function", "function": {
            "name": name, "description": text.format(o=obj, s=service.capitalize()),
            "parameters": {"type": "object", "properties": props, "required": required}}})
    return tools


def load_sessions() -> list[list[BaseMessage]]:
    path = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
    return [convert_to_messages(record["traj"]) for record in json.loads(path.read_text())]


def remap(session: list[BaseMessage], names: list[str], seed: int) -> list[BaseMessage]:
    """The session with each distinct tool mapped to a distinct tool of ``names``."""
    used = list(dict.fromkeys(c["name"] for m in session if isinstance(m, AIMessage) for c in m.tool_calls))
    target = dict(zip(used, random.Random(seed).sample(names, len(used)), strict=True))
    out: list[BaseMessage] = []
    for message in session:
        if isinstance(message, AIMessage) and message.tool_calls:
            calls = [{**c, "name": target[c["name"]]} for c in message.tool_calls]
            message = message.model_copy(update={"tool_calls": calls})
        elif isinstance(message, ToolMessage) and message.name:
            message = message.model_copy(update={"name": target.get(message.name, message.name)})
        out.append(message)
    return out


CACHE_DISCOUNT = 0.1  # price of a cached prompt token relative to an uncached one


@dataclass
class Totals:
    calls: int = 0
    extra_calls: int = 0
    schema_full: int = 0
    schema_sent: int = 0
    header_full: int = 0
    header_sent: int = 0
    peak_sent: int = 0
    directory_tokens: int = 0
    load_answer_tokens: int = 0  # the load_tools answers (a ToolMessage each), inside input_sent
    input_full: int = 0  # whole requests (header + schemas + history) of the real calls, all bound
    input_sent: int = 0  # whole requests of every call with the directory, extra load calls too
    tool_cost_full: float = 0.0  # schemas at cache prices, all bound
    tool_cost_sent: float = 0.0  # schemas + directory at cache prices
    cost_full: float = 0.0  # whole requests at cache prices, all bound
    cost_sent: float = 0.0  # whole requests at cache prices, with the directory
    bound_changes: int = 0  # calls whose bound list differs from the session's previous call
    bound_as: set[str] = field(default_factory=set)
    plan_us: list[float] = field(default_factory=list)

    def add(self, plan: Any, system_tokens: int, seconds: float) -> None:
        self.calls += 1
        self.schema_full += plan.schema_tokens_full
        self.schema_sent += plan.schema_tokens_sent
        self.header_full += system_tokens
        self.header_sent += system_tokens + plan.directory_tokens
        self.peak_sent = max(self.peak_sent, plan.schema_tokens_sent)
        self.directory_tokens = plan.directory_tokens
        self.plan_us.append(seconds * 1e6)


@dataclass
class Prefix:
    """The previous call of a session: its bound tool names and its prompt tokens."""

    bound: tuple[str, ...] | None = None
    tokens: int = 0


def cached_price(tokens: int, cached: bool) -> float:
    return tokens * CACHE_DISCOUNT if cached else float(tokens)


def bound_as(plan: Any, registry: ToolRegistry) -> str:
    """``stubs`` when the plan binds stubs, ``loaded`` when it binds loaded schemas, ``all``
    when the directory is off."""
    if not plan.active:
        return "all"
    for tool in plan.bound:
        entry = registry.get(tool_name(tool) or "")
        if entry is not None and tool == registry.stub(entry):
            return "stubs"
    return "loaded"


def replay(tools: list[dict[str, Any]], sessions: list[list[BaseMessage]], mode: Mode, config: ToolsConfig,
           counter: TokenCounter) -> Totals:
    registry = ToolRegistry(counter)
    registry.binding = config.binding  # as ContextEngine sets it, before load_tools is built
    meta = registry.meta_tool()
    totals = Totals()
    sizes: dict[int, tuple[BaseMessage, int]] = {}  # the message is kept so its id stays its own

    def history_tokens(messages: list[BaseMessage]) -> int:
        return sum(sizes.setdefault(id(m), (m, count_message(m, counter)))[1] for m in messages)

    def plan_for(body: list[BaseMessage], system_tokens: int, prefix: Prefix) -> Any:
        start = time.perf_counter()
        plan = plan_tools(tools, body, config=config, counter=counter, registry=registry)
        totals.add(plan, system_tokens, time.perf_counter() - start)
        totals.bound_as.add(bound_as(plan, registry))
        prompt = system_tokens + plan.directory_tokens + plan.schema_tokens_sent + history_tokens(body)
        totals.input_sent += prompt
        signature = tuple(tool_name(t) or "" for t in plan.bound)
        # the history only grows, so an unchanged bound list keeps the whole previous prompt cached
        same = signature == prefix.bound
        totals.bound_changes += prefix.bound is not None and not same
        totals.tool_cost_sent += cached_price(plan.schema_tokens_sent + plan.directory_tokens, same)
        totals.cost_sent += (prompt - prefix.tokens if same else prompt) + cached_price(prefix.tokens, same)
        prefix.bound, prefix.tokens = signature, prompt
        return plan

    for index, session in enumerate(sessions):
        system, rest = session[0], session[1:]
        system_tokens = count_message(system, counter) if isinstance(system, SystemMessage) else 0
        body: list[BaseMessage] = []
        original: list[BaseMessage] = []
        read: set[str] = set()  # tools whose parameters the model has seen in this session
        prefix = Prefix()
        previous_full: int | None = None
        for message in rest:
            if isinstance(message, AIMessage):
                plan = plan_for(body, system_tokens, prefix)
                full = system_tokens + plan.schema_tokens_full + history_tokens(original)
                totals.input_full += full
                warm = previous_full is not None
                totals.tool_cost_full += cached_price(plan.schema_tokens_full, warm)
                totals.cost_full += full - (previous_full or 0) + cached_price(previous_full or 0, warm)
                previous_full = full
                called = list(dict.fromkeys(c["name"] for c in message.tool_calls))
                if bound_as(plan, registry) == "stubs":
                    missing = [n for n in called if n not in read]
                else:
                    missing = [n for n in called if n not in {tool_name(t) for t in plan.bound}]
                read.update(called)
                if missing and mode == "load first":
                    # the call just planned is spent on load_tools; the real call comes after it
                    totals.extra_calls += 1
                    call_id = f"load_{index}_{len(body)}"
                    answer = ToolMessage(content=meta.invoke({"names": missing}), tool_call_id=call_id,
                                         name=LOAD_TOOLS_NAME)
                    totals.load_answer_tokens += history_tokens([answer])
                    body.append(AIMessage(content="", tool_calls=[
                        {"name": LOAD_TOOLS_NAME, "args": {"names": missing}, "id": call_id}]))
                    body.append(answer)
                    plan_for(body, system_tokens, prefix)
            body.append(message)
            original.append(message)
    return totals


def summarize(name: str, count: int, setting: str, mode: Mode, t: Totals) -> dict[str, Any]:
    def per_call(value: float) -> float:
        return value / t.calls

    real_calls = t.calls - t.extra_calls
    return {
        "tool set": name, "tools": count, "setting": setting, "binding": "/".join(sorted(t.bound_as)),
        "mode": mode, "calls": t.calls, "extra load calls": t.extra_calls,
        "schema tokens/call, all bound": round(per_call(t.schema_full)),
        "schema tokens/call, directory": round(per_call(t.schema_sent)),
        "schema reduction": round(1 - t.schema_sent / t.schema_full, 4),
        "peak schema tokens, directory": t.peak_sent,
        "directory tokens": t.directory_tokens,
        "header tokens/call, all bound": round(per_call(t.header_full)),
        "header tokens/call, directory": round(per_call(t.header_sent)),
        "header+schema reduction": round(1 - (t.header_sent + t.schema_sent) / (t.header_full + t.schema_full), 4),
        "tools-only reduction": round(1 - (t.header_sent - t.header_full + t.schema_sent) / t.schema_full, 4),
        "load answer tokens": t.load_answer_tokens,
        "session input reduction": round(1 - t.input_sent / t.input_full, 4),
        "bound list changes": t.bound_changes,
        # per real call of the recorded sessions, so both sides divide by the same count
        "cached tool cost/call, all bound": round(t.tool_cost_full / real_calls),
        "cached tool cost/call, directory": round(t.tool_cost_sent / real_calls),
        "cache-aware input x all bound": round(t.cost_sent / t.cost_full, 2),
        "plan_tools median us": round(statistics.median(t.plan_us), 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--json", type=Path, help="also write the rows as JSON here")
    args = parser.parse_args(argv)
    if not (DATA / "tools").is_dir():
        print(f"shared data not found at {DATA}", file=sys.stderr)
        return 2
    counter = get_counter()[0]
    sessions = load_sessions()
    airline = json.loads((DATA / "tools" / "tau-airline-tools.json").read_text())
    retail = json.loads((DATA / "tools" / "tau-retail-tools.json").read_text())
    many = generated_tools(200)

    def mapped(tools: list[dict[str, Any]]) -> list[list[BaseMessage]]:
        names = [t["function"]["name"] for t in tools]
        return [remap(s, names, seed) for seed, s in enumerate(sessions)]

    full_intents = {"directory_max_tokens": 100_000}
    sets: list[tuple[str, list[dict[str, Any]], list[list[BaseMessage]], dict[str, Any]]] = [
        ("tau airline", airline, sessions, {}),
        ("tau retail", retail, mapped(retail), {}),
        ("generated", many, mapped(many), {}),
        ("generated, directory_max_tokens=100000", many, mapped(many), full_intents),
    ]
    rows = []
    for name, tools, replayed, overrides in sets:
        for setting in ("loaded", "auto"):
            config = ToolsConfig(**overrides, binding=setting)
            modes: tuple[Mode, ...] = ("load first", "direct")
            for mode in modes:
                totals = replay(tools, replayed, mode, config, counter)
                rows.append(summarize(name, len(tools), setting, mode, totals))
    columns = ["tool set", "tools", "setting", "binding", "mode", "calls", "extra load calls",
               "schema tokens/call, all bound", "schema tokens/call, directory", "schema reduction",
               "directory tokens", "tools-only reduction", "session input reduction", "bound list changes",
               "cached tool cost/call, all bound", "cached tool cost/call, directory",
               "cache-aware input x all bound", "plan_tools median us"]
    print(f"encoding: {counter.name}; {len(sessions)} sessions; max_loaded={ToolsConfig().max_loaded}; "
          f"cached tokens at {CACHE_DISCOUNT}x\n")
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    for row in rows:
        cells = [f"{row[c]:.1%}" if "reduction" in c else str(row[c]) for c in columns]
        print("| " + " | ".join(cells) + " |")
    if args.json:
        args.json.write_text(json.dumps({"encoding": counter.name, "cache_discount": CACHE_DISCOUNT,
                                         "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
