"""What the facts stage has read of one reader's conversation so far (:class:`Seen`), extended
as the conversation grows, and the messages facts are read from."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from ctxplugin._messages import META_KEY, REPEAT, annotation, said_ref
from ctxplugin._prefix import Prefix, Stamp
from ctxplugin.cas import facts_unread
from ctxplugin.facts._said import AFTER
from ctxplugin.facts._turns import ANSWERING, answers_agent
from ctxplugin.facts.model import output_digest
from ctxplugin.facts.outdated import Asides, Exploring, Marking
from ctxplugin.stages._calls import Calls
from ctxplugin.stages.memos import fact_source
from ctxplugin.tokens import content_text


class Seen:
    """What the calls of one reader have read of its conversation so far: the messages (the
    next call's history starts with the same objects, or the reading starts afresh), how many
    exchanges they make, the latest user message, the spans, and the marks. Every part
    depends only on the messages up to it (the marks also on the facts in force), so a
    conversation that grows is read only where it grew."""

    __slots__ = (
        "asides", "asked", "calls", "exchanges", "latest", "marked_stamp", "marking", "new_at", "new_sources", "original", "plain", "said", "shown", "source_spans",
        "sources", "spans",
    )

    def __init__(self) -> None:
        self.original = Prefix()
        self.shown = Prefix()
        self.exchanges = 0
        self.latest = -1  # index of the latest user message
        self.sources: list[BaseMessage] = []  # the messages facts are read from (_fact_sources)
        self.asked: list[str] = []  # the digest of each user message among them, in order
        # per user message without an id among them, by its digest: where it was said last
        # (in ``asked``), and how many times after each stretch of user messages in between
        self.said: dict[str, tuple[int, dict[str, int]]] = {}
        self.plain: set[int] = set()  # the ids of those named as a first saying (held by ``sources``)
        self.source_spans = Exploring()  # over ``sources``
        self.new_sources: list[BaseMessage] = []  # the sources of the messages the last extend read
        self.new_at: list[int] = []  # and where each stands in the conversation
        self.spans = Exploring()  # over the history
        self.asides = Asides()
        self.marking = Marking()
        self.marked_stamp: Stamp | None = None  # of the history passed on last
        self.calls = Calls()  # the tool calls, and which the messages read last answered

    @property
    def size(self) -> int:
        return len(self.shown)

    def continued_by(
        self, original: Sequence[BaseMessage], shown: Sequence[BaseMessage], original_stamp: Stamp | None, shown_stamp: Stamp | None
    ) -> bool:
        """Whether ``original`` and ``shown`` (with their stamps) start with the very messages
        read so far, holding the very content they had (see :class:`~ctxplugin._prefix.Prefix`)."""
        return self.shown.changed(shown, shown_stamp) == [] and self.original.changed(original, original_stamp) == []

    def extend(
        self,
        original: Sequence[BaseMessage],
        shown: Sequence[BaseMessage],
        original_stamp: Stamp | None = None,
        shown_stamp: Stamp | None = None,
    ) -> int:
        """Read the messages past those read so far; return the first index whose aside span
        changed (``len(shown)`` when none did)."""
        start = len(self.shown)
        for index in range(max(start, 1), len(shown)):
            if isinstance(shown[index], (HumanMessage, AIMessage)):
                self.exchanges += 1
        if start == 0 and shown:
            self.exchanges += 1
        self.latest = next(
            (i for i in range(len(shown) - 1, start - 1, -1) if isinstance(shown[i], HumanMessage)), self.latest
        )
        self.original.extend(original[start:], original_stamp)
        self.shown.extend(shown[start:], shown_stamp)
        at = len(self.sources)
        found = _fact_sources(original, shown, start)
        self.sources.extend(self._numbered(message) for message, _, _ in found)
        self.source_spans.extend(self.sources)
        self.new_sources = [
            _marked(message, hypothetical=self.source_spans.spans.get(index) == "hypothetical", answering=answering)
            for index, (message, (_, answering, _)) in enumerate(zip(self.sources[at:], found, strict=True), start=at)
        ]
        self.new_at = [index for _, _, index in found]
        self.spans.extend(shown)
        self.calls.extend(original[start:])
        return self.asides.extend(shown)

    def left_behind(self, original: Sequence[BaseMessage]) -> list[BaseMessage]:
        """The user messages and tool outputs read so far that ``original`` (a conversation that
        does not continue them) no longer holds after the last message it still holds (by id; a
        tool output without one, by its call id), when a user message is among them: those of a
        branch the host went back from (time travel on a checkpointed thread). None when it
        holds none of them; what a host trims from the front, or drops in between, is before a message it still holds, and tool work
        it dropped at the end without a user message (a summary in its place) is not a branch.
        A conversation whose messages carry no id is told by content (:func:`_left_without_ids`)."""
        before = self.original.held
        if not any(m.id for m in before):
            return _left_without_ids(before, original)
        held = {m.id for m in original if m.id}
        last = next((i for i in range(len(before) - 1, -1, -1) if before[i].id in held), None)
        if last is None:
            return []
        answered = {m.tool_call_id for m in original if isinstance(m, ToolMessage)}
        left: list[BaseMessage] = [
            m
            for m in before[last + 1 :]
            if fact_source(m) and ((m.id and isinstance(m, (HumanMessage, ToolMessage))) or (isinstance(m, ToolMessage) and m.tool_call_id not in answered))
        ]
        return left if any(isinstance(m, HumanMessage) for m in left) else []

    def _numbered(self, message: BaseMessage) -> BaseMessage:
        """``message``, or when it is a user message without an id that repeats an earlier one
        word for word, a copy named after that repetition (:data:`~ctxplugin._messages.REPEAT`):
        read again, not taken for the earlier one. The name is that of the user messages said
        since the text was last said (and how many times the text followed the same ones), not
        of how many times it was said: the same conversation read afresh names its messages the
        same way, and so does a host that dropped its first messages (the first saying left in
        view is named as the first one was), so a copy of it is not read twice and a repetition
        after the trim is still read."""
        if not isinstance(message, HumanMessage):
            return message
        digest = output_digest(content_text(message.content))
        at = len(self.asked)
        self.asked.append(digest)
        if message.id:
            return message
        last = self.said.get(digest)
        if last is None or id(message) in self.plain:  # (the very object said before: a host resending it)
            self.said[digest] = (at, {}) if last is None else last
            self.plain.add(id(message))
            return message
        between = output_digest("".join(self.asked[last[0] + 1 : at]))[:8]
        times = last[1].get(between, 0)
        last[1][between] = times + 1
        self.said[digest] = (at, last[1])
        repeat = between if not times else f"{between}.{times}"
        numbered = message.model_copy(
            update={"additional_kwargs": {**message.additional_kwargs, META_KEY: {**annotation(message), REPEAT: repeat}}}
        )
        # the message as the view shows it names the same source: its facts are those it shows
        said_ref(message, repeat)
        return numbered


def as_read(conversation: Sequence[BaseMessage]) -> list[BaseMessage]:
    """``conversation`` (from its start) with its user messages named as the facts stage names
    them when it reads them: one without an id that repeats an earlier one word for word is
    named after that repetition (see :meth:`Seen._numbered`)."""
    seen = Seen()
    return [seen._numbered(m) for m in conversation]


def _fact_sources(raw: Sequence[BaseMessage], compacted: Sequence[BaseMessage], start: int) -> list[tuple[BaseMessage, bool, int]]:
    """The messages facts are read from on a prepare, those from ``start`` on, each with whether
    it is a user message said right after the agent asked something (see
    :func:`~ctxplugin.facts._turns.answers_agent`) and its index in ``raw``: each as it was received, so a tool output
    is read whole rather than as its summary (whose ``L12:`` line labels and cut lines are not
    statements), with the ref it is stored under as provenance. An output that already carries a
    ref was read when it was stored, unless the facts store failed then (:func:`facts_unread`:
    then it is read here, when the conversation keeps it whole)."""
    out: list[tuple[BaseMessage, bool, int]] = []
    for at, original, shown in zip(range(start, len(raw)), raw[start:], compacted[start:], strict=True):
        if not fact_source(original):
            continue
        note = annotation(original)
        if isinstance(original, ToolMessage) and note.get("ref") and not facts_unread(original):
            continue
        ref = annotation(shown).get("ref")
        marks: dict[str, object] = {"ref": ref} if shown is not original and isinstance(ref, str) else {}
        if isinstance(original, HumanMessage) and original.id and at and raw[at - 1].id:
            marks[AFTER] = raw[at - 1].id  # the order of the thread, for a process that did not read it
        if marks:
            original = original.model_copy(update={"additional_kwargs": {**original.additional_kwargs, META_KEY: {**note, **marks}}})
        out.append((original, isinstance(original, HumanMessage) and answers_agent(raw, at), at))
    return out


def _left_without_ids(before: Sequence[BaseMessage], original: Sequence[BaseMessage]) -> list[BaseMessage]:
    """:meth:`Seen.left_behind` for a conversation without message ids (an LCEL list, a chat
    history), told by what the messages say, so a host that sends copies is read as one that
    sends its own list: a branch when the last message read before is nowhere in ``original``
    (a list trimmed from the front, or with a summary in between, still holds it) and the two
    begin alike; then what follows the part they share, except a user message whose words
    ``original`` says again (a copy made anew states the same)."""
    if not before or not original:
        return []
    last = _said(before[-1])
    if (len(original) >= len(before) and _said(original[len(before) - 1]) == last) or last in set(map(_said, original)):
        return []  # (first where a list that grew holds it, then anywhere)
    shared = next((i for i, (one, other) in enumerate(zip(before, original, strict=False)) if _said(one) != _said(other)), min(len(before), len(original)))
    if not shared:
        return []
    texts = {content_text(m.content) for m in original if isinstance(m, HumanMessage)}
    answered = {m.tool_call_id for m in original if isinstance(m, ToolMessage)}
    left: list[BaseMessage] = [
        m
        for m in before[shared:]
        if fact_source(m) and (
            (isinstance(m, HumanMessage) and content_text(m.content) not in texts)
            or (isinstance(m, ToolMessage) and m.tool_call_id not in answered)
        )
    ]
    return left if any(isinstance(m, HumanMessage) for m in left) else []


def _said(message: BaseMessage) -> tuple[str, str, str]:
    """What tells one message without an id from another: its kind, its text, and a tool
    output's call id or the calls an assistant message makes."""
    if isinstance(message, ToolMessage):
        tag = message.tool_call_id
    elif isinstance(message, AIMessage):
        tag = ",".join(str(call.get("id")) for call in message.tool_calls)
    else:
        tag = ""
    return message.type, content_text(message.content), tag


def _marked(message: BaseMessage, *, hypothetical: bool, answering: bool) -> BaseMessage:
    """``message`` as the ledger reads it: marked hypothetical (``fact_scope``) when it is in an
    exploratory span the user opened, so that what it states is never a current fact; marked
    :data:`~ctxplugin.facts._turns.ANSWERING` when the agent asked something just before it."""
    note = annotation(message)
    marks: dict[str, object] = {}
    if hypothetical and "fact_scope" not in note:
        marks["fact_scope"] = "hypothetical"
    if answering:
        marks[ANSWERING] = True
    if not marks:
        return message
    return message.model_copy(update={"additional_kwargs": {**message.additional_kwargs, META_KEY: {**note, **marks}}})


def rejoining(original: Sequence[BaseMessage], gone: frozenset[str]) -> list[BaseMessage]:
    """The user messages of ``original`` left behind before (their id, or for one without an id
    the name its facts were read under, in ``gone``): in the conversation again."""
    return [m for m in original if isinstance(m, HumanMessage) and (m.id in gone if m.id else bool(gone) and said_ref(m) in gone)]


def user_names(messages: Sequence[BaseMessage]) -> set[str]:
    """What names each user message among ``messages``: its id, or the name the facts of one
    without an id are read under (:func:`~ctxplugin._messages.said_ref`)."""
    return {m.id or said_ref(m) for m in messages if isinstance(m, HumanMessage)}


__all__ = ["Seen", "rejoining", "user_names"]
