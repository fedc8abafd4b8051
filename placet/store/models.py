"""The store's tables, declared with SQLModel: the shape the migrations must produce.

These classes are the current schema. The database is built and upgraded only by the
named migrations in `placet.store.migrations` (never by `create_all()` on a live file);
a test builds a blank database both ways and requires the same tables, columns and
indexes, so a model change without its migration fails there.

JSON columns (`request`, `evidence`, `summary`, `detail`, `op`) hold canonical JSON text
(`placet.schema.canonical_json`). Datetimes are `UTCDateTime` (aware UTC at the API).
The store reads and writes these tables through SQLAlchemy Core (`Model.__table__`),
returning frozen records (`placet.store.records`) rather than live ORM objects.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, ForeignKey, Index, Integer, Table, Text, UniqueConstraint, text
from sqlmodel import Field, SQLModel

from placet.store.db import UTCDateTime


class Proposal(SQLModel, table=True):
    """One proposal (docs/design.md section 4): an inert, TTL-bounded request for a write."""

    __tablename__ = "proposal"
    __table_args__ = (
        # Idempotent proposing (docs/design.md section 9): one pending proposal per
        # kind + request hash + drive, enforced by the database, not only by a SELECT
        # (migration `pending_request_per_drive`, docs/decisions.md).
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

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(sa_type=Text, nullable=False)
    status: str = Field(sa_type=Text, nullable=False)
    request: str = Field(sa_type=Text, nullable=False)
    evidence: str = Field(sa_type=Text, nullable=False)
    request_hash: str = Field(sa_type=Text, nullable=False)
    reason: str = Field(sa_type=Text, nullable=False)
    drive_spec: str = Field(sa_type=Text, nullable=False)
    run_id: str = Field(sa_type=Text, nullable=False)
    client_name: str | None = Field(default=None, sa_type=Text)
    client_version: str | None = Field(default=None, sa_type=Text)
    label: str | None = Field(default=None, sa_type=Text)
    host: str = Field(sa_type=Text, nullable=False)
    created_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    expires_at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    resolved_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    resolved_by: str | None = Field(default=None, sa_type=Text)
    attempt: int = Field(default=0, sa_type=Integer, nullable=False)
    lease_holder: str | None = Field(default=None, sa_type=Text)
    lease_expires_at: datetime | None = Field(default=None, sa_type=UTCDateTime)
    summary: str | None = Field(default=None, sa_type=Text)
    host_id: str | None = Field(default=None, sa_type=Text)
    """The stable id of the host it was made on (`placet.store.host`); None for a
    proposal made before placet recorded it (migration `proposal_host_id`)."""


class OpResult(SQLModel, table=True):
    """The journal of one op of one execution attempt (`outcome`: done, already_done,
    stale, failed, skipped); written as each op completes."""

    __tablename__ = "op_result"
    __table_args__ = (
        UniqueConstraint("proposal_id", "attempt", "op_index", name="ux_op_result_op"),
    )

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: int = Field(
        sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False),
    )
    attempt: int = Field(sa_type=Integer, nullable=False)
    op_index: int = Field(sa_type=Integer, nullable=False)
    op: str = Field(sa_type=Text, nullable=False)
    outcome: str = Field(sa_type=Text, nullable=False)
    detail: str = Field(sa_type=Text, nullable=False)
    recorded_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


class ProposalOp(SQLModel, table=True):
    """One op of a sync proposal stored by reference (migration `proposal_ops_by_reference`,
    docs/decisions.md): `op` is its canonical JSON, `op_index` its `index`. Written once,
    with the proposal row, and never changed; the request's `ops_digest` binds them all."""

    __tablename__ = "proposal_op"

    proposal_id: int = Field(
        sa_column=Column(Integer, ForeignKey("proposal.id"), primary_key=True, nullable=False),
    )
    op_index: int = Field(sa_column=Column(Integer, primary_key=True, nullable=False))
    op: str = Field(sa_type=Text, nullable=False)


class AuditEvent(SQLModel, table=True):
    """One link of the audit chain: a transition (or creation, `from_status` NULL)."""

    __tablename__ = "audit_event"
    __table_args__ = (
        Index("ix_audit_event_proposal", "proposal_id"),
        Index("ix_audit_event_at", "at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    proposal_id: int = Field(
        sa_column=Column(Integer, ForeignKey("proposal.id"), nullable=False),
    )
    request_hash: str = Field(sa_type=Text, nullable=False)
    actor: str = Field(sa_type=Text, nullable=False)
    from_status: str | None = Field(default=None, sa_type=Text)
    to_status: str = Field(sa_type=Text, nullable=False)
    at: datetime = Field(sa_type=UTCDateTime, nullable=False)
    detail: str = Field(sa_type=Text, nullable=False)
    prev_hash: str = Field(sa_type=Text, nullable=False)
    hash: str = Field(sa_type=Text, nullable=False)


class PendingTally(SQLModel, table=True):
    """Pending proposals per scope ('total', 'run:<run_id>'), kept by triggers (migration 2).

    An upper bound on live pending proposals (unswept expired ones still count), used as
    the cheap first check of the caps."""

    __tablename__ = "pending_tally"

    scope: str = Field(sa_type=Text, primary_key=True)
    n: int = Field(sa_type=Integer, nullable=False)


class SchemaMigration(SQLModel, table=True):
    """One applied migration: `version` is its 1-based position in the ordered list."""

    __tablename__ = "schema_migration"

    version: int = Field(primary_key=True)
    name: str = Field(sa_type=Text, nullable=False)
    applied_at: datetime = Field(sa_type=UTCDateTime, nullable=False)


def table(model: type[SQLModel]) -> Table:
    """The Core `Table` of a SQLModel table class (typed, for the Core queries)."""
    t = model.__table__  # type: ignore[attr-defined]
    assert isinstance(t, Table)
    return t


PROPOSAL = table(Proposal)
OP_RESULT = table(OpResult)
AUDIT_EVENT = table(AuditEvent)
PROPOSAL_OP = table(ProposalOp)
PENDING_TALLY = table(PendingTally)
SCHEMA_MIGRATION = table(SchemaMigration)
