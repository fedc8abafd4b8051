"""The audit chain: how an event is hashed and appended, the anchor file, and verification.

Each event stores `prev_hash` (64 zeros for the first) and `hash = sha256(prev_hash +
content)`, `content` being the canonical JSON of its id, proposal id, request hash,
actor, from, to, time and exact detail text: editing, removing or reordering any event
breaks the chain there. Appends happen inside the transition's write transaction, so ids
are dense and the head read is the real head. After the commit the store appends
`"<id> <hash>\n"` to an anchor file outside the database, which catches a cut tail; each
anchor line is checked against the event with its id (docs/design.md section 9, "Accept
binds to what was shown"; docs/decisions/0018-audit.md; limits in docs/security.md)."""

from __future__ import annotations

import hashlib
import json
import logging
import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placet.config.pins import Pins
from placet.schema import canonical_json, ops_digest, request_hash
from placet.store import lifecycle as lc
from placet.store.db import RawDB, dt_text, qmark, raw
from placet.store.models import AUDIT_EVENT, PROPOSAL
from placet.store.records import AuditVerification, EventFacts
from placet.store.signatures import (
    LEGACY_SIGNED,
    accept_fields,
    check_signed_approval,
    check_signed_set,
    set_entry,
)

log = logging.getLogger(__name__)

GENESIS_HASH = "0" * 64

_HEAD_SQL = "SELECT id, hash FROM audit_event ORDER BY id DESC LIMIT 1"
_INSERT_SQL = (
    "INSERT INTO audit_event (id, proposal_id, request_hash, actor, from_status, to_status, "
    "at, detail, prev_hash, hash) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)


def event_content(*, event_id: int, facts: EventFacts, detail_json: str) -> str:
    """The canonical text an event's hash covers."""
    return canonical_json(
        {
            "id": event_id,
            "proposal_id": facts.proposal_id,
            "request_hash": facts.request_hash,
            "actor": facts.actor,
            "from": facts.from_status,
            "to": facts.to_status,
            "at": facts.at.isoformat(),
            "detail": detail_json,
        }
    )


def event_content_parts(
    *,
    request_hash: str,
    actor: str,
    from_status: str | None,
    to_status: str,
    at: datetime,
    detail_json: str,
) -> tuple[str, str, str]:
    """`event_content` split around the two numbers a writer learns only under the write
    lock, for a statement that hashes the event on the server: the content is
    `before_id + str(event_id) + before_proposal_id + str(proposal_id) + rest`. The keys
    are sorted (actor, at, detail, from, id, proposal_id, request_hash, to), so the two
    numbers sit between the first four and the last two."""
    first = canonical_json(
        {"actor": actor, "at": at.isoformat(), "detail": detail_json, "from": from_status}
    )
    last = canonical_json({"request_hash": request_hash, "to": to_status})
    return first[:-1] + ',"id":', ',"proposal_id":', "," + last[1:]


def chain_hash(prev_hash: str, content: str) -> str:
    """SHA-256 hex of the previous hash followed by this event's content."""
    return hashlib.sha256((prev_hash + content).encode("utf-8")).hexdigest()


def append_event(
    conn: Connection | RawDB, facts: EventFacts, *, detail: dict[str, Any] | None
) -> tuple[int, str]:
    """Insert the next event of the chain; returns (event id, hash).

    Must run inside a `BEGIN IMMEDIATE` transaction (the head must not move under us).
    """
    # Hot path: every transition appends, so this runs on the driver connection directly.
    db = conn if isinstance(conn, RawDB) else raw(conn)
    head = db.execute(_HEAD_SQL).fetchone()
    prev_id, prev_hash = (int(head[0]), str(head[1])) if head else (0, GENESIS_HASH)
    event_id = prev_id + 1
    detail_json = canonical_json(detail or {})
    content = event_content(event_id=event_id, facts=facts, detail_json=detail_json)
    digest = chain_hash(prev_hash, content)
    f = facts
    row = (f.proposal_id, f.request_hash, f.actor, f.from_status, f.to_status, dt_text(f.at))
    db.execute(_INSERT_SQL, (event_id, *row, detail_json, prev_hash, digest))
    return event_id, digest


def append_anchor(path: Path, heads: list[tuple[int, str]]) -> None:
    """Append `"<id> <hash>"` lines for committed events. A failure is logged, not raised:
    the transition is already committed, and verify reports the unanchored tail as such."""
    if not heads:
        return
    data = "".join(f"{eid} {digest}\n" for eid, digest in heads).encode("ascii")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
    except OSError as e:
        log.warning("could not append to the audit anchor %s: %s", path, e)


def create_anchor(path: Path) -> None:
    """Create the anchor file (empty, 0600) if absent, before a first write: a writer
    killed after its commit and before `append_anchor` (on PostgreSQL the server finishes
    a creation whose client died) leaves an unanchored tail, which verifies, not a
    missing anchor, which does not. A failure is logged, as in `append_anchor`."""
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o600))
    except OSError as e:
        log.warning("could not create the audit anchor %s: %s", path, e)


def read_anchor(path: Path) -> tuple[dict[int, str], list[str]]:
    """Anchor lines as {event id: hash}, plus the malformed lines (FileNotFoundError passes)."""
    anchors: dict[int, str] = {}
    bad: list[str] = []
    with open(path, encoding="ascii", errors="replace") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 2 and parts[0].isdigit() and len(parts[1]) == 64:
                eid = int(parts[0])
                if anchors.get(eid, parts[1]) != parts[1]:
                    bad.append(line.rstrip("\n"))
                anchors[eid] = parts[1]
            elif line.strip():
                bad.append(line.rstrip("\n"))
    return anchors, bad


def _follow_on_problem(eid: int, pid: int, row: Any, before: tuple[int, str] | None) -> str | None:
    """Why event `eid` does not follow on from proposal `pid`'s previous event `before`
    ((id, to), None for none), or None when it does."""
    frm, to = row.from_status, row.to_status
    if before is None and frm is not None:
        return (
            f"event {eid} moves proposal {pid} from {frm!r} but is its first event (the "
            "first must be its creation): the proposal was changed outside the store"
        )
    if before is not None and frm != before[1]:
        start = "is a second creation" if frm is None else f"moves it from {frm!r}"
        return (
            f"event {eid} of proposal {pid} {start}, but its previous event (id "
            f"{before[0]}) left it {before[1]!r}: its status was changed outside the store"
        )
    if (frm, to) not in lc.ALLOWED_EDGES:
        return (
            f"event {eid} records {frm or '(new)'} -> {to} for proposal {pid}, a transition "
            "the proposal lifecycle does not have"
        )
    return None


def verify_chain(
    conn: Connection, anchor_path: Path, pins: Callable[[], Pins]
) -> AuditVerification:
    """Walk every event in id order, then the anchor, then each proposal's last event.

    Every approval signed with a passkey is verified again (`_signatures_problem`), and
    its passkey must have been pinned by the owner with the key the database holds
    (`pins()`, read only when there is a signed approval: `placet.config.pins`; unpinned
    since is fine: it signed before); the
    message notes approvals without a signature made after the first approval made in
    signed mode (its detail says ``"approvals": "signed"``), i.e. while the owner had
    turned signed mode off.

    Chain problems (edited content, broken link, missing ids, an anchored hash that
    differs, a removed tail, and a proposal's events that do not follow on: each
    event's `from` must be the `to` of that proposal's previous event, the first must be
    its creation, and each arrow must be one `lifecycle.ALLOWED_EDGES` has) are reported
    by the lowest event id they concern; only when
    the chain is sound are proposals cross-checked (current status equals the last
    event's `to`, stored request still hashes to the creation event's request hash).
    """
    try:
        anchors, malformed = read_anchor(anchor_path)
        anchor_missing = False
    except FileNotFoundError:
        anchors, malformed, anchor_missing = {}, [], True

    problems: list[tuple[int, str]] = []
    last_to: dict[int, tuple[int, str]] = {}
    created_hash: dict[int, tuple[int, str]] = {}
    signed: list[tuple[int, int, str, dict[str, Any]]] = []
    signed_mode_since: int | None = None  # the first approval made in signed mode
    unsigned_after: list[int] = []  # approvals without a signature made after it
    prev, expected, count, last_id = GENESIS_HASH, 1, 0, 0
    rows = conn.execute(select(AUDIT_EVENT).order_by(AUDIT_EVENT.c.id))
    for row in rows:
        count += 1
        eid = int(row.id)
        if eid != expected:
            problems.append((expected, f"events {expected}..{eid - 1} are missing"))
        if row.prev_hash != prev:
            problems.append((eid, f"event {eid} does not link to the event before it"))
        facts = EventFacts(
            row.proposal_id, row.request_hash, row.actor, row.from_status, row.to_status, row.at
        )
        content = event_content(event_id=eid, facts=facts, detail_json=row.detail)
        if chain_hash(row.prev_hash, content) != row.hash:
            problems.append((eid, f"event {eid} was altered: its content does not match its hash"))
        anchored = anchors.get(eid)
        if anchored is not None and anchored != row.hash:
            problems.append((eid, f"event {eid} differs from the hash the anchor file recorded"))
        follow = _follow_on_problem(eid, row.proposal_id, row, last_to.get(row.proposal_id))
        if follow is not None:
            problems.append((eid, follow))
        last_to[row.proposal_id] = (eid, row.to_status)
        if row.from_status is None:
            created_hash[row.proposal_id] = (eid, row.request_hash)
        if row.to_status == lc.APPROVED:
            if '"passkey"' in row.detail:
                signed.append((eid, row.proposal_id, row.request_hash, json.loads(row.detail)))
            elif signed_mode_since is not None:
                unsigned_after.append(eid)
            if signed_mode_since is None and '"approvals":"signed"' in row.detail:
                signed_mode_since = eid
        prev, expected, last_id = row.hash, eid + 1, eid

    max_anchor = max(anchors, default=0)
    if max_anchor > last_id:
        problems.append(
            (
                last_id + 1,
                f"the anchor file records {max_anchor} events but the database ends at "
                f"event {last_id}: events {last_id + 1}..{max_anchor} were removed",
            )
        )
    if problems:
        first_id, first_msg = min(problems, key=lambda p: p[0])
        more = f" ({len(problems) - 1} more problem(s))" if len(problems) > 1 else ""
        return AuditVerification(False, count, first_id, first_msg + more)

    places: dict[int, tuple[str | None, str]] = {}  # proposal -> (host id, drive spec)
    for p in conn.execute(select(PROPOSAL).order_by(PROPOSAL.c.id)):
        places[p.id] = (p.host_id, p.drive_spec)
        last = last_to.get(p.id)
        created = created_hash.get(p.id)
        if last is None or created is None:
            return AuditVerification(
                False, count, None, f"proposal {p.id} has no creation audit event"
            )
        if last[1] != p.status:
            return AuditVerification(
                False,
                count,
                last[0],
                f"proposal {p.id} is {p.status!r} but its last audit event (id {last[0]}) "
                f"says {last[1]!r}: its status was changed outside the store",
            )
        stored = request_hash(p.kind, json.loads(p.request), json.loads(p.evidence))
        if stored != p.request_hash or p.request_hash != created[1]:
            return AuditVerification(
                False,
                count,
                created[0],
                f"proposal {p.id}'s stored request no longer hashes to the request hash "
                f"its creation event (id {created[0]}) recorded",
            )
        altered = _ops_altered(conn, p.id, json.loads(p.request))
        if altered:
            return AuditVerification(False, count, created[0], altered)

    legacy: list[int] = []
    bad_signature = _signatures_problem(conn, signed, places, pins(), legacy) if signed else None
    if bad_signature is not None:
        return AuditVerification(False, count, bad_signature[0], bad_signature[1])

    if malformed:
        return AuditVerification(
            False, count, None, f"the anchor file has {len(malformed)} malformed line(s)"
        )
    if anchor_missing and count:
        return AuditVerification(
            False,
            count,
            None,
            f"the anchor file {anchor_path} is missing while the database holds {count} "
            "events; a removed tail cannot be ruled out",
        )
    head = f", head {prev[:16]}…" if count else ""
    sigs = f", {len(signed)} passkey-signed approval(s) re-verified" if signed else ""
    if legacy:
        sigs += (
            f" ({len(legacy)} signed by an older placet, binding neither host nor drive: "
            f"events {', '.join(map(str, legacy[:10]))}{', ...' if len(legacy) > 10 else ''})"
        )
    if unsigned_after:
        shown = ", ".join(map(str, unsigned_after[:10])) + (
            ", ..." if len(unsigned_after) > 10 else ""
        )
        sigs += (
            f"; note: {len(unsigned_after)} approval(s) without a passkey signature were made "
            f"after signed mode was first used (event {signed_mode_since}): events {shown} "
            '(approvals = "signed" was off then)'
        )
    return AuditVerification(True, count, None, f"{count} events verified{sigs}{head}")


_PUBLIC_KEY_SQL = "SELECT public_key FROM web_passkey WHERE credential_id = ?"


def _signatures_problem(
    conn: Connection,
    signed: list[tuple[int, int, str, dict[str, Any]]],
    places: dict[int, tuple[str | None, str]],
    pins: Pins,
    legacy: list[int],
) -> tuple[int, str] | None:
    """(event id, why) for the first approval whose stored passkey assertion does not
    verify against the stored public key of its credential (revoked keys included), over
    the challenge of that event's proposal, request hash and `skip_ops` and the
    proposal's host and drive as stored now (`places`; `placet.store.signatures`: a
    proposal moved to another host or drive fails here), that repeats the nonce of an
    earlier signed approval (an assertion copied into a second approval), or whose
    passkey the owner never pinned with that key (`pins`); None when every one verifies.
    An approval of a set is checked over the set's challenge, which must hold this
    proposal as approved, on its host and drive as stored; its assertion approves each
    of its proposals once.
    An approval signed by an older placet (no host, no drive bound) verifies, and its
    event id is added to `legacy`."""
    nonces: dict[str, int] = {}
    for eid, pid, rh, detail in signed:
        assertion = detail.get("passkey")
        if not isinstance(assertion, dict):
            return eid, f"event {eid} (approval of proposal {pid}) has a malformed passkey entry"
        together = detail.get("set")
        # One assertion approves each proposal of its set once: the nonce names the
        # signature, and with the proposal id one approval of a set.
        name = str(assertion.get("nonce")) + (f" #{pid}" if together is not None else "")
        first = nonces.setdefault(name, eid)
        if first != eid:
            return eid, (
                f"event {eid} (approval of proposal {pid}) repeats the passkey signature of "
                f"event {first}: one signature approves once"
            )
        row = conn.exec_driver_sql(
            qmark(conn, _PUBLIC_KEY_SQL), (str(assertion.get("credential_id")),)
        ).first()
        if row is None:
            return eid, (
                f"event {eid} (approval of proposal {pid}) was signed by a passkey this "
                "database does not hold"
            )
        cid = str(assertion.get("credential_id"))
        unpinned = pins.problem(cid, bytes(row[0]), active=False)
        if unpinned is not None:
            return eid, (
                f"event {eid} (approval of proposal {pid}) was signed by a passkey that {unpinned}"
            )
        skip = detail.get("skip_ops") or []
        skip = skip if isinstance(skip, list) else []
        host_id, drive_spec = places.get(pid, (None, ""))
        if together is not None:
            why = check_signed_set(assertion, bytes(row[0]), together)
            entry = set_entry(together, pid)
            if why is None and (
                entry is None
                or entry.get("request_hash") != rh
                or sorted(entry.get("skip_ops") or []) != sorted(skip)
                or entry.get("host_id") != host_id
                or entry.get("drive_spec") != drive_spec
            ):
                why = "the set its passkey signed does not hold this proposal as approved"
        else:
            fields = accept_fields(
                proposal_id=pid, request_hash=rh, skip_ops=skip,
                host_id=host_id, drive_spec=drive_spec,
            )  # fmt: skip
            why = check_signed_approval(assertion, bytes(row[0]), fields)
            if why == LEGACY_SIGNED:
                legacy.append(eid)
                why = None
        if why is not None:
            return eid, (
                f"event {eid} (approval of proposal {pid}): {why}; it was signed for another "
                "request, selection, host or drive than the proposal's as stored"
            )
    return None


def _ops_altered(conn: Connection, pid: int, request: dict[str, Any]) -> str | None:
    """Why a by-reference sync's op rows no longer match the `ops_digest` and `op_count`
    its (hash-checked) request binds, or None (docs/design.md section 4)."""
    bound = request.get("ops_digest")
    if not isinstance(bound, str):
        return None
    rows = conn.exec_driver_sql(
        qmark(conn, "SELECT op FROM proposal_op WHERE proposal_id = ? ORDER BY op_index"), (pid,)
    ).all()
    if len(rows) != request.get("op_count") or ops_digest(str(t) for (t,) in rows) != bound:
        return (
            f"proposal {pid}'s {len(rows)} stored ops no longer hash to the ops digest its "
            "request binds: they were altered outside the store"
        )
    return None
