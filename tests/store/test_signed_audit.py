"""`placet audit --verify` re-verifies every passkey-signed approval against the stored
public key (`placet.store.audit`, `placet.store.signatures`) and the owner's pins
(`placet.config.pins`): a key swapped or removed in the passkey table, which the hash
chain does not cover, or one the owner never pinned, is caught at the approval's
event. The assertion is made by a small software authenticator (an EC P-256 key signing
authenticator data and client data as WebAuthn specifies), so no browser is needed."""

from __future__ import annotations

from typing import Any

import pytest

from placet.config import Settings
from placet.store import Store, open_store
from tests.support.db import sql
from tests.support.passkey import SoftKey
from tests.support.pins import register_pinned
from tests.support.review import T0, add_upload, quiet
from tests.support.signing import challenge_of

pytestmark = pytest.mark.usefixtures("store_backend")


def _signed_accept(quiet_store: Store, key: SoftKey, cid: str) -> Any:
    rec = add_upload(quiet_store)
    nonce = "ab" * 16
    challenge = challenge_of(rec, nonce)
    passkey = {**key.assert_(challenge, cid), "nonce": nonce}
    quiet_store.accept(
        rec.id, now=T0, detail={"request_hash": rec.request_hash, "via": "web", "passkey": passkey}
    )
    return rec


def test_audit_verify_re_verifies_signatures_against_the_stored_key(quiet_store: Store) -> None:
    key, cid = SoftKey(), "c29mdC1rZXk"
    register_pinned(quiet_store, cid, key.cose(), "soft")
    rec = _signed_accept(quiet_store, key, cid)
    v = quiet_store.verify_audit()
    assert v.ok and "1 passkey-signed approval(s) re-verified" in v.message, v.message
    approval = [
        e for e in quiet_store.audit_events(proposal_id=rec.id) if e.to_status == "approved"
    ]

    sql(quiet_store.settings, "UPDATE web_passkey SET public_key = ?", SoftKey().cose())
    v = quiet_store.verify_audit()  # the swapped key is not the one the owner pinned
    assert not v.ok and v.first_bad_event_id == approval[0].id
    assert "other than the one the owner pinned" in v.message, v.message

    sql(quiet_store.settings, "DELETE FROM web_passkey")
    v = quiet_store.verify_audit()
    assert not v.ok and "a passkey this database does not hold" in v.message


def test_an_approval_signed_for_another_request_fails_verification(quiet_store: Store) -> None:
    key, cid = SoftKey(), "c29mdC1rZXk"
    register_pinned(quiet_store, cid, key.cose(), "soft")
    other = add_upload(quiet_store, local_path="other.txt")
    rec = add_upload(quiet_store, local_path="this.txt")
    nonce = "cd" * 16
    wrong = challenge_of(other, nonce)  # made for the other proposal, recorded on this one
    passkey = {**key.assert_(wrong, cid), "nonce": nonce}
    quiet_store.accept(
        rec.id, now=T0, detail={"request_hash": rec.request_hash, "via": "web", "passkey": passkey}
    )
    v = quiet_store.verify_audit()
    assert not v.ok and f"approval of proposal {rec.id}" in v.message


def test_unsigned_approvals_after_signed_mode_was_used_are_reported(settings: Settings) -> None:
    key, cid = SoftKey(), "c29mdC1rZXk"
    with open_store(quiet(settings, approvals="signed")) as signed:
        register_pinned(signed, cid, key.cose(), "soft")
        rec = _signed_accept(signed, key, cid)
        approval = [e for e in signed.audit_events(proposal_id=rec.id) if e.to_status == "approved"]
        assert approval[0].detail["approvals"] == "signed"
        assert "note" not in signed.verify_audit().message
    with open_store(quiet(settings)) as terminal:  # the owner (or not) turned signed mode off
        later = add_upload(terminal, local_path="later.txt")
        terminal.accept(later.id, now=T0, detail={"request_hash": later.request_hash})
        event = terminal.audit_events(proposal_id=later.id)[-1].id
        v = terminal.verify_audit()
    assert v.ok
    assert "1 approval(s) without a passkey signature were made after signed mode" in v.message
    assert f"events {event} " in v.message


def test_an_approval_signed_by_a_key_the_owner_never_pinned_fails(quiet_store: Store) -> None:
    """A valid signature by a key registered in the database alone (no pin beside
    config.toml) does not verify; pinning it (what `placet keys pin` does) makes it
    verify, and unpinning it later keeps what it signed verifiable."""
    from placet.config.pins import editing_pins

    key, cid = SoftKey(), "bm90LXBpbm5lZA"
    quiet_store.register_passkey(
        quiet_store.create_pairing(), credential_id=cid, public_key=key.cose(), sign_count=0,
        name="db only",
    )  # fmt: skip
    rec = _signed_accept(quiet_store, key, cid)
    v = quiet_store.verify_audit()
    assert not v.ok and f"approval of proposal {rec.id}" in v.message
    assert "is not pinned by the owner" in v.message, v.message
    with editing_pins(quiet_store.settings.config_file) as pins:
        pins.pin(cid, key.cose(), "mine", T0)
    assert quiet_store.verify_audit().ok
    with editing_pins(quiet_store.settings.config_file) as pins:
        assert pins.unpin(cid, T0)
    assert quiet_store.verify_audit().ok
