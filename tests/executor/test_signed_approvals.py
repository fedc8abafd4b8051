"""Signed mode (`approvals = "signed"`) against a process that can write placet's
database but not its config: an owner's passkey signature, once used, must not approve
the same proposal again. The assertion is made by the software authenticator of
test_store_signed_audit (an EC P-256 key signing as WebAuthn specifies)."""

from __future__ import annotations

from typing import Any

import pytest

from placet.errors import PolicyRefused
from placet.executor import execute
from placet.store import ProposalRecord
from placet.store.signatures import check_signed_approval
from tests.support.passkey import SoftKey
from tests.support.pins import register_pinned
from tests.support.rig import Rig
from tests.support.signing import challenge_of, fields_of


def _signed_run_that_failed(rig: Rig, nonce: str) -> tuple[ProposalRecord, dict[str, Any]]:
    """An upload the owner approved with a pinned passkey, whose run then failed (the file
    changed after signing); returns it and the approval's detail, ready to be copied."""
    key, cid = SoftKey(), "c29mdC1rZXk"
    register_pinned(rig.store, cid, key.cose(), "soft")
    rig.write("a.txt", b"alpha\n")
    rec = rig.upload("a.txt")
    challenge = challenge_of(rec, nonce)
    signed: dict[str, Any] = {**key.assert_(challenge, cid), "nonce": nonce}
    detail = {"request_hash": rec.request_hash, "via": "web", "passkey": signed}
    rig.store.accept(rec.id, detail=detail)
    rig.write("a.txt", b"changed after the owner signed\n")  # the run fails
    assert execute(rig.store, rig.settings, rec.id, drive=rig.drive).status == "failed"
    return rec, detail


def test_a_used_signature_does_not_approve_a_retry(signed_rig: Rig) -> None:
    """The owner signs proposal P once; its run fails. A process that copies that
    approval's assertion into a new approval (`Store.accept`, or an INSERT) must not get
    P run again: the nonce was answered once (docs/security.md, "answered twice is
    refused")."""
    rec, detail = _signed_run_that_failed(signed_rig, "cd" * 16)

    signed_rig.write("a.txt", b"alpha\n")
    signed_rig.store.accept(rec.id, detail=detail)  # the same assertion, copied
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_invalid"
    assert not (signed_rig.remote_dir / "a.txt").exists()  # type: ignore[operator]
    v = signed_rig.store.verify_audit()
    assert not v.ok and "repeats the passkey signature" in v.message, v.message


def test_audit_verify_reports_a_garbled_signature_or_key(signed_rig: Rig) -> None:
    """A process that edits the database garbles a signed approval's authenticator data,
    or the passkey's stored public key: `placet audit --verify` (and the executor) must
    report it, not stop on py_webauthn's InvalidAuthenticatorDataStructure /
    InvalidPublicKeyStructure."""
    import sqlite3

    import cbor2

    key, cid = SoftKey(), "c29mdC1rZXk"
    register_pinned(signed_rig.store, cid, key.cose(), "soft")
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    nonce = "ef" * 16
    challenge = challenge_of(rec, nonce)
    signed: dict[str, Any] = {**key.assert_(challenge, cid), "nonce": nonce}
    signed["authenticator_data"] = "AAAA"  # 3 bytes: no authenticator data at all
    signed_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "passkey": signed})
    v = signed_rig.store.verify_audit()
    assert not v.ok and "does not verify" in v.message, v.message
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_invalid"

    # valid CBOR, an unknown key type (kty 99): UnsupportedPublicKeyType, not a crash
    garbled = bytes(cbor2.dumps({1: 99}))
    intact = {**key.assert_(challenge, cid), "nonce": nonce}
    why = check_signed_approval(intact, garbled, fields_of(rec))
    assert why is not None and "does not verify" in why
    con = sqlite3.connect(signed_rig.settings.db_path)
    with con:
        con.execute("UPDATE web_passkey SET public_key = ?", (garbled,))
    con.close()
    v = signed_rig.store.verify_audit()  # the pin's digest is checked first
    assert not v.ok and "other than the one the owner pinned" in v.message, v.message


def test_a_passkey_added_through_the_database_does_not_approve(signed_rig: Rig) -> None:
    """docs/security.md: a process "that writes approvals into the database directly
    (the executor refuses those in signed mode ...)". It need not forge the owner's
    signature: it registers a key of its own in the same database (a pairing of its own,
    or an INSERT) and signs with it. The key is not pinned beside config.toml
    (`placet.config.pins`), so the executor refuses it (``passkey_not_pinned``) and
    `placet audit --verify` reports the approval."""
    owner = SoftKey()
    register_pinned(signed_rig.store, "b3duZXI", owner.cose(), "owner's phone")
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    mine, cid = SoftKey(), "bWluZQ"
    signed_rig.store.register_passkey(
        signed_rig.store.create_pairing(), credential_id=cid, public_key=mine.cose(), sign_count=0,
        name="owner's phone",
    )  # fmt: skip
    nonce = "12" * 16
    challenge = challenge_of(rec, nonce)
    signed = {**mine.assert_(challenge, cid), "nonce": nonce}
    signed_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "passkey": signed})
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "passkey_not_pinned", e.value
    assert "is not pinned by the owner" in e.value.message and "placet keys pin" in e.value.message
    assert not (signed_rig.remote_dir / "a.txt").exists()  # type: ignore[operator]
    assert signed_rig.store.get(rec.id).status == "failed"  # refused before any op
    v = signed_rig.store.verify_audit()
    assert not v.ok and "is not pinned by the owner" in v.message, v.message


def test_a_pinned_key_swapped_in_the_database_does_not_approve(signed_rig: Rig) -> None:
    """The process keeps the owner's credential id but puts its own public key under it
    (an UPDATE): the pin's key digest no longer matches."""
    import sqlite3

    owner, mine, cid = SoftKey(), SoftKey(), "b3duZXI"
    register_pinned(signed_rig.store, cid, owner.cose(), "owner's phone")
    con = sqlite3.connect(signed_rig.settings.db_path)
    with con:
        con.execute("UPDATE web_passkey SET public_key = ?", (mine.cose(),))
    con.close()
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    nonce = "34" * 16
    challenge = challenge_of(rec, nonce)
    signed = {**mine.assert_(challenge, cid), "nonce": nonce}
    signed_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "passkey": signed})
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "passkey_not_pinned" and "database was altered" in e.value.message
    assert not (signed_rig.remote_dir / "a.txt").exists()  # type: ignore[operator]


def test_a_used_signature_hidden_in_the_database_does_not_approve_a_retry(
    signed_rig: Rig,
) -> None:
    """As above, but the process first edits the earlier approval's audit event (here:
    drops its passkey entry) so the executor's look at the proposal's earlier approvals
    finds no nonce to match. The audit chain then fails `--verify`, but that is after the
    fact: the executor must still refuse, so the spent nonce must be recorded where the
    database writer cannot reach it (beside config.toml, with the pins)."""
    import sqlite3

    rec, detail = _signed_run_that_failed(signed_rig, "ab" * 16)

    con = sqlite3.connect(signed_rig.settings.db_path)
    with con:
        hide = "UPDATE audit_event SET detail = '{}' WHERE proposal_id = ? AND to_status = ?"
        con.execute(hide, (rec.id, "approved"))
    con.close()
    signed_rig.write("a.txt", b"alpha\n")
    signed_rig.store.accept(rec.id, detail=detail)  # the same assertion, copied
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_invalid", e.value
    assert "already approved a run" in e.value.message, e.value.message
    assert not (signed_rig.remote_dir / "a.txt").exists()  # type: ignore[operator]


def test_a_hostile_stored_assertion_reaches_no_terminal_raw(signed_rig: Rig) -> None:
    """A process that writes approvals (the store's own `accept`, chain intact) stores an
    assertion whose client data carries terminal escapes and a bidi override in the
    fields py_webauthn quotes back in its error (the client data's type and origin).
    `placet audit --verify` prints the verification message as is on the owner's
    terminal (and the executor's refusal reaches `placet accept` and the page): the
    attacker's text must arrive there inert, or it could clear the screen and print
    "verified" over the failure."""
    import base64
    import json

    def is_unsafe_char(c: str) -> bool:  # what a terminal or a page would act on
        return c in "\x1b\r\n\u202e"

    key, cid = SoftKey(), "c29mdC1rZXk"
    register_pinned(signed_rig.store, cid, key.cose(), "soft")
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    hostile = "\x1b[2J\x1b[H12 events verified\u202e\r\n"
    nonce = "56" * 16
    challenge = challenge_of(rec, nonce)
    signed: dict[str, Any] = {**key.assert_(challenge, cid), "nonce": nonce}
    right = base64.urlsafe_b64encode(challenge).decode().rstrip("=")
    for field in ("type", "origin"):
        client = {"type": "webauthn.get", "challenge": right, "origin": "http://localhost"}
        client[field] = hostile
        signed["client_data"] = base64.urlsafe_b64encode(json.dumps(client).encode()).decode()
        why = check_signed_approval(signed, key.cose(), fields_of(rec))
        assert why is not None and "12 events verified" in why, why
        assert not any(is_unsafe_char(c) for c in why), repr(why)
    signed_rig.store.accept(rec.id, detail={"request_hash": rec.request_hash, "passkey": signed})
    v = signed_rig.store.verify_audit()
    assert not v.ok and "does not verify" in v.message, v.message
    assert not any(is_unsafe_char(c) for c in v.message), repr(v.message)
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, rec.id, drive=signed_rig.drive)
    assert not any(is_unsafe_char(c) for c in e.value.message), repr(e.value.message)


def test_signed_mode_turned_on_binds_a_process_started_before(signed_rig: Rig) -> None:
    """The owner turns on `approvals = "signed"` in config.toml while a `placet review`
    (or `placet web`) started earlier is still running, with the settings it read at
    start. A process driving that review's terminal (tmux send-keys: what signed mode
    is there to stop) approves; the store and the executor must read the mode the
    owner's config.toml says now, not the one in memory."""
    from placet.errors import PlacetError
    from placet.store import open_store

    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    before = signed_rig.settings.model_copy(update={"approvals": "terminal"})
    # config.toml (written by the fixture) says "signed"; this process read "terminal"
    with open_store(before) as store, pytest.raises(PlacetError) as e:
        store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "tui"})
    assert e.value.error_code == "signature_required", e.value

    # ...and an executor started before runs no unsigned approval (one made while
    # the mode was still off, here) once config.toml says "signed"
    config = signed_rig.settings.config_file.read_text()
    signed_rig.settings.config_file.write_text(config.replace('"signed"', '"terminal"'))
    with open_store(before) as store:
        store.accept(rec.id, detail={"request_hash": rec.request_hash, "via": "tui"})
    signed_rig.settings.config_file.write_text(config)
    with open_store(before) as store, pytest.raises(PolicyRefused) as e:
        execute(store, before, rec.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_required", e.value
    assert not (signed_rig.remote_dir / "a.txt").exists()  # type: ignore[operator]
