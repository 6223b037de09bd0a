"""Checks and small transforms on langchain-core message lists (never in place)."""

from __future__ import annotations

import hashlib
import sys
from collections.abc import Iterator, Sequence
from typing import Any, Literal, cast

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    RemoveMessage,
    SystemMessage,
    ToolMessage,
)

from ctxplugin._lru import PerMessage
from ctxplugin._names import EXPAND_REF_NAME, own_call_id, read_nothing
from ctxplugin._untrusted import (
    MAX_JSON_DEPTH,
    content_problem,
    name_form,
    nesting_exceeds,
    not_a_message,
    ref_as_written,
    unwritable_int,
)
from ctxplugin.errors import InvalidInputError
from ctxplugin.tokens import content_text

META_KEY = "ctxplugin"
"""Key in ``additional_kwargs`` under which ctxplugin annotates messages."""

MISSING_RESULT = "[no result was recorded for this tool call]"
LATE_RESULT = "[this call's result came later in the conversation; it is shown there, answering the call with id {id!r}]"

NO_REPLY = "[no reply: the user wrote again before these tool calls returned]"
NO_ANSWER = "[no reply: the user wrote again before these results were answered]"
"""Between tool results (or the placeholders of calls a user turn closed) and that user turn: Mistral takes no user message right after a tool result."""
NO_EARLIER = "[the conversation before this point is not shown]"  # a user turn first: Anthropic, Bedrock refuse an assistant's

OrphanRepair = Literal["raise", "drop", "pair"]
"""What to do with a tool result no earlier AI message asked for (``orphan_tool_results``)."""

REPAIR_HINT = (
    "Remove that message from the thread's state (for a LangGraph thread: "
    "graph.update_state(config, {{'messages': [RemoveMessage(id={id!r})]}})), or let ctxplugin "
    "repair the view on every call with ContextConfig(orphan_tool_results='pair') (keeps the "
    "result, after a stand-in call) or 'drop' (leaves it out of the view); "
    "CTXPLUGIN_ORPHAN_TOOL_RESULTS sets the same from the environment."
)


def validate(
    messages: Sequence[BaseMessage], *, orphans: OrphanRepair = "raise"
) -> tuple[list[BaseMessage], list[str]]:
    """Check a conversation and return a valid copy plus warnings.

    AI tool calls without a result get a placeholder ``ToolMessage`` (the agent may have been
    interrupted); a tool result without a matching call (an orphan) is an error unless
    ``orphans`` asks for a repair — ``"drop"`` leaves it out of the view, ``"pair"`` puts a
    stand-in AI message that makes the call before it — each with a warning. A system message
    between calls and their results is shown after those results, with a warning. Anything that
    is not a ``BaseMessage`` is an error.

    Raises:
        InvalidInputError: empty input, a non-message item, or an orphan tool result while
            ``orphans`` is ``"raise"`` (the message says how to repair the thread).
    """
    return Validation(orphans).extend(messages)


def check_conversation(messages: object) -> None:
    """Raise :class:`InvalidInputError` unless ``messages`` is a non-empty sequence (its items
    are checked one by one as they are validated)."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidInputError(f"prepare() takes a list of langchain-core messages, got {type(messages).__name__}")
    if not messages:
        raise InvalidInputError("prepare() got an empty message list; a model call needs at least one message")


class Validation:
    """:func:`validate` carried from call to call: a conversation that grows is checked only
    where it grew, and what was repaired before (a placeholder, a stand-in call) is the same
    object on every call. Not locked: one caller at a time.

    Args:
        orphans: what to do with a tool result whose call is not in the conversation.
    """

    __slots__ = ("answered", "called", "checked", "closed", "extended", "group", "held", "lead", "orphans", "out",
                 "pending", "placeholders", "ran", "returned", "warnings")

    def __init__(self, orphans: OrphanRepair = "raise") -> None:
        self.orphans: OrphanRepair = orphans
        self.checked = 0  # how many messages were checked so far
        # whether the list the latest extend returned begins with the whole list the one before
        # returned (the very objects): true when messages were only appended to it
        self.extended = False
        self.returned = -1  # the length of the list returned last, when it was out itself
        self.out: list[BaseMessage] = []
        self.warnings: list[str] = []
        self.pending: dict[str, str] = {}  # tool_call_id -> tool name, awaiting results
        self.group = 0  # index in ``out`` of the AI message whose results are pending
        self.ran = False  # a result (an orphan, left out or moved before it) came after that message
        self.lead = False  # an orphan left out before any turn: an assistant turn next needs a user turn first
        # call id -> (index, id) of the message that answered it, and index of the message that made it
        self.answered: dict[str, tuple[int, str | None]] = {}
        self.called: dict[str, int] = {}
        self.closed: dict[str, int] = {}  # call id -> index of the message that came before its result
        # system messages that came while calls await their results: shown after those results
        # (a tool returning a LangGraph Command may add one beside its own result)
        self.held: list[BaseMessage] = []
        self.placeholders: dict[str, ToolMessage] = {}  # by call id, once made

    def extend(self, messages: Sequence[BaseMessage]) -> tuple[list[BaseMessage], list[str]]:
        """The valid form of ``messages`` and its warnings, checking the messages past those
        checked so far (the caller knows ``messages`` starts with the very messages checked).
        The list returned is this validation's own when no call awaits a placeholder: the
        caller copies what it keeps.

        Raises:
            InvalidInputError: as :func:`validate`.
        """
        check_conversation(messages)
        if len(messages) < self.checked:
            raise ValueError(f"{len(messages)} messages cannot continue the {self.checked} checked")
        before = self.returned
        for index in range(self.checked, len(messages)):
            self._check(index, messages[index])
        self.checked = len(messages)
        out, warnings = self.out, list(self.warnings)
        # Calls at the very end are the ones the agent is about to run: no placeholder there. Once a
        # result came after them (theirs or an orphan's) the tools have run: every call is answered.
        if self.pending and (self.held or self.ran or isinstance(out[-1], ToolMessage)):
            out = list(out)
            self._close_pending(out, dict(self.pending), warnings)
            out.extend(self.held)
        self.extended = before >= 0 and self.returned == before  # nothing put in before its end
        self.returned = len(out) if out is self.out else -1
        return out, warnings

    def _check(self, index: int, message: BaseMessage) -> None:
        out, pending, answered, warnings = self.out, self.pending, self.answered, self.warnings
        # content_problem: content set after construction, which coerces
        problem = not_a_message(f"message {index}", message) or content_problem(f"message {index}", message)
        if problem is not None:
            raise InvalidInputError(problem)
        if isinstance(message, RemoveMessage):
            raise InvalidInputError(
                f"message {index} is a RemoveMessage(id={message.id!r}): an instruction to LangGraph's add_messages "
                "reducer, not a message a model can read; apply it to the list first "
                "(langgraph.graph.message.add_messages(messages, [remove]))"
            )
        if isinstance(message, ToolMessage):
            if message.tool_call_id not in pending:
                problem = f"message {index} is a tool result for tool_call_id={message.tool_call_id!r}, " + (
                    self._answered_by(message.tool_call_id)
                    if message.tool_call_id in answered
                    else self._not_pending(message.tool_call_id)
                )
                if self.orphans == "raise":
                    raise InvalidInputError(f"{problem}. {REPAIR_HINT.format(id=message.id or '<its id>')}")
                self.ran = self.ran or bool(pending)
                first = header_length(out) == len(out)  # no turn before it (orphans are rare)
                if self.orphans == "drop" or message.tool_call_id in answered:
                    # a second result for an answered call cannot be paired: call ids are unique
                    warnings.append(f"{problem}; it was left out of the view (orphan_tool_results={self.orphans!r})")
                    self.lead = self.lead or first
                    return
                answered[message.tool_call_id] = (index, message.id)
                paired = self._late(index, message) if message.tool_call_id in self.placeholders else message
                # before the AI message whose results are still coming, so those stay adjacent
                at = self.group if pending else len(out)
                if at < self.returned:
                    self.returned = -1  # what was returned last is no longer the beginning of out
                out[at:at] = [*([_user_turn()] if first else []), _stand_in_call(paired), paired]
                self.lead = False
                self.group += 2 if pending else 0
                under = f" with the id {paired.tool_call_id!r}" if paired is not message else ""
                warnings.append(f"{problem}; a stand-in call{under} was put before it (orphan_tool_results='pair')")
                return
            pending.pop(message.tool_call_id)
            answered[message.tool_call_id] = (index, message.id)
            out.append(message)
            if not pending and self.held:
                out.extend(self.held)
                self.held.clear()
            return
        if pending and isinstance(message, SystemMessage):
            warnings.append(
                f"message {index} is a system message between the tool calls of message "
                f"{self.called.get(next(iter(pending)), '?')} and their results; the view shows it after those results"
            )
            self.held.append(message)
            return
        if pending:
            self.closed.update(dict.fromkeys(pending, index))
            self._close_pending(out, pending, warnings)
            if isinstance(message, HumanMessage):  # checked once: the same object on every call
                out.append(AIMessage(content=NO_REPLY, additional_kwargs={META_KEY: {"repaired": "no reply before a user turn"}}))
            out.extend(self.held)
            self.held.clear()
        elif isinstance(message, HumanMessage) and out and isinstance(out[-1], ToolMessage):
            out.append(AIMessage(content=NO_ANSWER, additional_kwargs={META_KEY: {"repaired": "no reply before a user turn"}}))
        if self.lead and not isinstance(message, SystemMessage):
            self.lead = False
            if isinstance(message, AIMessage):
                out.append(_user_turn())
        out.append(message)
        if isinstance(message, AIMessage):
            self.group, self.ran = len(out) - 1, False
            for call in message.tool_calls:
                call_id = call.get("id")
                if not call_id:
                    raise InvalidInputError(f"message {index} has a tool call without an id: {call['name']!r}")
                if nesting_exceeds(call.get("args"), MAX_JSON_DEPTH):
                    raise InvalidInputError(
                        f"message {index} has a tool call ({call['name']!r}) whose arguments nest deeper than "
                        f"{MAX_JSON_DEPTH} levels; no model writes such arguments, and ctxplugin does not walk them"
                    )
                if unwritable_int(call.get("args")):
                    raise InvalidInputError(
                        f"message {index} has a tool call ({call['name']!r}) whose arguments hold an integer of over "
                        f"{sys.get_int_max_str_digits():,} digits, which Python does not write as text; pass such a number as a string"
                    )
                if call_id in pending:  # two calls of this message: their results could not be told apart
                    raise InvalidInputError(
                        f"message {index}{f' (id={message.id!r})' if message.id else ''} makes two tool calls with the same id {call_id!r}: "
                        f"{pending[call_id]!r} and {call['name']!r}; each call of a message needs its own id, "
                        "since a result is paired with its call by id. Give the calls unique ids (or remove "
                        "the message from the thread's state)"
                    )
                pending[call_id] = call["name"]
                self.called[call_id] = index
            # a call whose arguments did not parse is still a call: the providers' LangChain
            # integrations send it (one without a name is left out by langchain-anthropic), and
            # create_agent answers it with an error result
            for invalid in message.invalid_tool_calls:
                if invalid.get("id") and invalid.get("name"):
                    pending[str(invalid["id"])] = str(invalid["name"])

    def _late(self, index: int, message: ToolMessage) -> ToolMessage:
        """A result that came after a placeholder closed its call, under an id of its own (providers
        refuse two calls with one id); the placeholder says where it went."""
        late_id = own_call_id(message.tool_call_id, f"late{index}", lambda i: i in self.called or i in self.answered or i in self.pending)
        self.answered[late_id], old = (index, message.id), self.placeholders[message.tool_call_id]
        new = self.placeholders[message.tool_call_id] = old.model_copy(
            update={"content": LATE_RESULT.format(id=late_id), "status": "success"})
        at = next(i for i, m in enumerate(self.out) if m is old)  # closed by a message, so in out
        self.out[at], self.returned = new, -1 if at < self.returned else self.returned
        return message.model_copy(update={"tool_call_id": late_id})

    def _answered_by(self, call_id: str) -> str:
        """Where the call ``call_id`` was made and first answered, for the error on a second result."""
        at, first_id = self.answered[call_id]
        made = self.called.get(call_id)
        by = f" (made by message {made})" if made is not None and made < at else ""
        return f"but message {at}{f' (id={first_id!r})' if first_id else ''} already answered that call{by}; call ids are unique, so one of the two results is extra"

    def _not_pending(self, call_id: str) -> str:
        """Why a result for ``call_id`` answers no call that awaits one (it was not answered before)."""
        made, closed = self.called.get(call_id), self.closed.get(call_id)
        if made is None or closed is None:
            return "but no earlier AI message made that call"
        return (f"but message {made} made that call, but message {closed} came between the call and this result; "
                "a result must follow its call (or the other results of that call's message)")

    def _close_pending(self, out: list[BaseMessage], pending: dict[str, str], warnings: list[str]) -> None:
        for call_id, name in pending.items():
            placeholder = self.placeholders.get(call_id)
            if placeholder is None or placeholder.name != name:
                placeholder = ToolMessage(content=MISSING_RESULT, tool_call_id=call_id, name=name, status="error")
                self.placeholders[call_id] = placeholder
            out.append(placeholder)
            warnings.append(f"tool call {call_id!r} ({name}) had no result; a placeholder was added to the view")
        pending.clear()


def _user_turn() -> HumanMessage:
    return HumanMessage(content=NO_EARLIER, additional_kwargs={META_KEY: {"repaired": "a user turn before a view that began mid-conversation"}})


STAND_IN = "stand-in call for a tool result without one"
"""What ``additional_kwargs["ctxplugin"]["repaired"]`` says on a stand-in call."""


def _stand_in_call(orphan: ToolMessage) -> AIMessage:
    """An AI message that makes the call an orphan tool result answers (marked as a repair)."""
    return AIMessage(
        content="",
        # the result's name, which its tool may choose, names the call only in a tool name's form
        tool_calls=[{"name": name_form(orphan.name) or "unknown_tool", "args": {}, "id": orphan.tool_call_id, "type": "tool_call"}],
        additional_kwargs={META_KEY: {"repaired": STAND_IN}},
    )


def header_length(messages: Sequence[BaseMessage]) -> int:
    """How many system messages ``messages`` begins with."""
    return next((i for i, m in enumerate(messages) if not isinstance(m, SystemMessage)), len(messages))


def split_header(messages: Sequence[BaseMessage]) -> tuple[list[SystemMessage], list[BaseMessage]]:
    """Leading system messages, and the rest."""
    index = header_length(messages)
    return cast(list[SystemMessage], list(messages[:index])), list(messages[index:])


def last_human_text(messages: Sequence[BaseMessage]) -> str:
    """Text of the latest human message ('' if none)."""
    latest = next((m for m in reversed(messages) if isinstance(m, HumanMessage)), None)
    return content_text(latest.content) if latest is not None else ""


def annotation(message: BaseMessage) -> dict[str, Any]:
    """ctxplugin's annotation on a message (empty dict if none)."""
    value = message.additional_kwargs.get(META_KEY)
    return value if isinstance(value, dict) else {}


REPEAT = "repeat"
"""The annotation the facts stage gives a copy of a user message without an id that repeats an
earlier one word for word: which repetition it is (a digest of the user messages since the text
was last said, and how many times before it followed them). It names the copy's own source
(:func:`said_ref`), so that read as a message of its own it states its values again: a user
going back to what they first said makes it current."""


def said_ref(message: HumanMessage, repeat: str | None = None) -> str:
    """What names a user message without an id as the source of its facts: a digest of its
    text, and which repetition of that text it is (see :data:`REPEAT`; ``repeat`` names it so
    from now on). An LCEL chain's or a chat history's messages often carry no id; without a name
    their facts could not be found in a view that shows the message itself."""
    found = _SAID.get(message) if repeat is None else None  # looked up for every message in view on every call
    if found is None:
        digest = hashlib.sha256(content_text(message.content).encode("utf-8", "surrogatepass")).hexdigest()
        repeat = repeat or annotation(message).get(REPEAT)
        found = f"said:{digest[:16]}" + (f".{repeat}" if isinstance(repeat, str) and repeat else "")
        _SAID.put(message, found)
    return found


_SAID: PerMessage[str] = PerMessage(4096)


def source_refs(message: BaseMessage) -> Iterator[str]:
    """What a fact read from ``message`` names as its source: the message id (for a user
    message without one, :func:`said_ref`), a tool result's call id, and the ref its output is
    stored under."""
    if message.id:
        yield str(message.id)
    elif isinstance(message, HumanMessage):
        yield said_ref(message)
    if isinstance(message, ToolMessage):
        yield message.tool_call_id
    ref = annotation(message).get("ref")
    if isinstance(ref, str):
        yield ref


def answered(messages: Sequence[BaseMessage], latest: int | None) -> int | None:
    """The index of the assistant message the human message at ``latest`` answers (the one
    right before it), or None. The history and the budget stages keep it whole while that human
    message is the latest: a reply such as "yes" or "in that case, go ahead" means nothing
    without what it answers."""
    if latest is None or latest < 1:
        return None
    return latest - 1 if isinstance(messages[latest - 1], AIMessage) else None


def exchange_spans(messages: Sequence[BaseMessage]) -> list[tuple[int, int]]:
    """``(start, end)`` index spans of exchanges: a human turn, or an AI message with the tool
    results that answer it. System messages inside the body stay with the span before them."""
    spans: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(messages) + 1):
        if index == len(messages) or isinstance(messages[index], (HumanMessage, AIMessage)):
            spans.append((start, index))
            start = index
    return [s for s in spans if s[1] > s[0]]


def expanded_refs(messages: Sequence[BaseMessage], tool_name: str = EXPAND_REF_NAME) -> list[str]:
    """Refs the model expanded since its previous call: the refs (:func:`ref_as_written`) of
    the ``expand_ref`` calls in the AI message whose results end the conversation, each once (a
    ref read in two pages is one ref expanded); not a call answered that nothing was read."""
    index = len(messages) - 1
    while index >= 0 and isinstance(messages[index], ToolMessage):
        index -= 1
    message = messages[index] if index >= 0 else None
    if index == len(messages) - 1 or not isinstance(message, AIMessage):
        return []
    asked = [c for c in message.tool_calls if c["name"] == tool_name and c["args"].get("ref_id")]
    read = {m.tool_call_id for m in messages[index + 1 :] if asked and isinstance(m, ToolMessage)  # (no call: none read)
            and m.status != "error" and not read_nothing(m.content, m.artifact)}
    calls = [c for c in asked if c["id"] in read]
    return list(dict.fromkeys(ref_as_written(str(c["args"]["ref_id"])) for c in calls))
