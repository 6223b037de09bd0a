"""The CAS store contract: one suite every :class:`~ctxplugin.cas.CASStore` backend passes.

Subclass :class:`CASStoreContract` in a test module and implement :meth:`make_store`::

    class TestMyStore(CASStoreContract):
        def make_store(self, tmp_path, clock):
            return MyStore(dsn, clock=clock)

The store must take its time from ``clock`` (TTL tests move it forward instead of sleeping).
Needs pytest.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ctxplugin.cas import CASItem, CASStore, RefExistence, content_hash, make_ref, raw_hash
from ctxplugin.cas.store import RefRevocation
from ctxplugin.errors import InvalidInputError, RefNotFoundError, StoreError
from ctxplugin.scope import Scope


class FakeClock:
    """A settable clock for TTL tests."""

    def __init__(self, now: float = 1_700_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make_item(content: str, kind: str = "test", summary: str = "") -> CASItem:
    """A well-formed :class:`CASItem` for ``content`` (hashes and ref computed as capture does)."""
    digest = content_hash(content)
    return CASItem(
        ref_id=make_ref(kind, digest),
        content_hash=digest,
        raw_hash=raw_hash(content),
        kind=kind,
        content=content,
        summary=summary or f"summary of {len(content)} characters",
    )


A = Scope(session_id="s-a", user_id="u1", workspace_id="w1")
B = Scope(session_id="s-b", user_id="u2", workspace_id="w1")
A2 = Scope(session_id="s-a2", user_id="u1", workspace_id="w1")
A_OTHER_USER = Scope(session_id="s-a", user_id="u9", workspace_id="w1")
A_OTHER_TENANT = Scope(session_id="s-a", user_id="u1", workspace_id="w1", tenant_id="t2")
A_OTHER_WORKSPACE = Scope(session_id="s-a", user_id="u1", workspace_id="w2")

# Pairs of distinct scopes whose ids, joined with "|" as earlier versions did, gave one key,
# or a store's columns could hold alike.
COLLIDING_SCOPES = (
    (Scope(user_id="a", session_id="b|c"), Scope(user_id="a|b", session_id="c")),
    (Scope(tenant_id="t|w", session_id="s"), Scope(tenant_id="t", workspace_id="w", session_id="s")),
    (Scope(tenant_id="", session_id="s"), Scope(session_id="s")),
    (Scope(workspace_id="w", user_id="u|s", session_id="x"), Scope(workspace_id="w|u", user_id="s", session_id="x")),
    (Scope(user_id="é,!%7C", session_id="s"), Scope(user_id="é,!|", session_id="s")),
    # ids no text column holds (lone surrogates, NUL) beside the ids their escaped forms spell
    (Scope(tenant_id="t\udcff", user_id="u\x00", session_id="s\ud800"), Scope(tenant_id="t%ED%B3%BF", user_id="u%00", session_id="s%ED%A0%80")),
)

ODD_TEXTS = (
    "plain",
    "line one\r\nline two\r\n",
    "trailing spaces   \n\n\n",
    "nul \x00 byte and emoji 🚀 and accents éü",
    "undecodable \udcff\udcfe bytes kept by surrogateescape",
    '{"b": 1, "a": [1, 2, {"c": null}]}',
    "",
)


class CASStoreContract:
    """Behaviour every CAS store must have. Subclasses implement :meth:`make_store`."""

    def make_store(self, tmp_path: Path, clock: FakeClock) -> CASStore:
        """A fresh, empty store using ``clock``."""
        raise NotImplementedError

    @pytest.fixture
    def clock(self) -> FakeClock:
        return FakeClock()

    @pytest.fixture
    def store(self, tmp_path: Path, clock: FakeClock) -> Iterator[CASStore]:
        store = self.make_store(tmp_path, clock)
        yield store
        store.close()

    # ------------------------------------------------------------------ round trip
    @pytest.mark.parametrize("content", ODD_TEXTS)
    def test_round_trip_is_exact(self, store: CASStore, content: str) -> None:
        item = make_item(content)
        assert store.put(item, A) is True
        record = store.get(item.ref_id, A)
        assert record.content == content
        assert (record.ref_id, record.content_hash, record.raw_hash, record.kind) == (
            item.ref_id, item.content_hash, item.raw_hash, item.kind,
        )
        assert record.summary == item.summary

    @pytest.mark.parametrize(("first", "second"), COLLIDING_SCOPES)
    def test_scopes_whose_ids_join_alike_stay_apart(self, store: CASStore, first: Scope, second: Scope) -> None:
        # the same output captured by both: each gets its own grant and can read it back
        shared = make_item("balance: 1,024.00 for account 7")
        assert store.put(shared, second) is True
        assert store.put(shared, first) is True
        assert store.get(shared.ref_id, first).content == store.get(shared.ref_id, second).content
        # an output only one of them captured is invisible to the other, both ways
        mine, theirs = make_item("private to the first scope"), make_item("private to the second scope")
        store.put(mine, first)
        store.put(theirs, second)
        with pytest.raises(RefNotFoundError):
            store.get(mine.ref_id, second)
        with pytest.raises(RefNotFoundError):
            store.get(theirs.ref_id, first)
        if isinstance(store, RefExistence):
            assert not store.exists(mine.ref_id, second) and not store.exists(theirs.ref_id, first)

    def test_put_is_idempotent(self, store: CASStore) -> None:
        item = make_item("x" * 500)
        assert store.put(item, A) is True
        assert store.put(item, A) is False
        assert store.get(item.ref_id, A).content == item.content

    def test_same_content_from_two_scopes_is_two_grants(self, store: CASStore) -> None:
        item = make_item("shared output")
        assert store.put(item, A) is True
        assert store.put(item, B) is True
        assert store.get(item.ref_id, A).content == store.get(item.ref_id, B).content == "shared output"

    def test_variants_keep_their_own_bytes_per_scope(self, store: CASStore) -> None:
        lf, crlf = make_item("a\nb"), make_item("a\r\nb  ")
        assert lf.ref_id == crlf.ref_id  # one canonical content, one ref
        store.put(lf, A)
        store.put(crlf, B)
        assert store.get(lf.ref_id, A).content == "a\nb"
        assert store.get(lf.ref_id, B).content == "a\r\nb  "

    def test_first_variant_wins_within_a_scope(self, store: CASStore) -> None:
        first, second = make_item('{"a": 1, "b": 2}'), make_item('{"b":2,"a":1}')
        assert first.ref_id == second.ref_id
        assert store.put(first, A) is True
        assert store.put(second, A) is False
        assert store.get(first.ref_id, A).content == '{"a": 1, "b": 2}'

    # ------------------------------------------------------------------ isolation
    def test_unknown_ref_is_not_found(self, store: CASStore) -> None:
        with pytest.raises(RefNotFoundError):
            store.get(make_item("never stored").ref_id, A)

    @pytest.mark.parametrize(
        "reader",
        [B, A2, A_OTHER_USER, A_OTHER_TENANT, A_OTHER_WORKSPACE],
        ids=["other-session", "same-user-other-session", "same-session-other-user", "other-tenant", "same-session-other-workspace"],
    )
    def test_session_grants_do_not_leak(self, store: CASStore, reader: Scope) -> None:
        item = make_item("private output")
        store.put(item, A)
        with pytest.raises(RefNotFoundError) as denied:
            store.get(item.ref_id, reader)
        with pytest.raises(RefNotFoundError) as unknown:
            store.get(make_item("never stored").ref_id, reader)
        # the error says nothing that tells an existing ref from an unknown one
        assert str(denied.value).replace(item.ref_id, "?") == str(unknown.value).replace(make_item("never stored").ref_id, "?")

    def test_user_visibility_spans_the_users_sessions_only(self, store: CASStore) -> None:
        item = make_item("user-wide output")
        store.put(item, A, visibility="user")
        assert store.get(item.ref_id, A2).content == "user-wide output"
        for reader in (B, A_OTHER_TENANT):
            with pytest.raises(RefNotFoundError):
                store.get(item.ref_id, reader)

    def test_workspace_and_tenant_visibility(self, store: CASStore) -> None:
        ws, tenant = make_item("workspace output"), make_item("tenant output")
        store.put(ws, A, visibility="workspace")
        store.put(tenant, A, visibility="tenant")
        assert store.get(ws.ref_id, B).content == "workspace output"
        assert store.get(tenant.ref_id, Scope(session_id="anyone")).content == "tenant output"
        with pytest.raises(RefNotFoundError):
            store.get(ws.ref_id, Scope(session_id="x", workspace_id="w2"))
        with pytest.raises(RefNotFoundError):
            store.get(tenant.ref_id, A_OTHER_TENANT)

    def test_ref_id_alone_grants_nothing_even_after_another_scope_reads(self, store: CASStore) -> None:
        item = make_item("read by its owner")
        store.put(item, A)
        store.get(item.ref_id, A)
        with pytest.raises(RefNotFoundError):
            store.get(item.ref_id, B)

    # ------------------------------------------------------------------ access counts and TTL
    def test_get_counts_accesses_per_grant(self, store: CASStore) -> None:
        item = make_item("counted")
        store.put(item, A)
        store.put(item, B)
        assert [store.get(item.ref_id, A).access_count for _ in range(3)] == [1, 2, 3]
        assert store.get(item.ref_id, B).access_count == 1

    def test_exists_says_what_get_would_find_without_counting(self, store: CASStore, clock: FakeClock) -> None:
        if not isinstance(store, RefExistence):
            pytest.skip(f"{type(store).__name__} has no exists() (an optional ability)")
        item, short = make_item("looked up, never read"), make_item("short-lived")
        store.put(item, A, visibility="user")
        store.put(short, A, ttl_seconds=60)
        assert store.exists(item.ref_id, A)
        assert store.exists(item.ref_id, A2), "user visibility reaches the user's other sessions"
        assert not store.exists(item.ref_id, A_OTHER_TENANT), "tenants never mix"
        assert not store.exists(item.ref_id, B), "another user's ref does not exist for B"
        assert not store.exists(make_item("never stored").ref_id, A)
        assert [store.exists(item.ref_id, A) for _ in range(3)] == [True] * 3
        assert store.get(item.ref_id, A).access_count == 1, "exists() counts no access"
        clock.advance(61)
        assert not store.exists(short.ref_id, A), "an expired grant does not exist"
        with pytest.raises(InvalidInputError):
            store.exists("ref:nope", A)

    # ------------------------------------------------------------------ revocation (optional)
    def _revocable(self, store: CASStore) -> RefRevocation:
        if not isinstance(store, RefRevocation):
            pytest.skip(f"{type(store).__name__} has no revoke() (an optional ability)")
        return store

    def test_revoke_removes_the_scopes_grants_and_keeps_other_scopes(self, store: CASStore) -> None:
        revocable = self._revocable(store)
        item = make_item("card 4111 1111 1111 1111 of jane@example.com")
        store.put(item, A)
        store.put(item, A, visibility="user")
        store.put(item, B)
        assert revocable.revoke(item.ref_id, A) is True
        for reader in (A, A2):
            with pytest.raises(RefNotFoundError):
                store.get(item.ref_id, reader)
        assert store.get(item.ref_id, B).content == item.content, "another scope's grant stays"
        assert revocable.revoke(item.ref_id, A) is False, "nothing left to revoke"
        assert store.put(item, A) is True and store.get(item.ref_id, A).content == item.content, "a new grant"

    def test_revoke_deletes_the_content_with_its_last_grant(self, store: CASStore) -> None:
        revocable = self._revocable(store)
        item, kept = make_item("masked after capture"), make_item("another output")
        store.put(item, A)
        store.put(item, B)
        store.put(kept, A)
        assert revocable.revoke(item.ref_id, B) is True
        stats = getattr(store, "stats", None)
        if callable(stats):
            assert stats()["contents"] == 2, "content another grant points to stays"
        assert revocable.revoke(item.ref_id, A) is True
        if callable(stats):
            assert stats()["contents"] == 1 and stats()["grants"] == 1
        with pytest.raises(RefNotFoundError):
            store.get(item.ref_id, B)
        assert store.get(kept.ref_id, A).content == "another output"

    def test_revoke_of_an_unknown_ref_or_a_bad_one(self, store: CASStore) -> None:
        revocable = self._revocable(store)
        assert revocable.revoke(make_item("never stored").ref_id, A) is False
        item = make_item("stored by A only")
        store.put(item, A)
        assert revocable.revoke(item.ref_id, B) is False and revocable.revoke(item.ref_id, A_OTHER_USER) is False
        assert store.get(item.ref_id, A).content == item.content
        for bad in ("", "ref:x", "ref:Bash:0123456789abcdef"):
            with pytest.raises(InvalidInputError):
                revocable.revoke(bad, A)

    def test_revoke_on_a_closed_store_raises_store_error(self, tmp_path: Path, clock: FakeClock) -> None:
        store = self.make_store(tmp_path, clock)
        revocable = self._revocable(store)
        store.put(make_item("before close"), A)
        store.close()
        with pytest.raises(StoreError):
            revocable.revoke(make_item("before close").ref_id, A)

    def test_expired_grants_are_unreadable_and_purged(self, store: CASStore, clock: FakeClock) -> None:
        short, forever = make_item("short-lived"), make_item("kept")
        store.put(short, A, ttl_seconds=60)
        store.put(forever, A)
        record = store.get(short.ref_id, A)
        assert record.expires_at == pytest.approx(clock.now + 60)
        clock.advance(61)
        with pytest.raises(RefNotFoundError):
            store.get(short.ref_id, A)
        assert store.purge_expired() == 1
        assert store.purge_expired() == 0
        assert store.get(forever.ref_id, A).content == "kept"

    def test_put_again_extends_expiry_and_revives(self, store: CASStore, clock: FakeClock) -> None:
        item = make_item("renewed")
        store.put(item, A, ttl_seconds=60)
        clock.advance(50)
        assert store.put(item, A, ttl_seconds=60) is False
        clock.advance(50)  # 100 s after the first put, 50 s after the second
        assert store.get(item.ref_id, A).content == "renewed"
        clock.advance(20)
        with pytest.raises(RefNotFoundError):
            store.get(item.ref_id, A)
        assert store.put(item, A, ttl_seconds=60) is True  # an expired grant put again is new
        assert store.get(item.ref_id, A).access_count == 1
        store.purge_expired()
        assert store.get(item.ref_id, A).content == "renewed"

    def test_ttl_none_never_expires_and_wins_over_a_ttl(self, store: CASStore, clock: FakeClock) -> None:
        item = make_item("pinned")
        store.put(item, A, ttl_seconds=10)
        store.put(item, A, ttl_seconds=None)
        clock.advance(10_000)
        assert store.get(item.ref_id, A).expires_at is None

    # ------------------------------------------------------------------ bad input and failures
    def test_malformed_refs_are_invalid_input(self, store: CASStore) -> None:
        for bad in ("", "ref:x", "ref:bash:XYZ", "bash:0123456789abcdef", "ref:Bash:0123456789abcdef"):
            with pytest.raises(InvalidInputError):
                store.get(bad, A)

    def test_put_checks_its_item(self, store: CASStore) -> None:
        item = make_item("checked")
        with pytest.raises(InvalidInputError):
            store.put(CASItem(**{**item.__dict__, "ref_id": "ref:test:0000000000000000"}), A)
        with pytest.raises(InvalidInputError):
            store.put(item, A, visibility="world")  # type: ignore[arg-type]
        with pytest.raises(InvalidInputError):
            store.put(item, A, ttl_seconds=0)

    def test_hash_prefix_collision_is_a_store_error(self, store: CASStore) -> None:
        item = make_item("original")
        store.put(item, A)
        impostor = CASItem(**{**item.__dict__, "content_hash": item.content_hash[:16] + "f" * 48, "content": "other"})
        with pytest.raises(StoreError):
            store.put(impostor, B)

    def test_closed_store_raises_store_error(self, tmp_path: Path, clock: FakeClock) -> None:
        store = self.make_store(tmp_path, clock)
        item = make_item("before close")
        store.put(item, A)
        store.close()
        store.close()  # idempotent
        with pytest.raises(StoreError):
            store.get(item.ref_id, A)
        with pytest.raises(StoreError):
            store.put(item, A)

    # ------------------------------------------------------------------ concurrency
    def test_concurrent_puts_and_gets_from_threads(self, store: CASStore) -> None:
        items = [make_item(f"output {i} " * 50) for i in range(20)]
        scopes = [Scope(session_id=f"s{j}") for j in range(4)]
        created: list[bool] = []
        errors: list[BaseException] = []
        lock = threading.Lock()

        def work(scope: Scope) -> None:
            try:
                for _ in range(2):
                    for item in items:
                        result = store.put(item, scope)
                        assert store.get(item.ref_id, scope).content == item.content
                        with lock:
                            created.append(result)
            except BaseException as exc:  # surfaced below with the failing thread's error
                errors.append(exc)

        threads = [threading.Thread(target=work, args=(s,)) for s in scopes for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors[0]
        assert created.count(True) == len(items) * len(scopes)  # each grant created exactly once
        for scope in scopes:
            for item in items:
                assert store.get(item.ref_id, scope).content == item.content


def hammer_sqlite(path_or_store: str | CASStore, worker: int, count: int) -> None:
    """Process target for multi-process tests: write ``count`` outputs, half of them shared by
    all workers, and read each back. Given a path it opens its own SQLite store; given a store
    (inherited through ``fork``) it uses that one."""
    from ctxplugin.cas import SQLiteCASStore

    store = SQLiteCASStore(path_or_store) if isinstance(path_or_store, str) else path_or_store
    scope = Scope(session_id=f"proc-{worker}")
    try:
        for i in range(count):
            content = f"shared output {i}\n" * 20 if i % 2 else f"worker {worker} output {i}\n" * 20
            item = make_item(content, kind="proc")
            store.put(item, scope)
            if store.get(item.ref_id, scope).content != content:
                raise AssertionError(f"worker {worker} read back different content for {item.ref_id}")
    finally:
        store.close()
