"""How many of the values the next action used would the archive note show, ranked another way?

The swe recordings are replayed at the defaults. On every call whose view holds an archive note,
the values the agent's next action used (as the replay's grounding recall counts them) that no
other message of the view shows are the ones the archive can still show. The archive note is then
written again, offline, from the same candidates with the same picker, at several caps and under
several rankings: the present one and variants of its score. Block notes and the rest of the view
are left as they were, so the figure is the archive's alone: the values it shows, summed over
calls (the present ranking at 850 tokens shows what the replay does).

Run from the repository root (the shared data beside it)::

    uv run --all-packages python benchmarks/archive_ranking.py
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ctxplugin import ContextConfig
from ctxplugin.history import _digests
from ctxplugin.history import _reuse as reuse_module
from ctxplugin.history._notes import EXPAND_HINT, _note
from ctxplugin.history._reuse import Reuse
from ctxplugin.replay.loaders import discover, load_file
from ctxplugin.replay.metrics import Meter, action_identifiers, calls_after, occurs
from ctxplugin.replay.runner import ReplaySettings, build_strategies, memory_engine_factory
from ctxplugin.scope import Scope
from ctxplugin.tokens import TokenCounter

SWE = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "trajectories" / "swe"
Score = Callable[[dict[str, Any]], np.ndarray]


@dataclass
class Archive:
    """What one archive note was made from."""

    reuse: Reuse
    known: str
    span: tuple[int, int]


@dataclass
class Call:
    """One call whose view holds an archive note: the values only the archive can show."""

    run: str
    archive: Archive
    needed: list[str]


@contextmanager
def archives_recorded(made: dict[str, Archive]) -> Iterator[None]:
    """Each archive note made meanwhile, by its text, with what it was made from."""
    original = _digests.Digests._archive_note

    def recording(self: Any, upto: int, cap: int) -> Any:
        note, chosen = original(self, upto, cap)
        if note is not None:
            spans = self._spans
            first = next((spans[k][0] for k in range(upto) if spans[k]), 0)
            last = next((spans[k][-1] for k in range(upto - 1, -1, -1) if spans[k]), 0)
            made[str(note.content)] = Archive(self._ranked(upto)[0], self._known, (first, last))
        return note, chosen

    _digests.Digests._archive_note = recording  # type: ignore[method-assign]
    try:
        yield
    finally:
        _digests.Digests._archive_note = original  # type: ignore[method-assign]


def calls(data: Path) -> tuple[list[Call], TokenCounter]:
    """Every call of the recordings under ``data`` whose view holds an archive note."""
    config = ContextConfig()
    settings = ReplaySettings(config=config, strategies=("ctxplugin",))
    made: dict[str, Archive] = {}
    out: list[Call] = []
    paths, _ = discover([data])
    counter: TokenCounter | None = None
    with archives_recorded(made):
        for path in paths:
            for conversation in load_file(path).conversations:
                engine = memory_engine_factory(config)
                counter = engine.counter
                meter = Meter(engine.counter)
                scope = Scope(session_id=conversation.id)
                [ours] = [s for s in build_strategies(settings, engine, meter, scope, conversation.tools) if s.name == "ctxplugin"]
                messages = conversation.messages
                for index, action, said in calls_after(messages, conversation.call_indexes(), meter):
                    eligible = [i for i in sorted(action_identifiers(action)) if occurs(i, said)]
                    view = ours.view(messages[:index])
                    archive, others = None, []
                    for message in view.messages:
                        text = message.content if isinstance(message.content, str) else ""
                        if archive is None and EXPAND_HINT in text.split("\n", 1)[0] and text in made:
                            archive = made[text]
                        else:
                            others.append(meter.text([message]))
                    if archive is not None:
                        rest = "\n".join(others)
                        out.append(Call(Path(path).name, archive, [i for i in eligible if not occurs(i, rest)]))
    assert counter is not None, f"no recordings under {data}"
    return out, counter


def present(figures: dict[str, Any]) -> np.ndarray:
    """The present score (see :meth:`ctxplugin.history._reuse.Reuse.ranked`)."""
    weights = np.array(reuse_module._TYPED_WEIGHT)
    score = weights[figures["used"]] * (1.0 + figures["ages"]) ** -reuse_module._AGE_POWER / (figures["tokens"] + 1)
    return np.where(figures["record"] == 1, score * reuse_module._RECORD_WEIGHT, score)


def by_label(weight: Callable[[str], float]) -> Score:
    """The present score times a weight of each value's label."""
    return lambda figures: present(figures) * np.array([weight(label) for label in figures["labels"]])


def from_tool(label: str) -> bool:
    return label.endswith((" returned", " failed"))


VARIANTS: dict[str, Score] = {
    "present": present,
    "age ** -0.5": lambda f: present(f) * (1.0 + f["ages"]) ** (reuse_module._AGE_POWER - 0.5),
    "age ** -1.1": lambda f: present(f) * (1.0 + f["ages"]) ** (reuse_module._AGE_POWER - 1.1),
    "tokens ** 0.7": lambda f: present(f) * (f["tokens"] + 1) ** 0.3,
    "what tools returned × 0.5": by_label(lambda label: 0.5 if from_tool(label) else 1.0),
    "paths × 2": by_label(lambda label: 2.0 if label == "path" else 1.0),
    "commands × 2": by_label(lambda label: 2.0 if label == "ran" else 1.0),
}


def ranked(archive: Archive, score: Score) -> list[tuple[str, str]]:
    """The values the archive may list, best first by ``score`` (ties in place order)."""
    figures, pairs = archive.reuse.figures, archive.reuse.pairs
    assert figures is not None and pairs is not None
    kept = np.flatnonzero(figures[:, 9])
    rows = figures[kept]
    named = {
        "ages": (archive.reuse.exchanges - 1) - rows[:, 5],
        "used": np.minimum(rows[:, 6], 3),  # the row keeps every use; the weights stop at 3
        "tokens": rows[:, 7],
        "record": rows[:, 8],
        "labels": [pairs[k][0] for k in kept],
    }
    by_place = np.argsort(reuse_module._place_keys(rows))
    order = by_place[np.argsort(-score(named)[by_place], kind="stable")]
    return [pairs[kept[k]] for k in order.tolist()]


def shown(found: list[Call], counter: TokenCounter, score: Score, cap: int) -> int:
    """The needed values the archive notes show, summed over ``found``, ranked by ``score``."""
    notes: dict[int, str] = {}
    total = 0
    for call in found:
        archive = call.archive
        text = notes.get(id(archive))
        if text is None:
            note, _ = _note(archive.span, ranked(archive, score), archive.reuse.when or {}, set(), archive.known, cap, counter, first=True)
            text = notes[id(archive)] = str(note.content) if note is not None else ""
        total += sum(1 for value in call.needed if occurs(value, text))
    return total


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=SWE)
    parser.add_argument("--caps", default="850,750,650", help="archive caps, comma-separated")
    args = parser.parse_args(argv)
    caps = [int(c) for c in args.caps.split(",")]
    found, counter = calls(args.data)
    needed = sum(len(c.needed) for c in found)
    print(f"{len(found)} calls with an archive note; {needed} values used only the archive could show")
    print(f"{'ranking':>28} | " + " | ".join(f"{cap:>5}" for cap in caps))
    for name, score in VARIANTS.items():
        print(f"{name:>28} | " + " | ".join(f"{shown(found, counter, score, cap):>5}" for cap in caps))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
