"""Idempotent proposing is per drive: the same request pending for another drive is
another proposal (migration `pending_request_per_drive`, docs/decisions.md), and a
database at the previous schema version is migrated in place with its proposals and
audit chain intact."""

from __future__ import annotations

import sqlite3
from datetime import timedelta
from pathlib import Path

import pytest

from placet.config import Settings, ensure_data_dir
from placet.errors import SchemaTooNew
from placet.store import ProposalRecord, Store, open_store
from placet.store.db import make_engine, prepare_db_file, utcnow
from placet.store.migrations import MIGRATIONS, migrate, schema_version

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


def _index(db: Path) -> tuple[list[str], str]:
    con = sqlite3.connect(db)
    try:
        cols = [r[2] for r in con.execute("PRAGMA index_info(ux_proposal_pending_request)")]
        sql = con.execute(
            "SELECT sql FROM sqlite_master WHERE name = 'ux_proposal_pending_request'"
        ).fetchone()[0]
        return cols, sql
    finally:
        con.close()


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
    con = sqlite3.connect(store.db_path)
    try:
        cols = ", ".join(
            c for c in ("kind", "status", "request", "evidence", "request_hash", "reason",
                        "drive_spec", "run_id", "host", "created_at", "expires_at", "attempt")
        )  # fmt: skip
        copy = f"INSERT INTO proposal ({cols}) SELECT {cols.replace('drive_spec', '?')} "
        copy += "FROM proposal WHERE id = ?"
        with pytest.raises(sqlite3.IntegrityError):
            con.execute(copy, (DRIVE_A, a.id))
        con.execute(copy, (DRIVE_B, a.id))  # another drive: allowed
        con.commit()
    finally:
        con.close()


def test_an_expired_duplicate_on_another_drive_is_left_alone(store: Store) -> None:
    a, _ = _propose(store, DRIVE_A, ttl=60)
    later = utcnow() + timedelta(seconds=61)
    b, created = _propose(store, DRIVE_B, now=later)
    assert created and b.id != a.id
    assert store.get(a.id).status == "pending"  # only the sweeper (or drive A) expires it


def test_previous_schema_is_migrated_in_place(settings: Settings) -> None:
    ensure_data_dir(settings)
    prepare_db_file(settings.db_path)
    engine = make_engine(settings.db_path)
    assert migrate(engine, db_label="old", migrations=MIGRATIONS[:PREVIOUS]) == PREVIOUS
    old = Store(engine, settings)
    try:
        p, created = _propose(old, DRIVE_A)
        assert created
        assert _index(settings.db_path)[0] == ["kind", "request_hash"]
        assert old.verify_audit().ok
    finally:
        old.close()

    with open_store(settings) as store:
        assert schema_version(store.engine) == len(MIGRATIONS)
        cols, sql = _index(settings.db_path)
        assert cols == ["kind", "request_hash", "drive_spec"]
        assert "WHERE status = 'pending'" in sql
        assert store.get(p.id) == p  # the pending proposal is intact
        v = store.verify_audit()
        assert v.ok and v.count == 1, v.message
        assert _propose(store, DRIVE_A, run_id="run-b") == (p, False)
        b, created_b = _propose(store, DRIVE_B, run_id="run-b")
        assert created_b and b.id != p.id
        assert store.verify_audit().ok

    # The previous placet now sees a newer database and refuses it.
    engine = make_engine(settings.db_path)
    try:
        with pytest.raises(SchemaTooNew) as e:
            migrate(engine, db_label="old", migrations=MIGRATIONS[:PREVIOUS])
        assert e.value.details == {"db_version": len(MIGRATIONS), "code_version": PREVIOUS}
    finally:
        engine.dispose()
