"""Where ``engine.history(session_id)`` keeps whole conversations.

``RunnableWithMessageHistory`` asks its factory for a fresh history object on every call, so the
conversation cannot live on that object: it lives in a store shared by every history of one
engine. Embedded engines (``ContextEngine.embedded(path)``) get a SQLite file beside their other
stores, so conversations survive a restart; other engines keep them in memory for the life of
the process.
"""

from __future__ import annotations

import json
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from ctxplugin._sqlite_wal import into_wal, schema_version
from ctxplugin._untrusted import json_text
from ctxplugin.errors import InvalidInputError, StoreError
from ctxplugin.scope import scope_key

if TYPE_CHECKING:
    from ctxplugin.engine import ContextEngine

logger = logging.getLogger("ctxplugin")

HISTORY_FILE = "history.sqlite3"
_SCHEMA_VERSION = 1  # 0: scope keys pipe-joined (ambiguous); 1: Scope.key()


class MessageStore(Protocol):
    """Whole conversations by scope key, in the order messages were added."""

    def load(self, key: str) -> list[BaseMessage]:
        """Every message stored under ``key`` (empty list if none)."""
        ...

    def append(self, key: str, messages: Sequence[BaseMessage]) -> None:
        """Add messages at the end of the conversation under ``key``."""
        ...

    def clear(self, key: str) -> None:
        """Forget the conversation under ``key``."""
        ...


class MemoryMessageStore:
    """Conversations in a dict, for the life of the process."""

    def __init__(self) -> None:
        self._items: dict[str, list[BaseMessage]] = {}
        self._lock = threading.Lock()

    def load(self, key: str) -> list[BaseMessage]:
        with self._lock:
            return list(self._items.get(key, ()))

    def append(self, key: str, messages: Sequence[BaseMessage]) -> None:
        with self._lock:
            self._items.setdefault(key, []).extend(messages)

    def clear(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)


class SQLiteMessageStore:
    """Conversations in a SQLite file (one row per message, JSON as LangChain dumps it).

    A connection per operation keeps it safe across threads and processes; the file runs in
    WAL mode, so readers and the writer never wait for one another, and SQLite's own locking
    orders concurrent writers, each waiting at most ``timeout`` seconds for another (then
    ``StoreError``).
    """

    def __init__(self, path: str | Path, *, timeout: float = 5.0) -> None:
        self.path = Path(path).absolute()  # connected per call: a chdir must not move the file
        self.timeout = timeout
        with self._connect(create=True):
            pass

    def _create(self, db: sqlite3.Connection) -> None:
        schema_version(db, _SCHEMA_VERSION, "the chat history at")  # a later release's file: refused
        into_wal(db, self.timeout)  # a process reading never makes another one's turn fail
        db.execute(
            "CREATE TABLE IF NOT EXISTS chat_messages ("
            " seq INTEGER PRIMARY KEY AUTOINCREMENT, scope_key TEXT NOT NULL, body TEXT NOT NULL)"
        )
        db.execute("CREATE INDEX IF NOT EXISTS chat_messages_scope ON chat_messages (scope_key, seq)")
        if db.execute("PRAGMA user_version").fetchone()[0] < _SCHEMA_VERSION:
            _rekey(db)
            db.execute(f"PRAGMA user_version = {_SCHEMA_VERSION}")

    @contextmanager
    def _connect(self, *, create: bool = False) -> Iterator[sqlite3.Connection]:
        # a file deleted while the engine runs (a cleanup of its directory) is made again, with
        # its table: the conversation goes on in the file a new process reads. An empty one is
        # one SQLite made when it was deleted as another call connected: it has no table either
        try:
            if not create and self._gone():
                logger.warning(
                    "the chat history file %s was deleted (or its directory removed) while in use; "
                    "made it again: the conversations stored before are not in it", self.path,
                )
                create = True
            if create:  # its directory may have been removed with it
                self.path.parent.mkdir(parents=True, exist_ok=True)
            db = sqlite3.connect(self.path, timeout=self.timeout)
        except (sqlite3.Error, OSError) as exc:
            raise StoreError(f"cannot open the chat history at {self.path}: {exc}") from exc
        try:
            with db:
                if create:
                    self._create(db)
                yield db
        except sqlite3.Error as exc:
            raise StoreError(f"chat history at {self.path} failed: {exc}") from exc
        finally:
            db.close()

    def _gone(self) -> bool:
        try:
            return self.path.stat().st_size == 0
        except (FileNotFoundError, NotADirectoryError):
            return True

    def load(self, key: str) -> list[BaseMessage]:
        with self._connect() as db:
            rows = db.execute(
                "SELECT body FROM chat_messages WHERE scope_key = ? ORDER BY seq", (key,)
            ).fetchall()
        return messages_from_dict([json.loads(body) for (body,) in rows])

    def append(self, key: str, messages: Sequence[BaseMessage]) -> None:
        # JSON escapes where a message holds lone surrogates, which SQLite cannot take as text
        rows = [(key, _body(messages, i)) for i in range(len(messages))]
        with self._connect() as db:
            db.executemany("INSERT INTO chat_messages (scope_key, body) VALUES (?, ?)", rows)

    def clear(self, key: str) -> None:
        with self._connect() as db:
            db.execute("DELETE FROM chat_messages WHERE scope_key = ?", (key,))


def _body(messages: Sequence[BaseMessage], index: int) -> str:
    """The JSON a message is stored as; one JSON cannot hold (bytes, an integer too long to write,
    arguments nested past the encoder's depth) is refused before anything is written."""
    message = messages[index]
    try:
        return json_text(message_to_dict(message))
    except (TypeError, ValueError, RecursionError) as exc:
        raise InvalidInputError(
            f"message {index} of the {len(messages)} added ({type(message).__name__}) cannot be stored as JSON "
            f"({str(exc)[:200]}); none of them was written. Keep values JSON can hold in its content, "
            "additional_kwargs and tool-call arguments"
        ) from exc


def _rekey(db: sqlite3.Connection) -> None:
    """Move conversations stored under pipe-joined scope keys to :meth:`Scope.key`.

    An old key with exactly three ``|`` names one scope (an empty part was ``None``); a key
    with more was shared by several scopes and is left as it is, read by none.
    """
    db.execute("BEGIN IMMEDIATE")
    for (old,) in db.execute("SELECT DISTINCT scope_key FROM chat_messages WHERE scope_key LIKE '%|%'").fetchall():
        parts = old.split("|")
        if len(parts) != 4 or not parts[3].strip():
            continue
        tenant, workspace, user, session = (p or None for p in parts)
        new = scope_key(tenant, workspace, user, session)
        db.execute("UPDATE chat_messages SET scope_key = ? WHERE scope_key = ?", (new, old))


class PendingMessageStore:
    """A message store whose appends never fail: messages it cannot write now (the file held by
    another process past ``timeout``, a full disk) are kept in this process, read back after the
    stored ones, and written before the next messages of their conversation (or by the engine's
    ``close()``, :meth:`flush`).

    ``RunnableWithMessageHistory`` adds a turn after the model answered: a failure there would
    lose the user's message and the answer, and fail a call whose work is done. Writes of one
    conversation are made one at a time (its kept messages keep their order); those of others
    go on beside them, so a file held by another process makes each wait ``timeout`` once, not
    once per conversation written before it.
    """

    def __init__(self, inner: MessageStore) -> None:
        self.inner = inner
        self._pending: dict[str, list[BaseMessage]] = {}
        self._lock = threading.Lock()  # held only to read or change the fields below, never for a write
        self._settled = threading.Condition(self._lock)
        self._writers: dict[str, tuple[threading.Lock, list[int]]] = {}  # per conversation, while in use
        self._changing: set[str] = set()  # conversations whose kept messages are being written (or cleared)
        self._flushed = 0  # times kept messages left ``_pending``: a read across one read them in neither place

    def load(self, key: str) -> list[BaseMessage]:
        while True:  # read again if kept messages were written (or cleared) during the read
            with self._lock:
                while key in self._changing:  # a write of its kept messages: at most ``timeout``
                    self._settled.wait()
                flushed = self._flushed
            stored = self.inner.load(key)
            with self._lock:
                if self._flushed == flushed and key not in self._changing:
                    return stored + self._pending.get(key, [])

    def append(self, key: str, messages: Sequence[BaseMessage]) -> None:
        failed, waiting = self._write(key, messages)
        if failed is not None:
            logger.warning(
                "chat history not written, %d message(s) kept in this process until it is: %s",
                len(waiting), failed,
            )

    def clear(self, key: str) -> None:
        with self._writing(key):
            self._change(key, lambda: self.inner.clear(key))  # first: a clear that fails keeps what it could not write either

    def flush(self) -> None:
        """Write the messages kept in the process (the engine's ``close()``: no later turn may
        come to write them); those that still cannot be written are lost with the process."""
        with self._lock:
            keys = list(self._pending)
        for key in keys:
            failed, waiting = self._write(key, ())
            if failed is not None:
                logger.warning(
                    "chat history not written at close, %d message(s) lost when this process ends: %s",
                    len(waiting), failed,
                )

    def _write(self, key: str, messages: Sequence[BaseMessage]) -> tuple[StoreError | None, list[BaseMessage]]:
        """Write ``key``'s kept messages, then ``messages``: the error, and what is kept, when not."""
        with self._writing(key):
            with self._lock:
                waiting = [*self._pending.get(key, ()), *messages]
            if not waiting:
                return None, waiting
            try:
                self._change(key, lambda: self.inner.append(key, waiting))
            except StoreError as exc:
                with self._lock:
                    self._pending[key] = waiting
                return exc, waiting
            return None, waiting

    def _change(self, key: str, write: Callable[[], None]) -> None:
        """``write`` (with ``key``'s writer held), then no message of ``key`` is kept any more;
        reads of ``key`` meanwhile wait for it when it has kept messages."""
        with self._lock:
            kept = key in self._pending
            if kept:
                self._changing.add(key)
        try:
            write()
            with self._lock:
                if self._pending.pop(key, None) is not None:
                    self._flushed += 1
        finally:
            if kept:
                with self._lock:
                    self._changing.discard(key)
                    self._settled.notify_all()

    @contextmanager
    def _writing(self, key: str) -> Iterator[None]:
        """Hold ``key``'s writer: one write of a conversation at a time (the lock is dropped
        once no thread uses it, so none is kept per conversation ever written)."""
        with self._lock:
            lock, users = self._writers.setdefault(key, (threading.Lock(), [0]))
            users[0] += 1
        try:
            with lock:
                yield
        finally:
            with self._lock:
                users[0] -= 1
                if not users[0]:
                    del self._writers[key]


_stores_lock = threading.Lock()
_ATTRIBUTE = "_ctxplugin_message_store"


def store_for(engine: ContextEngine) -> MessageStore:
    """The conversation store of ``engine`` (SQLite under an embedded engine's path).

    Kept on the engine itself, so it lives and goes with it and no map grows with the number
    of engines a process builds."""
    store: MessageStore | None = getattr(engine, _ATTRIBUTE, None)
    if store is not None:
        return store
    with _stores_lock:
        store = getattr(engine, _ATTRIBUTE, None)
        if store is None:
            root = getattr(engine, "path", None)
            if root is not None:
                pending = PendingMessageStore(SQLiteMessageStore(Path(root) / HISTORY_FILE, timeout=engine.config.stores.timeout))
                engine.opened(pending.flush)
                store = pending
            else:
                store = MemoryMessageStore()
            setattr(engine, _ATTRIBUTE, store)
        return store
