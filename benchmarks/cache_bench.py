"""Answer cache: hit rate, latency saved and false hits on a generated workload of repeated and
near-duplicate questions.

Every question belongs to an *intent* (one answer). A stand-in model answers ``[intent] ...``,
so a served answer is a false hit when its intent differs from the asked one. Questions come
from two sources: the opening messages of the tau-bench airline conversations (real wording,
25 tasks; other trials of the same task are paraphrases) and templates of retail and airline
questions with slots (cities, order and reservation ids, counts, dates, weekdays, negation,
direction). Each intent has *counterfactual siblings*: the same question with one detail
changed ("Portland" -> "Seattle", "#W1234" -> "#W1235", "2 bags" -> "3 bags", "from A to B" ->
"from B to A"), which need a different answer.

Workloads, all through the engine (``prepare``, ``cached_answer``, ``remember_answer``):

- **shared** (``scope="global"``): one question per session from many users, intents drawn with
  Zipf-like popularity, half asked verbatim and half as a surface variant (case, punctuation,
  greetings, "can you tell me", contractions, digits as words); siblings are intents of their
  own, so they are asked after their base question.
- **sessions** (``scope="session"``): conversations of 2-6 turns in which the user sometimes asks
  again (verbatim or reworded) right away, or follows up with a sibling. Only the answer just
  given counts as servable: asked again after other turns, a question is asked in another
  context (the cache then calls the model, by design).
- **pairs**: each base question, then each of its siblings, in one partition: the
  Portland/Seattle test. Also scored for a cosine-only cache (no guard), and for the looser
  ``same_specifics`` guard.

Latency: the model is not called (it would dominate the run); the time saved per hit is the
median latency of the 570 recorded model calls of the SWE trajectories (``timestamp - created``
of each response), minus what the cache costs on every call (lookup on each, store on misses),
measured here for the memory and the embedded Chroma store.

Run (a minute or two):
    uv run --all-packages python benchmarks/cache_bench.py [--asks 2000] [--postgres DSN] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import platform
import random
import re
import statistics
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.cache import (
    AnswerCache,
    AnswerCacheStore,
    CacheScope,
    ChromaAnswerCacheStore,
    MemoryAnswerCacheStore,
    normalize_query,
    same_specifics,
    same_wording,
    search_text,
)
from ctxplugin.cas import MemoryCASStore
from ctxplugin.config import CacheConfig
from ctxplugin.facts import FactsLedger, HashingEmbedding, MemoryFactStore
from ctxplugin.facts.embedding import cosine

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / ".." / "shared" / "data"
DOCS = ROOT / "docs" / "cache.md"
BEGIN, END = "<!-- cache-bench:begin -->", "<!-- cache-bench:end -->"
SYSTEM = SystemMessage(content="You are a customer-service assistant for an airline and an online store. Be brief.")
MODEL = "bench-model"

CITIES = ["Portland", "Seattle", "Denver", "Boston", "Austin", "Chicago", "Miami", "Atlanta", "Phoenix", "Dallas", "Houston", "Newark"]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
CABINS = ["basic economy", "economy", "business"]
LONG = (
    "I ordered the blue trail running shoes and the matching wool socks last week and I need them "
    "delivered to my office in {city} before the team offsite starts, so how long will standard "
    "shipping take for order #W{id} if it leaves the warehouse tomorrow morning?"
)
TEMPLATES: list[tuple[str, tuple[str, ...]]] = [
    ("How long does standard shipping to {city} take?", ("city",)),
    ("What is the status of order #W{id}?", ("id",)),
    ("What is the baggage fee for {n} checked bags on a {cabin} ticket?", ("n", "cabin")),
    ("Is there a direct flight from {city} to {city2} on {day}?", ("city", "city2", "day", "swap")),
    ("How many miles do I earn on a {cabin} flight from {city} to {city2}?", ("cabin", "city", "swap")),
    ("What is the cancellation fee for reservation {res} booked {n} days ago?", ("res", "n")),
    ("Does the refund for order #W{id} include the shipping fee?", ("id", "negate")),
    ("Can I still change the delivery address of order #W{id} to {city}?", ("id", "city")),
    (LONG, ("city", "id")),
]
VARIANT_OPENERS = ["Hi! ", "Hello there, ", "Hey, quick question: ", "Hi there! I'd like to know: "]
VARIANT_CLOSERS = [" Thanks!", " thank you", " Thanks in advance.", "??", ""]
NUMBER_WORDS = {"1": "one", "2": "two", "3": "three", "4": "four", "5": "five", "6": "six", "7": "seven", "8": "eight", "9": "nine"}


@dataclass
class Intent:
    """One answer: a canonical question and its siblings (one detail changed, another answer)."""

    id: str
    text: str
    siblings: list[Intent] = field(default_factory=list)
    paraphrases: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------- workload
def _fill(template: str, slots: dict[str, Any]) -> str:
    return template.format(**slots)


def template_intents(rng: random.Random, per_template: int, taken: set[str]) -> list[Intent]:
    """Intents from the templates; a question whose wording is already taken (by another intent
    or sibling) is drawn again, so that one wording never has two answers."""
    intents: list[Intent] = []
    for t, (template, kinds) in enumerate(TEMPLATES):
        j = attempts = 0
        while j < per_template and attempts < 50 * per_template:  # few cities: some draws collide
            attempts += 1
            city, city2 = rng.sample(CITIES, 2)
            slots: dict[str, Any] = {"city": city, "city2": city2, "id": rng.randint(1_000_000, 9_999_999), "n": rng.randint(1, 5),
                     "cabin": rng.choice(CABINS), "day": rng.choice(DAYS), "res": "".join(rng.choices("ABCDEFGHJKLMNPQRSTUVWXYZ23456789", k=6))}
            base = Intent(f"t{t}.{j}", _fill(template, slots))
            for kind in kinds:
                changed = dict(slots)
                if kind == "city":
                    changed["city"] = rng.choice([c for c in CITIES if c not in (city, city2)])
                elif kind == "city2":
                    changed["city2"] = rng.choice([c for c in CITIES if c not in (city, city2)])
                elif kind == "id":
                    changed["id"] = slots["id"] + rng.choice([1, -1, 10, 100])
                elif kind == "n":
                    changed["n"] = slots["n"] % 5 + 1
                elif kind == "cabin":
                    changed["cabin"] = rng.choice([c for c in CABINS if c != slots["cabin"]])
                elif kind == "day":
                    changed["day"] = rng.choice([d for d in DAYS if d != slots["day"]])
                elif kind == "res":
                    changed["res"] = slots["res"][:-1] + ("X" if slots["res"][-1] != "X" else "Y")
                if kind == "swap":
                    text = _fill(template, {**slots, "city": city2, "city2": city})
                elif kind == "negate":
                    text = base.text.replace("include", "not include")
                else:
                    text = _fill(template, changed)
                base.siblings.append(Intent(f"{base.id}~{kind}", text))
            wordings = [search_text(i.text) for i in (base, *base.siblings)]
            if len(set(wordings)) < len(wordings) or taken.intersection(wordings):
                continue
            taken.update(wordings)
            intents.append(base)
            j += 1
    return intents


_DATE = re.compile(r"\b(May|June|April) (\d{1,2})(st|nd|rd|th)?\b")


def tau_intents() -> list[Intent]:
    """Opening messages of the tau-bench airline conversations: one intent per task; other
    trials of the task are its paraphrases; a changed city, date or number makes a sibling."""
    path = DATA / "trajectories" / "tau" / "gpt-4o-airline-dev.json"
    if not path.exists():
        return []
    by_task: dict[int, list[str]] = {}
    for record in json.loads(path.read_text()):
        first = next((m["content"] for m in record["traj"] if m["role"] == "user"), "")
        by_task.setdefault(int(record["task_id"]), []).append(" ".join(str(first).split()))
    intents: list[Intent] = []
    for task, texts in sorted(by_task.items()):
        base = Intent(f"tau{task}", texts[0], paraphrases=[t for t in texts[1:] if normalize_query(t) != normalize_query(texts[0])])
        found = [c for c in [*CITIES, "New York", "Texas", "Philadelphia", "LaGuardia"] if c in base.text]
        if found:
            other = next(c for c in CITIES if c not in base.text)
            base.siblings.append(Intent(f"{base.id}~city", base.text.replace(found[0], other, 1)))
        date = _DATE.search(base.text)
        if date:
            day = int(date.group(2)) % 28 + 1
            base.siblings.append(Intent(f"{base.id}~date", base.text[: date.start(2)] + str(day) + base.text[date.end(2):]))
        intents.append(base)
    # one wording, one intent: tasks that open with the same words (greetings and framing
    # aside) ask the same question, and a paraphrase worded like another task's is dropped
    seen: set[str] = set()
    unique: list[Intent] = []
    for base in intents:
        if search_text(base.text) not in seen:
            seen.update(search_text(i.text) for i in (base, *base.siblings))
            unique.append(base)
    for base in unique:
        own = search_text(base.text)
        base.paraphrases = [p for p in base.paraphrases if search_text(p) == own or search_text(p) not in seen]
    return unique


def surface_variant(text: str, rng: random.Random) -> str:
    """The same question worded on the surface differently (never a detail changed)."""
    out = text
    if rng.random() < 0.5:
        out = out.lower() if rng.random() < 0.5 else out.upper()
    if rng.random() < 0.4:
        out = out.replace("What is", "What's").replace("what is", "what's")
    if rng.random() < 0.4 and re.match(r"(?i)(what|how|is|does|can) ", out):
        out = "Can you tell me " + out[0].lower() + out[1:]
    if rng.random() < 0.3:
        out = re.sub(r"\b([1-9])\b", lambda m: NUMBER_WORDS[m.group(1)], out)
    if rng.random() < 0.3:
        out = out.replace("#W", "W")
    out = out.rstrip("?!. ")
    return rng.choice(VARIANT_OPENERS) * (rng.random() < 0.5) + out + rng.choice(VARIANT_CLOSERS)


# ---------------------------------------------------------------------- running
@dataclass
class Tally:
    asks: int = 0
    repeats: int = 0
    verbatim_repeats: int = 0
    hits: int = 0
    repeat_hits: int = 0
    verbatim_hits: int = 0
    false_hits: int = 0
    sibling_asks: int = 0
    sibling_hits: int = 0
    paraphrase_asks: int = 0
    paraphrase_hits: int = 0
    tokens_saved: int = 0
    lookup_ms: dict[str, list[float]] = field(default_factory=lambda: {"hit": [], "miss": []})
    store_ms: list[float] = field(default_factory=list)


def make_engine(store: AnswerCacheStore, scope: CacheScope) -> ContextEngine:
    config = ContextConfig(cache=CacheConfig(enabled=True, scope=scope))
    return ContextEngine(config, cas=MemoryCASStore(), facts=FactsLedger(MemoryFactStore(), config.facts),
                         answer_cache=AnswerCache(store, config.cache))


class Asker:
    """Asks questions through the engine as a host would, and scores what comes back."""

    def __init__(self, engine: ContextEngine, tally: Tally) -> None:
        self.engine, self.tally = engine, tally
        self.answered: set[str] = set()

    def ask(self, scope: Scope, history: list[BaseMessage], text: str, intent: str, kind: str) -> AIMessage:
        messages = [SYSTEM, *history, HumanMessage(content=text)]
        prepared = self.engine.prepare(messages, scope=scope)
        start = time.perf_counter()
        cached = self.engine.cached_answer(messages, prepared, scope=scope, model=MODEL)
        elapsed = (time.perf_counter() - start) * 1000
        t = self.tally
        t.asks += 1
        repeat = intent in self.answered and kind in ("verbatim", "variant")
        t.repeats += repeat
        t.verbatim_repeats += repeat and kind == "verbatim"
        t.sibling_asks += kind == "sibling"
        t.paraphrase_asks += kind == "paraphrase"
        if cached is not None:
            t.lookup_ms["hit"].append(elapsed)
            served = str(cached.content).split("]", 1)[0].lstrip("[")
            t.hits += 1
            t.repeat_hits += repeat
            t.verbatim_hits += repeat and kind == "verbatim"
            t.false_hits += served != intent
            t.sibling_hits += kind == "sibling"
            t.paraphrase_hits += kind == "paraphrase"
            t.tokens_saved += prepared.report.tokens_after + self.engine.counter.count(str(cached.content))
            return cached
        t.lookup_ms["miss"].append(elapsed)
        answer = AIMessage(content=f"[{intent}] An answer to: {text[:60]}", response_metadata={"finish_reason": "stop"})
        start = time.perf_counter()
        self.engine.remember_answer(messages, prepared, answer, scope=scope, model=MODEL)
        t.store_ms.append((time.perf_counter() - start) * 1000)
        self.answered.add(intent)
        return answer


def popular(intents: list[Intent], rng: random.Random) -> Intent:
    weights = [1.0 / (rank + 1) ** 0.9 for rank in range(len(intents))]
    return rng.choices(intents, weights=weights)[0]


def shared_workload(store: AnswerCacheStore, intents: list[Intent], asks: int, seed: int) -> Tally:
    rng = random.Random(seed)
    pool = [i for base in intents for i in (base, *base.siblings)]
    rng.shuffle(pool)
    paraphrases = {i.id: i.paraphrases for i in intents}
    tally = Tally()
    asker = Asker(make_engine(store, "global"), tally)
    for n in range(asks):
        intent = popular(pool, rng)
        scope = Scope(session_id=f"shared-{n}", user_id=f"user-{rng.randrange(300)}")
        roll = rng.random()
        if paraphrases.get(intent.id) and roll < 0.15 and intent.id in asker.answered:
            text, kind = rng.choice(paraphrases[intent.id]), "paraphrase"
        elif roll < 0.55:
            text, kind = intent.text, "verbatim"
        else:
            text, kind = surface_variant(intent.text, rng), "variant"
        family = intent.id.split("~")[0]
        if kind != "paraphrase" and intent.id not in asker.answered and any(f.split("~")[0] == family for f in asker.answered):
            kind = "sibling"  # another question of its family was answered: serving that would be false
        asker.ask(scope, [], text, intent.id, kind)
    return tally


def session_workload(store: AnswerCacheStore, intents: list[Intent], sessions: int, seed: int) -> Tally:
    rng = random.Random(seed)
    tally = Tally()
    asker = Asker(make_engine(store, "session"), tally)
    for s in range(sessions):
        scope = Scope(session_id=f"conv-{s}", user_id=f"user-{s % 50}")
        history: list[BaseMessage] = []
        intent = popular(intents, rng)
        for turn in range(rng.randint(2, 6)):
            # what may be served: the answer just given (a question asked again after other
            # turns is asked in another context, which may change its answer)
            asker.answered.intersection_update({intent.id} if turn else set())
            roll = rng.random()
            if history and roll < 0.2:
                text, kind = intent.text, "verbatim"
            elif history and roll < 0.35:
                text, kind = surface_variant(intent.text, rng), "variant"
            elif history and roll < 0.55 and intent.siblings:
                intent = rng.choice(intent.siblings)
                text, kind = intent.text, "sibling"
            else:
                intent = popular(intents, rng)
                text, kind = intent.text, "verbatim"
            reply = asker.ask(scope, history, text, intent.id, kind)
            history += [HumanMessage(content=text), reply]
    return tally


def pairs(intents: list[Intent], threshold: float) -> dict[str, Any]:
    """Each base question then each sibling, in a fresh partition: hits are false hits."""
    emb = HashingEmbedding()
    rows = {"pairs": 0, "cosine": 0, "specifics": 0, "wording": 0, "engine": 0, "max_cosine": 0.0}
    tally = Tally()
    asker = Asker(make_engine(MemoryAnswerCacheStore(), "global"), tally)
    for n, base in enumerate(intents):
        for sibling in base.siblings:
            rows["pairs"] += 1
            a, b = normalize_query(base.text), normalize_query(sibling.text)
            similarity = cosine(emb.embed_query(a), emb.embed_query(b))
            rows["max_cosine"] = max(rows["max_cosine"], similarity)
            close = similarity >= threshold
            rows["cosine"] += close
            rows["specifics"] += close and same_specifics(base.text, sibling.text) is None
            rows["wording"] += close and same_wording(base.text, sibling.text) is None
            scope = Scope(session_id=f"pair-{n}-{sibling.id}", tenant_id=f"pair-{n}-{sibling.id}")
            asker.ask(scope, [], base.text, base.id, "verbatim")
            asker.ask(scope, [], sibling.text, sibling.id, "sibling")
    rows["engine"] = tally.false_hits
    return rows


def postgres_store(dsn: str, schema: str) -> AnswerCacheStore:
    """A Postgres store in a fresh schema (dropped first if a previous run left it)."""
    from ctxplugin_postgres.answer_cache import PostgresAnswerCacheStore

    drop_schema(dsn, schema)
    return PostgresAnswerCacheStore.from_dsn(dsn, schema=schema)


def drop_schema(dsn: str, schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def model_latency() -> tuple[float, float, int]:
    """Median and p90 seconds of the recorded model calls of the SWE trajectories."""
    seconds: list[float] = []
    for path in sorted((DATA / "trajectories" / "swe").glob("*.traj.json")):
        for message in json.loads(path.read_text()).get("messages", []):
            extra = message.get("extra") or {}
            response, stamp = extra.get("response") or {}, extra.get("timestamp")
            if message.get("role") == "assistant" and response.get("created") and stamp:
                seconds.append(float(stamp) - float(response["created"]))
    if not seconds:
        return 0.0, 0.0, 0
    seconds.sort()
    return statistics.median(seconds), seconds[int(0.9 * (len(seconds) - 1))], len(seconds)


# ---------------------------------------------------------------------- report
def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def markdown(results: dict[str, dict[str, Tally]], pair_rows: dict[str, Any], latency: tuple[float, float, int], args: argparse.Namespace, intents: list[Intent]) -> str:
    median_s, p90_s, calls = latency
    today = dt.date.today().isoformat()
    siblings = sum(len(i.siblings) for i in intents)
    lines = [
        f"Measured {today} on {platform.machine()} / Python {platform.python_version()}, seed {args.seed}: "
        f"{len(intents)} base intents ({sum(1 for i in intents if i.id.startswith('tau'))} from tau-bench openings, "
        f"the rest from {len(TEMPLATES)} templates) with {siblings} siblings; threshold 0.97, default guard.",
        "",
        "```bash",
        f"uv run --all-packages python benchmarks/cache_bench.py --asks {args.asks} --sessions {args.sessions} --seed {args.seed}"
        + (" --postgres postgresql://postgres@127.0.0.1:5432/test" if args.postgres else "") + " --write-docs",
        "```",
        "",
        "| workload | store | asks | repeats asked | hits | hit rate | repeats served | false hits | siblings asked / served | lookup p50 / p95 (ms) | store p50 (ms) |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for workload, by_store in results.items():
        for store_name, t in by_store.items():
            lookups = t.lookup_ms["hit"] + t.lookup_ms["miss"]
            lines.append(
                f"| {workload} | {store_name} | {t.asks:,} | {t.repeats:,} | {t.hits:,} | {t.hits / max(1, t.asks):.1%} | "
                f"{t.repeat_hits / max(1, t.repeats):.1%} | **{t.false_hits}** | {t.sibling_asks:,} / {t.sibling_hits} | "
                f"{_pct(lookups, 0.5):.2f} / {_pct(lookups, 0.95):.2f} | {_pct(t.store_ms, 0.5):.2f} |"
            )
    shared = results["shared"]["memory"]
    overhead_s = (sum(shared.lookup_ms["hit"]) + sum(shared.lookup_ms["miss"]) + sum(shared.store_ms)) / 1000
    saved_s = shared.hits * median_s - overhead_s
    lines += [
        "",
        f"*repeats asked*: asks, verbatim or reworded on the surface, whose intent had been answered before in a "
        f"partition that may share it (what a perfect cache could serve); *repeats served*: the share of those "
        f"served from the cache; *hits* also count tau-bench paraphrases served. Verbatim repeats served in the "
        f"shared workload: {shared.verbatim_hits} of {shared.verbatim_repeats}; tau-bench paraphrases (another "
        f"trial's opening for the same task) served: {shared.paraphrase_hits} of {shared.paraphrase_asks}.",
        "",
        f"Latency saved (shared workload, memory store): {shared.hits:,} model calls not made × {median_s:.2f} s "
        f"(median of {calls} recorded model calls; p90 {p90_s:.1f} s) = {shared.hits * median_s:,.0f} s, less "
        f"{overhead_s:.1f} s the cache spent on all {shared.asks:,} calls: **{saved_s:,.0f} s saved**, "
        f"{saved_s / max(1, shared.asks):.2f} s per ask. Input and output tokens not sent: {shared.tokens_saved:,}.",
        "",
        "Near-duplicates that need another answer (each base question, then each sibling, in one partition):",
        "",
        "| check at threshold 0.97 | sibling pairs | would be served (false hits) |",
        "|---|---:|---:|",
        f"| cosine only (hashing embedding) | {pair_rows['pairs']} | {pair_rows['cosine']} |",
        f"| cosine + `same_specifics` | {pair_rows['pairs']} | {pair_rows['specifics']} |",
        f"| cosine + `same_wording` (default) | {pair_rows['pairs']} | {pair_rows['wording']} |",
        f"| the engine end to end (default) | {pair_rows['pairs']} | **{pair_rows['engine']}** |",
        "",
        f"Highest cosine of a sibling pair: {pair_rows['max_cosine']:.3f}.",
    ]
    return "\n".join(lines)


def write_docs(text: str) -> None:
    page = DOCS.read_text()
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} section to fill")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--asks", type=int, default=2000, help="questions in the shared workload")
    parser.add_argument("--sessions", type=int, default=300, help="conversations in the session workload")
    parser.add_argument("--per-template", type=int, default=12, help="intents drawn per template")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--postgres", metavar="DSN", help="also measure the Postgres store (schemas cache_bench_*)")
    parser.add_argument("--write-docs", action="store_true", help=f"write the results into {DOCS}")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    intents = tau_intents()
    taken = {search_text(i.text) for base in intents for i in (base, *base.siblings)}
    intents += template_intents(rng, args.per_template, taken)
    if not any(i.id.startswith("tau") for i in intents):
        print(f"note: {DATA} not found; templates only")
    results: dict[str, dict[str, Tally]] = {"shared": {}, "sessions": {}}
    names = ["memory", "chroma"] + (["postgres"] if args.postgres else [])
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for workload in ("shared", "sessions"):
                store: AnswerCacheStore
                if name == "memory":
                    store = MemoryAnswerCacheStore()
                elif name == "chroma":
                    store = ChromaAnswerCacheStore.persistent(Path(tmp) / f"chroma-{workload}")
                else:
                    store = postgres_store(args.postgres, f"cache_bench_{workload}")
                if workload == "shared":
                    results[workload][name] = shared_workload(store, intents, args.asks, args.seed)
                else:
                    results[workload][name] = session_workload(store, intents, args.sessions, args.seed)
                t = results[workload][name]
                print(f"{workload:8} {name:6}: {t.asks} asks, {t.hits} hits, {t.false_hits} false", flush=True)
                close = getattr(store, "close", None)
                if callable(close):
                    close()
                if name == "postgres":
                    drop_schema(args.postgres, f"cache_bench_{workload}")
    pair_rows = pairs(intents, 0.97)
    text = markdown(results, pair_rows, model_latency(), args, intents)
    print()
    print(text)
    if args.write_docs:
        write_docs(text)
        print(f"\nwritten to {DOCS}")


if __name__ == "__main__":
    main()
