"""Signed rules: with ``approvals = "signed"``, a rule approves only while the rules file's
current bytes carry the owner's passkey signature, and only what those bytes allow.

`placet web`'s rules page (`placet rules sign` names it) shows the file and has the
owner's passkey sign `rules_challenge` of its SHA-256 (`placet.store.signatures`); the
bytes, the hash and the assertion are kept in `rules_signature` (`record`). A rule then
approves only when the file as read now has a signature whose passkey is registered,
unrevoked and pinned (`signature_for`): an edited file hashes anew and approves nothing
until it is signed again. The approval carries the assertion, and the executor and
`placet audit --verify` check it again (`approval_problem`): the signature over the
recorded hash, the stored bytes hashing to it, and the rule in them still covering the
proposal at the approval's time, so a rule approval written into the database, or one
whose rules hash was changed there, runs nothing and fails verification.
docs/decisions/0039-signed-rules.md records the choice.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from placet.config import Settings
from placet.config.pins import read_pins
from placet.rules.facts import facts_of
from placet.rules.loading import RulesInvalid, RulesState, owner_drive, parse_rules
from placet.rules.matcher import allow_miss, evaluate
from placet.schema import Op, canonical_json
from placet.store import AuditRecord, ProposalRecord, Store
from placet.store.db import as_utc, upsert
from placet.store.models import RULES_SIGNATURE
from placet.store.signatures import check_signed_rules

__all__ = [
    "RuleVerification",
    "SignedRules",
    "approval_problem",
    "record_signature",
    "signature_for",
    "signed_rules",
    "verify_rule_approvals",
]

S = RULES_SIGNATURE.c


@dataclass(frozen=True)
class SignedRules:
    """A signed rules file as kept: its bytes, their SHA-256, the assertion (nonce
    included) and the passkey that made it."""

    rules_sha256: str
    data: bytes
    assertion: dict[str, Any]
    passkey_id: int
    signed_at: datetime


def record_signature(
    store: Store, data: bytes, assertion: dict[str, Any], passkey_id: int, now: datetime
) -> str:
    """Keep the owner's signature over the rules file `data` (replacing an earlier one
    of the same bytes); returns the bytes' SHA-256."""
    digest = hashlib.sha256(data).hexdigest()
    values = {
        "rules_sha256": digest,
        "rules": data,
        "assertion": canonical_json(assertion),
        "passkey_id": passkey_id,
        "signed_at": as_utc(now),
    }

    def tx(conn: Connection, _heads: object) -> None:
        stmt = upsert(conn, RULES_SIGNATURE).values(**values)
        kept = {k: getattr(stmt.excluded, k) for k in values if k != "rules_sha256"}
        conn.execute(stmt.on_conflict_do_update(index_elements=["rules_sha256"], set_=kept))

    store._write("keeping the signature of the rules file", tx)
    return digest


def signed_rules(store: Store, rules_sha256: str) -> SignedRules | None:
    """The kept signature over the rules file hashing to `rules_sha256`, or None."""
    q = select(RULES_SIGNATURE).where(S.rules_sha256 == rules_sha256)
    row = store._read("reading a rules signature", lambda c: c.execute(q).first())
    if row is None:
        return None
    return SignedRules(
        str(row.rules_sha256), bytes(row.rules), json.loads(row.assertion),
        int(row.passkey_id), row.signed_at,
    )  # fmt: skip


def _signature_problem(
    store: Store, settings: Settings, rules_sha256: str, assertion: object
) -> str | None:
    """Why `assertion` is not a valid signature over the rules hashing to `rules_sha256`
    by a registered, unrevoked passkey the owner pinned; None when it is."""
    if not isinstance(assertion, dict):
        return "it carries no signature of the rules file"
    key = store.passkey_by_credential(str(assertion.get("credential_id")))
    if key is None or key.revoked_at is not None:
        return "the rules were signed by a passkey that is not registered (or was revoked)"
    unpinned = read_pins(settings.config_file).problem(
        key.credential_id, key.public_key, active=True
    )
    if unpinned is not None:
        return f"the rules were signed by passkey {key.id}, which {unpinned}"
    problem = check_signed_rules(assertion, key.public_key, rules_sha256=rules_sha256)
    return None if problem is None else f"the rules signature fails: {problem}"


def signature_for(
    store: Store, settings: Settings, state: RulesState
) -> tuple[dict[str, Any] | None, str]:
    """(the kept signature over the usable rules file `state`, "") or (None, why there
    is none that holds: never signed, edited since, or a passkey no longer pinned)."""
    if state.sha256 is None:
        return None, "the rules file is not usable"
    kept = signed_rules(store, state.sha256)
    if kept is None:
        return None, (
            f"the rules file as it is now (sha256 {state.sha256[:16]}…) is not signed "
            "(edited since, or never signed): run `placet rules sign`"
        )
    problem = _signature_problem(store, settings, state.sha256, kept.assertion)
    if problem is not None:
        return None, f"{problem}: run `placet rules sign`"
    return kept.assertion, ""


def approval_problem(
    store: Store,
    settings: Settings,
    record: ProposalRecord,
    ops: Sequence[Op],
    detail: dict[str, Any],
    at: datetime,
) -> str | None:
    """Why the rule approval of `record` (its audit `detail`, made `at`; `ops` its
    parsed ops) is not backed by signed rules that cover it; None when it is (module
    docstring)."""
    rule = detail.get("rule")
    if not isinstance(rule, dict):
        return "it names no rule"
    digest, rid = str(rule.get("rules_sha256")), str(rule.get("id"))
    kept = signed_rules(store, digest)
    if kept is None:
        return f"no signed rules file has the sha256 {digest[:16]}… it records"
    if hashlib.sha256(kept.data).hexdigest() != digest:
        return f"the signed rules kept under sha256 {digest[:16]}… were altered"
    problem = _signature_problem(store, settings, digest, rule.get("signature"))
    if problem is not None:
        return problem
    try:
        rules = parse_rules(kept.data)
    except RulesInvalid as e:
        return f"the signed rules do not parse ({e})"
    found = next((r for r in rules if r.id == rid and r.effect == "allow"), None)
    if found is None:
        return f"the signed rules hold no allow rule {rid!r}"
    facts = facts_of(record, ops)
    drive = owner_drive(settings)
    verdict = evaluate(rules, facts, at, drive)
    if verdict.effect == "forbid":
        return f"the signed rules forbid it ({verdict.reason})"
    miss = allow_miss(found, facts, at, drive)
    return None if miss is None else f"signed rule {rid!r} does not cover it: {miss}"


@dataclass(frozen=True)
class RuleVerification:
    """What `verify_rule_approvals` found: `ok`, how many signed rule approvals it
    checked, the first bad event (id and why), and the unsigned ones noted."""

    ok: bool
    checked: int
    first_bad: tuple[int, str] | None = None
    unsigned: tuple[int, ...] = ()

    def message(self) -> str:
        if self.first_bad is not None:
            eid, why = self.first_bad
            return f"event {eid}: {why}"
        out = f"{self.checked} rule approval(s) checked against the signed rules they used"
        if self.unsigned:
            shown = ", ".join(map(str, self.unsigned[:10]))
            out += f"; {len(self.unsigned)} rule approval(s) without signed rules: events {shown}"
        return out


def verify_rule_approvals(
    store: Store,
    settings: Settings,
    events: Iterable[AuditRecord],
    ops_of: Callable[[ProposalRecord], Sequence[Op]],
) -> RuleVerification:
    """Check every rule approval among `events` that carries signed rules
    (`approval_problem`); `ops_of(record)` reads a proposal's ops. A rule approval
    without a signature is noted, not failed (made while signed mode was off)."""
    checked = 0
    unsigned: list[int] = []
    for e in events:
        if e.to_status != "approved" or e.detail.get("via") != "rule":
            continue
        rule = e.detail.get("rule")
        if not (isinstance(rule, dict) and isinstance(rule.get("signature"), dict)):
            unsigned.append(e.id)
            continue
        record = store.get(e.proposal_id)
        why = approval_problem(store, settings, record, ops_of(record), e.detail, e.at)
        if why is not None:
            return RuleVerification(
                False, checked, (e.id, f"rule approval of proposal {e.proposal_id}: {why}")
            )
        checked += 1
    return RuleVerification(True, checked, None, tuple(unsigned))
