"""The rule extractor reads the same facts from a corpus of tool outputs and user messages as
recorded in ``rules_recorded.json``: the tool outputs and user messages of every recording under
``../shared/data/trajectories``, and generated line-shaped outputs (``grep -n`` matches, ``ls -la``,
CSV rows, ``key: value`` dumps, log and status lines). A change meant to make the rules faster
changes none of them.

Each entry is the digest of every draft (all fields) read three ways: as the ledger reads a
message (at most ``max_per_message``), ``from_tool`` whole, and the user's rules over the same
text. A change meant to alter what the rules read regenerates the file::

    uv run --all-packages python tests/facts/test_facts_rules_recorded.py --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.messages import HumanMessage, ToolMessage

from ctxplugin.facts import RuleExtractor
from ctxplugin.replay.loaders import load_file
from ctxplugin.testing.recordings import recordings_root
from ctxplugin.tokens import content_text

TRAJECTORIES = recordings_root() / "trajectories"
RECORDED = Path(__file__).with_name("rules_recorded.json")

_WORDS = (
    "alpha", "budget", "deadline", "status", "owner", "region", "total", "count", "value", "max",
    "minimum", "policy", "instead", "now", "moved", "error", "passed", "limit", "price", "seats",
)


def _word(i: int) -> str:
    return _WORDS[(i * 7 + 3) % len(_WORDS)]


def line_shaped() -> dict[str, str]:
    """Line-shaped tool outputs, the same on every run (no randomness)."""
    rows = range(60)
    return {
        "grep": "\n".join(f"src/pkg/mod{i % 9}.py:{(i * 37) % 900 + 1}:    {_word(i)} = {_word(i + 1)}_{i} is now {i % 97}" for i in rows),
        "grep_prose": "\n".join(f"docs/guide_{i % 5}.md:{i + 10}:The {_word(i)} is {_word(i + 2)} and the {_word(i + 4)} is ${i}k." for i in rows),
        "ls": "total 240\n" + "\n".join(
            f"-rw-r--r--  1 root root {(i * 7919) % 99999:>6} Nov {i % 28 + 1:>2} 10:{i % 50 + 10} file_{i}.txt" for i in rows
        ),
        "csv": "id,name,status,amount,owner\n" + "\n".join(
            f"{i},item {_word(i)} {i},{'open' if i % 3 else 'closed'},{(i * 13) % 999}.{i % 90 + 10},{_word(i + 5)}" for i in rows
        ),
        "config": "\n".join(f"{_word(i)}_{i}: {_word(i + 3)} {(i * 11) % 500} ms" for i in rows),
        "config_plain": "\n".join(f"{_word(i)} {_word(i + 1)}: {_word(i + 2)}" for i in rows),
        "status": "\n".join(
            f"The {_word(i)} of team {i} is {_word(i + 1)}, and the budget is ${i + 1}k and the max seats are {i % 40} per room." for i in rows
        ),
        "log": "\n".join(
            f"2024-05-{i % 28 + 1:02d} 10:{i % 60:02d}:00 {'ERROR' if i % 4 == 0 else 'INFO'} {_word(i)} moved to region-{i % 5} in {i * 3} ms"
            for i in rows
        ),
        "env": "\n".join(f"{_word(i).upper()}_{i}={_word(i + 2)}{i}" for i in rows),
        "links": "\n".join(f"- {_word(i)} changed from {i} to {i + 1}: see https://example.com/{_word(i)}/{i}" for i in rows),
        "numbered": "\n".join(f"{i + 1}. Step {i + 1}: set the {_word(i)} to {i * 2} users, not {i}" for i in rows),
        "questions": "\n".join(f"Is the {_word(i)} {i}? What if the {_word(i + 1)} were {i + 2}%" for i in rows),
    }


def corpus() -> Iterator[tuple[str, list[tuple[str, str | None, str]]]]:
    """``(name, [(kind, tool name, text)])`` for each generated output and each recorded
    conversation."""
    for name, text in line_shaped().items():
        yield f"generated/{name}", [("tool", "bash", text)]
    if not TRAJECTORIES.is_dir():
        return
    for path in sorted(TRAJECTORIES.rglob("*.json")):
        for conversation in load_file(path).conversations:
            items = [
                ("tool" if isinstance(m, ToolMessage) else "user", m.name if isinstance(m, ToolMessage) else None, content_text(m.content))
                for m in conversation.messages
                if isinstance(m, (ToolMessage, HumanMessage))
            ]
            yield f"{path.relative_to(TRAJECTORIES).as_posix()}#{conversation.id}", items


def digest(items: list[tuple[str, str | None, str]]) -> str:
    """What the rules read from ``items``, as one digest."""
    rules = RuleExtractor()
    read: list[object] = []
    for index, (kind, name, text) in enumerate(items):
        message = ToolMessage(content=text, tool_call_id=f"call_{index}", name=name) if kind == "tool" else HumanMessage(content=text)
        read.append(rules(message))
        if kind == "tool":
            read.append(rules.from_tool(text, name))
        read.append(rules.from_text(text, voice="user"))
    return hashlib.sha256(repr(read).encode()).hexdigest()


def _recorded() -> dict[str, str]:
    data: dict[str, str] = json.loads(RECORDED.read_text())
    return data


@pytest.mark.parametrize("name", sorted(line_shaped()))
def test_generated_line_shaped_outputs_read_as_recorded(name: str) -> None:
    assert digest([("tool", "bash", line_shaped()[name])]) == _recorded()[f"generated/{name}"]


@pytest.mark.skipif(not TRAJECTORIES.is_dir(), reason=f"the recordings are not at {TRAJECTORIES} (../shared/data)")
def test_recorded_outputs_and_messages_read_as_recorded() -> None:
    recorded = _recorded()
    found = dict(corpus())
    assert set(found) == set(recorded)
    changed = [name for name, items in found.items() if digest(items) != recorded[name]]
    assert changed == []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help=f"record the digests in {RECORDED.name}")
    args = parser.parse_args()
    digests = {name: digest(items) for name, items in corpus()}
    if args.write:
        RECORDED.write_text(json.dumps(digests, indent=0, sort_keys=True) + "\n")
        print(f"wrote {len(digests)} digests to {RECORDED}")
    else:
        recorded = _recorded()
        changed = sorted(n for n in digests if recorded.get(n) != digests[n])
        print(f"{len(changed)} of {len(digests)} changed", *changed, sep="\n")
        sys.exit(1 if changed else 0)


if __name__ == "__main__":
    main()
