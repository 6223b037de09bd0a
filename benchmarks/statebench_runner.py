"""StateBench at the context level: what a prepared view shows for each query, scored against the
query's ground truth, beside StateBench's own ``memgine`` and ``state_based`` baselines in the
same run.

For each timeline the adapter gives ctxplugin what a caller who knows its state would: the
initial facts and every ``state_write`` / ``supersession`` event through ``engine.facts.write``
with their own ids, keys, ``supersedes``, authority, source, fact scope and dependencies; the
conversation turns as messages; the user's role as ``Scope.roles``; identity and environment as
the system prompt. At each query it calls ``engine.prepare`` and scores the view without the
query itself:

- must-mention recall: of the query's must-mention phrases (or any of their alternatives), the
  share found in the context (StateBench's boundary-aware matcher);
- must-not-mention leakage: of its must-not-mention phrases, the share found in the context
  other than under a negation ("no longer", "superseded", ...; StateBench's own rule);
- context tokens: tokens of the context text (cl100k, offline), the same count for every system.

The ``whole_input`` row is everything the timeline gave up to the query, as text: its recall is
the ceiling of any context built from that state (many must-mention phrases are answers no input
states, such as "both wrong" or "exceeds").

StateBench is not a dependency of ctxplugin; run it beside the project:

    uv run --all-packages --with statebench==2.0.0 python benchmarks/statebench_runner.py \
        [--seed 7] [--count 20] [--tracks ...] [--baselines memgine state_based] [--no-ceiling] [--misses] [--write-docs]

Without StateBench installed, ``--vectors`` runs the three test vectors of the state model
specification (basic supersession, emphatic repetition, authority override) the same way.
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import statistics
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import CtxpluginError
from ctxplugin.facts.model import normalize_key
from ctxplugin.tokens import content_text, get_counter

TRACKS = (
    "supersession",
    "commitment_durability",
    "interruption_resumption",
    "scope_permission",
    "environmental_freshness",
    "hallucination_resistance",
    "scope_leak",
    "causality",
    "repair_propagation",
    "brutal_realistic",
    "supersession_detection",
    "supersession_maintain",
    "authority_conflict",
    "dependency_chain",
    "authority_maintain",
)
"""The tracks of StateBench's v0.1, v0.2 and v1.1 sets plus supersession detection."""

_AUTHORITY = {
    "policy": "policy",
    "executive": "executive",
    "manager": "manager",
    "peer": "employee",
    "subordinate": "intern",
    "system": "system",
    "unverified": "guest",
}
_SOURCE = {"user": "state_write", "system": "system", "policy": "policy", "tool": "tool", "external": "tool"}
_SCOPE = {"global": "global", "session": "session", "task": "task", "project": "task", "hypothetical": "hypothetical", "draft": "draft"}
_LADDER = ("manager", "director", "vp", "svp", "cxo")
_CXO = {"ceo", "cfo", "cto", "coo", "cro", "cmo", "chief", "president"}
_RESTRICTED = re.compile(r"^\s*\[RESTRICTED:[^\]]*?restricted to ([\w-]+)(\+?)[^\]]*\]\s*", re.IGNORECASE)
_SCOPED = re.compile(r"^\s*\[SCOPE:\s*([^\]]+)\]\s*")
_DRAFT_VALUE = re.compile(r"\((?:DRAFT|PROPOSED|TENTATIVE)\)", re.IGNORECASE)
DOCS = Path(__file__).resolve().parent.parent / "docs" / "facts.md"
_MARK_START = "<!-- statebench:start -->"
_MARK_END = "<!-- statebench:end -->"


# ---------------------------------------------------------------- scoring


@dataclass
class Score:
    """Counts for one system on one track."""

    mentions: int = 0
    mentioned: int = 0
    stemmed: int = 0  # mentioned, counting a phrase that begins a longer word ("recalculat" in "recalculate")
    forbidden: int = 0
    leaked: int = 0
    queries: int = 0
    errors: int = 0
    tokens: list[int] = field(default_factory=list)
    # per must-mention phrase (its first form): [asked, missed, missed although the input states it]
    phrases: dict[str, list[int]] = field(default_factory=dict)

    def add(self, other: Score) -> None:
        self.mentions += other.mentions
        self.mentioned += other.mentioned
        self.stemmed += other.stemmed
        self.forbidden += other.forbidden
        self.leaked += other.leaked
        self.queries += other.queries
        self.errors += other.errors
        self.tokens.extend(other.tokens)
        for phrase, counts in other.phrases.items():
            mine = self.phrases.setdefault(phrase, [0, 0, 0])
            for i, n in enumerate(counts):
                mine[i] += n

    @property
    def recall(self) -> float:
        return self.mentioned / self.mentions if self.mentions else 1.0

    @property
    def stem_recall(self) -> float:
        return self.stemmed / self.mentions if self.mentions else 1.0

    @property
    def leakage(self) -> float:
        return self.leaked / self.forbidden if self.forbidden else 0.0

    @property
    def mean_tokens(self) -> float:
        return statistics.fmean(self.tokens) if self.tokens else 0.0


def _phrases(item: Any) -> list[str]:
    if isinstance(item, str):
        return [item]
    return [item.phrase, *item.alternatives]


def score_context(context: str, ground_truth: Any, tokens: int, given: Iterable[str] = ()) -> Score:
    """One query's counts, with StateBench's own phrase matching. ``given``: the text of the
    timeline up to the query, to tell a missed phrase the input states from one it does not."""
    from statebench.evaluation.rubric import all_mentions_negated, contains_phrase

    score = Score(queries=1, tokens=[tokens])
    given = list(given)
    for item in ground_truth.must_mention:
        score.mentions += 1
        found = any(contains_phrase(context, p) for p in _phrases(item))
        score.mentioned += found
        stated = not found and any(contains_phrase(text, p) for text in given for p in _phrases(item))
        score.phrases[_phrases(item)[0]] = [1, int(not found), int(stated)]
        score.stemmed += found or any(_begins_word(context, p) for p in _phrases(item))
    for item in ground_truth.must_not_mention:
        score.forbidden += 1
        found = [p for p in _phrases(item) if contains_phrase(context, p)]
        score.leaked += any(not all_mentions_negated(context, p) for p in found)
    return score


def given_text(timeline: Any, upto: int) -> list[str]:
    """Every string of the timeline's initial state and of its events before event ``upto``
    (queries' prompts included, their ground truth left out): all the input says so far."""
    out: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, str):
            out.append(value)
        elif isinstance(value, dict):
            for key, item in value.items():
                if key != "ground_truth":
                    walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    walk(timeline.initial_state.model_dump(mode="json"))
    walk([event.model_dump(mode="json") for event in timeline.events[:upto]])
    return out


def _begins_word(context: str, phrase: str) -> bool:
    """Whether ``phrase`` occurs in ``context`` as StateBench matches it, except that its last
    word may go on: several must-mention phrases are word stems ("recalculat", "6 week") that
    StateBench 2.0.0's boundary-aware matching finds only as a whole token, which no sentence
    holds. Reported beside the official recall, never instead of it."""
    from statebench.evaluation.rubric import normalize_text

    text, stem = normalize_text(context), normalize_text(phrase)
    if not stem or stem.startswith("regex:") or "|" in stem:
        return False
    lead = r"(?<!\w)" if stem[:1].isalnum() or stem[:1] == "_" else ""
    return re.search(lead + re.escape(stem), text) is not None


# ---------------------------------------------------------------- the adapter


class CtxpluginAdapter:
    """Feeds one timeline's events to a fresh engine and answers ``context(query)``."""

    name = "ctxplugin"

    def __init__(self, config: ContextConfig | None = None) -> None:
        self.config = config or ContextConfig()
        self.engine: ContextEngine | None = None

    def reset(self, timeline: Any) -> None:
        self.engine = ContextEngine(config=self.config)
        user = timeline.actors.user
        identity = timeline.initial_state.identity_role
        self.scope = Scope(session_id=timeline.id, user_id=user.id, roles=_roles(identity.authority))
        self.identity = identity
        self.environment = dict(timeline.initial_state.environment)
        self.messages: list[BaseMessage] = []
        self.turn = 0
        initial = [f for f in timeline.initial_state.persistent_facts if f.is_valid]
        for fact in initial:
            self._write(fact.id, fact.key, fact.value, fact.source, fact.scope, fact.supersedes, fact.depends_on, fact.is_constraint)
        for item in timeline.initial_state.working_set:
            # "[SCOPE: sandbox environment] ...": an item of an exercise, not a current fact
            scoped = _SCOPED.match(item.content)
            self.engine.facts.write(
                item.content[scoped.end():] if scoped else item.content,
                scope=self.scope,
                fact_scope="hypothetical" if scoped else "session",
                scope_id=scoped.group(1).strip() if scoped else None,
                kind="task" if item.item_type in ("objective", "pending_action") else "fact",
            )

    def _write(
        self, fact_id: str, key: str, value: str, source: Any, fact_scope: str, supersedes: str | None,
        depends_on: Iterable[str], constraint: bool,
    ) -> None:
        assert self.engine is not None
        kind = "constraint" if constraint else "fact"
        mapped = _SCOPE.get(fact_scope, "global")
        # the timeline writes a restriction and a draft status into the value; a caller that
        # knows its state passes them as an audience and a fact scope
        audience: list[str] = []
        restricted = _RESTRICTED.match(value)
        if restricted:
            value = value[restricted.end():] or value
            audience = _audience(restricted.group(1), bool(restricted.group(2)))
        if _DRAFT_VALUE.search(value) and mapped == "global":
            mapped = "draft"
        held = self.engine.facts.get(fact_id, scope=self.scope)
        if held is not None:
            # the timeline writes an id again: with the same key, an update of that fact; with
            # another key the id is a placeholder ("W-AUTO" on every write), not an identity
            if held.key == normalize_key(key):
                supersedes = supersedes or fact_id
            fact_id = None  # type: ignore[assignment]
        self.engine.facts.write(
            value[:500],
            scope=self.scope,
            key=key,
            fact_id=fact_id,
            supersedes=supersedes if supersedes and self._known(supersedes) else None,
            kind=kind,
            fact_scope=mapped,  # type: ignore[arg-type]
            scope_id=fact_scope if mapped == "task" else None,
            authority=_authority(source),  # type: ignore[arg-type]
            source=_SOURCE.get(source.type, "state_write"),  # type: ignore[arg-type]
            depends_on=list(depends_on),
            audience=audience,
        )

    def _known(self, name: str) -> bool:
        assert self.engine is not None
        return self.engine.facts.get(name, scope=self.scope) is not None or self.engine.facts.current(name, scope=self.scope) is not None

    def event(self, event: Any) -> None:
        assert self.engine is not None
        if event.type == "conversation_turn":
            self.turn += 1
            if event.speaker == "user":
                self.messages.append(HumanMessage(event.text, id=f"turn-{self.turn}"))
            else:
                self.messages.append(AIMessage(event.text, id=f"turn-{self.turn}"))
            return
        for write in event.writes:
            if write.layer == "environment":
                self.environment[write.key] = write.value
            elif write.layer == "working_set":
                self.engine.facts.write(write.value[:500], scope=self.scope, key=write.key, fact_scope="session")
            else:
                self._write(write.id, write.key, write.value, write.source, write.scope, write.supersedes, write.depends_on, write.is_constraint)

    def context(self, query: str) -> str:
        assert self.engine is not None
        system = SystemMessage(self._system_prompt())
        prepared = self.engine.prepare([system, *self.messages, HumanMessage(query)], scope=self.scope)
        return _without_query(prepared.messages, query)

    def _system_prompt(self) -> str:
        who = self.identity
        org = ", ".join(x for x in (who.department, who.organization) if x)
        lines = [f"You assist {who.user_name}, {who.authority}{f' ({org})' if org else ''}."]
        lines.extend(f"{key}: {value}" for key, value in self.environment.items())
        return "\n".join(lines)


def _authority(source: Any) -> str | None:
    """Who states a written fact: a policy document states its own (whoever recorded it), a tool
    output nobody (the ledger gives it ``tool``), anything else the source's authority."""
    if source.type == "policy":
        return "policy"
    if _SOURCE.get(source.type) == "tool":
        return None
    return _AUTHORITY.get(source.authority, "user")


def _level(word: str) -> str | None:
    word = word.lower()
    if word in _CXO or (word.startswith("c") and len(word) == 3 and word.endswith("o")):
        return "cxo"
    if word in ("svp", "evp"):
        return "svp"
    if word in ("vp", "vice"):
        return "vp"
    if word in ("director", "head"):
        return "director"
    if word in ("manager", "lead"):
        return "manager"
    return None


def _roles(title: str) -> tuple[str, ...]:
    """A user's roles from a job title: its words, and its level ("VP Sales": ``vp``)."""
    words = [w for w in re.split(r"[^\w]+", title.lower()) if w]
    levels = [lv for lv in (_level(w) for w in words) if lv]
    return tuple(dict.fromkeys([*words, *levels]))


def _audience(role: str, and_above: bool) -> list[str]:
    """``restricted to VP+``: the VP level and every level above it."""
    level = _level(role) or role.lower()
    if and_above and level in _LADDER:
        return [f"role:{lv}" for lv in _LADDER[_LADDER.index(level):]]
    return [f"role:{level}"]


class BaselineAdapter:
    """One of StateBench's own strategies, scored the same way."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.strategy: Any = None

    def reset(self, timeline: Any) -> None:
        from statebench.baselines import get_baseline

        self.strategy = get_baseline(self.name)
        self.strategy.reset()
        if getattr(self.strategy, "expects_initial_state", False) or hasattr(self.strategy, "initialize_from_state"):
            init = getattr(self.strategy, "initialize_from_state", None)
            if callable(init):
                init(timeline.initial_state)

    def event(self, event: Any) -> None:
        self.strategy.process_event(event)

    def context(self, query: str) -> str:
        return str(self.strategy.build_context(query).context)


class WholeInput:
    """Everything the timeline gave so far, as text: every fact with its key (superseded ones
    too), working set, environment, turns and writes. Its recall is the most a context made of
    the given state can reach; a phrase it misses ("recalculat", "both wrong") is in no input."""

    name = "whole_input"

    def __init__(self) -> None:
        self.texts: list[str] = []

    def reset(self, timeline: Any) -> None:
        state = timeline.initial_state
        self.texts = [f"{f.key}: {f.value}" for f in state.persistent_facts]
        self.texts += [item.content for item in state.working_set]
        self.texts += [f"{key}: {value}" for key, value in state.environment.items()]

    def event(self, event: Any) -> None:
        if event.type == "conversation_turn":
            self.texts.append(event.text)
        else:
            self.texts.extend(f"{write.key}: {write.value}" for write in event.writes)

    def context(self, query: str) -> str:
        return "\n".join(self.texts)


# ---------------------------------------------------------------- the run


def _offline_tiktoken() -> None:
    """StateBench's baselines ask tiktoken for ``cl100k_base``, which downloads; hand them the
    offline copy instead."""
    import tiktoken

    original = tiktoken.get_encoding

    def get_encoding(name: str) -> Any:
        try:
            return original(f"{name}_offline")
        except (ValueError, KeyError):
            return original(name)

    tiktoken.get_encoding = get_encoding  # type: ignore[assignment]


def timelines(seed: int, count: int, tracks: Iterable[str]) -> Iterator[Any]:
    from statebench.generator.engine import generate_dataset
    from statebench.runner.harness import load_timelines

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timelines.jsonl"
        generate_dataset(output_path=path, tracks=list(tracks), count_per_track=count, seed=seed)
        yield from load_timelines(path)


def run(systems: list[Any], stream: Iterable[Any], *, misses: bool = False) -> dict[str, dict[str, Score]]:
    counter, _ = get_counter("cl100k_base", None)
    table: dict[str, dict[str, Score]] = {s.name: collections.defaultdict(Score) for s in systems}
    for timeline in stream:
        for system in systems:
            score = table[system.name][timeline.track]
            system.reset(timeline)
            for at, event in enumerate(timeline.events):
                if event.type != "query":
                    system.event(event)
                    continue
                try:
                    context = system.context(event.prompt)
                except (CtxpluginError, ValueError, KeyError) as exc:
                    print(f"{system.name} {timeline.id}: {exc}", file=sys.stderr)
                    score.errors += 1
                    score.queries += 1
                    continue
                given = given_text(timeline, at) if misses else ()
                score.add(score_context(context, event.ground_truth, counter.count(context), given))
    return table


def render(table: dict[str, dict[str, Score]], *, seed: int, count: int) -> str:
    names = list(table)
    tracks = sorted({t for scores in table.values() for t in scores})
    totals = {n: Score() for n in names}
    for name in names:
        for track in tracks:
            totals[name].add(table[name][track])
    queries = totals[names[0]].queries
    lines = [
        f"StateBench 2.0.0, context level, generator seed {seed}, {count} timelines per track, {queries} queries.",
        "",
        "| system | must-mention recall ↑ | must-not-mention leakage ↓ | mean context tokens | errors | recall, stems counted |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        t = totals[name]
        lines.append(f"| {name} | {t.recall:.3f} | {t.leakage:.3f} | {t.mean_tokens:.0f} | {t.errors} | {t.stem_recall:.3f} |")
    lines += ["", "Per track (recall / leakage / tokens):", ""]
    lines.append("| track | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for track in tracks:
        cells = [f"{table[n][track].recall:.2f} / {table[n][track].leakage:.2f} / {table[n][track].mean_tokens:.0f}" for n in names]
        lines.append(f"| {track} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def render_misses(table: dict[str, dict[str, Score]]) -> str:
    """Each must-mention phrase some system missed, per track: how often it was asked, and per
    system how often it was missed, with, in brackets, how many of those misses the input
    states (the timeline up to the query holds the phrase in some field, as StateBench matches
    it). A miss outside the brackets is a phrase the input never states in that form."""
    names = list(table)
    lines = ["| track | must-mention phrase | asked | " + " | ".join(f"{n} missed (input states it)" for n in names) + " |"]
    lines.append("|---|---|---|" + "---|" * len(names))
    for track in sorted({t for scores in table.values() for t in scores}):
        phrases = sorted({p for n in names for p, c in table[n][track].phrases.items() if c[1]})
        for phrase in phrases:
            cells = [table[n][track].phrases.get(phrase, [0, 0, 0]) for n in names]
            asked = max(c[0] for c in cells)  # a system's failed queries are not scored: it was asked fewer
            lines.append(f"| {track} | {phrase} | {asked} | " + " | ".join(f"{c[1]} ({c[2]})" for c in cells) + " |")
    return "\n".join(lines)


def write_docs(text: str) -> None:
    page = DOCS.read_text(encoding="utf-8")
    block = f"{_MARK_START}\n{text}\n{_MARK_END}"
    if _MARK_START in page:
        head, rest = page.split(_MARK_START, 1)
        page = head + block + rest.split(_MARK_END, 1)[1]
    else:
        page = page.rstrip() + "\n\n## StateBench (context level)\n\n" + block + "\n"
    DOCS.write_text(page, encoding="utf-8")


# ---------------------------------------------------------------- the state model specification's test vectors


def vectors() -> list[tuple[str, bool]]:
    """The three test vectors of the state model specification, run through ``prepare``."""
    out: list[tuple[str, bool]] = []
    scope = Scope(session_id="vectors-1")
    eng = ContextEngine()
    eng.facts.write("approved", key="status_v1", fact_id="status_v1", scope=scope)
    eng.facts.write("cancelled", key="status_v2", fact_id="status_v2", supersedes="status_v1", scope=scope)
    view = _without_query(eng.prepare([HumanMessage("What is the current status?")], scope=scope).messages, "What is the current status?")
    out.append(("basic supersession", "cancelled" in view and "approved" not in view))

    scope = Scope(session_id="vectors-2")
    eng = ContextEngine()
    for _ in range(3):
        eng.facts.write("The order is approved", key="order_v1", fact_id="order_v1", scope=scope)
    eng.facts.write("The order is cancelled", key="order_v2", supersedes="order_v1", scope=scope)
    view = _without_query(eng.prepare([HumanMessage("Should we proceed with the order?")], scope=scope).messages, "Should we proceed with the order?")
    out.append(("emphatic repetition", "cancelled" in view and "approved" not in view))

    scope = Scope(session_id="vectors-3", roles=("intern",))
    eng = ContextEngine()
    eng.facts.write("Max discount is 15%", key="policy", scope=scope, kind="constraint", authority="executive", source="policy")
    messages: list[BaseMessage] = [
        HumanMessage("Let's offer 25%.", additional_kwargs={"ctxplugin": {"authority": "intern"}}),
        AIMessage("Noted."),
        HumanMessage("Can we offer 25%?"),
    ]
    view = _without_query(eng.prepare(messages, scope=scope).messages, "Can we offer 25%?")
    current = eng.facts.current("policy", scope=scope)
    out.append(("authority override", "Max discount is 15%" in view and current is not None and current.text == "Max discount is 15%"))
    return out


def _without_query(messages: list[BaseMessage], query: str) -> str:
    """The view's text without the query (the latest user message, as sent)."""
    last = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage) and content_text(m.content) == query), default=-1)
    return "\n".join(content_text(m.content) for i, m in enumerate(messages) if i != last)


def _text(messages: list[BaseMessage]) -> str:
    return "\n".join(content_text(m.content) for m in messages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument("--tracks", nargs="*", default=list(TRACKS))
    parser.add_argument("--baselines", nargs="*", default=["memgine", "state_based"])
    parser.add_argument("--vectors", action="store_true", help="run the specification's test vectors only")
    parser.add_argument("--no-ceiling", action="store_true", help="leave out the whole_input row (the input's own recall)")
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--misses", action="store_true", help="also list each missed must-mention phrase per track and system")
    parser.add_argument("--json", type=Path, help="also write the per-track scores as JSON")
    args = parser.parse_args(argv)
    if args.vectors:
        results = vectors()
        for name, ok in results:
            print(f"{'pass' if ok else 'FAIL'}  {name}")
        return 0 if all(ok for _, ok in results) else 1
    try:
        import statebench  # noqa: F401
    except ImportError:
        print("StateBench is not installed: run with `uv run --with statebench==2.0.0 ...`, or use --vectors", file=sys.stderr)
        return 2
    _offline_tiktoken()
    systems: list[Any] = [CtxpluginAdapter(), *(BaselineAdapter(name) for name in args.baselines)]
    if not args.no_ceiling:
        systems.append(WholeInput())
    table = run(systems, timelines(args.seed, args.count, args.tracks), misses=args.misses)
    text = render(table, seed=args.seed, count=args.count)
    print(text)
    if args.misses:
        print("\nMissed must-mention phrases:\n")
        print(render_misses(table))
    if args.json:
        args.json.write_text(json.dumps({
            n: {t: {"recall": s.recall, "leakage": s.leakage, "tokens": s.mean_tokens, "queries": s.queries, "errors": s.errors} for t, s in scores.items()}
            for n, scores in table.items()
        }, indent=1), encoding="utf-8")
    if args.write_docs:
        write_docs(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
