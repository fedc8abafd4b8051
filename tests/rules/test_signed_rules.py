"""Signed mode and standing rules: an unsigned or edited rules file approves nothing; a
signed one does and its approval runs; the executor refuses a rule approval the signed
rules do not back; `placet audit --verify` accepts the signed rule approvals and rejects
one whose rules hash was changed in the database (even with the hash chain and anchor
rewritten to match). Signatures come from a software authenticator (no browser)."""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from placet.decisions.standing import approve_by_rule
from placet.errors import PolicyRefused
from placet.executor import execute
from placet.rules.approving import RuleApproval
from placet.rules.loading import load_rules
from placet.rules.signing import record_signature, signature_for
from placet.store.audit import chain_hash, event_content
from placet.store.records import EventFacts
from placet.store.signatures import rules_challenge
from tests.rules.test_ledger import UPLOADS
from tests.support.passkey import SoftKey
from tests.support.pins import register_pinned
from tests.support.rig import Rig, placet_cli, write_config
from tests.support.rules import judge_now, write_rules

CID = "c29mdC1rZXk"


@pytest.fixture
def signed(local_rig) -> tuple[Rig, SoftKey]:  # type: ignore[no-untyped-def]
    """A rig in signed mode whose rules file allows uploads under reports/, and the
    owner's pinned passkey (unsigned rules)."""
    rig = local_rig(approvals="signed")
    write_config(rig.settings, drive=rig.drive.spec, approvals="signed")
    write_rules(rig.settings, UPLOADS)
    key = SoftKey()
    register_pinned(rig.store, CID, key.cose(), "soft")
    return rig, key


def sign(rig: Rig, key: SoftKey, data: bytes, nonce: str = "ab" * 16) -> None:
    digest = hashlib.sha256(data).hexdigest()
    assertion = key.assert_(rules_challenge(rules_sha256=digest, nonce=nonce), CID)
    passkey = rig.store.passkey_by_credential(CID)
    assert passkey is not None
    record_signature(rig.store, data, {**assertion, "nonce": nonce}, passkey.id, _now())


def _now() -> datetime:
    return datetime.now(UTC)


def test_unsigned_and_edited_rules_approve_nothing_signed_ones_do(
    signed: tuple[Rig, SoftKey],
) -> None:
    rig, key = signed
    rig.write("a.txt", b"first report")
    unsigned = judge_now(rig.store, rig.settings, rig.upload("a.txt", "reports"))
    assert unsigned.approved_by is None
    assert unsigned.note is not None and "is not signed" in unsigned.note
    assert "placet rules sign" in unsigned.note

    sign(rig, key, UPLOADS)
    approved = judge_now(rig.store, rig.settings, unsigned.record)
    assert approved.approved_by == "reports"
    event = next(
        e for e in rig.store.audit_events(proposal_id=approved.record.id)
        if e.to_status == "approved"
    )  # fmt: skip
    assert event.detail["approvals"] == "signed"
    assert event.detail["rule"]["signature"]["credential_id"] == CID
    done = execute(rig.store, rig.settings, approved.record.id, drive=rig.drive)
    assert done.status == "succeeded"

    write_rules(rig.settings, UPLOADS + b"# an edit\n")  # every rule suspended
    rig.write("b.txt", b"second report")
    edited = judge_now(rig.store, rig.settings, rig.upload("b.txt", "reports"))
    assert edited.approved_by is None
    assert edited.note is not None and "is not signed (edited since" in edited.note
    state = load_rules(rig.settings, env={})
    assert signature_for(rig.store, rig.settings, state)[0] is None


def test_the_executor_refuses_a_rule_approval_the_signed_rules_do_not_back(
    signed: tuple[Rig, SoftKey],
) -> None:
    rig, key = signed
    sign(rig, key, UPLOADS)
    state = load_rules(rig.settings, env={})
    signature, _ = signature_for(rig.store, rig.settings, state)
    assert signature is not None and state.sha256 is not None
    # A rule approval written by another path for a proposal the rule does not cover
    # (outside reports/), carrying the valid signature of the rules.
    rig.write("x.txt", b"not a report")
    rec = rig.upload("x.txt", "elsewhere")
    forged = RuleApproval("reports", state.sha256, str(state.path), signature)
    approve_by_rule(rig.store, rig.settings, rec, forged, now=_now())
    with pytest.raises(PolicyRefused) as e:
        execute(rig.store, rig.settings, rec.id, drive=rig.drive)
    assert e.value.error_code == "signature_invalid"
    assert "does not cover it" in e.value.message
    assert rig.remote_dir is not None and not (rig.remote_dir / "elsewhere").exists()

    rig.write("y.txt", b"unsigned")  # one without a signature: the store refuses it
    bare = rig.upload("y.txt", "reports")
    with pytest.raises(PolicyRefused) as e2:
        approve_by_rule(
            rig.store,
            rig.settings,
            bare,
            RuleApproval("reports", state.sha256, str(state.path)),
            now=_now(),
        )
    assert e2.value.error_code == "signature_required"


def _rewrite_chain(db: Path, anchor: Path, event_id: int, detail: dict[str, object]) -> None:
    """Put `detail` in event `event_id` and recompute every hash from there on, and the
    anchor file: what only a process that can write both could do."""
    con = sqlite3.connect(db)
    try:
        con.execute(
            "UPDATE audit_event SET detail = ? WHERE id = ?",
            (json.dumps(detail, sort_keys=True, separators=(",", ":")), event_id),
        )
        rows = con.execute(
            "SELECT id, proposal_id, request_hash, actor, from_status, to_status, at, detail "
            "FROM audit_event ORDER BY id"
        ).fetchall()
        prev, lines = "0" * 64, []
        for eid, pid, rh, actor, frm, to, at, text in rows:
            when = datetime.fromisoformat(at).replace(tzinfo=UTC)  # stored naive UTC
            facts = EventFacts(pid, rh, actor, frm, to, when)
            digest = chain_hash(prev, event_content(event_id=eid, facts=facts, detail_json=text))
            con.execute(
                "UPDATE audit_event SET prev_hash = ?, hash = ? WHERE id = ?", (prev, digest, eid)
            )
            prev = digest
            lines.append(f"{eid} {digest}\n")
        con.commit()
    finally:
        con.close()
    anchor.write_text("".join(lines))


def test_audit_verify_checks_rule_approvals_against_the_signed_rules(
    signed: tuple[Rig, SoftKey],
) -> None:
    rig, key = signed
    sign(rig, key, UPLOADS)
    rig.write("a.txt", b"report")
    out = judge_now(rig.store, rig.settings, rig.upload("a.txt", "reports"))
    assert out.approved_by == "reports"
    env = {"PLACET_HOME": str(rig.settings.data_dir), "PATH": "/usr/bin:/bin"}
    ok = placet_cli("audit", "--verify", env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "1 rule approval(s) checked against the signed rules they used" in ok.stdout

    event = next(
        e for e in rig.store.audit_events(proposal_id=out.record.id) if e.to_status == "approved"
    )
    changed = json.loads(json.dumps(event.detail))
    changed["rule"]["rules_sha256"] = "0" * 64  # another rules file's hash
    _rewrite_chain(rig.settings.db_path, rig.settings.audit_anchor_path, event.id, changed)
    assert rig.store.verify_audit().ok  # the chain alone no longer tells
    bad = placet_cli("audit", "--verify", env=env)
    assert bad.returncode == 6, bad.stdout
    assert f"event {event.id}: rule approval of proposal {out.record.id}" in bad.stdout
    assert "no signed rules file has the sha256 0000000000000000" in bad.stdout


def test_a_signature_over_other_rules_does_not_sign_these(signed: tuple[Rig, SoftKey]) -> None:
    rig, key = signed
    other = UPLOADS.replace(b'"reports"', b'"other"')
    digest = hashlib.sha256(UPLOADS).hexdigest()
    nonce = "cd" * 16
    other_hash = hashlib.sha256(other).hexdigest()
    wrong = key.assert_(rules_challenge(rules_sha256=other_hash, nonce=nonce), CID)
    # signed for the other file, kept under this one's bytes
    passkey = rig.store.passkey_by_credential(CID)
    assert passkey is not None
    record_signature(rig.store, UPLOADS, {**wrong, "nonce": nonce}, passkey.id, _now())
    state = load_rules(rig.settings, env={})
    assert state.sha256 == digest
    assertion, why = signature_for(rig.store, rig.settings, state)
    assert assertion is None
    assert "the rules signature fails" in why
