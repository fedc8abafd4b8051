"""Creating proposals and the owner's and agent's decisions on them (docs/design.md section 4).

Creation is idempotent (one pending proposal per kind + request hash + drive, backed by a
partial unique index; the same request for another drive is another proposal) and capped
per `placet serve` session and in total; the caps count only live (unexpired) pending
proposals, so an agent is never blocked by proposals that are merely unswept.
The decisions: accept (pending -> approved only while `expires_at > now`; failed or
interrupted -> approved without an expiry check, docs/design.md section 9), discard, withdraw
(only the proposing session) and extend (never past `max_extend_hours` from creation).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from placet.config import approvals_mode
from placet.errors import (
    Expired,
    LimitExceeded,
    PlacetError,
    PolicyRefused,
    StoreError,
    UsageError,
    WrongState,
    one_or_set,
)
from placet.schema import by_reference, canonical_json, is_by_reference, request_hash
from placet.store import lifecycle as lc
from placet.store.audit import append_event, event_content_parts
from placet.store.base import Database, Heads, P, now_or_utcnow, proposal_of_row
from placet.store.db import RawDB, driver_integrity_errors, dt_text, raw
from placet.store.models import PROPOSAL, ProposalRecord
from placet.store.previews import StoredPreview, insert_previews
from placet.store.records import EventFacts, LeaseHolder

log = logging.getLogger(__name__)

# Creation is the hot path (docs/design.md section 8 asks >= 1,000/s from 4 processes): when no
# duplicate is pending, its whole transaction runs on a pooled driver connection
# (`_write_raw`), as plain SQL over the columns of `placet.store.models.PROPOSAL`
# (datetimes in `UTCDateTime`'s text form, `dt_text`): SQLAlchemy's per-statement and
# per-transaction overhead was most of the time spent holding the write lock. The rest of
# the store, and creation's rare paths, use Core. `bench/ingest.py` is the benchmark that
# keeps this second write path.
_SAME_PENDING = select(PROPOSAL).where(
    P.kind == bindparam("kind"),
    P.request_hash == bindparam("rh"),
    P.drive_spec == bindparam("drive"),
    P.status == lc.PENDING,
)
_COLUMNS = (
    "kind", "status", "request", "evidence", "request_hash", "reason", "drive_spec", "run_id",
    "client_name", "client_version", "label", "host", "created_at", "expires_at", "attempt",
    "host_id",
)  # fmt: skip
_INSERT_SQL = (
    "INSERT INTO proposal (kind, status, request, evidence, request_hash, reason, drive_spec, "
    "run_id, client_name, client_version, label, host, created_at, expires_at, attempt, "
    "host_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id"
)
_SAME_SQL = (
    "SELECT id FROM proposal WHERE kind = ? AND request_hash = ? AND drive_spec = ? "
    "AND status = 'pending'"
)
_OP_INSERT_SQL = "INSERT INTO proposal_op (proposal_id, op_index, op) VALUES (?, ?, ?)"
_OP_INDEXES_SQL = "SELECT op_index FROM proposal_op WHERE proposal_id = ? ORDER BY op_index"
_TALLY_SQL = "SELECT scope, n FROM pending_tally WHERE scope IN (?, ?)"
_COUNT_RUN_SQL = (
    "SELECT count(*) FROM (SELECT 1 FROM proposal WHERE run_id = ? AND status = 'pending' "
    "AND expires_at > ? LIMIT ?) AS live"
)
_COUNT_ALL_SQL = (
    "SELECT count(*) FROM (SELECT 1 FROM proposal WHERE status = 'pending' "
    "AND expires_at > ? LIMIT ?) AS live"
)

# On PostgreSQL a creation with no op rows is one call of the server-side function the
# migrations create (`placet_create_proposal`, `placet.store.migrations`), its own
# transaction in one round trip (`placet.store.db.call_statement`): the write lock is held
# only while the server works. No row back: a pending duplicate, a tally at a cap, or a
# session not at READ COMMITTED; the general path below then decides, as after
# `_SAME_SQL`. Its audit event is hashed by the server from `event_content_parts`.
_CREATE_PG_SQL = (
    "SELECT made_proposal_id, made_event_id, made_hash FROM placet_create_proposal("
    "?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


_BIGINT_MAX = (1 << 63) - 1
"""The largest cap the creation function takes (BIGINT); no tally reaches it, so a
larger cap (the config bounds caps from below only) is passed as this one."""


def _refuse_unstorable(fields: dict[str, str | None]) -> None:
    """Refuse text that a backend cannot store as given: U+0000 (PostgreSQL's text cannot
    hold it; SQLite would) or a lone surrogate (no UTF-8 holds one), so both backends
    give the same typed refusal and write nothing.

    Raises:
        UsageError: details `field` (the first offending field) and `character`.
    """
    for field, value in fields.items():
        if value is None:
            continue
        if "\x00" in value:
            raise UsageError(
                f"cannot create a proposal: its {field} holds a NUL character (U+0000) at "
                f"{value.index(chr(0))}, which the database cannot store; send it without one",
                details={"field": field, "character": "\\x00"},
            )
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise UsageError(
                f"cannot create a proposal: its {field} holds an unpaired UTF-16 surrogate "
                f"(\\u{ord(value[e.start]):04x}) at {e.start}, which is not valid Unicode; "
                "send the text as UTF-8 or as a proper surrogate pair",
                details={"field": field, "character": f"\\u{ord(value[e.start]):04x}"},
            ) from None


def _sql_value(v: object) -> object:
    return dt_text(v) if isinstance(v, datetime) else v


_NEW_UNRESOLVED: dict[str, Any] = dict.fromkeys(
    ("resolved_at", "resolved_by", "lease_holder", "lease_expires_at", "summary")
)
"""The columns a new proposal row leaves NULL."""


def _selection(
    pid: int, kind: str, request_json: str, skip: object, op_indexes: Callable[[], set[int]]
) -> dict[str, Any]:
    """The approval's `skip_ops` entry: {} for a non-sync, the sorted unticked op indexes
    for a sync (see `Decisions.accept`). `op_indexes` reads a by-reference sync's op
    indexes (only called when something is unticked)."""
    if kind != "sync":
        if skip:
            raise UsageError(
                f"cannot accept proposal {pid} with ops unticked: it is a {kind} proposal "
                "with a single op; accept or discard it whole",
                code="skip_invalid",
                details={"proposal_id": pid, "kind": kind},
            )
        return {}
    items = [] if skip is None else skip
    if not isinstance(items, list | tuple) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in items
    ):
        raise UsageError(
            f"cannot accept proposal {pid}: skip_ops must be a list of op indexes, got "
            f"{type(items).__name__}",
            code="skip_invalid",
            details={"proposal_id": pid},
        )
    if not items:
        return {"skip_ops": []}
    request = json.loads(request_json)
    if is_by_reference(kind, request):
        indexes = op_indexes()
    else:
        ops = request.get("ops")
        indexes = {
            o["index"]
            for o in (ops if isinstance(ops, list) else [])
            if isinstance(o, dict) and isinstance(o.get("index"), int)
        }
    unticked = set(items)
    unknown = sorted(unticked - indexes)
    if unknown:
        raise UsageError(
            f"cannot accept proposal {pid} with op(s) {unknown} unticked: it has no such "
            f"op (its ops are numbered {min(indexes, default=0)}..{max(indexes, default=0)}); "
            "check the op numbers shown with it",
            code="skip_invalid",
            details={"proposal_id": pid, "unknown": unknown},
        )
    if indexes and unticked >= indexes:
        raise UsageError(
            f"cannot accept proposal {pid} with every op unticked: nothing would run; "
            "discard it instead",
            code="nothing_selected",
            details={"proposal_id": pid},
        )
    return {"skip_ops": sorted(unticked)}


def _signed_rule(detail: Mapping[str, Any]) -> bool:
    """An approval by a standing rule that carries the owner's signature of the rules
    (`placet.rules.signing`): the executor checks it before anything runs."""
    rule = detail.get("rule")
    return (
        detail.get("via") == "rule"
        and isinstance(rule, dict)
        and isinstance(rule.get("signature"), dict)
    )


def signature_required(pid: int, config_file: object) -> PolicyRefused:
    """The refusal of an approval without a passkey signature in signed mode."""
    return PolicyRefused(
        f'refusing to accept proposal {pid} here: approvals = "signed" in {config_file}, '
        "so every approval needs your passkey; accept it in `placet web` (run `placet web` "
        "and open the page it prints)",
        code="signature_required",
        details={"proposal_id": pid, "config_key": "approvals"},
    )


def changed_since_shown(
    pid: int, request_hash: str, shown: object, *, verb: str = "accept"
) -> PolicyRefused:
    """The ``not_approved_as_shown`` refusal of deciding proposal `pid` whose request hash
    is now `request_hash` while the owner was shown `shown` (docs/design.md section 9,
    "Accept binds to what was shown"): one code for this cause in every shell."""
    return PolicyRefused(
        f"refusing to {verb} proposal {pid}: it changed after it was shown "
        f"(request hash {request_hash[:16]}..., shown {str(shown)[:16]}...); "
        f"nothing was {verb}ed: review it again",
        code="not_approved_as_shown",
        details={"proposal_id": pid, "shown": shown, "now": request_hash},
    )


def moved_since_shown(pid: int) -> PolicyRefused:
    """The ``not_approved_as_shown`` refusal of accepting proposal `pid` whose host or
    drive is no longer the one its passkey challenge bound (an edit of the database moved
    it to another host's drive after the page showed it)."""
    return PolicyRefused(
        f"refusing to accept proposal {pid}: its host or drive changed after it was shown "
        "(the database was edited); nothing was approved: review it again",
        code="not_approved_as_shown",
        details={"proposal_id": pid},
    )


def _decided_since(pid: int, status: str, shown: str | None) -> None:
    """Refuse (``wrong_state``) a proposal whose status is no longer `shown`, the status
    the owner saw: someone decided it since (None: the caller showed no status)."""
    if shown is not None and status != shown:
        raise WrongState(
            f"cannot decide proposal {pid} as shown: it was {shown} when shown and is "
            f"{status} now (decided since); review it again",
            details={"proposal_id": pid, "status": status, "shown_status": shown},
        )


class Decisions:
    """Creation, accept, discard, withdraw, extend (the ``decisions`` part of `Store`)."""

    def __init__(self, db: Database) -> None:
        self.db = db

    def create_proposal(
        self,
        *,
        kind: str,
        request: dict[str, Any],
        evidence: dict[str, Any],
        reason: str,
        drive_spec: str,
        run_id: str,
        client_name: str | None = None,
        client_version: str | None = None,
        label: str | None = None,
        ttl_seconds: int,
        now: datetime | None = None,
        previews: Sequence[StoredPreview] = (),
    ) -> tuple[ProposalRecord, bool]:
        """Persist a pending proposal; returns (record, created).

        `previews`: content previews of its ops (`placet.preview`), stored in the same
        transaction (on PostgreSQL, right after the one statement that creates it), cut
        to `preview_proposal_bytes` (`placet.store.previews`); none is stored when an
        identical proposal was pending.

        Idempotent: while a proposal with the same kind, request hash
        (`placet.schema.request_hash`) and `drive_spec` is pending and unexpired, that
        one is returned with created=False; the same request for another drive is a new
        proposal (accepting one must never write to a drive the agent did not name). One
        whose TTL passed unswept is expired here first.

        Raises:
            UsageError: ttl_seconds is not in 1..max_ttl_minutes*60, or a text holds
                what a backend cannot store (U+0000 outside the JSON, a lone surrogate).
            LimitExceeded: `pending_per_session` (per run_id) or `pending_total` reached.
        """
        now = now_or_utcnow(now)
        max_ttl = self.db.settings.max_ttl_minutes * 60
        if not 0 < ttl_seconds <= max_ttl:
            raise UsageError(
                f"cannot create a proposal with a TTL of {ttl_seconds} s: it must be between "
                f"1 s and {max_ttl} s (max_ttl_minutes)",
                details={"ttl_seconds": ttl_seconds, "max_seconds": max_ttl},
            )
        _refuse_unstorable(
            {"kind": kind, "reason": reason, "drive_spec": drive_spec, "run_id": run_id,
             "client_name": client_name, "client_version": client_version, "label": label}
        )  # fmt: skip
        given = request
        op_rows: list[tuple[int, str]] = []
        try:  # both encode the texts they hash to UTF-8, which a lone surrogate fails
            split = by_reference(request)
            if split is not None:
                request, op_rows = split
            rh = request_hash(kind, request, evidence)
        except UnicodeEncodeError:
            _refuse_unstorable(
                {"request": canonical_json(given), "evidence": canonical_json(evidence)}
            )
            raise  # pragma: no cover - one of the two was refused above
        expires_at = now + timedelta(seconds=ttl_seconds)
        values: dict[str, Any] = {
            "kind": kind,
            "status": lc.PENDING,
            "request": canonical_json(request),
            "evidence": canonical_json(evidence),
            "request_hash": rh,
            "reason": reason,
            "drive_spec": drive_spec,
            "run_id": run_id,
            "client_name": client_name,
            "client_version": client_version,
            "label": label,
            "host": self.db.host,
            "host_id": self.db.host_id,
            "created_at": now,
            "expires_at": expires_at,
            "attempt": 0,
        }
        actor = lc.agent_actor(run_id)
        same_key = {"kind": kind, "rh": rh, "drive": drive_spec}

        event_detail = {
            "kind": kind,
            "expires_at": expires_at.isoformat(),
            "client_name": client_name,
            "client_version": client_version,
        }

        def insert(db: RawDB, heads: Heads) -> tuple[ProposalRecord, bool]:
            self._check_caps(db, run_id, now)
            new_id = int(
                db.execute(_INSERT_SQL, [_sql_value(values[c]) for c in _COLUMNS]).fetchone()[0]
            )
            if op_rows:  # one statement for every op, in the proposal's transaction
                db.executemany(_OP_INSERT_SQL, ((new_id, i, t) for i, t in op_rows))
            if previews:
                insert_previews(db, new_id, previews, self.db.settings.preview_proposal_bytes)
            heads.append(
                append_event(
                    db, EventFacts(new_id, rh, actor, None, lc.PENDING, now), detail=event_detail
                )
            )
            return ProposalRecord.of({**values, **_NEW_UNRESOLVED, "id": new_id}), True

        def fast(db: RawDB, heads: Heads) -> tuple[ProposalRecord, bool] | None:
            if db.execute(_SAME_SQL, (kind, rh, drive_spec)).fetchone() is not None:
                return None  # a pending duplicate: the general path below decides
            return insert(db, heads)

        def general(conn: Connection, heads: Heads) -> tuple[ProposalRecord, bool]:
            same = conn.execute(_SAME_PENDING, same_key).first()
            if same is not None:
                if same.expires_at > now:
                    return proposal_of_row(same), False
                self.db.expire_row(
                    conn,
                    heads,
                    same,
                    now,
                    {"why": "ttl passed; superseded by an identical proposal"},
                )
            return insert(raw(conn), heads)

        def one_statement() -> tuple[ProposalRecord, bool] | None:
            detail_json = canonical_json(event_detail)
            parts = event_content_parts(
                request_hash=rh,
                actor=actor,
                from_status=None,
                to_status=lc.PENDING,
                at=now,
                detail_json=detail_json,
            )
            params = [
                *(_sql_value(values[c]) for c in _COLUMNS),
                min(self.db.settings.pending_total, _BIGINT_MAX),
                min(self.db.settings.pending_per_session, _BIGINT_MAX),
                actor, detail_json, *(p.encode("utf-8") for p in parts),
            ]  # fmt: skip
            row = self.db.write_statement(
                what, _CREATE_PG_SQL, params, lambda r: [(int(r[1]), str(r[2]))]
            )
            if row is None:
                return None  # a pending duplicate or a tally at a cap: `general` decides
            return ProposalRecord.of({**values, **_NEW_UNRESOLVED, "id": int(row[0])}), True

        what = f"creating a {kind} proposal"
        try:
            if self.db.postgres and not op_rows:
                made = one_statement()
                if made is None:
                    return self.db.write(what, general)
                if previews:  # after the one statement, which keeps the lock off round trips
                    self._previews_after(made[0].id, previews)
                return made
            return self.db.write_raw(what, fast) or self.db.write(what, general)
        except StoreError as e:
            # The partial unique index is the backstop; with BEGIN IMMEDIATE the SELECT
            # above already serialises creators, so this is belt and braces.
            if isinstance(e.__cause__, (*driver_integrity_errors(), IntegrityError)):
                found = self.db.read(
                    "reading a proposal",
                    lambda c: c.execute(_SAME_PENDING, same_key).first(),
                )
                if found is not None:
                    return proposal_of_row(found), False
            raise

    def _previews_after(self, pid: int, previews: Sequence[StoredPreview]) -> None:
        """Store the previews of proposal `pid`, just made, in their own transaction; a
        failure leaves it without them (they are then read when opened, `placet.preview`)
        and is logged, never raised: the proposal exists."""
        budget = self.db.settings.preview_proposal_bytes
        try:
            self.db.write_raw(
                f"storing the previews of proposal {pid}",
                lambda db, _: insert_previews(db, pid, previews, budget),
            )
        except StoreError as e:
            log.warning("the previews of proposal %d were not stored: %s", pid, e.message)

    def _check_caps(self, db: RawDB, run_id: str, now: datetime) -> None:
        caps = {
            "pending_per_session": self.db.settings.pending_per_session,
            "pending_total": self.db.settings.pending_total,
        }
        tally = dict(db.execute(_TALLY_SQL, ("total", f"run:{run_id}")).fetchall())
        upper = {"pending_per_session": tally.get(f"run:{run_id}", 0),
                 "pending_total": tally.get("total", 0)}  # fmt: skip
        for name, cap in caps.items():
            if upper[name] < cap:
                continue  # the tally bounds the live count from above: under the cap
            # At the cap by the tally: count the live (unexpired) ones exactly, reading at
            # most `cap` index entries.
            t = dt_text(now)
            n = (
                db.execute(_COUNT_RUN_SQL, (run_id, t, cap)).fetchone()[0]
                if name == "pending_per_session"
                else db.execute(_COUNT_ALL_SQL, (t, cap)).fetchone()[0]
            )
            if n >= cap:
                scope = (
                    f"this placet serve session (run {run_id})"
                    if name == "pending_per_session"
                    else "all placet serve sessions together"
                )  # fmt: skip
                raise LimitExceeded(
                    f"cannot create a proposal: {scope} already has {n} pending proposals, "
                    f"the cap ({name} = {cap}); wait for the owner to decide, or withdraw some",
                    details={"cap": name, "limit": cap, "pending": n, "run_id": run_id},
                    retryable=True,
                )

    def accept(
        self,
        pid: int,
        *,
        actor: str = lc.OWNER,
        now: datetime | None = None,
        detail: dict[str, Any] | None = None,
        status: str | None = None,
    ) -> ProposalRecord:
        """pending -> approved while `expires_at > now`; failed | interrupted -> approved.

        The event records the request hash the decision binds to, plus `detail` (e.g.
        whether a terminal was attached). For a sync, `detail["skip_ops"]` lists the op
        indexes the owner unticked; the event always records it for a sync (sorted,
        `[]` when every op was kept), and the executor journals those ops `skipped`
        without touching anything for them (docs/design.md section 9, "Op results").

        `detail["request_hash"]`, when given, is the hash the owner was shown: a proposal
        that no longer has it is refused and nothing is approved. `status`, when given,
        is the status the owner was shown: a proposal decided since (another status) is
        refused (``wrong_state``).

        The event records the approving process as ``detail["process"]`` (host name, pid,
        start time, as a lease holder, and this store's host id): a process that approves
        a proposal of its own host runs it itself, and that host's executor loops leave
        it to that process while it lives (`placet.executor.service`).

        With ``approvals = "signed"`` (`Settings.approvals`) an approval without a passkey
        assertion (`detail["passkey"]`, made by `placet web`) is refused
        (``signature_required``); the executor verifies the signature itself. The event
        of an approval made in signed mode records ``"approvals": "signed"``.

        The owner's decisions go through `placet.decisions`, which checks what the store
        cannot (the binding, the selection) before it calls `accept_set`.

        Raises NotFound, Expired, WrongState; PolicyRefused `not_approved_as_shown`,
        `signature_required`;
        UsageError `skip_invalid` (skip_ops on
        another kind, not a list of integers, or naming an op the request does not
        have) or `nothing_selected` (every op unticked: discard it instead).
        """
        shown = {} if status is None else {pid: status}
        return self.accept_set({pid: detail or {}}, actor=actor, now=now, shown_status=shown)[0]

    def accept_set(
        self,
        details: Mapping[int, Mapping[str, Any]],
        *,
        actor: str = lc.OWNER,
        now: datetime | None = None,
        shown_status: Mapping[int, str] | None = None,
    ) -> list[ProposalRecord]:
        """`accept` every proposal of `details` (proposal id -> its approval detail) in
        one transaction: all of them, or none. `shown_status`: proposal id -> the status
        the owner was shown.

        Raises:
            the proposal's own error (see `accept`) for a set of one; SetRefused
            (``set_refused``) listing each refused proposal otherwise.
        """
        now = now_or_utcnow(now)
        signed = approvals_mode(self.db.settings) == "signed"  # config.toml as it is now
        process = {**LeaseHolder.current().to_dict(), "host_id": self.db.host_id}
        statuses = shown_status or {}

        def one(conn: Connection, heads: Heads, pid: int, detail: Mapping[str, Any]) -> Any:
            given = dict(detail)
            skip = given.pop("skip_ops", None)
            if signed:
                if not (isinstance(given.get("passkey"), dict) or _signed_rule(given)):
                    raise signature_required(pid, self.db.settings.config_file)
                given["approvals"] = "signed"  # the audit shows the mode (`verify_chain`)
            cur = self.db.row(conn, pid)
            _decided_since(pid, cur.status, statuses.get(pid))
            selection = _selection(
                pid,
                cur.kind,
                cur.request,
                skip,
                lambda: {int(i) for (i,) in raw(conn).execute(_OP_INDEXES_SQL, (pid,))},
            )
            shown = given.get("request_hash")
            if shown is not None and shown != cur.request_hash:
                # The decision binds what the owner was shown, never what the row holds
                # now (docs/design.md section 9, "Accept binds to what was shown").
                raise changed_since_shown(pid, cur.request_hash, shown)
            guard: tuple[Any, ...] = (P.request_hash == cur.request_hash,)
            if cur.status == lc.PENDING:
                if cur.expires_at <= now:
                    raise Expired(
                        f"cannot accept proposal {pid}: it expired at "
                        f"{cur.expires_at.isoformat()}; ask the agent to propose again",
                        details={"proposal_id": pid, "expires_at": cur.expires_at.isoformat()},
                    )
                guard = (*guard, P.expires_at > now)
            return self.db.cas(
                conn,
                heads,
                cur,
                transition="accept",
                actor=actor,
                now=now,
                guard=guard,
                values={"resolved_at": now, "resolved_by": actor},
                detail={
                    **given,
                    **selection,
                    "request_hash": cur.request_hash,
                    "process": process,
                },
            )

        return self._decide_set("accept", details, one)

    def _decide_set(
        self,
        verb: str,
        items: Mapping[int, Any],
        one: Callable[[Connection, Heads, int, Any], ProposalRecord],
    ) -> list[ProposalRecord]:
        """`one(conn, heads, id, item)` for every item, in one transaction: committed
        when every one passed, else rolled back whole (`one_or_set` names each refusal)."""
        if not items:
            raise UsageError(f"cannot {verb} an empty set of proposals: name at least one")

        def tx(conn: Connection, heads: Heads) -> list[ProposalRecord]:
            done: list[ProposalRecord] = []
            refused: list[tuple[int, PlacetError]] = []
            for pid, item in items.items():
                try:
                    done.append(one(conn, heads, pid, item))
                except PlacetError as e:
                    refused.append((pid, e))
            if refused:  # raised inside the transaction: it rolls back, nothing is anchored
                raise one_or_set(verb, len(items), refused)
            return done

        ids = ", ".join(str(i) for i in items)
        return self.db.write(f"{verb}ing proposal{'s' if len(items) > 1 else ''} {ids}", tx)

    def discard(
        self,
        pid: int,
        *,
        actor: str = lc.OWNER,
        reason: str | None = None,
        now: datetime | None = None,
        request_hash: str | None = None,
    ) -> ProposalRecord:
        """pending -> discarded (expired-but-unswept included). `request_hash`, when
        given, is the hash the owner was shown (see `accept`). Raises NotFound,
        WrongState, PolicyRefused ``not_approved_as_shown``."""
        shown = {} if request_hash is None else {pid: request_hash}
        return self.discard_set([pid], actor=actor, reason=reason, now=now, shown_hash=shown)[0]

    def discard_set(
        self,
        pids: Sequence[int],
        *,
        actor: str = lc.OWNER,
        reason: str | None = None,
        now: datetime | None = None,
        shown_hash: Mapping[int, str] | None = None,
    ) -> list[ProposalRecord]:
        """`discard` every proposal of `pids` with one reason, in one transaction: all of
        them, or none (raises as `accept_set`). `shown_hash`: id -> the request hash the
        owner was shown."""
        now = now_or_utcnow(now)
        hashes = shown_hash or {}

        def one(conn: Connection, heads: Heads, pid: int, _: object) -> ProposalRecord:
            cur = self.db.row(conn, pid)
            shown = hashes.get(pid)
            if cur.status == lc.PENDING and shown is not None and shown != cur.request_hash:
                raise changed_since_shown(pid, cur.request_hash, shown, verb="discard")
            return self.db.cas(
                conn,
                heads,
                cur,
                transition="discard",
                actor=actor,
                now=now,
                guard=(P.request_hash == cur.request_hash,),
                values={"resolved_at": now, "resolved_by": actor},
                detail={"reason": reason} if reason else None,
            )

        return self._decide_set("discard", dict.fromkeys(pids), one)

    def withdraw(self, pid: int, *, run_id: str, now: datetime | None = None) -> ProposalRecord:
        """pending -> withdrawn, only by the session (run id) that proposed it.

        Raises NotFound, PolicyRefused (another session's proposal), WrongState.
        """
        now = now_or_utcnow(now)
        actor = lc.agent_actor(run_id)

        def tx(conn: Connection, heads: Heads) -> ProposalRecord:
            cur = self.db.row(conn, pid)
            if cur.run_id != run_id:
                raise PolicyRefused(
                    f"cannot withdraw proposal {pid}: another placet serve session proposed it; "
                    "an agent may withdraw only the proposals of its own session (ask the "
                    "owner to discard it instead)",
                    details={"proposal_id": pid},
                )
            return self.db.cas(
                conn,
                heads,
                cur,
                transition="withdraw",
                actor=actor,
                now=now,
                guard=(P.run_id == run_id,),
                values={"resolved_at": now, "resolved_by": actor},
            )

        return self.db.write(f"withdrawing proposal {pid}", tx)

    def extend(
        self, pid: int, *, minutes: int, actor: str = lc.OWNER, now: datetime | None = None
    ) -> ProposalRecord:
        """Push a pending, unexpired proposal's expiry `minutes` later, never past
        `created_at + max_extend_hours`. Audited as pending -> pending with detail
        {action: "extend", from_expires_at, to_expires_at, minutes, capped}.

        Raises UsageError (minutes < 1), NotFound, WrongState, Expired, LimitExceeded
        (already at the cap).
        """
        return self.extend_set([pid], minutes=minutes, actor=actor, now=now)[0]

    def extend_set(
        self,
        pids: Sequence[int],
        *,
        minutes: int,
        actor: str = lc.OWNER,
        now: datetime | None = None,
    ) -> list[ProposalRecord]:
        """`extend` every proposal of `pids` by `minutes`, in one transaction: all of
        them, or none (raises as `accept_set`)."""
        now = now_or_utcnow(now)
        if minutes < 1:
            which = ", ".join(str(p) for p in pids)
            raise UsageError(f"cannot extend proposal {which} by {minutes} minutes: give 1 or more")

        def one(conn: Connection, heads: Heads, pid: int, _: object) -> ProposalRecord:
            cur = self.db.row(conn, pid)
            if cur.status != lc.PENDING:
                raise self.db.wrong_state(pid, "extend", cur.status)
            if cur.expires_at <= now:
                raise Expired(
                    f"cannot extend proposal {pid}: it already expired at "
                    f"{cur.expires_at.isoformat()}; ask the agent to propose again",
                    details={"proposal_id": pid, "expires_at": cur.expires_at.isoformat()},
                )
            cap = cur.created_at + timedelta(hours=self.db.settings.max_extend_hours)
            wanted = cur.expires_at + timedelta(minutes=minutes)
            new = min(wanted, cap)
            if new <= cur.expires_at:
                raise LimitExceeded(
                    f"cannot extend proposal {pid}: it already expires at the latest allowed "
                    f"time, {self.db.settings.max_extend_hours} h after its creation "
                    f"({cap.isoformat()})",
                    details={"proposal_id": pid, "max_expires_at": cap.isoformat()},
                )
            return self.db.cas(
                conn,
                heads,
                cur,
                transition="extend",
                actor=actor,
                now=now,
                guard=(P.expires_at == cur.expires_at, P.expires_at > now),
                values={"expires_at": new},
                detail={
                    # The status does not change, so the detail names the action.
                    "action": "extend",
                    "from_expires_at": cur.expires_at.isoformat(),
                    "to_expires_at": new.isoformat(),
                    "minutes": minutes,
                    "capped": new < wanted,
                },
            )

        return self._decide_set("extend", dict.fromkeys(pids), one)
