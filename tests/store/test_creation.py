"""Creating a proposal, the ingest hot path, alike on both backends: on
PostgreSQL one call of a server-side function that takes the write lock itself, its own
transaction in one round trip, its audit event hashed by the server
(`placet_create_proposal`); on SQLite plain SQL under BEGIN IMMEDIATE. The event must
hash exactly as `placet.store.audit` hashes it (any text, any character), chain to the
head, reach the notification outbox and the anchor; a lock held past the busy timeout
must leave the pooled connection fit for reuse; a database whose default isolation is not
READ COMMITTED still gets its proposals (placet's sessions set READ COMMITTED)."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from placet.config import Settings
from placet.errors import StoreError
from placet.store import db as db_module
from placet.store import open_store
from placet.store.audit import (
    GENESIS_HASH,
    chain_hash,
    event_content,
    event_content_parts,
)
from placet.store.changes import CHANNEL
from placet.store.db import WRITE_LOCK_KEY, utcnow
from placet.store.migrations import MIGRATIONS
from placet.store.records import EventFacts
from tests.support.db import raw_db
from tests.support.proposals import propose_folder

TRICKY = ["", "plain", 'a "quoted" \\ back\\slash', "Zoë ✓ 日本語 🙂", "\n\t\x01", "}{,:"]


@pytest.mark.parametrize("text", TRICKY)
@pytest.mark.parametrize("from_status", [None, "pending"])
def test_the_content_parts_rebuild_the_content(text: str, from_status: str | None) -> None:
    at = datetime(2030, 1, 2, 3, 4, 5, 600007, tzinfo=UTC)
    fields = {
        "request_hash": "ab" * 32,
        "actor": f"agent:{text}",
        "from_status": from_status,
        "to_status": "approved",
        "at": at,
        "detail_json": (detail := f'{{"client_name":"{text}"}}'),
    }
    before_id, before_pid, rest = event_content_parts(**fields)  # type: ignore[arg-type]
    for event_id, pid in [(1, 1), (17, 123456789), (2**62, 9)]:
        facts = EventFacts(pid, "ab" * 32, f"agent:{text}", from_status, "approved", at)
        whole = event_content(event_id=event_id, facts=facts, detail_json=detail)
        assert before_id + str(event_id) + before_pid + str(pid) + rest == whole


@pytest.mark.usefixtures("store_backend")
@pytest.mark.parametrize("text", TRICKY[2:])
def test_a_creation_event_hashes_as_the_chain_does(settings: Settings, text: str) -> None:
    with open_store(settings) as store:
        first, _ = propose_folder(store, "one", client_name=text, reason=text, label=text, ttl=600)
        second, created = propose_folder(
            store, "two", client_name=text, run_id=f"run-{text}", ttl=600
        )
        assert created and second.client_name == text and store.get(second.id) == second
        events = store.audit_events()
        assert [(e.id, e.proposal_id) for e in events] == [(1, first.id), (2, second.id)]
        prev = GENESIS_HASH
        for e in events:
            facts = EventFacts(e.proposal_id, e.request_hash, e.actor, e.from_status,
                               e.to_status, e.at)  # fmt: skip
            content = event_content(
                event_id=e.id, facts=facts, detail_json=_stored_detail(settings, e.id)
            )
            assert e.prev_hash == prev and e.hash == chain_hash(prev, content)
            prev = e.hash
        assert e.detail["client_name"] == text and e.actor == f"agent:run-{text}"
        lines = settings.audit_anchor_path.read_text().split()
        assert lines == ["1", events[0].hash, "2", events[1].hash]
        with raw_db(settings) as db:
            outbox = db.execute(
                "SELECT kind, proposal_id, run_id, audit_event_id FROM notify_event ORDER BY id"
            ).fetchall()
        assert [tuple(r) for r in outbox] == [
            ("proposed", first.id, "run-a", 1),
            ("proposed", second.id, f"run-{text}", 2),
        ]
        assert store.verify_audit().ok


def _stored_detail(settings: Settings, event_id: int) -> str:
    with raw_db(settings) as db:
        return str(
            db.execute("SELECT detail FROM audit_event WHERE id = ?", (event_id,)).fetchone()[0]
        )


@pytest.mark.usefixtures("store_backend")
def test_a_creation_behind_a_held_lock_is_busy_and_the_store_recovers(
    settings: Settings,
) -> None:
    with open_store(settings, busy_timeout_ms=20) as store:
        made, _ = propose_folder(store, "before", ttl=600)
        with raw_db(settings, autocommit=False) as blocker:
            blocker.begin(write=True)  # the write lock, held past the busy timeout
            try:
                with pytest.raises(StoreError) as e:
                    propose_folder(store, "blocked", ttl=600)
                assert e.value.error_code == "store_busy" and e.value.retryable
            finally:
                blocker.rollback()
        # The same pooled connection serves the next creation and a transition.
        _, created = propose_folder(store, "after", ttl=600, now=utcnow())
        assert created and store.accept(made.id).status == "approved"
        assert [p.request["name"] for p in store.list()] == ["before", "after"]
        verification = store.verify_audit()
        assert verification.ok and verification.count == 3


def test_the_function_locks_with_placet_s_key_and_starts_at_genesis() -> None:
    (ddl,) = next(m for m in MIGRATIONS if m.name == "create_proposal_function").ddl(True)
    assert f"pg_advisory_xact_lock({WRITE_LOCK_KEY})" in ddl
    assert "repeat('0', 64)" in ddl and GENESIS_HASH == "0" * 64
    assert f"pg_notify('{CHANNEL}', '')" in ddl


@pytest.mark.usefixtures("store_backend")
def test_a_session_not_at_read_committed_takes_the_general_path(
    settings: Settings, store_backend: str
) -> None:
    """The function's lock must come before its statements' snapshots, which only READ
    COMMITTED gives: placet's sessions set it whatever the database's default (were one
    not at it, the function would make nothing and the client's general path create; on
    SQLite there is no such setting: the same creations, the same result)."""
    if store_backend == "postgresql":
        with raw_db(settings) as db:
            db.execute(
                "DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET "
                "default_transaction_isolation = %L', current_database(), "
                "'repeatable read'); END $$"
            )
    with open_store(settings) as store:
        made, created = propose_folder(store, "rr", ttl=600)
        again, created_again = propose_folder(store, "rr", ttl=600)
        assert created and not created_again and again.id == made.id
        assert [e.proposal_id for e in store.audit_events()] == [made.id]
        assert store.verify_audit().ok


@pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)
def test_a_pooled_connection_the_server_dropped_is_replaced(
    store_backend: str, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pooled connections are pinged only after `PING_IDLE_SECONDS` idle, not at every
    checkout: one the server dropped meanwhile is replaced, and nothing reaches the caller."""
    with open_store(settings) as store:
        propose_folder(store, "a", ttl=600)
        with raw_db(settings) as db:
            mine = "application_name = 'placet' AND datname = current_database()"
            db.execute(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE {mine}")
            deadline = time.monotonic() + 30
            while db.execute(f"SELECT count(*) FROM pg_stat_activity WHERE {mine}").fetchone()[0]:
                assert time.monotonic() < deadline, "the server did not drop the connection"
                time.sleep(0.02)
        monkeypatch.setattr(db_module, "PING_IDLE_SECONDS", 0.0)
        made, created = propose_folder(store, "b", ttl=600)
        assert created and store.get(made.id) == made
        assert store.verify_audit().ok
