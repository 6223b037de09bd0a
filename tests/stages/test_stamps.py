"""Validate checks the conversation once per call and stamps it; a stamp says whether this
call's history is the previous call's with messages appended."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from pydantic import ConfigDict

from ctxplugin import Scope
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.stages import CallView
from ctxplugin.stages.validate import Validate


def _view(messages: list[BaseMessage], session: str = "s") -> CallView:
    return CallView(scope=Scope(session_id=session), received=list(messages), tools_given=(), budgets={}, started=0.0)


def _conversation() -> list[BaseMessage]:
    return [SystemMessage("You help."), HumanMessage("Open /repo/app.py", id="h0"), AIMessage("Opened.", id="a0")]


def test_a_conversation_that_grew_is_stamped_as_grown_from_the_previous_one() -> None:
    stage = Validate()
    messages = _conversation()
    first = stage.apply(_view(messages))
    assert first.history_stamp is not None and first.history_stamp.before is None
    messages += [HumanMessage("Now run the tests.", id="h1")]
    second = stage.apply(_view(messages))
    assert second.history_stamp is not None and second.history_stamp.grew_from(first.history_stamp)
    assert second.received_stamp is not None and second.received_stamp.grew_from(first.received_stamp)
    assert second.original_stamp is second.history_stamp


def test_an_edited_replaced_or_other_conversation_is_not_stamped_as_grown() -> None:
    stage = Validate()
    messages = _conversation()
    last = stage.apply(_view(messages)).history_stamp
    messages[2].content = "Opened, and it is empty."  # changed in place by the host
    edited = stage.apply(_view([*messages, HumanMessage("Go on.", id="h1")])).history_stamp
    assert edited is not None and not edited.grew_from(last)
    replaced = stage.apply(_view([messages[0], HumanMessage("Open /repo/other.py", id="h0b"), *messages[2:]])).history_stamp
    assert replaced is not None and not replaced.grew_from(edited)
    other = stage.apply(_view(_conversation(), session="another")).history_stamp
    assert other is not None and other.before is None


def test_a_prefix_takes_a_grown_stamp_at_its_word_and_checks_anything_else() -> None:
    messages = _conversation()
    prefix = Prefix()
    first = Stamp(None, len(messages))
    prefix.extend(messages, first)
    messages[1].content = "Open /repo/changed.py"
    grown = Stamp(first, len(messages) + 1)
    assert prefix.changed([*messages, HumanMessage("more")], grown) == [], "taken at its word: no message is read"
    assert prefix.changed([*messages, HumanMessage("more")]) == [1], "unstamped: the edit is found"
    assert prefix.changed([*messages, HumanMessage("more")], Stamp(None, len(messages) + 1)) == [1]


def test_stamps_keep_no_chain_over_a_session() -> None:
    first = Stamp.after(None, 2)
    second = Stamp.after(first, 3)
    third = Stamp.after(second, 4)
    assert third.grew_from(second) and second.before is None, "only the latest step is kept"
    stage = Validate()
    messages = _conversation()
    stamps = []
    for turn in range(4):
        messages.append(HumanMessage(f"step {turn}", id=f"s{turn}"))
        stamps.append(stage.apply(_view(messages)).history_stamp)
    assert stamps[-1] is not None and stamps[-1].grew_from(stamps[-2])
    assert all(s is not None and s.before is None for s in stamps[:-1])


def test_a_history_validation_repaired_before_its_end_is_not_stamped_as_grown() -> None:
    """Validation puts a stand-in call before a pending call (an orphan result under 'pair'),
    or a placeholder that the real result replaces on the next call: the previous history is
    then not the beginning of this one, whatever the conversation received did."""
    stage = Validate(orphans="pair")
    messages: list[BaseMessage] = [*_conversation(), AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}], id="a1")]
    first = stage.apply(_view(messages))
    messages.append(ToolMessage("stray", tool_call_id="c9", id="t9"))  # no call made it: paired before a1
    second = stage.apply(_view(messages))
    assert second.history[: len(first.history)] != first.history
    assert second.history_stamp is not None and not second.history_stamp.grew_from(first.history_stamp)

    stage = Validate()
    messages = [*_conversation(), AIMessage("", tool_calls=[{"name": "ls", "args": {}, "id": "c1"}, {"name": "cat", "args": {}, "id": "c2"}])]
    messages.append(ToolMessage("a.py", tool_call_id="c1"))
    placeholder = stage.apply(_view(messages))  # c2 has no result yet: a placeholder ends the history
    messages.append(ToolMessage("print(1)", tool_call_id="c2"))
    answered = stage.apply(_view(messages))
    assert answered.history[-1] is messages[-1] and placeholder.history[-1] is not messages[-1]
    assert answered.history_stamp is not None and not answered.history_stamp.grew_from(placeholder.history_stamp)
    messages.append(HumanMessage("Thanks.", id="h2"))
    grown = stage.apply(_view(messages))
    assert grown.history_stamp is not None and grown.history_stamp.grew_from(answered.history_stamp)


def test_a_copy_is_another_message_even_an_equal_one() -> None:
    messages = _conversation()
    prefix = Prefix()
    prefix.extend(messages)
    # what was derived from a message (by another engine of the process, say) is not the copy's
    copied = [messages[0], messages[1].model_copy(), AIMessage("Opened.", id="a0")]
    assert copied[1] == messages[1] and copied[2] == messages[2]
    assert prefix.changed([*copied, HumanMessage("more")]) == [1, 2]
    assert prefix.changed([*messages, HumanMessage("more")]) == []
    assert prefix.changed(messages[:-1]) is None, "a conversation shorter than the one seen is not its continuation"
    listed = AIMessage([{"type": "text", "text": "Opened."}], id="a1")
    prefix.extend([listed])
    assert prefix.changed([*messages, listed]) == []
    listed.content.append({"type": "text", "text": "And read."})  # type: ignore[union-attr]
    assert prefix.changed([*messages, listed]) == [3], "a block list that grew in place"


class _Validated(HumanMessage):
    """A message that validates assignment: giving it a field puts a new field dict in place."""

    model_config = ConfigDict(validate_assignment=True)


def test_new_content_is_noticed_however_the_message_keeps_its_fields() -> None:
    messages: list[BaseMessage] = [*_conversation(), _Validated(content="Run the tests.", id="v1")]
    prefix = Prefix()
    prefix.extend(messages)
    assert prefix.changed(messages) == []
    messages[3].content = "Run only the slow tests."
    messages[1].content = "Open /repo/other.py"
    assert prefix.changed(messages) == [1, 3]
    prefix.replace(1, messages[1])
    prefix.replace(3, messages[3])
    assert prefix.changed(messages) == []
    messages[3].content = "Run none of them."
    assert prefix.changed(messages) == [3], "read again after it was replaced"
    assert prefix.changed(tuple(messages)) == [3], "a tuple of the same messages alike"


def test_content_given_again_as_an_equal_object_is_the_content_seen() -> None:
    messages = _conversation()
    prefix = Prefix()
    prefix.extend(messages)
    messages[1].content = "".join(list(str(messages[1].content)))  # equal, another object
    assert messages[1].content == prefix.held[1].content
    assert prefix.changed([*messages, HumanMessage("more")]) == []
    listed = AIMessage([{"type": "text", "text": "Opened."}], id="a1")
    prefix.extend([listed])
    blocks: list[str | dict[str, Any]] = [{"type": "text", "text": "Opened."}]
    listed.content = blocks  # equal to the list seen, another list
    assert prefix.changed([*messages, listed]) == []
    blocks.append({"type": "text", "text": "And read."})
    assert prefix.changed([*messages, listed]) == [len(messages)]
