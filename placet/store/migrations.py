"""Named, ordered schema migrations, recorded in the database they built.

Why not `create_all()`: it creates missing tables but never changes an existing one, so
a database made by an older placet would silently keep an old shape. Instead each
schema change is one `Migration` appended to `MIGRATIONS`; its 1-based position is its
version, and `schema_migration` records every version applied (with its name), so
`migrate` runs exactly the missing ones, in order, each in its own `BEGIN IMMEDIATE`
transaction (concurrent first starts serialise; the loser finds the work done).

Rules for appending a migration (later issues: sync plans, hash cache, baseline,
snapshots): add the SQLModel table in its module, then append
`Migration("short_name", ("CREATE TABLE ...", "CREATE INDEX ..."))` at the END of
`MIGRATIONS` with DDL that matches the model exactly (the schema test compares a
migrated blank database with `SQLModel.metadata`); never edit or reorder a released one.

A database whose recorded version is newer than `len(MIGRATIONS)` was written by a newer
placet and is refused (`SchemaTooNew`, naming both versions): an older placet could
misread columns it does not know. A recorded name that differs from the code's at the
same version means a different lineage and is refused too.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import insert, select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from placet.errors import SchemaTooNew, StoreError
from placet.store.db import BEGIN_OPTION, is_busy, utcnow
from placet.store.models import SCHEMA_MIGRATION


@dataclass(frozen=True)
class Migration:
    """One schema step: DDL statements, or a function for data changes, or both."""

    name: str
    statements: tuple[str, ...] = ()
    run: Callable[[Connection], None] | None = None


_INITIAL = (
    """CREATE TABLE proposal (
    id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    status TEXT NOT NULL,
    request TEXT NOT NULL,
    evidence TEXT NOT NULL,
    request_hash TEXT NOT NULL,
    reason TEXT NOT NULL,
    drive_spec TEXT NOT NULL,
    run_id TEXT NOT NULL,
    client_name TEXT,
    client_version TEXT,
    label TEXT,
    host TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL,
    resolved_at DATETIME,
    resolved_by TEXT,
    attempt INTEGER NOT NULL,
    lease_holder TEXT,
    lease_expires_at DATETIME,
    summary TEXT,
    PRIMARY KEY (id)
)""",
    "CREATE INDEX ix_proposal_run_status ON proposal (run_id, status, expires_at)",
    "CREATE INDEX ix_proposal_status_expires ON proposal (status, expires_at)",
    "CREATE UNIQUE INDEX ux_proposal_pending_request ON proposal (kind, request_hash) "
    "WHERE status = 'pending'",
    """CREATE TABLE audit_event (
    id INTEGER NOT NULL,
    proposal_id INTEGER NOT NULL,
    request_hash TEXT NOT NULL,
    actor TEXT NOT NULL,
    from_status TEXT,
    to_status TEXT NOT NULL,
    at DATETIME NOT NULL,
    detail TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (id),
    FOREIGN KEY(proposal_id) REFERENCES proposal (id)
)""",
    "CREATE INDEX ix_audit_event_at ON audit_event (at)",
    "CREATE INDEX ix_audit_event_proposal ON audit_event (proposal_id)",
    """CREATE TABLE op_result (
    id INTEGER NOT NULL,
    proposal_id INTEGER NOT NULL,
    attempt INTEGER NOT NULL,
    op_index INTEGER NOT NULL,
    op TEXT NOT NULL,
    outcome TEXT NOT NULL,
    detail TEXT NOT NULL,
    recorded_at DATETIME NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT ux_op_result_op UNIQUE (proposal_id, attempt, op_index),
    FOREIGN KEY(proposal_id) REFERENCES proposal (id)
)""",
)

# Pending-proposal counters for the caps (docs/design.md section 9), kept by triggers in the
# same transaction as every change, so the cap check reads two rows instead of counting
# up to `pending_total` index entries while holding the write lock. Scopes: 'total' and
# 'run:<run_id>'. A count includes pending proposals whose TTL passed unswept: it is an
# upper bound, and the store counts exactly only when a tally reaches its cap.
_PENDING_TALLY = (
    """CREATE TABLE pending_tally (
    scope TEXT NOT NULL,
    n INTEGER NOT NULL,
    PRIMARY KEY (scope)
)""",
    """CREATE TRIGGER tr_pending_insert AFTER INSERT ON proposal
WHEN new.status = 'pending'
BEGIN
    INSERT INTO pending_tally (scope, n) VALUES ('total', 1), ('run:' || new.run_id, 1)
    ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END""",
    """CREATE TRIGGER tr_pending_leave AFTER UPDATE OF status ON proposal
WHEN old.status = 'pending' AND new.status <> 'pending'
BEGIN
    UPDATE pending_tally SET n = n - 1 WHERE scope IN ('total', 'run:' || old.run_id);
END""",
    """CREATE TRIGGER tr_pending_enter AFTER UPDATE OF status ON proposal
WHEN old.status <> 'pending' AND new.status = 'pending'
BEGIN
    INSERT INTO pending_tally (scope, n) VALUES ('total', 1), ('run:' || new.run_id, 1)
    ON CONFLICT (scope) DO UPDATE SET n = n + 1;
END""",
    """CREATE TRIGGER tr_pending_delete AFTER DELETE ON proposal
WHEN old.status = 'pending'
BEGIN
    UPDATE pending_tally SET n = n - 1 WHERE scope IN ('total', 'run:' || old.run_id);
END""",
    """INSERT INTO pending_tally (scope, n)
SELECT 'run:' || run_id, count(*) FROM proposal WHERE status = 'pending' GROUP BY run_id""",
    """INSERT INTO pending_tally (scope, n)
SELECT 'total', count(*) FROM proposal WHERE status = 'pending'""",
)

# Sync (issue 6): stored plans, the local and remote digest caches, baselines per pair,
# and drive snapshots; the tables are declared in `placet.sync.tables`.
_SYNC = (
    """CREATE TABLE sync_plan (
    id INTEGER NOT NULL,
    pair_key TEXT NOT NULL,
    root_name TEXT NOT NULL,
    root_path TEXT NOT NULL,
    local_path TEXT NOT NULL,
    drive_spec TEXT NOT NULL,
    remote_path TEXT NOT NULL,
    options TEXT NOT NULL,
    local_fingerprint TEXT NOT NULL,
    remote_fingerprint TEXT NOT NULL,
    baseline_generation INTEGER NOT NULL,
    summary TEXT NOT NULL,
    meta TEXT NOT NULL,
    body BLOB NOT NULL,
    skips BLOB NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id)
)""",
    "CREATE INDEX ix_sync_plan_created ON sync_plan (created_at)",
    "CREATE INDEX ix_sync_plan_pair ON sync_plan (pair_key, created_at)",
    """CREATE TABLE sync_digest_cache (
    root_key TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    inode INTEGER NOT NULL,
    ctime_ns INTEGER NOT NULL,
    sha256 TEXT NOT NULL,
    sha1 TEXT,
    md5 TEXT,
    verified INTEGER NOT NULL,
    version INTEGER NOT NULL,
    PRIMARY KEY (root_key, path)
)""",
    """CREATE TABLE sync_remote_digest (
    drive_spec TEXT NOT NULL,
    path TEXT NOT NULL,
    size INTEGER NOT NULL,
    mtime TEXT NOT NULL,
    digest_type TEXT NOT NULL,
    digest TEXT NOT NULL,
    PRIMARY KEY (drive_spec, path)
)""",
    """CREATE TABLE sync_pair (
    pair_key TEXT NOT NULL,
    root_path TEXT NOT NULL,
    local_path TEXT NOT NULL,
    drive_spec TEXT NOT NULL,
    remote_path TEXT NOT NULL,
    generation INTEGER NOT NULL,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (pair_key)
)""",
    """CREATE TABLE sync_baseline (
    pair_key TEXT NOT NULL,
    path TEXT NOT NULL,
    sha256 TEXT,
    remote_digest_type TEXT,
    remote_digest TEXT,
    size INTEGER,
    mtime TEXT,
    updated_at DATETIME NOT NULL,
    PRIMARY KEY (pair_key, path)
)""",
    """CREATE TABLE drive_snapshot (
    id INTEGER NOT NULL,
    drive_spec TEXT NOT NULL,
    path TEXT NOT NULL,
    entry_count INTEGER NOT NULL,
    body BLOB NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id)
)""",
    "CREATE INDEX ix_drive_snapshot_created ON drive_snapshot (created_at)",
)

# Idempotency per drive (docs/decisions.md): identical pending requests for DIFFERENT
# drives are different proposals, so the key gains `drive_spec`. `request_hash` stays as
# it is (audit verification recomputes it for existing proposals). Widening a unique key
# cannot make existing rows collide, so the recreate never fails on old data.
_PENDING_PER_DRIVE = (
    "DROP INDEX ux_proposal_pending_request",
    "CREATE UNIQUE INDEX ux_proposal_pending_request ON proposal "
    "(kind, request_hash, drive_spec) WHERE status = 'pending'",
)

# A sync proposal's ops by reference (docs/decisions.md, "A sync proposal's ops are stored
# by reference"): one row per op, written with the proposal. Existing proposals keep
# their ops inline in `request` (their request hash covers them as they are); the store
# reads both forms, so nothing is moved.
_PROPOSAL_OPS = (
    """CREATE TABLE proposal_op (
    proposal_id INTEGER NOT NULL,
    op_index INTEGER NOT NULL,
    op TEXT NOT NULL,
    PRIMARY KEY (proposal_id, op_index),
    FOREIGN KEY(proposal_id) REFERENCES proposal (id)
)""",
)

# Notifications (issue 14): the outbox of events that need the owner, the messages made of
# them and their deliveries per channel (`placet.store.outbox`). The trigger writes an
# event in the same transaction as the audit event of a creation, a failure or an
# interruption, whichever code path appends it.
_NOTIFY_OUTBOX = (
    """CREATE TABLE notify_event (
    id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    proposal_id INTEGER NOT NULL,
    run_id TEXT NOT NULL,
    audit_event_id INTEGER,
    dedupe TEXT NOT NULL,
    state TEXT NOT NULL,
    message_id INTEGER,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id),
    CONSTRAINT ux_notify_event_dedupe UNIQUE (dedupe)
)""",
    "CREATE INDEX ix_notify_event_state ON notify_event (state, created_at)",
    "CREATE INDEX ix_notify_event_proposal ON notify_event (proposal_id)",
    """CREATE TABLE notify_message (
    id INTEGER NOT NULL,
    kind TEXT NOT NULL,
    run_id TEXT NOT NULL,
    title TEXT NOT NULL,
    body TEXT NOT NULL,
    payload TEXT NOT NULL,
    priority INTEGER NOT NULL,
    created_at DATETIME NOT NULL,
    PRIMARY KEY (id)
)""",
    """CREATE TABLE notify_delivery (
    id INTEGER NOT NULL,
    message_id INTEGER NOT NULL,
    channel TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL,
    next_at DATETIME NOT NULL,
    claimed_by TEXT,
    claim_until DATETIME,
    last_error TEXT,
    created_at DATETIME NOT NULL,
    sent_at DATETIME,
    PRIMARY KEY (id),
    CONSTRAINT ux_notify_delivery_channel UNIQUE (message_id, channel),
    FOREIGN KEY(message_id) REFERENCES notify_message (id)
)""",
    "CREATE INDEX ix_notify_delivery_state ON notify_delivery (state, next_at)",
    """CREATE TRIGGER tr_notify_event AFTER INSERT ON audit_event
WHEN (new.from_status IS NULL AND new.to_status = 'pending')
    OR new.to_status IN ('failed', 'interrupted')
BEGIN
    INSERT INTO notify_event (kind, proposal_id, run_id, audit_event_id, dedupe, state,
        created_at)
    SELECT CASE WHEN new.from_status IS NULL THEN 'proposed' ELSE new.to_status END,
        new.proposal_id, p.run_id, new.id, 'audit:' || new.id, 'new', new.at
    FROM proposal p WHERE p.id = new.proposal_id;
END""",
)

# `placet web` (issue 15): the owner's passkeys, sign-in sessions and one-time pairing
# links; the tables are declared in `placet.store.passkeys`.
_WEB = (
    """CREATE TABLE web_passkey (
    id INTEGER NOT NULL,
    credential_id TEXT NOT NULL,
    public_key BLOB NOT NULL,
    sign_count INTEGER NOT NULL,
    name TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    last_used_at DATETIME,
    revoked_at DATETIME,
    PRIMARY KEY (id),
    CONSTRAINT ux_web_passkey_credential UNIQUE (credential_id)
)""",
    """CREATE TABLE web_session (
    token_hash TEXT NOT NULL,
    passkey_id INTEGER NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL,
    PRIMARY KEY (token_hash),
    FOREIGN KEY(passkey_id) REFERENCES web_passkey (id)
)""",
    """CREATE TABLE web_pairing (
    token_hash TEXT NOT NULL,
    created_at DATETIME NOT NULL,
    expires_at DATETIME NOT NULL,
    used_at DATETIME,
    PRIMARY KEY (token_hash)
)""",
)

MIGRATIONS: list[Migration] = [
    Migration("initial_proposals_audit_op_results", _INITIAL),
    Migration("pending_tally", _PENDING_TALLY),
    Migration("sync_plans_caches_baselines_snapshots", _SYNC),
    Migration("pending_request_per_drive", _PENDING_PER_DRIVE),
    Migration("proposal_ops_by_reference", _PROPOSAL_OPS),
    Migration("notify_outbox", _NOTIFY_OUTBOX),
    Migration("web_passkeys_sessions_pairings", _WEB),
    # Append new migrations here, at the end; never edit or reorder the ones above.
]

MIGRATE_RETRIES = 3

_CREATE_MIGRATION_TABLE = """CREATE TABLE IF NOT EXISTS schema_migration (
    version INTEGER NOT NULL,
    name TEXT NOT NULL,
    applied_at DATETIME NOT NULL,
    PRIMARY KEY (version)
)"""


def code_version(migrations: list[Migration] | None = None) -> int:
    """The schema version this code builds: the number of migrations it knows."""
    return len(MIGRATIONS if migrations is None else migrations)


def _applied(conn: Connection) -> dict[int, str]:
    rows = conn.execute(select(SCHEMA_MIGRATION.c.version, SCHEMA_MIGRATION.c.name))
    return {int(v): str(n) for v, n in rows}


def _check(applied: dict[int, str], migrations: list[Migration], db_label: str) -> None:
    newest = max(applied, default=0)
    if newest > len(migrations):
        raise SchemaTooNew(
            f"the database {db_label} has schema version {newest}, newer than this "
            f"placet's schema version {len(migrations)}; upgrade placet (or point "
            "PLACET_DB at another database)",
            details={"db_version": newest, "code_version": len(migrations)},
        )
    for version, name in sorted(applied.items()):
        if migrations[version - 1].name != name:
            raise StoreError(
                f"the database {db_label} recorded migration {version} as {name!r} but this "
                f"placet knows it as {migrations[version - 1].name!r}; it was built by a "
                "different placet lineage, refusing to touch it",
                details={"version": version, "db_name": name},
            )


def _recorded(conn: Connection) -> dict[int, str] | None:
    exists = conn.exec_driver_sql(
        "SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migration'"
    ).first()
    return _applied(conn) if exists else None


def schema_version(engine: Engine) -> int:
    """The highest migration version recorded in the database (0 when blank)."""
    with engine.connect() as conn:
        return max(_recorded(conn) or {}, default=0)


def migrate(engine: Engine, *, db_label: str, migrations: list[Migration] | None = None) -> int:
    """Apply every missing migration in order; return the resulting schema version.

    An up-to-date database is only read (no write lock), so opening the store costs
    nothing while other processes write. A lock that outlasts the busy timeout is retried
    a few times, then raised as a retryable StoreError.

    Raises:
        SchemaTooNew: the database records a version newer than the code knows.
        StoreError: the database's migration names disagree with the code's; the database
            stayed locked; or it is unreadable.
    """
    migrations = MIGRATIONS if migrations is None else migrations
    for attempt in range(MIGRATE_RETRIES + 1):
        try:
            with engine.connect() as conn:
                applied = _recorded(conn)
                if applied is not None:
                    _check(applied, migrations, db_label)
                    if len(applied) == len(migrations):
                        return len(migrations)
            _apply(engine, db_label, migrations)
            return len(migrations)
        except OperationalError as e:
            if is_busy(e) and attempt < MIGRATE_RETRIES:
                time.sleep(random.uniform(0.01, 0.05) * (2**attempt))
                continue
            raise StoreError(
                f"preparing the database {db_label} failed: {getattr(e, 'orig', e)}; "
                + (
                    "another placet process holds it locked, try again in a moment"
                    if is_busy(e)
                    else "`placet doctor` checks it"
                ),
                code="store_busy" if is_busy(e) else None,
                retryable=is_busy(e),
                details={"path": db_label},
            ) from e
        except SQLAlchemyError as e:
            raise StoreError(
                f"preparing the database {db_label} failed: {getattr(e, 'orig', e)}; "
                "`placet doctor` checks it",
                details={"path": db_label},
            ) from e
    raise AssertionError("unreachable")  # pragma: no cover


def _apply(engine: Engine, db_label: str, migrations: list[Migration]) -> None:
    with engine.connect() as conn:
        conn.execution_options(**{BEGIN_OPTION: "IMMEDIATE"})
        with conn.begin():
            conn.exec_driver_sql(_CREATE_MIGRATION_TABLE)
            applied = _applied(conn)
            _check(applied, migrations, db_label)
        for version, migration in enumerate(migrations, start=1):
            if version in applied:
                continue
            with conn.begin():
                # Re-read under the write lock: a concurrent start may have applied it.
                applied = _applied(conn)
                _check(applied, migrations, db_label)
                if version in applied:
                    continue
                for statement in migration.statements:
                    conn.exec_driver_sql(statement)
                if migration.run is not None:
                    migration.run(conn)
                conn.execute(
                    insert(SCHEMA_MIGRATION).values(
                        version=version, name=migration.name, applied_at=utcnow()
                    )
                )
