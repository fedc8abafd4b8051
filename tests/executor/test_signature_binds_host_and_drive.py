"""Signed mode on a shared queue (docs/security.md, "The shared queue"): a passkey
signature binds the host that runs the proposal and the drive it was made against
(placet.store.signatures.accept_fields), and the run's claim spends it in the database
every host reads, in the claim's own transaction (Store.claim, Store.spent).

Two hosts on one PostgreSQL database, the owner's passkey pinned on both (what signed
mode on several hosts needs), a software authenticator signing (tests/store/
test_signed_audit.py). A process that can edit the database moves a signed proposal to
the other host's drive: it runs nowhere and `placet audit --verify` names the approval.
It resets a proposal that ran: the signature, spent with the first claim, approves no
second run, even on a host whose spent-signatures file does not know it. An approval
signed by an older placet (no host, no drive in its challenge) verifies in the audit and
runs nowhere in signed mode."""

from __future__ import annotations

import hashlib
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from placet.config import Settings
from placet.config.pins import SPENT_FILE, editing_pins
from placet.drive import configured_spec
from placet.errors import PolicyRefused
from placet.executor import execute
from placet.executor.service import run_host_executor
from placet.schema import canonical_json
from placet.store import ProposalRecord, Store, open_store
from placet.store.signatures import signature_id
from tests.store.test_signed_audit import SoftKey
from tests.support.db import sql
from tests.support.pins import register_pinned
from tests.support.rig import Rig, host_b_settings, write_config
from tests.support.signing import challenge_of

pytestmark = pytest.mark.usefixtures("store_backend")
postgresql_only = pytest.mark.parametrize("store_backend", ["postgresql"], indirect=True)

CID = "b3duZXI"


def _host_b(rig: Rig, key: SoftKey, tmp_path: Path) -> Settings:
    """Host B in signed mode on host A's database: its own data directory and drive, the
    owner's passkey pinned there too."""
    drive = tmp_path / "host-b-drive"
    drive.mkdir()
    settings = host_b_settings(rig.settings, tmp_path)
    write_config(settings, drive=str(drive), approvals="signed")
    with editing_pins(settings.config_file) as pins:
        pins.pin(CID, key.cose(), "owner's phone", datetime.now(UTC))
    return settings.model_copy(update={"drive": str(drive), "approvals": "signed"})


def _sign_and_approve(rig: Rig, key: SoftKey, rec: ProposalRecord, nonce: str) -> None:
    """The owner's passkey approves `rec` as stored (what `placet web` records)."""
    passkey = {**key.assert_(challenge_of(rec, nonce), CID), "nonce": nonce}
    rig.store.accept(
        rec.id, detail={"request_hash": rec.request_hash, "via": "web", "passkey": passkey}
    )


def _approval_id(store: Store, pid: int) -> int:
    return next(e.id for e in store.audit_events(proposal_id=pid) if e.to_status == "approved")


@postgresql_only
@pytest.mark.timeout(120)
def test_a_signed_proposal_moved_to_another_hosts_drive_runs_nowhere(
    store_backend: str, signed_rig: Rig, tmp_path: Path
) -> None:
    key = SoftKey()
    register_pinned(signed_rig.store, CID, key.cose(), "owner's phone")
    settings_b = _host_b(signed_rig, key, tmp_path)
    rec = signed_rig.mkdir("", "signed-for-host-a")
    _sign_and_approve(signed_rig, key, rec, "a1" * 16)
    with open_store(settings_b) as store_b:
        assert signed_rig.store.verify_audit().ok
        sql(
            signed_rig.settings, "UPDATE proposal SET host_id = ?, drive_spec = ? WHERE id = ?",
            store_b.host_id, configured_spec(settings_b), rec.id,
        )  # fmt: skip
        assert signed_rig.store.approved_here() == []  # host A no longer runs it
        [ran] = run_host_executor(store_b, settings_b, stop=threading.Event(), once=True)
        assert ran.proposal_id == rec.id and isinstance(ran.error, PolicyRefused), ran
        assert ran.error.error_code == "signature_invalid", ran.error
        assert "signed for another request, selection, host or drive" in ran.error.message
        assert store_b.get(rec.id).status == "failed"  # refused before any op
        assert not (Path(str(settings_b.drive)) / "signed-for-host-a").exists()
        for store in (signed_rig.store, store_b):
            v = store.verify_audit()
            assert not v.ok and v.first_bad_event_id == _approval_id(store, rec.id), v.message
            assert f"approval of proposal {rec.id}" in v.message and "host or drive" in v.message
    assert not (signed_rig.remote_dir or Path()).joinpath("signed-for-host-a").exists()


@postgresql_only
@pytest.mark.timeout(120)
def test_a_spent_signature_approves_no_second_run_on_any_host(
    store_backend: str, signed_rig: Rig, tmp_path: Path
) -> None:
    """Host A runs a signed upload; its claim spends the signature in the database, in
    the claim's transaction, and host B reads it there. A process that edits the
    database then resets the proposal (the run's events removed, the status set back to
    approved, the file made new), and host A's config folder is the one restored from a
    backup taken before the run (its spent-signatures file does not know the signature):
    the run is refused, nothing is uploaded again."""
    key = SoftKey()
    register_pinned(signed_rig.store, CID, key.cose(), "owner's phone")
    settings_b = _host_b(signed_rig, key, tmp_path)
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    nonce = "b2" * 16
    _sign_and_approve(signed_rig, key, rec, nonce)
    first = execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert first.status == "succeeded"
    [claim] = [
        e for e in signed_rig.store.audit_events(proposal_id=rec.id) if e.detail.get("holder")
    ]
    assert claim.detail["signature"] == signature_id(nonce)
    with open_store(settings_b) as store_b:
        spent = store_b.spent(signature_id(nonce))
    assert spent is not None
    assert (spent.proposal_id, spent.host_id, spent.claim_hash) == (
        rec.id, signed_rig.store.host_id, claim.hash,
    )  # fmt: skip

    after = _approval_id(signed_rig.store, rec.id)
    sql(
        signed_rig.settings,
        "DELETE FROM audit_event WHERE proposal_id = ? AND id > ?",
        rec.id,
        after,
    )
    sql(
        signed_rig.settings,
        "UPDATE proposal SET status = 'approved', resolved_at = NULL WHERE id = ?",
        rec.id,
    )
    (signed_rig.settings.config_file.parent / SPENT_FILE).unlink()
    (signed_rig.remote_dir or Path()).joinpath("a.txt").unlink()
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_invalid", e.value
    assert "already approved a run" in e.value.message and "recorded in the database" in (
        e.value.message
    )
    assert not (signed_rig.remote_dir or Path()).joinpath("a.txt").exists()
    claims = [
        e for e in signed_rig.store.audit_events(proposal_id=rec.id) if e.detail.get("holder")
    ]
    assert [c.detail["signature"] for c in claims] == [signature_id(nonce)]  # the new claim's
    assert signed_rig.store.spent(signature_id(nonce)) == spent  # still the first claim's


def _legacy_challenge(rec: ProposalRecord, nonce: str) -> bytes:
    """The challenge an older placet had the passkey sign: no host, no drive."""
    body: dict[str, Any] = {
        "purpose": "placet-accept", "proposal_id": rec.id, "request_hash": rec.request_hash,
        "skip_ops": [], "nonce": nonce,
    }  # fmt: skip
    return hashlib.sha256(canonical_json(body).encode()).digest()


def test_an_approval_signed_by_an_older_placet_is_audited_but_not_run(signed_rig: Rig) -> None:
    key = SoftKey()
    register_pinned(signed_rig.store, CID, key.cose(), "owner's phone")
    rec = signed_rig.mkdir("", "signed-before-the-upgrade")
    nonce = "c3" * 16
    passkey = {**key.assert_(_legacy_challenge(rec, nonce), CID), "nonce": nonce}
    signed_rig.store.accept(
        rec.id, detail={"request_hash": rec.request_hash, "via": "web", "passkey": passkey}
    )
    v = signed_rig.store.verify_audit()
    event = _approval_id(signed_rig.store, rec.id)
    assert v.ok, v.message
    assert f"1 signed by an older placet, binding neither host nor drive: events {event}" in (
        v.message
    )
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_invalid"
    assert "older placet" in e.value.message and "placet web" in e.value.message
    assert not (signed_rig.remote_dir or Path()).joinpath("signed-before-the-upgrade").exists()
