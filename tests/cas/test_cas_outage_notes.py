"""While the CAS is down, the tool outputs it could not store pass through whole, with no ref:
a note standing for exchanges that held one (condensed into its values, or left out to fit
the budget) does not tell the model that those outputs are one ``expand_ref`` away."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pytest_mock import MockerFixture

from ctxplugin import ContextConfig, ContextEngine, Scope
from ctxplugin.errors import StoreUnavailableError
from ctxplugin.tokens import content_text

SCOPE = Scope(session_id="notes-outage")
OUTPUTS = 12
NOTE_LEADS = ("[context note: ", "[earlier exchanges are not shown")
"""How the notes begin; the view shows them as a lookup's answer, in a tool message."""


def output(i: int) -> str:
    return "\n".join(
        f"worker-{i} request {i * 100 + r} took {r * 7}ms on shard {r % 4} status=ok"
        for r in range(120)
    )


def conversation(outputs: int = OUTPUTS) -> list[BaseMessage]:
    messages: list[BaseMessage] = [HumanMessage("What did the workers do?", id="h0")]
    for i in range(outputs):
        call = {"name": "logs", "args": {"path": f"/var/log/w{i}.log"}, "id": f"c{i}"}
        messages.append(AIMessage("", tool_calls=[call], id=f"a{i}"))
        messages.append(ToolMessage(output(i), tool_call_id=f"c{i}", name="logs", id=f"t{i}"))
        messages.append(HumanMessage(f"And worker {i}? use /srv/w{i}", id=f"h{i + 1}"))
    return messages


def notes(tmp_path: Path, total: int, mocker: MockerFixture) -> list[str]:
    """The notes of the view of each call of the conversation as it grows, the CAS down."""
    config = ContextConfig(
        mode="compact", budget={"total": total}, stores={"timeout": 0.2, "retry_after": 0.01}
    )
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:

        def down(*args: Any, **kwargs: Any) -> bool:
            raise StoreUnavailableError("SQLite CAS put failed: database is locked")

        mocker.patch.object(engine.cas, "put", side_effect=down)
        messages = conversation()
        shown: list[str] = []
        for end in range(4, len(messages) + 1, 3):
            prepared = engine.prepare(messages[:end], scope=SCOPE)
            shown += [
                text
                for m in prepared.messages
                if (text := content_text(m.content)).startswith(NOTE_LEADS)
            ]
            assert prepared.report.refs_used == []
        return shown


@pytest.mark.parametrize("total", [3000, 8000], ids=["dropped", "condensed"])
def test_no_note_offers_expand_ref_for_outputs_the_cas_could_not_store(
    tmp_path: Path, mocker: MockerFixture, total: int
) -> None:
    down = notes(tmp_path, total, mocker)
    assert down, "the outage left notes in the view"
    assert not [note for note in down if "expand_ref" in note]


def test_the_notes_say_the_rest_as_they_do_with_the_cas_up(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    """Only the line on ``expand_ref`` goes: a note lists the same values."""
    down = notes(tmp_path, 8000, mocker)
    condensed = [note for note in down if note.startswith("[context note: ")]
    assert condensed and any("/var/log/w0.log" in note for note in condensed)
    assert all(note.split("\n", 1)[0].endswith(":") for note in condensed)


def test_a_note_standing_only_for_stored_outputs_keeps_its_line_on_expand_ref(
    tmp_path: Path, mocker: MockerFixture
) -> None:
    """The CAS goes down as the last output comes: the context note of the exchanges before,
    whose outputs are stored, still says how to read them; the note of the exchanges dropped
    to fit the budget, among them the output left unstored, does not."""
    config = ContextConfig(mode="compact", budget={"total": 3000})
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        messages = conversation(40)
        for end in range(4, len(messages) - 2, 3):
            engine.prepare(messages[:end], scope=SCOPE)

        def down(*args: Any, **kwargs: Any) -> bool:
            raise StoreUnavailableError("SQLite CAS put failed: database is locked")

        mocker.patch.object(engine.cas, "put", side_effect=down)
        prepared = engine.prepare(messages, scope=SCOPE)
    assert any("1 tool output passed through unstored" in w for w in prepared.report.warnings)
    texts = [content_text(m.content) for m in prepared.messages]
    assert output(39) not in texts, "the output left unstored is dropped to fit"
    condensed = [t for t in texts if t.startswith("[context note: ")]
    dropped = [t for t in texts if t.startswith("[earlier exchanges are not shown")]
    assert condensed and all("(expand_ref reads their stored outputs):" in t for t in condensed[:1])
    assert dropped and not [t for t in dropped if "expand_ref" in t]


def test_a_note_for_stored_outputs_says_the_same_while_later_outputs_go_unstored(
    tmp_path: Path,
) -> None:
    """The CAS goes down after twelve outputs are stored: the first context note, standing for
    exchanges whose outputs are stored, keeps its line on ``expand_ref`` and its very text while
    the exchanges holding outputs left unstored are condensed into notes of their own (a note
    that changes breaks the provider's cache of everything after it)."""
    config = ContextConfig(
        mode="compact", budget={"total": 8000}, stores={"timeout": 0.2, "retry_after": 0.01}
    )
    with ContextEngine.embedded(tmp_path / "stores", config) as engine:
        put = engine.cas.put
        down = {"now": False}

        def maybe_down(*args: Any, **kwargs: Any) -> bool:
            if down["now"]:
                raise StoreUnavailableError("SQLite CAS put failed: database is locked")
            return put(*args, **kwargs)

        engine.cas.put = maybe_down  # type: ignore[method-assign]
        messages = conversation(17)
        firsts: list[str] = []
        for call, end in enumerate(range(4, len(messages) + 1, 3)):
            down["now"] = call >= 12
            prepared = engine.prepare(messages[:end], scope=SCOPE)
            texts = [content_text(m.content) for m in prepared.messages]
            condensed = [t for t in texts if t.startswith("[context note: ")]
            if down["now"]:
                assert condensed
                firsts.append(condensed[0])
                assert not [t for t in condensed[1:] if "expand_ref" in t]
    assert len(firsts) == 5 and len(set(firsts)) == 1, "the first note is the same on every call"
    assert "(expand_ref reads their stored outputs):" in firsts[0]
    assert "/var/log/w12.log" not in firsts[0], "it stands for stored outputs alone"
