"""Signed mode (`approvals = "signed"` in config.toml): `placet accept ID` at a terminal
is refused and names `placet web`; the browser accept, signed with the owner's passkey,
runs; the executor refuses an approval whose signature is missing or made by a revoked
passkey; a stored signature checks out only for exactly the request, selection, host
and drive it signed (what `placet audit --verify` re-verifies)."""

from __future__ import annotations

import os

import pytest

from placet.errors import PolicyRefused
from placet.executor import bind, execute
from placet.store import open_store
from placet.store.signatures import check_signed_approval
from tests.support.rig import PLACET, Rig
from tests.support.signing import fields_of
from tests.support.terminal import PtyProcess
from tests.support.web import Tab, browser, pair, serve, tab, visit

__all__ = ["browser", "tab"]


def test_terminal_accept_is_refused_and_the_browser_accept_runs(tab: Tab, signed_rig: Rig) -> None:
    signed_rig.write("a.txt", b"alpha\n")
    rec = signed_rig.upload("a.txt")
    # at a terminal, and through `script` (a pseudo-terminal another program drives)
    for argv in (
        [str(PLACET), "accept", str(rec.id)],
        ["/usr/bin/script", "-qefc", f"{PLACET} accept {rec.id}", "/dev/null"],
    ):
        p = PtyProcess(argv, dict(os.environ))
        try:
            code = p.wait_exit(60)
        finally:
            p.kill()
        out = p.bytes().decode(errors="replace")
        assert code == 4, out
        assert "signature_required" in out and "placet web" in out
        assert "type the code" not in out  # refused before any code is asked
    assert signed_rig.store.get(rec.id).status == "pending"

    with pytest.raises(PolicyRefused) as e:  # nor through the store by any other path
        signed_rig.accept(rec)
    assert e.value.error_code == "signature_required"

    with serve(signed_rig.store, signed_rig.settings) as served:
        pair(tab, served)
        visit(tab, served.url(f"/p/{rec.id}"))
        tab.page.click("#accept")
        tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
    assert (
        signed_rig.remote_dir is not None
        and (signed_rig.remote_dir / "a.txt").read_bytes() == b"alpha\n"
    )
    v = signed_rig.store.verify_audit()
    assert v.ok and "1 passkey-signed approval(s) re-verified" in v.message

    approval = next(
        e for e in signed_rig.store.audit_events(proposal_id=rec.id) if e.to_status == "approved"
    )
    signed = approval.detail["passkey"]
    key = signed_rig.store.passkey_by_credential(signed["credential_id"])
    assert key is not None
    ok = fields_of(rec)
    assert check_signed_approval(signed, key.public_key, ok) is None
    changes: list[dict[str, object]] = [
        {"request_hash": "0" * 64}, {"proposal_id": rec.id + 1}, {"skip_ops": [0]},
        {"host_id": "00000000-0000-4000-8000-000000000000"}, {"drive_spec": "/elsewhere"},
    ]  # fmt: skip
    for change in changes:
        assert check_signed_approval(signed, key.public_key, {**ok, **change}) is not None
    forged = {**signed, "nonce": "00" * 16}
    assert check_signed_approval(forged, key.public_key, ok) is not None
    signed_rig.store.close()


def test_the_executor_refuses_an_unsigned_or_revoked_approval(tab: Tab, signed_rig: Rig) -> None:
    signed_rig.write("b.txt", b"beta\n")
    signed_rig.write("c.txt", b"gamma\n")
    unsigned = signed_rig.upload("b.txt")
    terminal = signed_rig.settings.model_copy(update={"approvals": "terminal"})
    config = signed_rig.settings.config_file.read_text()
    signed_rig.settings.config_file.write_text(config.replace('"signed"', '"terminal"'))
    with open_store(terminal) as store:  # approved while the mode was off
        store.accept(unsigned.id, detail={"request_hash": unsigned.request_hash, "via": "cli"})
    signed_rig.settings.config_file.write_text(config)  # and turned on since
    with pytest.raises(PolicyRefused) as e:
        execute(signed_rig.store, signed_rig.settings, unsigned.id, drive=signed_rig.drive)
    assert e.value.error_code == "signature_required"

    signed = signed_rig.upload("c.txt")
    with serve(signed_rig.store, signed_rig.settings) as served:
        pair(tab, served)
        visit(tab, served.url(f"/p/{signed.id}"))
        tab.page.click("#accept")
        tab.page.wait_for_selector("#proposal-status:has-text('succeeded')")
    record = signed_rig.store.get(signed.id)
    with pytest.raises(PolicyRefused) as e:  # its signature approved that run, no other
        bind(signed_rig.store, signed_rig.settings, record, signed_rig.drive)
    assert e.value.error_code == "signature_invalid" and "already approved a run" in str(e.value)
    signed_rig.store.revoke_passkey(signed_rig.store.passkeys()[0].id)
    with pytest.raises(PolicyRefused) as e:  # run again now: its signer is revoked
        bind(signed_rig.store, signed_rig.settings, record, signed_rig.drive)
    assert e.value.error_code == "signature_invalid" and "revoked" in e.value.message
    assert signed_rig.store.verify_audit().ok  # the revoked key still verifies what it signed
    signed_rig.store.close()
