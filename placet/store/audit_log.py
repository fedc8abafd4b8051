"""The `AuditLog` part of the store: reading the audit chain and verifying it.

The chain itself (hashing, the anchor file, the walk) is `placet.store.audit`'s; this
part reads events as typed rows and runs the walk with the owner's pins, so
`placet audit --verify` checks every signed approval's passkey too.
"""

from __future__ import annotations

import builtins
from datetime import datetime

from sqlalchemy import select

from placet.config.pins import Pins, read_pins
from placet.store.audit import verify_chain
from placet.store.base import Database
from placet.store.db import as_utc
from placet.store.models import AUDIT_EVENT, AuditRecord
from placet.store.records import AuditVerification


class AuditLog:
    """Reading and verifying the audit chain (a part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def audit_events(
        self,
        *,
        since: datetime | None = None,
        proposal_id: int | None = None,
        after_id: int | None = None,
        limit: int | None = None,
    ) -> builtins.list[AuditRecord]:
        """Audit events in chain order, filtered by time (`at >= since`), proposal, id."""
        A = AUDIT_EVENT.c
        q = select(AUDIT_EVENT).order_by(A.id)
        if since is not None:
            q = q.where(A.at >= as_utc(since))
        if proposal_id is not None:
            q = q.where(A.proposal_id == proposal_id)
        if after_id is not None:
            q = q.where(A.id > after_id)
        if limit is not None:
            q = q.limit(limit)
        rows = self.db.read("reading the audit log", lambda c: c.execute(q).all())
        return [AuditRecord.stored(r._mapping) for r in rows]

    def verify_audit(self) -> AuditVerification:
        """Walk the chain and the anchor file (`placet.store.audit.verify_chain`), and check
        every signed approval's passkey against the owner's pins (`placet.config.pins`).

        Raises:
            ConfigError: the pins file is malformed (read only if an approval is signed).
        """

        def pins() -> Pins:
            return read_pins(self.db.settings.config_file)

        return self.db.read(
            "verifying the audit log", lambda c: verify_chain(c, self.db.anchor_path, pins)
        )
