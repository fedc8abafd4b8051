"""The store's tables, declared as SQLAlchemy Core tables: the shape the migrations must produce.

These tables are the current schema. The database is built and upgraded only by the
named migrations in `placet.store.migrations` (never by `create_all()` on a live file);
a test builds a blank database both ways and requires the same tables, columns and
indexes, so a table change without its migration fails there.

A table is `declare`d from its columns in their migrated order; `columns` gives a run
of consecutive columns of one type (NOT NULL unless `null=True`), `keys` the primary
key's. The store reads and writes these tables through SQLAlchemy Core, returning
frozen records (`placet.store.records`), so no ORM class stands behind them (and the
store's import loads neither SQLModel nor SQLAlchemy's ORM).

JSON columns (`request`, `evidence`, `summary`, `detail`, `op`) hold canonical JSON text
(`placet.schema.canonical_json`). Datetimes are `UTCDateTime` (aware UTC at the API).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Column,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)
from sqlalchemy.types import TypeEngine

from placet.store.db import UTCDateTime

METADATA = MetaData()
"""Every placet table (the store's, `placet.store.outbox`'s and `placet.store.passkeys`',
`placet.sync.tables`'): what the schema test builds with `create_all` to compare with
the migrations."""

ColumnType = type[TypeEngine[Any]]
"""A column's SQL type: `Text`, `Integer`, `LargeBinary`, `UTCDateTime`."""


def columns(sa_type: ColumnType, *names: str, null: bool = False) -> list[Column[Any]]:
    """Columns `names`, in this order, all of `sa_type`: NOT NULL unless `null`."""
    return [Column(name, sa_type, nullable=null) for name in names]


def keys(sa_type: ColumnType, *names: str) -> list[Column[Any]]:
    """The primary key's columns `names`, in this order, all of `sa_type` (NOT NULL)."""
    return [Column(name, sa_type, primary_key=True) for name in names]


def serial_id() -> Column[Any]:
    """`id`, the integer primary key the database assigns (SERIAL on PostgreSQL)."""
    return Column("id", Integer, primary_key=True)


def proposal_ref(*, primary_key: bool = False) -> Column[Any]:
    """`proposal_id`, NOT NULL, referencing `proposal.id`."""
    return Column(
        "proposal_id", Integer, ForeignKey("proposal.id"), primary_key=primary_key, nullable=False
    )


def declare(name: str, *parts: Column[Any] | list[Column[Any]] | Index | UniqueConstraint) -> Table:
    """The table `name` in `METADATA`: its columns in the order given (a list stands for
    its columns), then its indexes and constraints."""
    items: list[Column[Any] | Index | UniqueConstraint] = []
    for part in parts:
        if isinstance(part, list):
            items.extend(part)
        else:
            items.append(part)
    return Table(name, METADATA, *items)


PROPOSAL = declare(
    "proposal",
    serial_id(),
    columns(Text, "kind", "status", "request", "evidence", "request_hash", "reason"),
    columns(Text, "drive_spec", "run_id"),
    columns(Text, "client_name", "client_version", "label", null=True),
    columns(Text, "host"),
    columns(UTCDateTime, "created_at", "expires_at"),
    columns(UTCDateTime, "resolved_at", null=True),
    columns(Text, "resolved_by", null=True),
    Column("attempt", Integer, nullable=False, default=0),
    columns(Text, "lease_holder", null=True),
    columns(UTCDateTime, "lease_expires_at", null=True),
    # host_id: the stable id of the host it was made on (`placet.store.host`); None for
    # a proposal made before placet recorded it (migration `proposal_host_id`).
    columns(Text, "summary", "host_id", null=True),
    # Idempotent proposing (docs/design.md section 9): one pending proposal per
    # kind + request hash + drive, enforced by the database, not only by a SELECT
    # (migration `pending_request_per_drive`, docs/decisions/0017-store-writes.md).
    Index(
        "ux_proposal_pending_request",
        "kind",
        "request_hash",
        "drive_spec",
        unique=True,
        sqlite_where=text("status = 'pending'"),
    ),
    Index("ix_proposal_status_expires", "status", "expires_at"),
    Index("ix_proposal_run_status", "run_id", "status", "expires_at"),
    Index("ix_proposal_host_status", "host_id", "status"),
)
"""One proposal (docs/design.md section 4): an inert, TTL-bounded request for a write."""

OP_RESULT = declare(
    "op_result",
    serial_id(),
    proposal_ref(),
    columns(Integer, "attempt", "op_index"),
    columns(Text, "op", "outcome", "detail"),
    columns(UTCDateTime, "recorded_at"),
    UniqueConstraint("proposal_id", "attempt", "op_index", name="ux_op_result_op"),
)
"""The journal of one op of one execution attempt (`outcome`: done, already_done,
stale, failed, skipped); written as each op completes."""

PROPOSAL_OP = declare(
    "proposal_op",
    proposal_ref(primary_key=True),
    keys(Integer, "op_index"),
    columns(Text, "op"),
)
"""One op of a sync proposal stored by reference (migration `proposal_ops_by_reference`,
docs/decisions/0023-ops-by-reference.md): `op` is its canonical JSON, `op_index` its
`index`. Written once, with the proposal row, and never changed; the request's
`ops_digest` binds them all."""

PROPOSAL_PREVIEW = declare(
    "proposal_preview",
    proposal_ref(primary_key=True),
    keys(Integer, "op_index"),
    keys(Text, "side"),
    columns(Integer, "size", null=True),
    columns(Text, "binding"),
    columns(LargeBinary, "content"),
    columns(UTCDateTime, "captured_at"),
)
"""The first bytes of a file one op writes (`side` ``new``) or replaces (``current``),
captured when the proposal was made (migration `proposal_previews`, `placet.preview`):
`size` is the whole file's, `binding` how the bytes were tied to the evidence's digest
(``same_read``, ``digest``, ``unchecked``). Written once, after the proposal row."""

AUDIT_EVENT = declare(
    "audit_event",
    serial_id(),
    proposal_ref(),
    columns(Text, "request_hash", "actor"),
    columns(Text, "from_status", null=True),
    columns(Text, "to_status"),
    columns(UTCDateTime, "at"),
    columns(Text, "detail", "prev_hash", "hash"),
    Index("ix_audit_event_proposal", "proposal_id"),
    Index("ix_audit_event_at", "at"),
)
"""One link of the audit chain: a transition (or creation, `from_status` NULL)."""

PENDING_TALLY = declare(
    "pending_tally",
    keys(Text, "scope"),
    columns(Integer, "n"),
)
"""Pending proposals per scope ('total', 'run:<run_id>'), kept by triggers (migration 2).

An upper bound on live pending proposals (unswept expired ones still count), used as
the cheap first check of the caps."""

SPENT_SIGNATURE = declare(
    "spent_signature",
    keys(Text, "signature"),
    proposal_ref(),
    columns(Text, "claim_hash"),
    columns(Text, "host_id", null=True),
    columns(UTCDateTime, "spent_at"),
)
"""A passkey-signed approval that approved a run, written with that run's claim and read
by every host sharing the database (migration `spent_signatures`): `signature` is
`placet.store.signatures.signature_id` of its nonce, `claim_hash` the hash of the claim's
audit event, `host_id` the host that claimed it. One signature approves one run."""

SCHEMA_MIGRATION = declare(
    "schema_migration",
    keys(Integer, "version"),
    columns(Text, "name"),
    columns(UTCDateTime, "applied_at"),
)
"""One applied migration: `version` is its 1-based position in the ordered list."""

RULE_USE = declare(
    "rule_use",
    serial_id(),
    columns(Text, "rule_id"),
    proposal_ref(),
    columns(Text, "rules_sha256"),
    columns(UTCDateTime, "at"),
    UniqueConstraint("proposal_id", name="ux_rule_use_proposal"),
    Index("ix_rule_use_rule_at", "rule_id", "at"),
)
"""One proposal a standing rule approved (`placet.rules.ledger`): counted for the rule's
`max_per_hour` in the same transaction that adds it, and joined with the audit events to
tell a rule whose approved run failed (paused)."""

RULES_SIGNATURE = declare(
    "rules_signature",
    keys(Text, "rules_sha256"),
    columns(LargeBinary, "rules"),
    columns(Text, "assertion"),
    columns(Integer, "passkey_id"),
    columns(UTCDateTime, "signed_at"),
)
"""The owner's passkey signature over one rules file (signed mode, `placet rules sign`):
the file's exact bytes, their SHA-256, and the assertion over `rules_challenge` of that
hash (`placet.rules.signing`)."""

RULE_RESUME = declare(
    "rule_resume",
    keys(Text, "rule_id"),
    columns(UTCDateTime, "resumed_at"),
)
"""When the owner last resumed a rule (`placet rules resume`): a failed run of a proposal
the rule approved before that no longer pauses it."""
