"""Idempotent proposing is per drive: the same request pending for another drive is
another proposal (migration `pending_request_per_drive`, docs/decisions/0017-store-writes.md), and a
database at the previous schema version is migrated in place with its proposals and
audit chain intact."""

from __future__ import annotations

from datetime import timedelta

import pytest

from placet.config import Settings, ensure_data_dir
from placet.errors import SchemaTooNew
from placet.schema import canonical_json, request_hash
from placet.store import ProposalRecord, Store, open_store
from placet.store.audit import append_anchor, append_event
from placet.store.db import driver_integrity_errors, dt_text, utcnow
from placet.store.lifecycle import agent_actor
from placet.store.migrations import MIGRATIONS, migrate, schema_version
from placet.store.records import EventFacts
from tests.support.db import make_test_engine, raw_db

pytestmark = pytest.mark.usefixtures("store_backend")

DRIVE_A = "local:/tmp/nc-drive"
DRIVE_B = "local:/tmp/nope"
REQUEST = {"kind": "upload", "local_path": "notes/report.md", "remote_path": "report.md"}
EVIDENCE = {"local": {"sha256": "ab" * 32, "size": 12}, "remote": {"exists": False}}
# The schema version just before `pending_request_per_drive`.
PREVIOUS = [m.name for m in MIGRATIONS].index("pending_request_per_drive")


def _propose(
    store: Store, drive: str, run_id: str = "run-a", ttl: int = 600, **kw: object
) -> tuple[ProposalRecord, bool]:
    return store.create_proposal(
        kind="upload",
        request=REQUEST,
        evidence=EVIDENCE,
        reason="upload the report",
        drive_spec=drive,
        run_id=run_id,
        ttl_seconds=ttl,
        **kw,  # type: ignore[arg-type]
    )


def _propose_on_the_previous_schema(settings: Settings) -> int:
    """`_propose(store, DRIVE_A)` as the placet of that schema wrote it (its columns
    only, with the creation's audit event); returns the proposal id."""
    now = utcnow()
    expires = now + timedelta(seconds=600)
    rh = request_hash("upload", REQUEST, EVIDENCE)
    with raw_db(settings, autocommit=False) as db:
        db.begin(write=True)
        (pid,) = db.execute(
            "INSERT INTO proposal (kind, status, request, evidence, request_hash, reason, "
            "drive_spec, run_id, host, created_at, expires_at, attempt) "
            "VALUES ('upload', 'pending', ?, ?, ?, ?, ?, 'run-a', 'old-host', ?, ?, 0) "
            "RETURNING id",
            (canonical_json(REQUEST), canonical_json(EVIDENCE), rh, "upload the report",
             DRIVE_A, dt_text(now), dt_text(expires)),
        ).fetchone()  # fmt: skip
        detail = {"kind": "upload", "expires_at": expires.isoformat(), "client_name": None,
                  "client_version": None}  # fmt: skip
        facts = EventFacts(pid, rh, agent_actor("run-a"), None, "pending", now)
        head = append_event(db, facts, detail=detail)
        db.commit()
    append_anchor(settings.audit_anchor_path, [head])
    return int(pid)


def _index(settings: Settings) -> tuple[list[str], str]:
    """The columns and the definition of the pending-request unique index."""
    with raw_db(settings) as con:
        if con.postgres:
            (sql,) = con.execute(
                "SELECT indexdef FROM pg_indexes WHERE indexname = 'ux_proposal_pending_request'"
            ).fetchone()
            cols = [c.strip() for c in sql.split("(", 1)[1].split(")", 1)[0].split(",")]
            return cols, sql.replace("(status = 'pending'::text)", "status = 'pending'")
        cols = [r[2] for r in con.execute("PRAGMA index_info(ux_proposal_pending_request)")]
        sql = con.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'ux_proposal_pending_request'"
        ).fetchone()[0]
        return cols, sql


def test_same_request_on_two_drives_is_two_proposals(store: Store) -> None:
    a, created_a = _propose(store, DRIVE_A)
    b, created_b = _propose(store, DRIVE_B, run_id="run-b")
    assert created_a and created_b
    assert a.id != b.id and (a.drive_spec, b.drive_spec) == (DRIVE_A, DRIVE_B)
    assert a.request_hash == b.request_hash  # the hash itself is unchanged
    again, created_again = _propose(store, DRIVE_A, run_id="run-c")
    assert (again.id, created_again) == (a.id, False)
    again_b, created_again_b = _propose(store, DRIVE_B)
    assert (again_b.id, created_again_b) == (b.id, False)
    # Accepting the drive-B proposal approves only drive B's.
    store.accept(b.id)
    assert store.get(b.id).status == "approved" and store.get(a.id).status == "pending"
    assert store.verify_audit().ok


def test_the_index_is_the_backstop_per_drive(store: Store) -> None:
    a, _ = _propose(store, DRIVE_A)
    with raw_db(store.settings) as con:
        cols = ", ".join(
            c for c in ("kind", "status", "request", "evidence", "request_hash", "reason",
                        "drive_spec", "run_id", "host", "created_at", "expires_at", "attempt")
        )  # fmt: skip
        copy = f"INSERT INTO proposal ({cols}) SELECT {cols.replace('drive_spec', '?')} "
        copy += "FROM proposal WHERE id = ?"
        with pytest.raises(driver_integrity_errors()):
            con.execute(copy, (DRIVE_A, a.id))
        con.execute(copy, (DRIVE_B, a.id))  # another drive: allowed


def test_an_expired_duplicate_on_another_drive_is_left_alone(store: Store) -> None:
    a, _ = _propose(store, DRIVE_A, ttl=60)
    later = utcnow() + timedelta(seconds=61)
    b, created = _propose(store, DRIVE_B, now=later)
    assert created and b.id != a.id
    assert store.get(a.id).status == "pending"  # only the sweeper (or drive A) expires it


@pytest.mark.blank_database
def test_previous_schema_is_migrated_in_place(settings: Settings) -> None:
    ensure_data_dir(settings)
    engine = make_test_engine(settings)
    assert migrate(engine, db_label="old", migrations=MIGRATIONS[:PREVIOUS]) == PREVIOUS
    engine.dispose()
    pid = _propose_on_the_previous_schema(settings)
    assert _index(settings)[0] == ["kind", "request_hash"]

    with open_store(settings) as store:
        assert schema_version(store.engine) == len(MIGRATIONS)
        cols, sql = _index(settings)
        assert cols == ["kind", "request_hash", "drive_spec"]
        assert "WHERE status = 'pending'" in sql
        p = store.get(pid)  # the pending proposal is intact
        assert (p.status, p.drive_spec, p.request, p.host_id) == (
            "pending",
            DRIVE_A,
            REQUEST,
            None,  # made before host ids were recorded
        )
        v = store.verify_audit()
        assert v.ok and v.count == 1, v.message
        assert _propose(store, DRIVE_A, run_id="run-b") == (p, False)
        b, created_b = _propose(store, DRIVE_B, run_id="run-b")
        assert created_b and b.id != p.id
        assert store.verify_audit().ok

    # The previous placet now sees a newer database and refuses it.
    engine = make_test_engine(settings)
    try:
        with pytest.raises(SchemaTooNew) as e:
            migrate(engine, db_label="old", migrations=MIGRATIONS[:PREVIOUS])
        assert e.value.details == {"db_version": len(MIGRATIONS), "code_version": PREVIOUS}
    finally:
        engine.dispose()
