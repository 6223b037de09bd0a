"""Reading a message a second time changes nothing in the ledger.

The engine reads each message for facts once, and remembers that in memory only. A new
process (a deploy, a crash, another worker behind a load balancer) or an engine that forgot
the message reads it again. Its statements are then old news: written again, a message that
set a key twice ("started", then "finished") would flip the key back and forth and leave new
facts behind each time, and an early value replaced since by an output that is not read again
(a stored one, read when it was captured) would come back as current. So the facts the
ledger already holds tell which messages it read: one with a fact stored from that very
message (same text, same source: message id or tool call id, the digest of the text read,
same owner) is skipped whole. A message the host edited in place (same id, other text) is read
again for what it states anew, which replaces what the old text said; a statement its old text
made too is not read again, so a value a later message replaced since stays replaced. A
statement of the old text that the new one no longer makes is marked not current (see
:func:`unsaid`). A message whose facts were marked left behind (its conversation went back to an
earlier point, or was cleared) and that a conversation holds again is read as new.
"""

from __future__ import annotations

from collections.abc import Sequence

from ctxplugin.facts._batch import WriteBatch
from ctxplugin.facts._drafts import Output, Read
from ctxplugin.facts._forks import LEFT_BEHIND
from ctxplugin.facts._said import said_by
from ctxplugin.facts.model import Fact, FactQuery, text_hash
from ctxplugin.facts.store import FactStore
from ctxplugin.scope import Scope

_Origin = tuple[str, str | None, Output | None]


def unread(writes: FactStore | WriteBatch, owner: Scope, drafts: Sequence[Read]) -> list[Read]:
    """The drafts of ``drafts`` read from messages the ledger has not read before, as
    ``owner``. ``writes`` is read before anything of this ingest is written: a batch answers
    from what it prefetched, a store with ``lookup`` in one request."""
    hashes = sorted({text_hash(read[0].text.strip()) for read in drafts})
    stored: list[Fact]
    lookup = getattr(writes, "lookup", None)
    if not isinstance(writes, WriteBatch) and callable(lookup):
        stored = list(lookup(owner, keys=[], hashes=hashes))
    else:
        stored = [f for h in hashes for f in writes.find(FactQuery(reader=owner, text_hash=h))]
    owner_key = owner.key()
    # what a message its conversation no longer held stated (a host went back, or cleared it) was
    # marked so: read in a conversation again, it is read as new, and replaces what came since
    mine = [f for f in stored if f.owner.key() == owner_key and not (f.note == LEFT_BEHIND and not f.is_valid)]
    known = {(f.text_hash, f.source.type, f.source.ref, (f.source.call_id, f.source.digest)) for f in mine}
    # what was read from a message, whatever its text then (before the digest of its text was
    # kept, any text of it marks it read)
    stated = {(f.text_hash, f.source.type, f.source.ref) for f in mine if f.source.call_id is None}
    undigested = {(f.text_hash, f.source.type, f.source.ref) for f in mine if f.source.call_id is None and f.source.digest is None}
    read_before: set[_Origin] = set()
    restated: set[int] = set()
    for index, read in enumerate(drafts):
        draft, source, _, output = read
        said = (text_hash(draft.text.strip()), source, draft.source_ref)
        message = output is None or output[0] is None
        # what was read is told by call id and digest; the message before it is no part of that
        if (*said, output[:2] if output else (None, None)) in known or (message and said in undigested):
            read_before.add(_origin(read))
        elif message and said in stated:
            # an edited message: what its old text said too was read then, and may have been
            # replaced since by a later message; only what it says anew is read
            restated.add(index)
    return (
        [read for index, read in enumerate(drafts) if _origin(read) not in read_before and index not in restated]
        if read_before or restated
        else list(drafts)
    )


def unsaid(store: FactStore, writes: WriteBatch, owner: Scope, drafts: Sequence[Read]) -> list[Fact]:
    """Mark not current, in ``writes``, what ``owner``'s user messages among ``drafts`` stated
    in an earlier text (a fact read from the same message ref, another digest) and state no
    more (no draft of the message has its text), and return those facts.

    Called after the drafts were decided: a statement the new text replaced by key is
    superseded already, and one a later message replaced stays superseded, so only facts still
    current change (``is_valid=False`` and a note, as a refused fact; nothing supersedes them).
    Needs the store's ``from_messages``: without it, an old statement stays current. A fact
    stored before message digests were kept (none) is left as it is."""
    finder = getattr(store, "from_messages", None)
    texts: dict[str, tuple[str, set[str]]] = {}  # message ref -> its digest now, what it states
    for draft, source, _, output in drafts:
        if source != "conversation" or draft.source_ref is None or output is None or output[0] is not None:
            continue
        if draft.source_ref.startswith(f"said:{output[1]}"):
            continue  # a message without an id is named by the digest of its text (and repetition): never edited
        texts.setdefault(draft.source_ref, (output[1], set()))[1].add(text_hash(draft.text.strip()))
    if not texts or not callable(finder):
        return []
    owner_key = owner.key()
    gone = [
        f.id
        for f in finder(owner, list(texts))
        if f.owner.key() == owner_key and (ref := said_by(f)) in texts and f.source.digest is not None
        and f.source.digest != texts[ref][0] and f.text_hash not in texts[ref][1] and f.is_valid
    ]
    dropped = [
        f.model_copy(update={"is_valid": False, "note": "its message was edited and no longer states it"})
        for f in writes.get(gone, reader=owner) if f.is_valid
    ] if gone else []
    if dropped:
        writes.update(dropped)
    return dropped


def by_message(drafts: Sequence[Read]) -> list[list[Read]]:
    """``drafts`` in runs read from one message each, in order."""
    runs: list[list[Read]] = []
    for read in drafts:
        if runs and _origin(runs[-1][-1]) == _origin(read):
            runs[-1].append(read)
        else:
            runs.append([read])
    return runs


def _origin(read: Read) -> _Origin:
    """The message a draft was read from: its source type, reference and tool output."""
    draft, source, _, output = read
    return source, draft.source_ref, output


__all__ = ["by_message", "unread", "unsaid"]
