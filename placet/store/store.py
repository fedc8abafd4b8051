"""The `Store`: proposals, their lifecycle, op results and the audit chain, composed of
named parts, one module each.

`Store` holds no logic of its own: each public method is served by one part, and the
table in `Store.__init__` says which. The parts: ``db`` (`placet.store.base.Database`:
connection, transactions, the compare-and-set of every transition), ``proposals``
(`placet.store.proposals`: reads), ``audit`` (`placet.store.audit_log`), ``decisions``
(`placet.store.decisions`: creating, accepting, discarding, extending), ``execution``
(`placet.store.execution`: claim, lease, op journal, finish), ``sweeper``
(`placet.store.sweeper`), ``keys`` (`placet.store.passkeys`: passkeys, sessions,
pairing links) and ``previews`` (`placet.store.previews`). The rules of which
transition exists and who may make it are `placet.store.lifecycle`'s.
"""

from __future__ import annotations

from typing import Self

from sqlalchemy.engine import Engine

from placet.config import Settings
from placet.store.audit_log import AuditLog
from placet.store.base import Database
from placet.store.decisions import Decisions
from placet.store.execution import Execution
from placet.store.passkeys import Passkeys
from placet.store.previews import Previews
from placet.store.proposals import Proposals
from placet.store.sweeper import Sweeper

__all__ = ["Store"]


class Store:
    """Proposals, op results and the audit chain in one SQLite or PostgreSQL database.

    Build with `placet.store.open_store(settings)`. Safe to share between threads; each
    process opens its own. Besides the domain errors each method names, any database
    failure is a `StoreError` (retryable when the database stayed locked).
    """

    # a misspelt or moved name fails at once instead of setting an attribute nothing reads
    __slots__ = (
        "_read", "_store_error", "_write", "_write_raw", "accept", "accept_set",
        "anchor_path", "approvals_here", "approved_here", "audit", "audit_events",
        "change_waiter", "check_ops", "check_pairing", "checked_ops", "checked_parsed",
        "claim", "close", "close_session", "counter_alarms", "counts", "create_pairing",
        "create_proposal", "data_version", "db", "db_label", "db_path", "decisions",
        "discard", "discard_set", "engine", "execution", "expire", "expire_due", "extend",
        "extend_set", "finish", "get", "heartbeat", "host_id", "iter_ops", "keys", "list",
        "mark_interrupted", "op_count", "op_results", "open_session", "ops",
        "outcome_counts", "passkey_by_credential", "passkeys", "postgres", "preview_bytes",
        "previews", "previews_of", "proposals", "prune_previews", "record_counter_alarm",
        "record_op_result", "record_op_results", "recover_interrupted", "register_passkey",
        "revoke_passkey", "session_passkey", "settings", "spent", "sweep", "sweeper",
        "use_passkey", "verify_audit", "withdraw",
    )  # fmt: skip

    def __init__(self, engine: Engine, settings: Settings) -> None:
        self.db = Database(engine, settings)
        self.proposals = Proposals(self.db)
        self.audit = AuditLog(self.db)
        self.decisions = Decisions(self.db)
        self.execution = Execution(self.db)
        self.previews = Previews(self.db)
        self.sweeper = Sweeper(self.db, self.previews)
        self.keys = Passkeys(self.db)
        # the database and its plumbing (`placet.rules`, `placet.sync` run their own
        # transactions through `_read`, `_write`, `_write_raw`)
        self.engine = self.db.engine
        self.settings = self.db.settings
        self.db_path = self.db.db_path
        self.db_label = self.db.db_label
        self.postgres = self.db.postgres
        self.anchor_path = self.db.anchor_path
        self.host_id = self.db.host_id
        self.close = self.db.close
        self.change_waiter = self.db.change_waiter
        self.data_version = self.db.data_version
        self._read = self.db.read
        self._write = self.db.write
        self._write_raw = self.db.write_raw
        self._store_error = self.db.store_error
        # reads
        self.get = self.proposals.get
        self.list = self.proposals.list
        self.approved_here = self.proposals.approved_here
        self.approvals_here = self.proposals.approvals_here
        self.counts = self.proposals.counts
        self.op_count = self.proposals.op_count
        self.ops = self.proposals.ops
        self.iter_ops = self.proposals.iter_ops
        self.checked_ops = self.proposals.checked_ops
        self.checked_parsed = self.proposals.checked_parsed
        self.check_ops = self.proposals.check_ops
        self.op_results = self.proposals.op_results
        self.outcome_counts = self.proposals.outcome_counts
        self.audit_events = self.audit.audit_events
        self.verify_audit = self.audit.verify_audit
        # the lifecycle's transitions
        self.create_proposal = self.decisions.create_proposal
        self.accept = self.decisions.accept
        self.accept_set = self.decisions.accept_set
        self.discard = self.decisions.discard
        self.discard_set = self.decisions.discard_set
        self.withdraw = self.decisions.withdraw
        self.extend = self.decisions.extend
        self.extend_set = self.decisions.extend_set
        self.claim = self.execution.claim
        self.spent = self.execution.spent
        self.heartbeat = self.execution.heartbeat
        self.record_op_result = self.execution.record_op_result
        self.record_op_results = self.execution.record_op_results
        self.finish = self.execution.finish
        self.mark_interrupted = self.execution.mark_interrupted
        self.expire = self.sweeper.expire
        self.expire_due = self.sweeper.expire_due
        self.recover_interrupted = self.sweeper.recover_interrupted
        self.sweep = self.sweeper.sweep
        # passkeys, web sessions, pairing links; content previews
        self.create_pairing = self.keys.create_pairing
        self.check_pairing = self.keys.check_pairing
        self.register_passkey = self.keys.register_passkey
        self.passkeys = self.keys.passkeys
        self.passkey_by_credential = self.keys.passkey_by_credential
        self.revoke_passkey = self.keys.revoke_passkey
        self.use_passkey = self.keys.use_passkey
        self.record_counter_alarm = self.keys.record_counter_alarm
        self.counter_alarms = self.keys.counter_alarms
        self.open_session = self.keys.open_session
        self.session_passkey = self.keys.session_passkey
        self.close_session = self.keys.close_session
        self.previews_of = self.previews.previews_of
        self.preview_bytes = self.previews.preview_bytes
        self.prune_previews = self.previews.prune_previews

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Store({self.db_label!r})"
