"""The store's tables, declared once as SQLModel models, and the typed rows it returns.

A table is a `table=True` model of `Table`, whose registry keeps placet's tables in
`METADATA` (never in SQLModel's shared metadata). A table the store returns rows of takes
its columns, in migrated order, from a `Row` model (`ProposalRecord` for `Proposal`, ...):
the row is validated from the column values and frozen, a snapshot; changing a proposal
goes back through a `Store` transition. `to_dict()` is the JSON shape the CLI (`--json`)
and the MCP tools print. The database is built only by the named migrations
(`placet.store.migrations`); a test builds a blank database both ways and requires the
same schema. The store queries `table(Model)` through SQLAlchemy Core.

JSON columns (`request`, `evidence`, `summary`, `detail`, `op`) hold canonical JSON text
(`placet.schema.canonical_json`), parsed into a row's fields. Datetimes are
`UTCDateTime` (aware UTC at the API).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime
from functools import cache
from typing import Annotated, Any, Self

from pydantic import BeforeValidator
from sqlalchemy import Index, MetaData, Text, UniqueConstraint, text
from sqlalchemy import Table as CoreTable
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel
from sqlmodel._compat import SQLModelConfig

from placet.store.db import UTCDateTime

METADATA = MetaData()
"""Every placet table (the store's, the outbox's, the passkeys', sync's): what the schema
test builds with `create_all` to compare with the migrations."""


def _json_object(value: Any) -> Any:
    return json.loads(value) if isinstance(value, str | bytes) else value


# Column types by annotation: NOT NULL unless `Null...` (which default to None).
Str = Annotated[str, Field(sa_type=Text)]
StrKey = Annotated[str, Field(primary_key=True, sa_type=Text)]
NullStr = Annotated[str | None, Field(default=None, sa_type=Text)]
When = Annotated[datetime, Field(sa_type=UTCDateTime)]
NullWhen = Annotated[datetime | None, Field(default=None, sa_type=UTCDateTime)]
JSONText = Annotated[dict[str, Any], BeforeValidator(_json_object), Field(sa_type=Text)]
"""A JSON column: canonical JSON text in the database, a dict in a row."""
NullJSONText = Annotated[
    dict[str, Any] | None, BeforeValidator(_json_object), Field(default=None, sa_type=Text)
]
ProposalId = Annotated[int, Field(foreign_key="proposal.id")]
"""`proposal_id`, referencing `proposal.id`."""


def _jsonable(value: Any) -> Any:
    return value.isoformat() if isinstance(value, datetime) else value


class Table(SQLModel, registry=registry(metadata=METADATA)):
    """The base of every placet table model and row: their tables go into `METADATA`."""


class Row(Table):
    """A typed row the store returns: validated, frozen, with its JSON shape."""

    model_config = SQLModelConfig(frozen=True)

    @classmethod
    def of(cls, values: Mapping[Any, Any]) -> Self:
        """The row validated from a result row's column values (`row._mapping`)."""
        return cls.model_validate(dict(values))

    @classmethod
    def stored(cls, values: Mapping[Any, Any]) -> Self:
        """The row built from a result row of its own table without validating it again
        (the columns' types are the fields', as the schema test pins), its JSON columns
        parsed: for bulk reads (`Store.list`, `audit_events`, `op_results`), where
        validation would cost ~10 us a row (docs/decisions/0004-sqlmodel-tables.md)."""
        data = dict(values)
        for name in _json_fields(cls):
            if isinstance(data.get(name), str):
                data[name] = json.loads(data[name])
        row = object.__new__(cls)  # what `model_construct` makes, without its overhead
        object.__setattr__(row, "__dict__", data)
        object.__setattr__(row, "__pydantic_fields_set__", set(data))
        object.__setattr__(row, "__pydantic_extra__", None)
        object.__setattr__(row, "__pydantic_private__", None)
        return row

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable dict of every field not excluded (`Field(exclude=True)`):
        datetimes as ISO 8601 strings, None kept."""
        return {
            name: _jsonable(getattr(self, name))
            for name, f in type(self).model_fields.items()
            if not f.exclude
        }


@cache
def _json_fields(cls: type[Row]) -> tuple[str, ...]:
    """The fields of `cls` that hold a JSON column (`JSONText`, `NullJSONText`)."""
    return tuple(
        name
        for name, f in cls.model_fields.items()
        if any(getattr(m, "func", None) is _json_object for m in f.metadata)
    )


def table(model: type[Table]) -> CoreTable:
    """The Core table of a `table=True` model (what the store's queries use)."""
    return model.__table__  # type: ignore[attr-defined,no-any-return]


def _proposal_key() -> Any:
    return Field(foreign_key="proposal.id", primary_key=True)


# ---- the store's rows and tables --------------------------------------------------------


class ProposalRecord(Row):
    """A proposal as stored (docs/design.md section 4). Datetimes are aware UTC."""

    id: int = Field(primary_key=True)
    kind: Str
    status: Str
    request: JSONText
    evidence: JSONText
    request_hash: Str
    reason: Str
    drive_spec: Str
    run_id: Str
    client_name: NullStr
    client_version: NullStr
    label: NullStr
    host: Str
    created_at: When
    expires_at: When
    resolved_at: NullWhen
    resolved_by: NullStr
    attempt: int = Field(default=0)
    lease_holder: NullStr
    lease_expires_at: NullWhen
    summary: NullJSONText
    host_id: NullStr
    """The stable id of the host it was made on (`placet.store.host`); None when made
    before placet recorded it (migration `proposal_host_id`)."""

    def is_expired(self, now: datetime) -> bool:
        """True when a pending proposal's TTL has passed at `now` (swept or not)."""
        return self.expires_at <= now


class Proposal(ProposalRecord, table=True):
    """One proposal (docs/design.md section 4): an inert, TTL-bounded request for a write."""

    __tablename__ = "proposal"
    __table_args__ = (
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


class OpResultRecord(Row):
    """One journaled op of one execution attempt (`id`, the row's, not in its JSON; None
    for a result not yet stored)."""

    id: int | None = Field(default=None, primary_key=True, exclude=True)
    proposal_id: ProposalId
    attempt: int
    op_index: int
    op: JSONText
    outcome: Str  # done | already_done | stale | failed | skipped
    detail: JSONText
    recorded_at: When


class OpResult(OpResultRecord, table=True):
    """The journal of one op of one execution attempt; written as each op completes."""

    __tablename__ = "op_result"
    __table_args__ = (
        UniqueConstraint("proposal_id", "attempt", "op_index", name="ux_op_result_op"),
    )


class ProposalOp(Table, table=True):
    """One op of a sync proposal stored by reference (migration `proposal_ops_by_reference`,
    docs/decisions/0023-ops-by-reference.md): `op` is its canonical JSON, `op_index` its
    `index`. Written once, with the proposal row, and never changed; the request's
    `ops_digest` binds them all."""

    __tablename__ = "proposal_op"

    proposal_id: int = _proposal_key()
    op_index: int = Field(primary_key=True)
    op: Str


class ProposalPreview(Table, table=True):
    """The first bytes of a file one op writes (`side` ``new``) or replaces (``current``),
    captured when the proposal was made (migration `proposal_previews`, `placet.preview`;
    read as `placet.store.previews.StoredPreview`): `size` is the whole file's, `binding`
    how the bytes were tied to the evidence's digest. Written once, after the proposal."""

    __tablename__ = "proposal_preview"

    proposal_id: int = _proposal_key()
    op_index: int = Field(primary_key=True)
    side: StrKey
    size: int | None = None
    binding: Str
    content: bytes
    captured_at: When


class AuditRecord(Row):
    """One audit event as stored: its `id` in the chain, the transition's facts (who, from
    which status, None at creation, to which, when), its `detail`, and the chain's links
    (`prev_hash`, `hash`; `placet.store.audit`)."""

    id: int = Field(primary_key=True)
    proposal_id: ProposalId
    request_hash: Str
    actor: Str
    from_status: NullStr
    to_status: Str
    at: When
    detail: JSONText
    prev_hash: Str
    hash: Str


class AuditEvent(AuditRecord, table=True):
    """One link of the audit chain: a transition (or creation, `from_status` NULL)."""

    __tablename__ = "audit_event"
    __table_args__ = (
        Index("ix_audit_event_proposal", "proposal_id"),
        Index("ix_audit_event_at", "at"),
    )


class PendingTally(Table, table=True):
    """Pending proposals per scope ('total', 'run:<run_id>'), kept by triggers (migration 2).

    An upper bound on live pending proposals (unswept expired ones still count), used as
    the cheap first check of the caps."""

    __tablename__ = "pending_tally"

    scope: StrKey
    n: int


class SpentSignature(Row):
    """A passkey-signed approval that approved a run, written with that run's claim and
    read by every host sharing the database (migration `spent_signatures`): `signature` is
    `placet.store.signatures.signature_id` of its nonce, `claim_hash` the hash of the
    claim's audit event, `host_id` the host that claimed it. One signature approves one
    run."""

    signature: StrKey
    proposal_id: ProposalId
    claim_hash: Str
    host_id: NullStr
    spent_at: When


class SpentSignatureRow(SpentSignature, table=True):
    """The table of `SpentSignature`s."""

    __tablename__ = "spent_signature"


class SchemaMigration(Table, table=True):
    """One applied migration: `version` is its 1-based position in the ordered list."""

    __tablename__ = "schema_migration"

    version: int = Field(primary_key=True, sa_column_kwargs={"autoincrement": False})
    name: Str
    applied_at: When


class RuleUse(Table, table=True):
    """One proposal a standing rule approved (`placet.rules.ledger`): counted for the rule's
    `max_per_hour` in the same transaction that adds it, and joined with the audit events
    to tell a rule whose approved run failed (paused)."""

    __tablename__ = "rule_use"
    __table_args__ = (
        UniqueConstraint("proposal_id", name="ux_rule_use_proposal"),
        Index("ix_rule_use_rule_at", "rule_id", "at"),
    )

    id: int = Field(primary_key=True)
    rule_id: Str
    proposal_id: ProposalId
    rules_sha256: Str
    at: When


class RulesSignature(Table, table=True):
    """The owner's passkey signature over one rules file (signed mode, `placet rules
    sign`): the file's exact bytes, their SHA-256, and the assertion over
    `rules_challenge` of that hash (`placet.rules.signing`)."""

    __tablename__ = "rules_signature"

    rules_sha256: StrKey
    rules: bytes
    assertion: Str
    passkey_id: int
    signed_at: When


class RuleResume(Table, table=True):
    """When the owner last resumed a rule (`placet rules resume`): a failed run of a
    proposal the rule approved before that no longer pauses it."""

    __tablename__ = "rule_resume"

    rule_id: StrKey
    resumed_at: When


PROPOSAL = table(Proposal)
OP_RESULT = table(OpResult)
PROPOSAL_PREVIEW = table(ProposalPreview)
AUDIT_EVENT = table(AuditEvent)
SPENT_SIGNATURE = table(SpentSignatureRow)
SCHEMA_MIGRATION = table(SchemaMigration)
RULE_USE = table(RuleUse)
RULES_SIGNATURE = table(RulesSignature)
RULE_RESUME = table(RuleResume)
