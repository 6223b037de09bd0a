"""A short user turn where the user's reply between two kept assistant turns was condensed.

An assistant message can stay whole while the user's reply after it goes: a pinned answer, the
answer the host followed with a system message of its own (kept, as every system message inside
the conversation is), or an exchange the budget stage keeps while it drops the ones after it.
The reply is then condensed into a context note, or dropped, and the next assistant turn
follows the kept one: two assistant turns in a row, which Gemini (user and model turns must
alternate) and Bedrock Converse refuse — a system message between them does not count, both
move it into the system prompt, and a note is shown as a lookup, which goes before an assistant
turn that follows a user turn, not after an assistant one.

So the reply keeps a place of its own: a short user turn, :data:`STAND_IN`, saying that it was
condensed, never its text nor anything taken from it (a ref the reply names is the user's
text, not ctxplugin's word) — a reply of any length costs a few tokens, and its values are in
the note as before. Every such turn is the same, so the prompt cache keeps serving it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage

from ctxplugin._layout import is_note, is_user_turn
from ctxplugin._messages import META_KEY, annotation
from ctxplugin._note_marks import STAND_IN_MARK

STAND_IN = "[reply condensed into the context notes]"
"""The user turn standing for a condensed or dropped reply between two kept assistant turns."""


def is_stand_in(message: BaseMessage) -> bool:
    """Whether ``message`` is a turn standing for a condensed reply (see :func:`_stand_in`)."""
    return isinstance(message, HumanMessage) and bool(annotation(message).get(STAND_IN_MARK))


def _stand_in(gap: Sequence[BaseMessage]) -> HumanMessage | None:
    """The turn standing for the user turns among ``gap`` (messages condensed or dropped
    between two kept assistant turns), or None when ``gap`` holds none: the assistant turns
    were already in a row in the conversation."""
    if not any(is_user_turn(m) for m in gap):
        return None
    # never a word of the reply, not even a ref it names: the reply is the user's text (a ref
    # in it may be pasted or forged), and this turn is ctxplugin's
    return HumanMessage(content=STAND_IN, additional_kwargs={META_KEY: {STAND_IN_MARK: True}})


@dataclass(slots=True)
class Turns:
    """Keeps user and assistant turns alternating while a view is put together from a
    conversation's exchanges, in order, some kept and some condensed or dropped.

    Call :meth:`gone` before the note of exchanges left out is added to ``view``, and
    :meth:`kept` before a kept exchange is: where the exchanges left out after a kept assistant
    turn held a user turn and the next kept one opens with an assistant turn, a stand-in for
    that user turn goes where the first of them was.

    Attributes:
        view: the view being put together.
        source: the conversation (indexes in :meth:`gone` and :meth:`kept` are into it).
    """

    view: list[BaseMessage]
    source: Sequence[BaseMessage]
    _answered: bool = False  # the last turn kept is the assistant's
    _gap: int | None = None  # where in ``source`` the messages left out after it begin
    _at: int = 0  # where in ``view`` they were

    def gone(self, start: int) -> None:
        """The exchange starting at ``source[start]`` is condensed or dropped."""
        if self._answered and self._gap is None:
            self._gap, self._at = start, len(self.view)

    def needless(self, shown: Sequence[BaseMessage]) -> bool:
        """Whether ``shown`` is a stand-in that no longer follows an assistant turn (the turn it
        followed was dropped since): it is left out with what it stood for."""
        return bool(shown) and is_stand_in(shown[0]) and not self._answered

    def kept(self, start: int, shown: Sequence[BaseMessage]) -> int | None:
        """The exchange starting at ``source[start]`` is kept, shown as ``shown``; returns where
        a stand-in was put in ``view`` (None when none was)."""
        first = next((m for m in shown if _turn(m)), None)
        if first is None:  # a system message or a note: neither is anyone's turn
            return None
        at: int | None = None
        if self._gap is not None and isinstance(first, AIMessage):
            turn = _stand_in(self.source[self._gap : start])
            if turn is not None:
                self.view.insert(self._at, turn)
                at = self._at
        self._gap = None
        self._answered = isinstance(next(m for m in reversed(shown) if _turn(m)), AIMessage)
        return at


def _turn(message: BaseMessage) -> bool:
    """Whether ``message`` is someone's turn: not a system message, not a context note."""
    return not isinstance(message, SystemMessage) and not is_note(message)


def without_exchanges(
    history: Sequence[BaseMessage],
    spans: Sequence[tuple[int, int]],
    dropped: Collection[int],
    note: BaseMessage,
) -> list[BaseMessage]:
    """``history`` without its exchanges ``spans`` numbered in ``dropped`` (not empty): ``note``
    stands where the first of them was, and a stand-in for a user turn dropped between two kept
    assistant turns where the first of those was. A stand-in already in ``history`` is never
    among ``dropped`` (it is no exchange of its own): it goes when the assistant turn before it
    does."""
    out: list[BaseMessage] = []
    turns = Turns(out, history)
    first = min(dropped)
    for number, (start, end) in enumerate(spans):
        if number in dropped:
            turns.gone(start)
            if number == first:
                out.append(note)
        elif not turns.needless(history[start:end]):
            turns.kept(start, history[start:end])
            out.extend(history[start:end])
    return out


__all__ = ["STAND_IN", "Turns", "is_stand_in", "without_exchanges"]
